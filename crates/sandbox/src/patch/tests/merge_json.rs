use pretty_assertions::assert_eq;
use serde_json::json;

use crate::patch::{PatchError, apply_json_patch, apply_merge_patch, diff_merge_patch};

#[test]
fn merge_patch_follows_rfc_7386() {
    // Cases from RFC 7386 appendix A plus a nested one.
    let cases = [
        (json!({"a": "b"}), json!({"a": "c"}), json!({"a": "c"})),
        (
            json!({"a": "b"}),
            json!({"b": "c"}),
            json!({"a": "b", "b": "c"}),
        ),
        (json!({"a": "b"}), json!({"a": null}), json!({})),
        (
            json!({"a": "b", "b": "c"}),
            json!({"a": null}),
            json!({"b": "c"}),
        ),
        (json!({"a": ["b"]}), json!({"a": "c"}), json!({"a": "c"})),
        (json!({"a": "c"}), json!({"a": ["b"]}), json!({"a": ["b"]})),
        (
            json!({"a": {"b": "c"}}),
            json!({"a": {"b": "d", "c": null}}),
            json!({"a": {"b": "d"}}),
        ),
        (
            json!({"a": [{"b": "c"}]}),
            json!({"a": [1]}),
            json!({"a": [1]}),
        ),
        (json!(["a", "b"]), json!(["c", "d"]), json!(["c", "d"])),
        (json!({"a": "b"}), json!(["c"]), json!(["c"])),
        (json!({"a": "foo"}), json!(null), json!(null)),
        (
            json!({"e": null}),
            json!({"a": 1}),
            json!({"e": null, "a": 1}),
        ),
        (
            json!([1, 2]),
            json!({"a": "b", "c": null}),
            json!({"a": "b"}),
        ),
        (
            json!({}),
            json!({"a": {"bb": {"ccc": null}}}),
            json!({"a": {"bb": {}}}),
        ),
    ];
    for (target, patch, expected) in cases {
        let mut doc = target.clone();
        apply_merge_patch(&mut doc, &patch);
        assert_eq!(doc, expected, "target {target} patch {patch}");
    }
}

#[test]
fn merge_patch_null_removes_a_label_and_keeps_the_others() {
    let mut cm =
        json!({"metadata": {"name": "c", "labels": {"a": "1", "b": "2"}}, "data": {"k": "v"}});
    apply_merge_patch(&mut cm, &json!({"metadata": {"labels": {"a": null}}}));
    assert_eq!(
        cm,
        json!({"metadata": {"name": "c", "labels": {"b": "2"}}, "data": {"k": "v"}})
    );
}

#[test]
fn diff_merge_patch_reproduces_the_target() {
    let from = json!({"a": 1, "b": {"c": [1, 2], "d": "x"}, "gone": true});
    let to = json!({"a": 2, "b": {"c": [3], "d": "x", "e": {}}, "new": "y"});
    let patch = diff_merge_patch(&from, &to);
    assert_eq!(
        patch,
        json!({"gone": null, "a": 2, "b": {"c": [3], "e": {}}, "new": "y"})
    );
    let mut doc = from;
    apply_merge_patch(&mut doc, &patch);
    assert_eq!(doc, to);
}

#[test]
fn json_patch_applies_operations_in_order() {
    let mut doc = json!({"metadata": {"labels": {"a": "1"}}, "spec": {"list": [1, 2]}});
    let patch = json!([
        {"op": "add", "path": "/metadata/labels/b~1c", "value": "2"},
        {"op": "replace", "path": "/spec/list/0", "value": 9},
        {"op": "add", "path": "/spec/list/-", "value": 3},
        {"op": "remove", "path": "/metadata/labels/a"},
        {"op": "copy", "from": "/spec/list", "path": "/spec/copy"},
        {"op": "move", "from": "/spec/copy", "path": "/spec/moved"},
        {"op": "test", "path": "/spec/moved/2", "value": 3}
    ]);
    apply_json_patch(&mut doc, &patch).unwrap();
    assert_eq!(
        doc,
        json!({"metadata": {"labels": {"b/c": "2"}}, "spec": {"list": [9, 2, 3], "moved": [9, 2, 3]}})
    );
}

#[test]
fn json_patch_test_failure_leaves_the_object_unchanged() {
    let original = json!({"spec": {"replicas": 1}, "metadata": {"resourceVersion": "7"}});
    let mut doc = original.clone();
    let patch = json!([
        {"op": "replace", "path": "/spec/replicas", "value": 5},
        {"op": "test", "path": "/metadata/resourceVersion", "value": "6"}
    ]);
    let err = apply_json_patch(&mut doc, &patch).unwrap_err();
    assert!(
        matches!(err, PatchError::Invalid(ref m) if m.contains("operation '/1'")),
        "{err}"
    );
    assert_eq!(doc, original);
}

#[test]
fn json_patch_rejects_malformed_documents_and_bad_paths() {
    let mut doc = json!({"a": 1});
    for patch in [
        json!({"op": "add"}),
        json!([{"op": "frobnicate", "path": "/a"}]),
        json!([{"op": "add", "path": "/missing/child", "value": 1}]),
        json!([{"op": "remove", "path": "/nope"}]),
    ] {
        assert!(
            matches!(
                apply_json_patch(&mut doc, &patch),
                Err(PatchError::Invalid(_))
            ),
            "{patch}"
        );
        assert_eq!(doc, json!({"a": 1}));
    }
}

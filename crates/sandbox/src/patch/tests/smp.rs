use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::{CONFIG_MAP, DEPLOYMENT, SERVICE, SUBSCRIPTION};
use crate::patch::{
    GroupVersionKindRef, PatchError, UNSUPPORTED_FOR_CUSTOM_RESOURCES, apply_strategic_merge_patch,
};

fn deployment(containers: Value) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "finalizers": ["a"]},
        "spec": {
            "replicas": 1,
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}},
            "template": {"spec": {"containers": containers, "tolerations": [{"key": "k1"}]}}
        }
    })
}

fn containers(doc: &Value) -> &Value {
    &doc["spec"]["template"]["spec"]["containers"]
}

fn patched(mut doc: Value, patch: Value) -> Value {
    apply_strategic_merge_patch(&mut doc, &patch, &DEPLOYMENT).unwrap();
    doc
}

fn containers_patch(list: Value) -> Value {
    json!({"spec": {"template": {"spec": {"containers": list}}}})
}

#[test]
fn containers_merge_by_name() {
    let live = deployment(json!([
        {"name": "a", "image": "a:1", "env": [{"name": "X", "value": "1"}]},
        {"name": "b", "image": "b:1"}
    ]));
    let doc = patched(
        live,
        containers_patch(json!([
            {"name": "b", "image": "b:2"},
            {"name": "c", "image": "c:1"}
        ])),
    );
    assert_eq!(
        containers(&doc),
        &json!([
            {"name": "a", "image": "a:1", "env": [{"name": "X", "value": "1"}]},
            {"name": "b", "image": "b:2"},
            {"name": "c", "image": "c:1"}
        ])
    );
}

#[test]
fn a_new_item_alone_goes_first_as_in_kubernetes() {
    // Without $setElementOrder the Go implementation places patch-only items before the
    // server-only items that follow them in the live order.
    let live = deployment(json!([{"name": "a"}, {"name": "b"}]));
    let doc = patched(live, containers_patch(json!([{"name": "c"}])));
    assert_eq!(
        containers(&doc),
        &json!([{"name": "c"}, {"name": "a"}, {"name": "b"}])
    );
}

#[test]
fn env_merges_by_name_and_null_deletes_a_field_of_an_item() {
    let live = deployment(json!([{"name": "a", "image": "a:1", "env": [
        {"name": "X", "value": "1"}, {"name": "Y", "value": "2"}
    ]}]));
    let doc = patched(
        live,
        containers_patch(
            json!([{"name": "a", "image": null, "env": [{"name": "Y", "value": "3"}]}]),
        ),
    );
    assert_eq!(
        containers(&doc),
        &json!([{"name": "a", "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "3"}]}])
    );
}

#[test]
fn patch_delete_removes_the_matching_item() {
    let live = deployment(json!([{"name": "a"}, {"name": "b"}]));
    let doc = patched(
        live,
        containers_patch(json!([{"name": "a", "$patch": "delete"}])),
    );
    assert_eq!(containers(&doc), &json!([{"name": "b"}]));
}

#[test]
fn patch_replace_in_a_list_replaces_it_and_in_a_map_replaces_the_map() {
    let live = deployment(json!([{"name": "a", "image": "a:1"}, {"name": "b"}]));
    let doc = patched(
        live.clone(),
        containers_patch(json!([{"name": "z", "image": "z:1"}, {"$patch": "replace"}])),
    );
    assert_eq!(containers(&doc), &json!([{"name": "z", "image": "z:1"}]));

    let doc = patched(
        live,
        json!({"spec": {"strategy": {"$patch": "replace", "type": "Recreate"}}}),
    );
    assert_eq!(doc["spec"]["strategy"], json!({"type": "Recreate"}));
}

#[test]
fn patch_delete_on_a_map_empties_it() {
    let doc = patched(
        deployment(json!([])),
        json!({"spec": {"strategy": {"$patch": "delete"}}}),
    );
    assert_eq!(doc["spec"]["strategy"], json!({}));
}

#[test]
fn set_element_order_reorders_the_merged_list() {
    let live = deployment(json!([{"name": "a", "image": "a:1"}, {"name": "b"}]));
    let doc = patched(
        live,
        json!({"spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "b"}, {"name": "c"}, {"name": "a"}],
            "containers": [{"name": "c", "image": "c:1"}]
        }}}}),
    );
    assert_eq!(
        containers(&doc),
        &json!([{"name": "b"}, {"name": "c", "image": "c:1"}, {"name": "a", "image": "a:1"}])
    );
}

#[test]
fn set_element_order_that_contradicts_the_patch_list_is_rejected() {
    let live = deployment(json!([{"name": "a"}, {"name": "b"}]));
    let mut doc = live.clone();
    let err = apply_strategic_merge_patch(
        &mut doc,
        &json!({"spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
            "containers": [{"name": "b"}, {"name": "a"}]
        }}}}),
        &DEPLOYMENT,
    )
    .unwrap_err();
    assert!(
        matches!(err, PatchError::Invalid(ref m) if m.contains("$setElementOrder")),
        "{err}"
    );
    assert_eq!(doc, live);
}

#[test]
fn finalizers_merge_as_a_set_and_delete_from_primitive_list_removes() {
    let live = deployment(json!([]));
    let doc = patched(
        live.clone(),
        json!({"metadata": {"finalizers": ["b", "a"]}}),
    );
    assert_eq!(doc["metadata"]["finalizers"], json!(["b", "a"]));
    let doc = patched(live.clone(), json!({"metadata": {"finalizers": ["c"]}}));
    assert_eq!(doc["metadata"]["finalizers"], json!(["c", "a"]));
    let doc = patched(
        doc,
        json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a", "zz"]}}),
    );
    assert_eq!(doc["metadata"]["finalizers"], json!(["c"]));
}

#[test]
fn retain_keys_clears_fields_not_listed() {
    let doc = patched(
        deployment(json!([])),
        json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}}),
    );
    assert_eq!(doc["spec"]["strategy"], json!({"type": "Recreate"}));

    let mut bad = deployment(json!([]));
    let err = apply_strategic_merge_patch(
        &mut bad,
        &json!({"spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": {}}}}),
        &DEPLOYMENT,
    );
    assert!(matches!(err, Err(PatchError::Invalid(m)) if m.contains("retainKeys")));
}

#[test]
fn lists_without_a_patch_strategy_are_replaced() {
    let doc = patched(
        deployment(json!([])),
        json!({"spec": {"template": {"spec": {"tolerations": [{"key": "k2"}]}}}}),
    );
    assert_eq!(
        doc["spec"]["template"]["spec"]["tolerations"],
        json!([{"key": "k2"}])
    );
}

#[test]
fn null_deletes_a_key_and_maps_merge() {
    let mut cm = json!({"metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}});
    apply_strategic_merge_patch(
        &mut cm,
        &json!({"data": {"a": null, "c": "3"}}),
        &CONFIG_MAP,
    )
    .unwrap();
    assert_eq!(
        cm,
        json!({"metadata": {"name": "c"}, "data": {"b": "2", "c": "3"}})
    );
}

#[test]
fn service_ports_merge_by_port() {
    let mut svc =
        json!({"spec": {"ports": [{"port": 80, "name": "http"}, {"port": 443, "name": "https"}]}});
    apply_strategic_merge_patch(
        &mut svc,
        &json!({"spec": {"ports": [{"port": 443, "targetPort": 8443}]}}),
        &SERVICE,
    )
    .unwrap();
    assert_eq!(
        svc["spec"]["ports"],
        json!([{"port": 80, "name": "http"}, {"port": 443, "name": "https", "targetPort": 8443}])
    );
}

#[test]
fn status_conditions_merge_by_type() {
    let mut d = json!({"status": {"conditions": [
        {"type": "Available", "status": "False"},
        {"type": "Progressing", "status": "True"}
    ]}});
    apply_strategic_merge_patch(
        &mut d,
        &json!({"status": {"conditions": [{"type": "Available", "status": "True"}]}}),
        &DEPLOYMENT,
    )
    .unwrap();
    assert_eq!(
        d["status"]["conditions"],
        json!([{"type": "Available", "status": "True"}, {"type": "Progressing", "status": "True"}])
    );
}

#[test]
fn directives_in_a_new_list_are_interpreted_not_stored() {
    let mut d = json!({"spec": {"template": {"spec": {}}}});
    apply_strategic_merge_patch(
        &mut d,
        &containers_patch(
            json!([{"name": "a", "image": "a:1", "env": null}, {"name": "x", "$patch": "delete"}]),
        ),
        &DEPLOYMENT,
    )
    .unwrap();
    assert_eq!(containers(&d), &json!([{"name": "a", "image": "a:1"}]));
}

#[test]
fn custom_resources_are_rejected_with_the_api_server_message() {
    let mut sub = json!({"spec": {"channel": "stable"}});
    let err = apply_strategic_merge_patch(
        &mut sub,
        &json!({"spec": {"channel": "fast"}}),
        &SUBSCRIPTION,
    )
    .unwrap_err();
    assert!(
        matches!(err, PatchError::UnsupportedMediaType(ref m) if m == UNSUPPORTED_FOR_CUSTOM_RESOURCES)
    );
    assert!(
        err.to_string()
            .starts_with("the body of the request was in an unknown format")
    );
    assert_eq!(sub, json!({"spec": {"channel": "stable"}}));
}

#[test]
fn malformed_patches_are_invalid_and_leave_the_target_unchanged() {
    let live = deployment(json!([{"name": "a"}]));
    let cases = [
        json!(["not", "an", "object"]),
        containers_patch(json!([{"image": "no-name"}])),
        containers_patch(json!([{"name": "a", "$patch": "merge"}])),
        containers_patch(json!([{"name": "a"}, "mixed"])),
        json!({"spec": {"strategy": {"$patch": "frobnicate"}}}),
        json!({"metadata": {"$deleteFromPrimitiveList/finalizers": "a"}}),
    ];
    for patch in cases {
        let mut doc = live.clone();
        let result = apply_strategic_merge_patch(&mut doc, &patch, &DEPLOYMENT);
        assert!(
            matches!(result, Err(PatchError::Invalid(_))),
            "{patch}: {result:?}"
        );
        assert_eq!(doc, live, "{patch}");
    }
}

#[test]
fn errors_name_the_kind_and_the_field() {
    let mut doc = deployment(json!([{"name": "a"}]));
    let err = apply_strategic_merge_patch(
        &mut doc,
        &containers_patch(json!([{"image": "x"}])),
        &DEPLOYMENT,
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("Deployment"), "{err}");
    assert!(err.contains(".spec.template.spec.containers"), "{err}");
    assert!(err.contains("merge key: name"), "{err}");
}

#[test]
fn every_builtin_kind_we_serve_accepts_strategic_merge() {
    for (group, kind) in [
        ("", "Pod"),
        ("", "Namespace"),
        ("", "Secret"),
        ("", "ServiceAccount"),
        ("rbac.authorization.k8s.io", "ClusterRole"),
        ("apiextensions.k8s.io", "CustomResourceDefinition"),
        ("apiregistration.k8s.io", "APIService"),
        (
            "admissionregistration.k8s.io",
            "MutatingWebhookConfiguration",
        ),
        ("coordination.k8s.io", "Lease"),
        ("events.k8s.io", "Event"),
    ] {
        let gvk = GroupVersionKindRef {
            group,
            version: "v1",
            kind,
        };
        let mut doc = json!({"metadata": {"labels": {"a": "1"}}});
        apply_strategic_merge_patch(&mut doc, &json!({"metadata": {"labels": {"b": "2"}}}), &gvk)
            .unwrap();
        assert_eq!(
            doc["metadata"]["labels"],
            json!({"a": "1", "b": "2"}),
            "{kind}"
        );
    }
}

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::{CONFIG_MAP, DEPLOYMENT};
use crate::patch::{
    apply_json_patch, apply_merge_patch, apply_strategic_merge_patch, diff_merge_patch,
    server_side_apply,
};

fn object(map: BTreeMap<String, Value>) -> Value {
    Value::Object(map.into_iter().collect::<Map<_, _>>())
}

/// JSON without nulls (a merge patch cannot produce a null value).
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        any::<bool>().prop_map(Value::from),
        any::<i32>().prop_map(Value::from),
        "[a-z]{0,5}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 32, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-c]{1,2}", inner, 0..4).prop_map(object),
        ]
    })
}

fn json_object() -> impl Strategy<Value = Value> {
    prop::collection::btree_map("[a-c]{1,2}", json_value(), 0..5).prop_map(object)
}

/// Nested maps of strings, with nulls allowed when `nulls`.
fn map_tree(nulls: bool) -> impl Strategy<Value = Value> {
    let leaf = if nulls {
        prop_oneof![3 => "[a-z]{0,3}".prop_map(Value::from), 1 => Just(Value::Null)].boxed()
    } else {
        "[a-z]{0,3}".prop_map(Value::from).boxed()
    };
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop::collection::btree_map("[a-c]{1,2}", inner, 0..4).prop_map(object)
    })
}

prop_compose! {
    /// A Deployment configuration with unique container and env names.
    fn deployment_config()(
        replicas in proptest::option::of(0..5i64),
        labels in prop::collection::btree_map("[a-c]", "[a-z]{1,3}", 0..3),
        containers in prop::collection::btree_map(
            "[a-c]",
            ("[a-z]{1,3}", prop::collection::btree_map("[A-C]", "[0-9]", 0..3)),
            0..3,
        ),
    ) -> Value {
        let containers: Vec<Value> = containers
            .into_iter()
            .map(|(name, (image, env))| {
                let env: Vec<Value> = env.into_iter().map(|(n, v)| json!({"name": n, "value": v})).collect();
                json!({"name": name, "image": image, "env": env})
            })
            .collect();
        let mut spec = json!({"template": {"metadata": {"labels": labels}, "spec": {"containers": containers}}});
        if let Some(r) = replicas {
            spec["replicas"] = json!(r);
        }
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": spec})
    }
}

/// Whether `outer` holds everything `inner` sets; list items with a `name` match by name.
fn contains(outer: &Value, inner: &Value) -> bool {
    match (outer, inner) {
        (Value::Object(o), Value::Object(i)) => i
            .iter()
            .all(|(k, v)| o.get(k).is_some_and(|ov| contains(ov, v))),
        (Value::Array(o), Value::Array(i)) if i.iter().all(|v| v.get("name").is_some()) => {
            i.iter().all(|v| {
                o.iter()
                    .any(|ov| ov.get("name") == v.get("name") && contains(ov, v))
            })
        }
        (o, i) => o == i,
    }
}

fn labelled(labels: &BTreeMap<String, String>) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labels": labels}})
}

proptest! {
    #[test]
    fn merge_patch_of_a_diff_reproduces_the_target(from in json_object(), to in json_object()) {
        let patch = diff_merge_patch(&from, &to);
        let mut doc = from;
        apply_merge_patch(&mut doc, &patch);
        prop_assert_eq!(doc, to);
    }

    #[test]
    fn strategic_merge_equals_merge_patch_without_lists(target in map_tree(false), patch in map_tree(true)) {
        let (target, patch) = (json!({"data": target}), json!({"data": patch}));
        let mut by_merge = target.clone();
        apply_merge_patch(&mut by_merge, &patch);
        let mut by_smp = target;
        apply_strategic_merge_patch(&mut by_smp, &patch, &CONFIG_MAP).unwrap();
        prop_assert_eq!(by_smp, by_merge);
    }

    #[test]
    fn applying_the_same_configuration_twice_is_idempotent(
        live_config in deployment_config(),
        config in deployment_config(),
    ) {
        let live = server_side_apply(None, &live_config, "other", false, &DEPLOYMENT, "2025-01-01T00:00:00Z").unwrap();
        let once = server_side_apply(Some(&live), &config, "me", true, &DEPLOYMENT, "2025-01-02T00:00:00Z").unwrap();
        let twice = server_side_apply(Some(&once), &config, "me", false, &DEPLOYMENT, "2025-01-03T00:00:00Z").unwrap();
        prop_assert_eq!(&once, &twice);
        // Everything applied is in the result.
        prop_assert!(contains(&once, &config), "{} does not contain {}", once, config);
    }

    #[test]
    fn a_manager_that_stops_applying_leaves_only_the_others_labels(
        a in prop::collection::btree_map("[a-c]", "[a-z]{1,3}", 0..3),
        b in prop::collection::btree_map("[d-f]", "[a-z]{1,3}", 0..3),
    ) {
        let t = "2025-01-01T00:00:00Z";
        let live = server_side_apply(None, &labelled(&a), "a", false, &CONFIG_MAP, t).unwrap();
        let live = server_side_apply(Some(&live), &labelled(&b), "b", false, &CONFIG_MAP, t).unwrap();
        let done = server_side_apply(Some(&live), &labelled(&BTreeMap::new()), "a", false, &CONFIG_MAP, t).unwrap();
        let labels: BTreeMap<String, String> = serde_json::from_value(
            done["metadata"].get("labels").cloned().unwrap_or(json!({})),
        )
        .unwrap();
        prop_assert_eq!(labels, b);
    }

    #[test]
    fn a_failing_json_patch_changes_nothing(doc in json_object(), value in json_value()) {
        let mut target = doc.clone();
        let patch = json!([
            {"op": "add", "path": "/added", "value": value},
            {"op": "test", "path": "/added", "value": "definitely-not-this"}
        ]);
        if value != json!("definitely-not-this") {
            prop_assert!(apply_json_patch(&mut target, &patch).is_err());
            prop_assert_eq!(target, doc);
        }
    }
}

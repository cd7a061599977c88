use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::{CONFIG_MAP, DEPLOYMENT, SERVICE, SUBSCRIPTION};
use crate::patch::{
    FieldConflict, GroupVersionKindRef, PatchError, record_status_update, record_update,
    server_side_apply, server_side_apply_status,
};

const T1: &str = "2025-01-01T00:00:00Z";
const T2: &str = "2025-01-02T00:00:00Z";
const T3: &str = "2025-01-03T00:00:00Z";

fn deployment(spec: Value) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "ns"},
        "spec": spec
    })
}

/// A configuration that sets nothing but the identity.
fn bare() -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "ns"}})
}

fn web_container(env: Value) -> Value {
    json!({
        "selector": {"matchLabels": {"app": "web"}},
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{
                "name": "web",
                "image": "nginx:1",
                "ports": [{"containerPort": 80}],
                "env": env
            }]}
        }
    })
}

fn apply(
    live: Option<&Value>,
    config: &Value,
    manager: &str,
    force: bool,
    now: &str,
) -> Result<Value, PatchError> {
    server_side_apply(live, config, manager, force, &DEPLOYMENT, now)
}

/// (manager, operation) of every managedFields entry, in order.
fn managers(obj: &Value) -> Vec<(String, String)> {
    obj["metadata"]["managedFields"]
        .as_array()
        .map(|entries| {
            entries
                .iter()
                .map(|e| {
                    (
                        e["manager"].as_str().unwrap().to_string(),
                        e["operation"].as_str().unwrap().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn entry<'a>(obj: &'a Value, manager: &str, operation: &str) -> &'a Value {
    obj["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["manager"] == manager && e["operation"] == operation)
        .unwrap_or_else(|| panic!("no {operation} entry for {manager} in {obj}"))
}

#[test]
fn first_apply_creates_the_object_and_records_fields_v1() {
    let config = deployment(web_container(json!([{"name": "A", "value": "1"}])));
    let obj = apply(None, &config, "ctl", false, T1).unwrap();
    assert_eq!(obj["spec"], config["spec"]);
    assert_eq!(
        entry(&obj, "ctl", "Apply"),
        &json!({
            "manager": "ctl",
            "operation": "Apply",
            "apiVersion": "apps/v1",
            "time": T1,
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:spec": {
                "f:selector": {},
                "f:template": {
                    "f:metadata": {"f:labels": {"f:app": {}}},
                    "f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {
                        ".": {},
                        "f:env": {"k:{\"name\":\"A\"}": {".": {}, "f:name": {}, "f:value": {}}},
                        "f:image": {},
                        "f:name": {},
                        "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}}
                    }}}
                }
            }}
        })
    );
}

#[test]
fn removing_an_env_var_from_the_apply_removes_it_from_the_object() {
    let v1 = deployment(web_container(
        json!([{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]),
    ));
    let live = apply(None, &v1, "olm-rs", false, T1).unwrap();
    let v2 = deployment(web_container(json!([{"name": "A", "value": "1"}])));
    let obj = apply(Some(&live), &v2, "olm-rs", false, T2).unwrap();
    let container = &obj["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["env"], json!([{"name": "A", "value": "1"}]));
    assert_eq!(container["image"], "nginx:1");
    assert!(
        !entry(&obj, "olm-rs", "Apply")["fieldsV1"]
            .to_string()
            .contains("\\\"B\\\"")
    );
}

#[test]
fn a_field_given_up_survives_when_another_manager_owns_it() {
    let v1 = deployment(json!({"replicas": 2, "paused": false}));
    let live = apply(None, &v1, "a", false, T1).unwrap();
    // b applies the same value: shared ownership, no conflict.
    let live = apply(
        Some(&live),
        &deployment(json!({"replicas": 2})),
        "b",
        false,
        T2,
    )
    .unwrap();
    let obj = apply(
        Some(&live),
        &deployment(json!({"paused": false})),
        "a",
        false,
        T3,
    )
    .unwrap();
    assert_eq!(obj["spec"], json!({"replicas": 2, "paused": false}));
    let obj = apply(Some(&obj), &bare(), "a", false, T3).unwrap();
    assert_eq!(obj["spec"], json!({"replicas": 2}));
    assert_eq!(managers(&obj), [("b".to_string(), "Apply".to_string())]);
}

#[test]
fn two_managers_conflict_on_replicas_unless_forced() {
    let live = apply(
        None,
        &deployment(json!({"replicas": 1, "paused": false})),
        "alice",
        false,
        T1,
    )
    .unwrap();
    let config = deployment(json!({"replicas": 3}));

    let err = apply(Some(&live), &config, "bob", false, T2).unwrap_err();
    let PatchError::Conflict { conflicts } = &err else {
        panic!("expected a conflict, got {err}")
    };
    assert_eq!(
        conflicts,
        &[FieldConflict {
            field: ".spec.replicas".into(),
            manager: "alice".into()
        }]
    );
    assert_eq!(
        err.to_string(),
        "Apply failed with 1 conflict: conflict with \"alice\": .spec.replicas"
    );

    let obj = apply(Some(&live), &config, "bob", true, T2).unwrap();
    assert_eq!(obj["spec"]["replicas"], 3);
    assert_eq!(
        entry(&obj, "alice", "Apply")["fieldsV1"],
        json!({"f:spec": {"f:paused": {}}})
    );
    assert_eq!(
        entry(&obj, "bob", "Apply")["fieldsV1"],
        json!({"f:spec": {"f:replicas": {}}})
    );

    // Now alice is the one in conflict.
    let err = apply(
        Some(&obj),
        &deployment(json!({"replicas": 1, "paused": false})),
        "alice",
        false,
        T3,
    );
    assert!(
        matches!(err, Err(PatchError::Conflict { ref conflicts }) if conflicts[0].manager == "bob")
    );
}

#[test]
fn an_update_manager_conflicts_with_an_applier() {
    let mut created = deployment(json!({"replicas": 1}));
    record_update(None, &mut created, "kubectl-create", T1);
    assert_eq!(
        entry(&created, "kubectl-create", "Update")["fieldsV1"],
        json!({"f:spec": {"f:replicas": {}}})
    );
    assert!(entry(&created, "kubectl-create", "Update")["time"] == T1);

    let err = apply(
        Some(&created),
        &deployment(json!({"replicas": 5})),
        "olm-rs",
        false,
        T2,
    )
    .unwrap_err();
    assert!(
        matches!(err, PatchError::Conflict { ref conflicts } if conflicts[0].manager == "kubectl-create")
    );
    // The same value is no conflict; both own it.
    let obj = apply(
        Some(&created),
        &deployment(json!({"replicas": 1})),
        "olm-rs",
        false,
        T2,
    )
    .unwrap();
    assert_eq!(managers(&obj).len(), 2);
}

#[test]
fn a_managers_own_update_entry_conflicts_with_its_apply_as_in_kubernetes() {
    let mut created = deployment(json!({"replicas": 1}));
    record_update(None, &mut created, "olm-rs", T1);
    let err = apply(
        Some(&created),
        &deployment(json!({"replicas": 2})),
        "olm-rs",
        false,
        T2,
    );
    assert!(
        matches!(err, Err(PatchError::Conflict { ref conflicts }) if conflicts[0].manager == "olm-rs")
    );
}

#[test]
fn an_update_takes_the_fields_it_changes_from_the_applier() {
    let live = apply(
        None,
        &deployment(json!({"replicas": 1, "paused": false})),
        "olm-rs",
        false,
        T1,
    )
    .unwrap();
    let mut updated = live.clone();
    updated["spec"]["replicas"] = json!(4);
    record_update(Some(&live), &mut updated, "hpa", T2);
    assert_eq!(
        entry(&updated, "hpa", "Update")["fieldsV1"],
        json!({"f:spec": {"f:replicas": {}}})
    );
    assert_eq!(
        entry(&updated, "olm-rs", "Apply")["fieldsV1"],
        json!({"f:spec": {"f:paused": {}}})
    );
    // An update that changes nothing records nothing new.
    let mut same = updated.clone();
    record_update(Some(&updated), &mut same, "other", T3);
    assert_eq!(managers(&same), managers(&updated));
}

#[test]
fn containers_from_two_appliers_merge_by_name() {
    let a =
        deployment(json!({"template": {"spec": {"containers": [{"name": "a", "image": "a:1"}]}}}));
    let b =
        deployment(json!({"template": {"spec": {"containers": [{"name": "b", "image": "b:1"}]}}}));
    let live = apply(None, &a, "ma", false, T1).unwrap();
    let live = apply(Some(&live), &b, "mb", false, T2).unwrap();
    assert_eq!(
        live["spec"]["template"]["spec"]["containers"],
        json!([{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}])
    );
    // ma stops applying its container: only ma's container goes.
    let obj = apply(Some(&live), &bare(), "ma", false, T3).unwrap();
    assert_eq!(
        obj["spec"]["template"]["spec"]["containers"],
        json!([{"name": "b", "image": "b:1"}])
    );
}

#[test]
fn labels_are_granular_and_finalizers_are_a_set() {
    let cm = |labels: Value, finalizers: Value| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "c", "labels": labels, "finalizers": finalizers}})
    };
    let live = server_side_apply(
        None,
        &cm(json!({"a": "1"}), json!(["x"])),
        "m1",
        false,
        &CONFIG_MAP,
        T1,
    )
    .unwrap();
    let live = server_side_apply(
        Some(&live),
        &cm(json!({"b": "2"}), json!(["y"])),
        "m2",
        false,
        &CONFIG_MAP,
        T2,
    )
    .unwrap();
    assert_eq!(live["metadata"]["labels"], json!({"a": "1", "b": "2"}));
    assert_eq!(live["metadata"]["finalizers"], json!(["x", "y"]));
    assert_eq!(
        entry(&live, "m2", "Apply")["fieldsV1"],
        json!({"f:metadata": {"f:finalizers": {"v:\"y\"": {}}, "f:labels": {"f:b": {}}}})
    );
    let obj = server_side_apply(
        Some(&live),
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}),
        "m1",
        false,
        &CONFIG_MAP,
        T3,
    )
    .unwrap();
    assert_eq!(obj["metadata"]["labels"], json!({"b": "2"}));
    assert_eq!(obj["metadata"]["finalizers"], json!(["y"]));
}

fn subscription_status(conditions: Value) -> Value {
    json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "Subscription",
        "metadata": {"name": "sub", "namespace": "ns"},
        "status": {"state": "AtLatestKnown", "conditions": conditions}
    })
}

#[test]
fn kube_runtime_style_status_apply() {
    let live = server_side_apply(
        None,
        &json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
                "metadata": {"name": "sub", "namespace": "ns"},
                "spec": {"channel": "stable", "name": "etcd"},
                "status": {"state": "ignored by a main-resource apply"}}),
        "user",
        false,
        &SUBSCRIPTION,
        T1,
    )
    .unwrap();
    assert!(live.get("status").is_none());

    let conditions = json!([
        {"type": "CatalogSourcesUnhealthy", "status": "False"},
        {"type": "ResolutionFailed", "status": "True"}
    ]);
    let obj = server_side_apply_status(
        Some(&live),
        &subscription_status(conditions),
        "olm-rs",
        true,
        &SUBSCRIPTION,
        T2,
    )
    .unwrap();
    assert_eq!(obj["spec"], live["spec"]);
    assert_eq!(obj["status"]["state"], "AtLatestKnown");
    let status_entry = entry(&obj, "olm-rs", "Apply");
    assert_eq!(status_entry["subresource"], "status");
    assert_eq!(
        status_entry["fieldsV1"]["f:status"]["f:conditions"],
        json!({
            "k:{\"type\":\"CatalogSourcesUnhealthy\"}": {".": {}, "f:status": {}, "f:type": {}},
            "k:{\"type\":\"ResolutionFailed\"}": {".": {}, "f:status": {}, "f:type": {}}
        })
    );

    // The next status apply drops a condition: it disappears; the user's spec stays.
    let obj = server_side_apply_status(
        Some(&obj),
        &subscription_status(json!([{"type": "CatalogSourcesUnhealthy", "status": "False"}])),
        "olm-rs",
        true,
        &SUBSCRIPTION,
        T3,
    )
    .unwrap();
    assert_eq!(
        obj["status"]["conditions"],
        json!([{"type": "CatalogSourcesUnhealthy", "status": "False"}])
    );
    assert_eq!(obj["spec"], live["spec"]);
    assert_eq!(managers(&obj).len(), 2);
}

#[test]
fn status_writes_are_recorded_with_the_subresource() {
    let live = subscription_status(json!([]));
    let mut new = live.clone();
    new["status"]["state"] = json!("UpgradePending");
    new["spec"] = json!({"channel": "x"});
    record_status_update(Some(&live), &mut new, "catalog-operator", T1);
    let e = entry(&new, "catalog-operator", "Update");
    assert_eq!(e["subresource"], "status");
    assert_eq!(e["apiVersion"], "operators.coreos.com/v1alpha1");
    assert_eq!(e["fieldsV1"], json!({"f:status": {"f:state": {}}}));
}

#[test]
fn applying_the_same_configuration_again_changes_nothing() {
    let config = deployment(web_container(json!([{"name": "A", "value": "1"}])));
    let once = apply(None, &config, "olm-rs", false, T1).unwrap();
    let twice = apply(Some(&once), &config, "olm-rs", false, T2).unwrap();
    assert_eq!(once, twice);
    assert_eq!(entry(&twice, "olm-rs", "Apply")["time"], T1);
}

#[test]
fn invalid_configurations_are_rejected() {
    let wrong_version =
        json!({"apiVersion": "apps/v1beta1", "kind": "Deployment", "metadata": {"name": "w"}});
    let err = apply(None, &wrong_version, "m", false, T1)
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "Incorrect version specified in apply patch. Specified patch version: apps/v1beta1, expected: apps/v1"
    );
    let cases = [
        json!(["x"]),
        json!({"kind": "Deployment"}),
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet"}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"managedFields": [{"manager": "x"}]}}),
        deployment(json!({"template": {"spec": {"containers": [{"image": "no-name"}]}}})),
        deployment(json!({"template": {"spec": {"containers": [{"name": "a"}, {"name": "a"}]}}})),
    ];
    for config in cases {
        let result = apply(None, &config, "m", false, T1);
        assert!(
            matches!(result, Err(PatchError::Invalid(_))),
            "{config}: {result:?}"
        );
    }
}

#[test]
fn a_manager_reset_clears_managed_fields() {
    let live = apply(None, &deployment(json!({"replicas": 1})), "m", false, T1).unwrap();
    let mut new = live.clone();
    new["metadata"]["managedFields"] = json!([{}]);
    record_update(Some(&live), &mut new, "m", T2);
    assert!(new["metadata"].get("managedFields").is_none());
}

#[test]
fn a_field_left_empty_by_pruning_is_removed() {
    let cm = |metadata: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": {"k": "v"}});
    let live = server_side_apply(
        None,
        &cm(json!({"name": "c", "labels": {"a": "1"}})),
        "m",
        false,
        &CONFIG_MAP,
        T1,
    )
    .unwrap();
    let obj = server_side_apply(
        Some(&live),
        &cm(json!({"name": "c"})),
        "m",
        false,
        &CONFIG_MAP,
        T2,
    )
    .unwrap();
    assert_eq!(obj["metadata"].get("labels"), None);
    assert_eq!(obj["data"], json!({"k": "v"}));
}

#[test]
fn port_keys_default_the_protocol_so_explicit_tcp_matches() {
    let service = |ports: Value| json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"ports": ports}});
    let mut live = service(json!([{"port": 80, "protocol": "TCP", "targetPort": 8080}]));
    record_update(None, &mut live, "kubectl-create", T1);
    let obj = server_side_apply(
        Some(&live),
        &service(json!([{"port": 80, "name": "http"}])),
        "m",
        false,
        &SERVICE,
        T2,
    )
    .unwrap();
    assert_eq!(
        obj["spec"]["ports"],
        json!([{"port": 80, "protocol": "TCP", "targetPort": 8080, "name": "http"}])
    );
    assert_eq!(
        entry(&obj, "m", "Apply")["fieldsV1"],
        json!({"f:spec": {"f:ports": {"k:{\"port\":80,\"protocol\":\"TCP\"}": {".": {}, "f:name": {}, "f:port": {}}}}})
    );
}

#[test]
fn crd_conditions_merge_by_type_under_apply() {
    let crd = GroupVersionKindRef {
        group: "apiextensions.k8s.io",
        version: "v1",
        kind: "CustomResourceDefinition",
    };
    let status = |conditions: Value| {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": "x"}, "status": {"conditions": conditions}})
    };
    let live = server_side_apply_status(
        None,
        &status(json!([{"type": "Established", "status": "True"}])),
        "a",
        false,
        &crd,
        T1,
    )
    .unwrap();
    let obj = server_side_apply_status(
        Some(&live),
        &status(json!([{"type": "NamesAccepted", "status": "True"}])),
        "b",
        false,
        &crd,
        T2,
    )
    .unwrap();
    assert_eq!(
        obj["status"]["conditions"],
        json!([{"type": "Established", "status": "True"}, {"type": "NamesAccepted", "status": "True"}])
    );
}

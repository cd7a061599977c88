use std::collections::BTreeMap;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::*;
use crate::olm_hash::go_json::{self, GoType};

/// docs/api-types.md §6.4: the bytes real OLM v0.31.0 hashed for `demo-operator.v0.3.0`.
const DEMO_V030_BYTES: &str = r#"{"replicas":1,"selector":{"matchLabels":{"control-plane":"controller-manager"}},"template":{"metadata":{"creationTimestamp":null,"labels":{"control-plane":"controller-manager"},"annotations":{"alm-examples":"[{\"apiVersion\": \"example.com/v1alpha1\", \"kind\": \"Demo\", \"metadata\": {\"name\": \"demo-sample\"}, \"spec\": {\"size\": 1}}]","capabilities":"Basic Install","categories":"Developer Tools","containerImage":"example.com/demo-operator:v0.3.0","createdAt":"2025-01-01T00:00:00Z","olm.operatorGroup":"demo-og","olm.operatorNamespace":"demo","olm.targetNamespaces":"demo","operatorframework.io/properties":"{\"properties\":[{\"type\":\"olm.gvk\",\"value\":{\"group\":\"example.com\",\"kind\":\"Demo\",\"version\":\"v1alpha1\"}},{\"type\":\"olm.package\",\"value\":{\"packageName\":\"demo-operator\",\"version\":\"0.3.0\"}}]}","repository":"https://example.com/demo-operator"}},"spec":{"containers":[{"name":"manager","image":"example.com/demo-operator:v0.3.0","args":["--leader-elect"],"ports":[{"name":"health","containerPort":8081,"protocol":"TCP"}],"env":[{"name":"OPERATOR_CONDITION_NAME","value":"demo-operator.v0.3.0"}],"resources":{"limits":{"cpu":"100m","memory":"64Mi"},"requests":{"cpu":"10m","memory":"32Mi"}}}],"terminationGracePeriodSeconds":10,"serviceAccountName":"demo-operator-controller-manager"}},"strategy":{},"revisionHistoryLimit":1}"#;
const DEMO_V030_HASH: &str = "6txxiaSavSoP6da975NoddwNNM7izjPTnVQeRQ";
/// The same procedure without the API server's `protocol: TCP` default.
const DEMO_V030_HASH_WITHOUT_PROTOCOL: &str = "4Zu5qHTLhcvn8OLOmujmAHBoiNuzug09qBovH4";

fn csv_annotations() -> BTreeMap<String, String> {
    [
        ("alm-examples", r#"[{"apiVersion": "example.com/v1alpha1", "kind": "Demo", "metadata": {"name": "demo-sample"}, "spec": {"size": 1}}]"#),
        ("capabilities", "Basic Install"),
        ("categories", "Developer Tools"),
        ("containerImage", "example.com/demo-operator:v0.3.0"),
        ("createdAt", "2025-01-01T00:00:00Z"),
        ("olm.operatorGroup", "demo-og"),
        ("olm.operatorNamespace", "demo"),
        ("olm.targetNamespaces", "demo"),
        ("operatorframework.io/properties", r#"{"properties":[{"type":"olm.gvk","value":{"group":"example.com","kind":"Demo","version":"v1alpha1"}},{"type":"olm.package","value":{"packageName":"demo-operator","version":"0.3.0"}}]}"#),
        ("repository", "https://example.com/demo-operator"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// The final spec built by hand, every object's members in a different order than Go's.
fn final_spec_reordered() -> Value {
    let annotations: serde_json::Map<String, Value> = csv_annotations()
        .into_iter()
        .rev()
        .map(|(k, v)| (k, Value::String(v)))
        .collect();
    json!({
        "revisionHistoryLimit": 1,
        "strategy": {},
        "template": {
            "spec": {
                "serviceAccountName": "demo-operator-controller-manager",
                "terminationGracePeriodSeconds": 10,
                "containers": [{
                    "resources": {
                        "requests": {"memory": "32Mi", "cpu": "10m"},
                        "limits": {"memory": "64Mi", "cpu": "100m"}
                    },
                    "env": [{"value": "demo-operator.v0.3.0", "name": "OPERATOR_CONDITION_NAME"}],
                    "ports": [{"protocol": "TCP", "containerPort": 8081, "name": "health"}],
                    "args": ["--leader-elect"],
                    "image": "example.com/demo-operator:v0.3.0",
                    "name": "manager"
                }]
            },
            "metadata": {
                "annotations": annotations,
                "labels": {"control-plane": "controller-manager"}
            }
        },
        "selector": {"matchLabels": {"control-plane": "controller-manager"}},
        "replicas": 1
    })
}

/// The bundle's DeploymentSpec as the API server returns it inside the CSV.
fn bundle_spec(with_protocol: bool) -> Value {
    let mut port = json!({"containerPort": 8081, "name": "health"});
    if with_protocol {
        port["protocol"] = json!("TCP");
    }
    json!({
        "replicas": 1,
        "selector": {"matchLabels": {"control-plane": "controller-manager"}},
        "template": {
            "metadata": {"labels": {"control-plane": "controller-manager"}},
            "spec": {
                "containers": [{
                    "args": ["--leader-elect"],
                    "image": "example.com/demo-operator:v0.3.0",
                    "name": "manager",
                    "ports": [port],
                    "resources": {
                        "limits": {"cpu": "100m", "memory": "64Mi"},
                        "requests": {"cpu": "10m", "memory": "32Mi"}
                    }
                }],
                "serviceAccountName": "demo-operator-controller-manager",
                "terminationGracePeriodSeconds": 10
            }
        }
    })
}

fn apply_steps(spec: &mut Value) {
    merge_csv_annotations(spec, &csv_annotations()).expect("step 2");
    set_operator_condition_name(spec, "demo-operator.v0.3.0").expect("step 4");
    set_revision_history_limit(spec).expect("step 5");
}

#[test]
fn worked_value_from_the_literal_bytes() {
    assert_eq!(
        sha224_base62(format!("{DEMO_V030_BYTES}\n").as_bytes()),
        DEMO_V030_HASH
    );
}

#[test]
fn encoder_reproduces_the_literal_bytes_from_a_reordered_value() {
    let spec = final_spec_reordered();
    assert_eq!(
        go_json::encode(&spec, GoType::DEPLOYMENT_SPEC).expect("encodes"),
        DEMO_V030_BYTES
    );
    assert_eq!(deployment_spec_hash(&spec).expect("hash"), DEMO_V030_HASH);
}

#[test]
fn literal_bytes_round_trip_through_the_encoder() {
    let parsed: Value = serde_json::from_str(DEMO_V030_BYTES).expect("valid JSON");
    assert_eq!(
        go_json::encode(&parsed, GoType::DEPLOYMENT_SPEC).expect("encodes"),
        DEMO_V030_BYTES
    );
}

#[test]
fn steps_2_4_5_turn_the_bundle_spec_into_the_hashed_spec() {
    let mut spec = bundle_spec(true);
    apply_steps(&mut spec);
    assert_eq!(deployment_spec_hash(&spec).expect("hash"), DEMO_V030_HASH);

    let mut spec = bundle_spec(false);
    apply_steps(&mut spec);
    assert_eq!(
        deployment_spec_hash(&spec).expect("hash"),
        DEMO_V030_HASH_WITHOUT_PROTOCOL
    );
}

#[test]
fn csv_annotations_win_over_template_annotations() {
    let mut spec =
        json!({"template": {"metadata": {"annotations": {"a": "template", "keep": "1"}}}});
    let csv: BTreeMap<String, String> = [
        ("a".to_owned(), "csv".to_owned()),
        ("b".to_owned(), "2".to_owned()),
    ]
    .into();
    merge_csv_annotations(&mut spec, &csv).expect("merges");
    assert_eq!(
        spec["template"]["metadata"]["annotations"],
        json!({"a": "csv", "keep": "1", "b": "2"})
    );

    let mut untouched = json!({});
    merge_csv_annotations(&mut untouched, &BTreeMap::new()).expect("no-op");
    assert_eq!(untouched, json!({}));
}

#[test]
fn operator_condition_name_is_replaced_in_place_or_appended() {
    let mut spec = json!({"template": {"spec": {
        "initContainers": [{"name": "init"}],
        "containers": [
            {"name": "a", "env": [
                {"name": "OPERATOR_CONDITION_NAME", "valueFrom": {"fieldRef": {"fieldPath": "x"}}},
                {"name": "OTHER", "value": "1"}
            ]},
            {"name": "b", "env": [{"name": "OTHER", "value": "2"}]},
            {"name": "c"}
        ]
    }}});
    set_operator_condition_name(&mut spec, "csv.v1").expect("sets");
    let containers = &spec["template"]["spec"]["containers"];
    assert_eq!(
        containers[0]["env"],
        json!([{"name": "OPERATOR_CONDITION_NAME", "value": "csv.v1"}, {"name": "OTHER", "value": "1"}])
    );
    assert_eq!(
        containers[1]["env"],
        json!([{"name": "OTHER", "value": "2"}, {"name": "OPERATOR_CONDITION_NAME", "value": "csv.v1"}])
    );
    assert_eq!(
        containers[2]["env"],
        json!([{"name": "OPERATOR_CONDITION_NAME", "value": "csv.v1"}])
    );
    assert_eq!(
        spec["template"]["spec"]["initContainers"],
        json!([{"name": "init"}])
    );
}

#[test]
fn malformed_specs_are_reported_not_panicked_on() {
    let mut spec = json!({"template": {"spec": {"containers": {"name": "not-a-list"}}}});
    let err = set_operator_condition_name(&mut spec, "x").expect_err("containers must be a list");
    assert!(
        err.to_string()
            .contains("DeploymentSpec.template.spec.containers"),
        "{err}"
    );
    let mut spec = json!("text");
    assert!(set_revision_history_limit(&mut spec).is_err());
}

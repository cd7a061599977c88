//! OLM's hash conventions through the public API, as the install and OperatorGroup code will
//! call them (worked values: docs/api-types.md §6.4, docs/install-plans.md §8).

use olm_rs::olm_hash::{
    OgRoleSuffix, RoleRefKind, aggregate_label_key, binding_hash, cluster_role_name,
    deployment_spec_hash, go_json, installed_alongside_annotation_key, og_cluster_role_name,
    role_name, rules_hash, sha224_base62,
};
use serde_json::json;

#[test]
fn operator_group_names_and_labels() {
    assert_eq!(
        og_cluster_role_name("demo", "demo-og", OgRoleSuffix::Edit),
        "olm.og.demo-og.edit-iX86eZdG8qXQYdgBi3na9RrzZm37VFBCTOw5O"
    );
    assert_eq!(
        aggregate_label_key("Demo", "v1alpha1", "example.com", OgRoleSuffix::View),
        "olm.opgroup.permissions/aggregate-to-7f1c1bed79b097e1-view"
    );
    assert_eq!(
        installed_alongside_annotation_key("demo", "demo-operator.v0.3.0"),
        "operatorframework.io/installed-alongside-6c4a32a7ecb91cf8"
    );
}

#[test]
fn install_plan_rbac_from_csv_json() {
    // As the catalog serves it: a CSV's install strategy, YAML-ish member order, extra members.
    let csv_strategy = json!({
        "clusterPermissions": [{
            "rules": [
                {"verbs": ["get", "list", "watch"], "resources": ["namespaces"], "apiGroups": [""]},
                {"verbs": ["create"], "resources": ["tokenreviews"], "apiGroups": ["authentication.k8s.io"]}
            ],
            "serviceAccountName": "demo-operator-controller-manager",
            "x-unknown": true
        }]
    });
    let permission = &csv_strategy["clusterPermissions"][0];
    let name = cluster_role_name("demo-operator.v0.3.0", "demo", permission).expect("name");
    assert_eq!(
        name,
        "demo-operator.v0.3.0-3z8UHO67B5CUqJSOeNoiQwBWEOUhSOEsRCrA1W"
    );
    assert_eq!(
        rules_hash(&permission["rules"]).expect("hash"),
        "8ONh59JpUFErMqDQ7GhvrP8d05vhfFKrcTwjb9"
    );
    assert_eq!(
        binding_hash(
            RoleRefKind::ClusterRole,
            &name,
            "demo-operator-controller-manager",
            "demo"
        ),
        "5zdDqX5E7RPjONGUImyZyszePnsx4P8ghwkgQr"
    );
    let role = role_name(
        "demo-operator.v0.3.0",
        &json!({"serviceAccountName": "sa", "rules": []}),
    )
    .expect("name");
    assert!(role.starts_with("demo-operator.v0.3.0-sa-"), "{role}");
}

#[test]
fn deployment_hash_is_the_stream_encoding_hashed() {
    let spec =
        json!({"template": {"spec": {"containers": [{"name": "m", "image": "i"}]}}, "replicas": 2});
    let text = go_json::encode_stream(&spec, go_json::GoType::DEPLOYMENT_SPEC).expect("encodes");
    assert!(text.ends_with("}\n") && !text.ends_with("\n\n"));
    assert_eq!(
        deployment_spec_hash(&spec).expect("hash"),
        sha224_base62(text.as_bytes())
    );
    // A different replica count is a different Deployment.
    let other =
        json!({"template": {"spec": {"containers": [{"name": "m", "image": "i"}]}}, "replicas": 3});
    assert_ne!(
        deployment_spec_hash(&other).expect("hash"),
        deployment_spec_hash(&spec).expect("hash")
    );
}

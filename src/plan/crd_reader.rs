//! olm-rs's read access to the custom resources of the CRDs it installs (docs/install-plans.md
//! §7.5).
//!
//! A CRD update is checked against every custom resource already stored (§7.4), so olm-rs must
//! list them. The chart cannot name the resources of CRDs that bundles will bring, and a
//! wildcard read would reach every custom resource of the cluster. Instead the chart binds
//! olm-rs to an aggregated ClusterRole ([`AGGREGATED_ROLE`]) that starts empty, and olm-rs adds
//! one small ClusterRole per CRD it installs or updates: read-only, for that CRD's resource
//! only, labelled [`AGGREGATE_LABEL`] so the controller-manager folds it into the bound role,
//! and owned by the CRD so that it goes when the CRD goes.

use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde_json::Value;

/// The label that aggregates a reader role into [`AGGREGATED_ROLE`] (the chart's selector).
pub const AGGREGATE_LABEL: &str = "olm-rs/aggregate-to-crd-reader";
/// The aggregated ClusterRole the chart binds to the controller's ServiceAccount.
pub const AGGREGATED_ROLE: &str = "olm-rs-controller-crd-reader";
/// The verbs a reader role grants: the safety check lists; nothing is ever written through it.
const VERBS: [&str; 3] = ["get", "list", "watch"];

/// The name of the reader role of CRD `crd_name`.
pub fn reader_role_name(crd_name: &str) -> String {
    format!("olm-rs-crd-reader-{crd_name}")
}

/// The reader role of a CRD (as JSON: the manifest of a step, or the live object), or `None`
/// when it lacks a name, group or plural. Owned by the CRD when its uid is known (a live CRD).
pub fn reader_role(crd: &Value) -> Option<ClusterRole> {
    let text = |path: &str| {
        crd.pointer(path)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    let name = text("/metadata/name")?;
    let group = text("/spec/group")?;
    let plural = text("/spec/names/plural")?;
    let owner = text("/metadata/uid").map(|uid| OwnerReference {
        api_version: "apiextensions.k8s.io/v1".to_owned(),
        kind: "CustomResourceDefinition".to_owned(),
        name: name.to_owned(),
        uid: uid.to_owned(),
        ..OwnerReference::default()
    });
    Some(ClusterRole {
        metadata: ObjectMeta {
            name: Some(reader_role_name(name)),
            labels: Some([(AGGREGATE_LABEL.to_owned(), "true".to_owned())].into()),
            owner_references: owner.map(|o| vec![o]),
            ..ObjectMeta::default()
        },
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec![group.to_owned()]),
            resources: Some(vec![plural.to_owned()]),
            verbs: VERBS.iter().map(|v| (*v).to_owned()).collect(),
            ..PolicyRule::default()
        }]),
        aggregation_rule: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd(uid: Option<&str>) -> Value {
        let mut crd = json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "demos.example.com"},
            "spec": {"group": "example.com", "names": {"plural": "demos", "kind": "Demo"}},
        });
        if let Some(uid) = uid {
            crd["metadata"]["uid"] = uid.into();
        }
        crd
    }

    #[test]
    fn a_live_crd_gets_a_read_only_role_it_owns() {
        let role = reader_role(&crd(Some("u-1"))).unwrap();
        assert_eq!(
            serde_json::to_value(&role).unwrap(),
            json!({
                "metadata": {
                    "name": "olm-rs-crd-reader-demos.example.com",
                    "labels": {"olm-rs/aggregate-to-crd-reader": "true"},
                    "ownerReferences": [{
                        "apiVersion": "apiextensions.k8s.io/v1",
                        "kind": "CustomResourceDefinition",
                        "name": "demos.example.com",
                        "uid": "u-1",
                    }],
                },
                "rules": [{
                    "apiGroups": ["example.com"],
                    "resources": ["demos"],
                    "verbs": ["get", "list", "watch"],
                }],
            })
        );
    }

    #[test]
    fn a_manifest_without_uid_gets_no_owner_and_an_incomplete_one_no_role() {
        let role = reader_role(&crd(None)).unwrap();
        assert!(role.metadata.owner_references.is_none());
        let mut broken = crd(None);
        broken["spec"]["names"]["plural"] = "".into();
        assert!(reader_role(&broken).is_none());
    }
}

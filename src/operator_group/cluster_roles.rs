//! The three aggregated ClusterRoles every OperatorGroup gets (docs/operator-groups.md §9.1, first
//! table): `olm.og.<og>.<admin|edit|view>-<hash>`, collecting the per-API roles of the APIs the
//! group provides through aggregation labels.

use std::collections::BTreeMap;

use k8s_openapi::api::rbac::v1::{AggregationRule, ClusterRole};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use crate::api::keys::{
    MANAGED_LABEL, MANAGED_LABEL_VALUE, OWNER_KIND_LABEL, OWNER_LABEL, OWNER_NAMESPACE_LABEL,
};
use crate::olm_hash::{OgRoleSuffix, aggregate_label_key, og_cluster_role_name};

use super::provided_apis::ApiSet;

/// `olm.owner.kind` value on objects owned by an OperatorGroup.
pub const OPERATOR_GROUP_OWNER_KIND: &str = "OperatorGroup";

/// The owner labels OLM puts on a group's ClusterRoles (also the selector that finds them
/// when the group is deleted).
pub fn operator_group_owner_labels(og_namespace: &str, og_name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (OWNER_LABEL.to_owned(), og_name.to_owned()),
        (OWNER_NAMESPACE_LABEL.to_owned(), og_namespace.to_owned()),
        (
            OWNER_KIND_LABEL.to_owned(),
            OPERATOR_GROUP_OWNER_KIND.to_owned(),
        ),
    ])
}

/// The group's admin, edit and view roles for the APIs `apis` (annotation ∪ member CSVs).
/// Selectors are sorted by label key (OLM's order is random, docs/operator-groups.md §9.1); no APIs means no
/// aggregation rule.
pub fn operator_group_cluster_roles(
    og_namespace: &str,
    og_name: &str,
    apis: &ApiSet,
) -> Vec<ClusterRole> {
    OgRoleSuffix::ALL
        .iter()
        .map(|&suffix| {
            let mut labels = operator_group_owner_labels(og_namespace, og_name);
            labels.insert(MANAGED_LABEL.to_owned(), MANAGED_LABEL_VALUE.to_owned());
            let mut keys: Vec<String> = apis
                .iter()
                .map(|api| aggregate_label_key(&api.kind, &api.version, &api.group, suffix))
                .collect();
            keys.sort();
            keys.dedup();
            let aggregation_rule = (!keys.is_empty()).then(|| AggregationRule {
                cluster_role_selectors: Some(
                    keys.into_iter()
                        .map(|key| LabelSelector {
                            match_labels: Some(BTreeMap::from([(key, "true".to_owned())])),
                            match_expressions: None,
                        })
                        .collect(),
                ),
            });
            ClusterRole {
                metadata: ObjectMeta {
                    name: Some(og_cluster_role_name(og_namespace, og_name, suffix)),
                    labels: Some(labels),
                    ..Default::default()
                },
                aggregation_rule,
                rules: None,
            }
        })
        .collect()
}

/// Whether `existing` already is what `desired` asks for: every desired label present with its
/// value, and the same set of aggregation selectors in any order.
pub fn cluster_role_matches(existing: &ClusterRole, desired: &ClusterRole) -> bool {
    let labels_ok = desired
        .metadata
        .labels
        .iter()
        .flatten()
        .all(|(k, v)| existing.metadata.labels.as_ref().and_then(|l| l.get(k)) == Some(v));
    labels_ok && selector_set(existing) == selector_set(desired)
}

fn selector_set(role: &ClusterRole) -> Vec<String> {
    let mut keys: Vec<String> = role
        .aggregation_rule
        .iter()
        .flat_map(|rule| rule.cluster_role_selectors.iter().flatten())
        .map(|sel| serde_json::to_string(sel).unwrap_or_default())
        .collect();
    keys.sort();
    keys
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operator_group::provided_apis::parse_provided_apis;

    #[test]
    fn names_labels_and_selectors_match_olm() {
        let apis = parse_provided_apis("Demo.v1alpha1.example.com");
        let roles = operator_group_cluster_roles("demo", "demo-og", &apis);
        let names: Vec<_> = roles
            .iter()
            .map(|r| r.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "olm.og.demo-og.admin-86yceVG1OUIPZEmmehd1WTzivsPEB9JIfZpQA8",
                "olm.og.demo-og.edit-iX86eZdG8qXQYdgBi3na9RrzZm37VFBCTOw5O",
                "olm.og.demo-og.view-3wJrIlYFBawzBy3isgQNbb5ExNdP1h7ZcoWrnk",
            ]
        );
        let edit = serde_json::to_value(&roles[1]).unwrap();
        assert_eq!(
            edit["metadata"]["labels"],
            serde_json::json!({
                "olm.managed": "true",
                "olm.owner": "demo-og",
                "olm.owner.kind": "OperatorGroup",
                "olm.owner.namespace": "demo",
            })
        );
        assert_eq!(
            edit["aggregationRule"]["clusterRoleSelectors"],
            serde_json::json!([{"matchLabels": {
                "olm.opgroup.permissions/aggregate-to-7f1c1bed79b097e1-edit": "true"
            }}])
        );
        assert!(edit.get("rules").is_none());
    }

    #[test]
    fn no_apis_means_no_aggregation_rule() {
        let roles = operator_group_cluster_roles("ns", "og", &ApiSet::new());
        assert!(roles.iter().all(|r| r.aggregation_rule.is_none()));
    }

    #[test]
    fn selector_order_does_not_matter() {
        let apis = parse_provided_apis("A.v1.g,B.v1.g");
        let desired = operator_group_cluster_roles("ns", "og", &apis).remove(0);
        let mut reordered = desired.clone();
        if let Some(rule) = reordered.aggregation_rule.as_mut() {
            rule.cluster_role_selectors.as_mut().unwrap().reverse();
        }
        assert!(cluster_role_matches(&reordered, &desired));
        let fewer =
            operator_group_cluster_roles("ns", "og", &parse_provided_apis("A.v1.g")).remove(0);
        assert!(!cluster_role_matches(&fewer, &desired));
    }
}

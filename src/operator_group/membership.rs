//! The three annotations that make a CSV a member of its namespace's OperatorGroup
//! (docs/operator-groups.md §2 step 4, §3; docs/api-types.md §5) and the "is this CSV a copy" test
//! (docs/csv-phases.md §2 step 2).

use std::collections::BTreeMap;

use crate::api::keys::{
    COPIED_FROM_LABEL, OPERATOR_GROUP_ANNOTATION, OPERATOR_GROUP_NAMESPACE_ANNOTATION,
    TARGET_NAMESPACES_ANNOTATION,
};
use crate::api::{ClusterServiceVersion, CsvReason, OperatorGroup};

use super::targets::{NamespaceAllAmongOthers, TargetNamespaces};

/// The membership annotations a group wants on its CSVs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberAnnotations {
    /// `olm.operatorNamespace`.
    pub operator_namespace: String,
    /// `olm.operatorGroup`.
    pub operator_group: String,
    /// `olm.targetNamespaces`; `None` while the group selects no namespace (no or an empty
    /// `status.namespaces`). OLM then leaves a stale value in place; olm-rs removes it, because
    /// a left-over `""` reads as "all namespaces" to anything that looks at the CSV (the CSV
    /// sync fails such a CSV with `NoTargetNamespaces` either way, docs/csv-phases.md §2 step 6).
    pub target_namespaces: Option<String>,
}

impl MemberAnnotations {
    /// The annotations for members of `og`.
    pub fn for_group(og: &OperatorGroup) -> Result<Self, NamespaceAllAmongOthers> {
        let targets = TargetNamespaces::from_status(
            og.status.as_ref().and_then(|s| s.namespaces.as_deref()),
        )?;
        let target_namespaces = (!targets.is_empty()).then(|| targets.to_annotation());
        Ok(Self {
            operator_namespace: og.metadata.namespace.clone().unwrap_or_default(),
            operator_group: og.metadata.name.clone().unwrap_or_default(),
            target_namespaces,
        })
    }

    /// Whether `annotations` already carry these values.
    pub fn present_in(&self, annotations: Option<&BTreeMap<String, String>>) -> bool {
        let get = |key: &str| annotations.and_then(|a| a.get(key)).map(String::as_str);
        get(OPERATOR_GROUP_NAMESPACE_ANNOTATION) == Some(self.operator_namespace.as_str())
            && get(OPERATOR_GROUP_ANNOTATION) == Some(self.operator_group.as_str())
            && get(TARGET_NAMESPACES_ANNOTATION) == self.target_namespaces.as_deref()
    }

    /// The three keys and their wanted values; `None` removes the key.
    pub fn entries(&self) -> BTreeMap<String, Option<String>> {
        BTreeMap::from([
            (
                OPERATOR_GROUP_NAMESPACE_ANNOTATION.to_owned(),
                Some(self.operator_namespace.clone()),
            ),
            (
                OPERATOR_GROUP_ANNOTATION.to_owned(),
                Some(self.operator_group.clone()),
            ),
            (
                TARGET_NAMESPACES_ANNOTATION.to_owned(),
                self.target_namespaces.clone(),
            ),
        ])
    }

    /// A JSON merge patch that sets these annotations and touches nothing else: CSVs are
    /// written by users, install plans and the CSV sync, so a partial server-side apply would
    /// fight over ownership of the whole annotation map.
    pub fn merge_patch(&self) -> serde_json::Value {
        // `null` deletes a key in a merge patch.
        let annotations: serde_json::Map<String, serde_json::Value> = self
            .entries()
            .into_iter()
            .map(|(k, v)| {
                (
                    k,
                    v.map_or(serde_json::Value::Null, serde_json::Value::String),
                )
            })
            .collect();
        serde_json::json!({ "metadata": { "annotations": annotations } })
    }
}

/// docs/csv-phases.md §2 step 2: a copy has `status.reason: Copied`, or an `olm.operatorNamespace` naming
/// another namespace, or the `olm.copiedFrom` label. Copies are never members.
pub fn is_copied(csv: &ClusterServiceVersion) -> bool {
    let reason_copied = csv
        .status
        .as_ref()
        .is_some_and(|s| s.reason == Some(CsvReason::Copied));
    let foreign_group = csv
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(OPERATOR_GROUP_NAMESPACE_ANNOTATION))
        .is_some_and(|ns| Some(ns) != csv.metadata.namespace.as_ref());
    let labelled = csv
        .metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(COPIED_FROM_LABEL));
    reason_copied || foreign_group || labelled
}

/// docs/operator-groups.md §3: the CSV is an active member of `og` — `og` is the only group of the
/// namespace (checked by the caller) and the three annotations match, with targets equal to
/// the group's sorted targets.
pub fn is_active_member(csv: &ClusterServiceVersion, og: &OperatorGroup) -> bool {
    let Ok(wanted) = MemberAnnotations::for_group(og) else {
        return false;
    };
    wanted.target_namespaces.is_some()
        && csv.metadata.namespace == og.metadata.namespace
        && !is_copied(csv)
        && wanted.present_in(csv.metadata.annotations.as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{OperatorGroupSpec, OperatorGroupStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn og(namespaces: Option<&[&str]>) -> OperatorGroup {
        let mut og = OperatorGroup::new("og", OperatorGroupSpec::default());
        og.metadata.namespace = Some("ops".into());
        if let Some(names) = namespaces {
            let mut status = OperatorGroupStatus::new(Time(jiff::Timestamp::UNIX_EPOCH));
            status.namespaces = Some(names.iter().map(|s| s.to_string()).collect());
            og.status = Some(status);
        }
        og
    }

    fn csv(annotations: &[(&str, &str)]) -> ClusterServiceVersion {
        let mut csv: ClusterServiceVersion = serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "ClusterServiceVersion",
            "metadata": {"name": "op.v1", "namespace": "ops"},
            "spec": {"displayName": "Op", "install": {"strategy": "deployment"}}
        }))
        .unwrap();
        csv.metadata.annotations = Some(
            annotations
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        csv
    }

    #[test]
    fn annotations_follow_sorted_targets_and_all_is_empty_string() {
        let wanted = MemberAnnotations::for_group(&og(Some(&["b", "a"]))).unwrap();
        assert_eq!(wanted.target_namespaces.as_deref(), Some("a,b"));
        let all = MemberAnnotations::for_group(&og(Some(&[""]))).unwrap();
        assert_eq!(all.target_namespaces.as_deref(), Some(""));
        assert_eq!(
            all.merge_patch(),
            serde_json::json!({"metadata": {"annotations": {
                "olm.operatorNamespace": "ops",
                "olm.operatorGroup": "og",
                "olm.targetNamespaces": "",
            }}})
        );
        let unsynced = MemberAnnotations::for_group(&og(None)).unwrap();
        assert_eq!(unsynced.target_namespaces, None);
        // A group selecting nothing removes a stale value instead of leaving `""` (= all).
        let nothing = MemberAnnotations::for_group(&og(Some(&[]))).unwrap();
        assert_eq!(nothing, unsynced);
        assert_eq!(
            nothing.merge_patch()["metadata"]["annotations"]["olm.targetNamespaces"],
            serde_json::Value::Null
        );
        let stale = csv(&[
            ("olm.operatorNamespace", "ops"),
            ("olm.operatorGroup", "og"),
            ("olm.targetNamespaces", ""),
        ]);
        assert!(!nothing.present_in(stale.metadata.annotations.as_ref()));
    }

    #[test]
    fn membership_needs_all_three_annotations() {
        let group = og(Some(&["a", "b"]));
        let member = csv(&[
            ("olm.operatorNamespace", "ops"),
            ("olm.operatorGroup", "og"),
            ("olm.targetNamespaces", "a,b"),
        ]);
        assert!(is_active_member(&member, &group));
        let stale = csv(&[
            ("olm.operatorNamespace", "ops"),
            ("olm.operatorGroup", "og"),
            ("olm.targetNamespaces", "a"),
        ]);
        assert!(!is_active_member(&stale, &group));
        assert!(
            !MemberAnnotations::for_group(&group)
                .unwrap()
                .present_in(stale.metadata.annotations.as_ref())
        );
    }

    #[test]
    fn copies_are_recognised_three_ways() {
        assert!(!is_copied(&csv(&[])));
        assert!(is_copied(&csv(&[("olm.operatorNamespace", "elsewhere")])));
        let mut labelled = csv(&[]);
        labelled.metadata.labels = Some([("olm.copiedFrom".to_string(), "x".to_string())].into());
        assert!(is_copied(&labelled));
        let mut reason = csv(&[]);
        reason.status = Some(crate::api::ClusterServiceVersionStatus {
            reason: Some(CsvReason::Copied),
            ..Default::default()
        });
        assert!(is_copied(&reason));
    }
}

//! `olm.operatorgroup.uid/<uid>` labels on target namespaces (docs/operator-groups.md §4): exactly one
//! per non-all-namespaces group that targets the namespace. They back the webhook
//! `namespaceSelector` of explicit-target groups (docs/certificates.md §8).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Namespace;
use kube::ResourceExt;
use kube::api::PartialObjectMeta;

use crate::api::OperatorGroup;
use crate::api::keys::OPERATOR_GROUP_UID_LABEL_PREFIX;
use crate::k8s::effects::{Body, Effects, Write};
use crate::k8s::write::ObjectKey;

use super::targets::TargetNamespaces;

/// `olm.operatorgroup.uid/<og-uid>` (value `""`).
pub fn group_label_key(og_uid: &str) -> String {
    format!("{OPERATOR_GROUP_UID_LABEL_PREFIX}{og_uid}")
}

/// The group label keys `namespace` should carry, given every group's uid and targets.
/// All-namespace groups label nothing.
pub fn desired_group_labels<'a>(
    namespace: &str,
    groups: impl IntoIterator<Item = (&'a str, &'a TargetNamespaces)>,
) -> BTreeSet<String> {
    groups
        .into_iter()
        .filter(|(_, targets)| !targets.is_all() && targets.contains(namespace))
        .map(|(uid, _)| group_label_key(uid))
        .collect()
}

/// A JSON merge patch making the namespace's group labels exactly `desired` (adding missing
/// keys with `""`, removing stale ones), or `None` when they already are. A merge patch rather
/// than an apply: namespaces belong to users, and labels set by OLM v0 before a takeover are
/// owned by another field manager, which an apply could not remove.
pub fn namespace_label_patch(
    current: Option<&BTreeMap<String, String>>,
    desired: &BTreeSet<String>,
) -> Option<serde_json::Value> {
    let mut changes = serde_json::Map::new();
    for (key, value) in current.into_iter().flatten() {
        if key.starts_with(OPERATOR_GROUP_UID_LABEL_PREFIX) && !desired.contains(key) {
            changes.insert(key.clone(), serde_json::Value::Null);
        } else if desired.contains(key) && !value.is_empty() {
            changes.insert(key.clone(), "".into());
        }
    }
    for key in desired {
        if !current.is_some_and(|c| c.contains_key(key)) {
            changes.insert(key.clone(), "".into());
        }
    }
    (!changes.is_empty()).then(|| serde_json::json!({"metadata": {"labels": changes}}))
}

/// Decides the group labels of `ns`, given every OperatorGroup (their uids and the targets
/// their status records): one merge patch guarded by the version of `ns` it removes stale
/// labels from, or nothing. A namespace being deleted is left alone.
pub fn decide_namespace_labels(
    ns: &PartialObjectMeta<Namespace>,
    groups: &[Arc<OperatorGroup>],
) -> Effects {
    let mut effects = Effects::default();
    if ns.metadata.deletion_timestamp.is_some() {
        return effects;
    }
    let name = ns.name_any();
    let targets: Vec<(&str, TargetNamespaces)> = groups
        .iter()
        .filter_map(|og| {
            let uid = og.metadata.uid.as_deref()?;
            let targets =
                TargetNamespaces::from_status(og.status.as_ref()?.namespaces.as_deref()).ok()?;
            Some((uid, targets))
        })
        .collect();
    let desired = desired_group_labels(&name, targets.iter().map(|(uid, t)| (*uid, t)));
    if let Some(patch) = namespace_label_patch(ns.metadata.labels.as_ref(), &desired) {
        effects.write(Write::MergePatch {
            key: ObjectKey::new::<Namespace>(None, &name),
            patch: Body::new(patch),
            resource_version: ns.metadata.resource_version.clone(),
        });
    }
    effects
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(list: &[&str]) -> TargetNamespaces {
        TargetNamespaces::Named(list.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn only_explicit_groups_targeting_the_namespace_label_it() {
        let a = named(&["ns1", "ns2"]);
        let b = named(&["ns2"]);
        let all = TargetNamespaces::All;
        let groups = [("uid-a", &a), ("uid-b", &b), ("uid-all", &all)];
        assert_eq!(
            desired_group_labels("ns2", groups),
            BTreeSet::from([
                "olm.operatorgroup.uid/uid-a".to_string(),
                "olm.operatorgroup.uid/uid-b".to_string()
            ])
        );
        assert!(desired_group_labels("ns3", groups).is_empty());
    }

    #[test]
    fn patch_adds_missing_removes_stale_and_leaves_other_labels() {
        let current = BTreeMap::from([
            ("team".to_string(), "x".to_string()),
            ("olm.operatorgroup.uid/old".to_string(), "".to_string()),
            ("olm.operatorgroup.uid/keep".to_string(), "".to_string()),
        ]);
        let desired = BTreeSet::from([
            "olm.operatorgroup.uid/keep".to_string(),
            "olm.operatorgroup.uid/new".to_string(),
        ]);
        assert_eq!(
            namespace_label_patch(Some(&current), &desired).unwrap(),
            serde_json::json!({"metadata": {"labels": {
                "olm.operatorgroup.uid/old": null,
                "olm.operatorgroup.uid/new": "",
            }}})
        );
        let settled = BTreeMap::from([("olm.operatorgroup.uid/keep".to_string(), String::new())]);
        let only_keep = BTreeSet::from(["olm.operatorgroup.uid/keep".to_string()]);
        assert_eq!(namespace_label_patch(Some(&settled), &only_keep), None);
        assert_eq!(namespace_label_patch(None, &BTreeSet::new()), None);
    }

    fn group_targeting(uid: &str, targets: &[&str]) -> Arc<OperatorGroup> {
        let mut og = OperatorGroup::new(uid, crate::api::OperatorGroupSpec::default());
        og.metadata.uid = Some(uid.to_owned());
        let mut status = crate::api::OperatorGroupStatus::new(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH),
        );
        status.namespaces = Some(targets.iter().map(|t| t.to_string()).collect());
        og.status = Some(status);
        Arc::new(og)
    }

    fn ns(labels: &[&str], deleting: bool) -> PartialObjectMeta<Namespace> {
        let mut ns = PartialObjectMeta::<Namespace>::default();
        ns.metadata.name = Some("team-a".into());
        ns.metadata.resource_version = Some("4".into());
        ns.metadata.labels = Some(
            labels
                .iter()
                .map(|l| (l.to_string(), String::new()))
                .collect(),
        );
        ns.metadata.deletion_timestamp = deleting.then_some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH),
        );
        ns
    }

    #[test]
    fn namespace_label_decisions() {
        let groups = vec![
            group_targeting("a", &["team-a", "team-b"]),
            group_targeting("all", &[""]),
            group_targeting("b", &["team-b"]),
        ];
        let patch = |labels: serde_json::Value| {
            vec![Write::MergePatch {
                key: ObjectKey::new::<Namespace>(None, "team-a"),
                patch: Body::new(serde_json::json!({"metadata": {"labels": labels}})),
                resource_version: Some("4".into()),
            }]
        };
        let cases = vec![
            (
                "a targeting group labels, all-namespace groups do not",
                ns(&[], false),
                patch(serde_json::json!({"olm.operatorgroup.uid/a": ""})),
            ),
            (
                "a stale label goes, guarded by the version seen",
                ns(
                    &["olm.operatorgroup.uid/a", "olm.operatorgroup.uid/b"],
                    false,
                ),
                patch(serde_json::json!({"olm.operatorgroup.uid/b": null})),
            ),
            (
                "labelled as wanted: nothing",
                ns(&["olm.operatorgroup.uid/a"], false),
                vec![],
            ),
            (
                "a namespace being deleted is left alone",
                ns(&[], true),
                vec![],
            ),
        ];
        for (name, ns, writes) in cases {
            let want = Effects {
                writes,
                ..Effects::default()
            };
            assert_eq!(decide_namespace_labels(&ns, &groups), want, "{name}");
        }
    }
}

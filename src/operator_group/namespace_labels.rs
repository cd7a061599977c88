//! `olm.operatorgroup.uid/<uid>` labels on target namespaces (docs/operator-groups.md §4): exactly one
//! per non-all-namespaces group that targets the namespace. They back the webhook
//! `namespaceSelector` of explicit-target groups (docs/certificates.md §8).

use std::collections::{BTreeMap, BTreeSet};

use crate::api::keys::OPERATOR_GROUP_UID_LABEL_PREFIX;

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
}

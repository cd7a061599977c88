//! The OperatorGroup status a sync wants (docs/operator-groups.md §1, §2 steps 1–3, §8): resolved
//! targets, `lastUpdated`, the service-account reference and the two problem conditions.

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::operator_group::{
    CONDITION_MULTIPLE_OPERATOR_GROUPS, CONDITION_SERVICE_ACCOUNT,
    MESSAGE_MULTIPLE_OPERATOR_GROUPS, REASON_MULTIPLE_OPERATOR_GROUPS_FOUND,
    REASON_SERVICE_ACCOUNT_NOT_FOUND,
};
use crate::api::{
    ConditionStatus, OperatorGroup, OperatorGroupStatus, meta_condition, remove_condition,
    set_condition,
};

use super::targets::TargetNamespaces;

/// What the sync found about `spec.serviceAccountName`.
#[derive(Debug, Clone, PartialEq)]
pub enum ServiceAccountState {
    /// The spec names no account.
    NotRequested,
    /// The named account does not exist in the group's namespace.
    Missing(String),
    /// The account exists; this is the reference to record.
    Found(ObjectReference),
}

/// Inputs of [`desired_status`] besides the group itself.
#[derive(Debug, Clone)]
pub struct Observed<'a> {
    /// Names of every OperatorGroup in the namespace, this one included.
    pub groups_in_namespace: &'a [String],
    /// Freshly computed targets; `None` when they could not be computed (invalid spec), which
    /// leaves `status.namespaces` as it is.
    pub targets: Option<&'a TargetNamespaces>,
    pub service_account: &'a ServiceAccountState,
    pub now: &'a Time,
}

/// The status to write, or `None` when the current one already says the same.
pub fn desired_status(og: &OperatorGroup, seen: &Observed<'_>) -> Option<OperatorGroupStatus> {
    let current = og.status.clone();
    let mut status = current
        .clone()
        .unwrap_or_else(|| OperatorGroupStatus::new(seen.now.clone()));
    let mut conditions = status.conditions.take().unwrap_or_default();
    let mut touched = current.is_none();

    // docs/operator-groups.md §2 step 1; the message names the groups (docs/operator-groups.md §11 item 1).
    if seen.groups_in_namespace.len() > 1 {
        let mut names = seen.groups_in_namespace.to_vec();
        names.sort();
        let message = format!("{MESSAGE_MULTIPLE_OPERATOR_GROUPS}: {}", names.join(", "));
        let condition = meta_condition(
            CONDITION_MULTIPLE_OPERATOR_GROUPS,
            ConditionStatus::True,
            REASON_MULTIPLE_OPERATOR_GROUPS_FOUND,
            &message,
            None,
            seen.now,
        );
        touched |= set_condition(&mut conditions, condition, seen.now);
    } else {
        touched |= remove_condition(&mut conditions, CONDITION_MULTIPLE_OPERATOR_GROUPS);
    }

    // docs/operator-groups.md §8. Unlike OLM, a missing account does not stop the targets from being computed
    // (docs/operator-groups.md §11 item 4); the reference already recorded is kept meanwhile.
    let mut reference_changed = false;
    match seen.service_account {
        ServiceAccountState::NotRequested => {
            touched |= remove_condition(&mut conditions, CONDITION_SERVICE_ACCOUNT);
            reference_changed = status.service_account_ref.take().is_some();
        }
        ServiceAccountState::Missing(name) => {
            let condition = meta_condition(
                CONDITION_SERVICE_ACCOUNT,
                ConditionStatus::True,
                REASON_SERVICE_ACCOUNT_NOT_FOUND,
                &format!("ServiceAccount {name} not found"),
                None,
                seen.now,
            );
            touched |= set_condition(&mut conditions, condition, seen.now);
        }
        ServiceAccountState::Found(reference) => {
            touched |= remove_condition(&mut conditions, CONDITION_SERVICE_ACCOUNT);
            if status.service_account_ref.as_ref() != Some(reference) {
                status.service_account_ref = Some(reference.clone());
                reference_changed = true;
            }
        }
    }

    let mut namespaces_changed = false;
    if let Some(targets) = seen.targets {
        let old = TargetNamespaces::from_status(status.namespaces.as_deref()).ok();
        // Compared as sets: OLM's order is arbitrary (docs/operator-groups.md §1).
        if old.as_ref() != Some(targets) {
            let list = targets.to_status();
            status.namespaces = (!list.is_empty()).then_some(list);
            namespaces_changed = true;
        }
    }

    if namespaces_changed || reference_changed {
        status.last_updated = seen.now.clone();
    }
    status.conditions = (!conditions.is_empty()).then_some(conditions);
    (touched || namespaces_changed || reference_changed).then_some(status)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::OperatorGroupSpec;

    fn at(seconds: i64) -> Time {
        Time(jiff::Timestamp::from_second(seconds).unwrap())
    }

    fn og() -> OperatorGroup {
        let mut og = OperatorGroup::new("og", OperatorGroupSpec::default());
        og.metadata.namespace = Some("ops".into());
        og
    }

    fn named(list: &[&str]) -> TargetNamespaces {
        TargetNamespaces::Named(list.iter().map(|s| s.to_string()).collect())
    }

    fn observe<'a>(
        groups: &'a [String],
        targets: Option<&'a TargetNamespaces>,
        sa: &'a ServiceAccountState,
        now: &'a Time,
    ) -> Observed<'a> {
        Observed {
            groups_in_namespace: groups,
            targets,
            service_account: sa,
            now,
        }
    }

    #[test]
    fn first_sync_writes_targets_and_last_updated_then_settles() {
        let groups = vec!["og".to_string()];
        let all = TargetNamespaces::All;
        let sa = ServiceAccountState::NotRequested;
        let mut group = og();
        let status = desired_status(&group, &observe(&groups, Some(&all), &sa, &at(10))).unwrap();
        assert_eq!(status.namespaces, Some(vec![String::new()]));
        assert_eq!(status.last_updated, at(10));
        assert_eq!(status.conditions, None);
        group.status = Some(status);
        assert_eq!(
            desired_status(&group, &observe(&groups, Some(&all), &sa, &at(20))),
            None
        );
        // Same set in another order is no change.
        let two = named(&["b", "a"]);
        let status = desired_status(&group, &observe(&groups, Some(&two), &sa, &at(30))).unwrap();
        assert_eq!(
            status.namespaces,
            Some(vec!["a".to_string(), "b".to_string()])
        );
        assert_eq!(status.last_updated, at(30));
        let mut unordered = status.clone();
        unordered.namespaces = Some(vec!["b".into(), "a".into()]);
        group.status = Some(unordered);
        assert_eq!(
            desired_status(&group, &observe(&groups, Some(&two), &sa, &at(40))),
            None
        );
    }

    #[test]
    fn empty_selection_is_written_as_absent() {
        let groups = vec!["og".to_string()];
        let none = named(&[]);
        let sa = ServiceAccountState::NotRequested;
        let status = desired_status(&og(), &observe(&groups, Some(&none), &sa, &at(1))).unwrap();
        assert_eq!(status.namespaces, None);
    }

    #[test]
    fn multiple_groups_condition_names_them_and_clears() {
        let groups = vec!["b-og".to_string(), "og".to_string()];
        let all = TargetNamespaces::All;
        let sa = ServiceAccountState::NotRequested;
        let mut group = og();
        let status = desired_status(&group, &observe(&groups, Some(&all), &sa, &at(1))).unwrap();
        let cond = &status.conditions.as_ref().unwrap()[0];
        assert_eq!(cond.type_, "MultipleOperatorGroup");
        assert_eq!(cond.status, "True");
        assert_eq!(cond.reason, "MultipleOperatorGroupsFound");
        assert_eq!(
            cond.message,
            "Multiple OperatorGroup found in the same namespace: b-og, og"
        );
        group.status = Some(status);
        let alone = vec!["og".to_string()];
        let status = desired_status(&group, &observe(&alone, Some(&all), &sa, &at(2))).unwrap();
        assert_eq!(status.conditions, None);
        // Removing only the condition does not move lastUpdated.
        assert_eq!(status.last_updated, at(1));
    }

    #[test]
    fn service_account_missing_then_found_then_dropped() {
        let groups = vec!["og".to_string()];
        let all = TargetNamespaces::All;
        let mut group = og();
        let missing = ServiceAccountState::Missing("scoped".into());
        let status =
            desired_status(&group, &observe(&groups, Some(&all), &missing, &at(1))).unwrap();
        let cond = &status.conditions.as_ref().unwrap()[0];
        assert_eq!(
            (
                cond.type_.as_str(),
                cond.reason.as_str(),
                cond.message.as_str()
            ),
            (
                "OperatorGroupServiceAccount",
                "ServiceAccountNotFound",
                "ServiceAccount scoped not found"
            )
        );
        // Targets are still computed while the account is missing.
        assert_eq!(status.namespaces, Some(vec![String::new()]));
        group.status = Some(status);

        let reference = ObjectReference {
            kind: Some("ServiceAccount".into()),
            api_version: Some("v1".into()),
            namespace: Some("ops".into()),
            name: Some("scoped".into()),
            uid: Some("u".into()),
            resource_version: Some("7".into()),
            ..Default::default()
        };
        let found = ServiceAccountState::Found(reference.clone());
        let status = desired_status(&group, &observe(&groups, Some(&all), &found, &at(5))).unwrap();
        assert_eq!(status.service_account_ref, Some(reference));
        assert_eq!(status.conditions, None);
        assert_eq!(status.last_updated, at(5));
        group.status = Some(status);

        let dropped = ServiceAccountState::NotRequested;
        let status =
            desired_status(&group, &observe(&groups, Some(&all), &dropped, &at(9))).unwrap();
        assert_eq!(status.service_account_ref, None);
        assert_eq!(status.last_updated, at(9));
    }

    #[test]
    fn uncomputable_targets_leave_namespaces_alone() {
        let groups = vec!["og".to_string()];
        let sa = ServiceAccountState::NotRequested;
        let mut group = og();
        let mut status = OperatorGroupStatus::new(at(1));
        status.namespaces = Some(vec!["a".into()]);
        group.status = Some(status);
        assert_eq!(
            desired_status(&group, &observe(&groups, None, &sa, &at(2))),
            None
        );
    }
}

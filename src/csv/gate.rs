//! The checks every sync runs before the phase switch (csv.md §2): copies, the NoRetry freeze,
//! the API surface, OperatorGroup membership, install modes, targets and provided APIs.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::api::keys::{
    OPERATOR_GROUP_ANNOTATION, OPERATOR_GROUP_NAMESPACE_ANNOTATION, TARGET_NAMESPACES_ANNOTATION,
};
use crate::api::{CSV_FINALIZER, ClusterServiceVersion, CsvPhase, CsvReason, OperatorGroup};

use super::identity::{annotation, is_copy, namespace};
use super::install_modes::{InstallModeSet, split_targets};
use super::observed::Observed;
use super::provided_apis::{
    ProvidedApiDecision, check_required_crd_names, provided_apis, reconcile_provided_apis,
};
use super::strategy::deployment_strategy;
use super::sync::{Action, Decision, Requeue};

/// Whether the phase switch may run.
pub enum Gate<'a> {
    /// The sync ends here with this decision.
    Stop(Decision),
    /// Continue with the phase switch; `group` is the CSV's only OperatorGroup.
    Pass {
        decision: Decision,
        group: &'a OperatorGroup,
    },
}

/// Runs csv.md §2 steps 1–9 (deletion is handled by the caller before this).
pub fn gate<'a>(csv: &ClusterServiceVersion, seen: &'a Observed, now: Timestamp) -> Gate<'a> {
    let mut d = Decision::new(csv, now);
    // Step 1.
    let has_finalizer = csv
        .metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == CSV_FINALIZER);
    if !has_finalizer {
        d.act(Action::AddFinalizer);
    }
    // Step 2.
    if is_copy(csv) {
        d.note("copied CSVs are not driven by the CSV sync");
        return Gate::Stop(d);
    }
    // Step 3, plus the trigger of csv.md §1.1 that lifts the freeze.
    if d.reason() == Some(&CsvReason::InstallComponentFailedNoRetry) {
        if cluster_changed_since_failure(csv, seen) {
            d.set(
                CsvPhase::Pending,
                CsvReason::DetectedClusterChange,
                "Cluster resources changed state",
            )
            .requeue(Requeue::After(std::time::Duration::ZERO));
        } else {
            d.note("install failed without retry; waiting for an RBAC or ServiceAccount change");
        }
        return Gate::Stop(d);
    }
    // Step 4.
    let apis =
        match provided_apis(csv).and_then(|apis| check_required_crd_names(csv).map(|()| apis)) {
            Ok(apis) => apis,
            Err(err) => {
                d.note(err.to_string());
                return Gate::Stop(d);
            }
        };
    // Step 6.
    let group = match seen.operator_groups.as_slice() {
        [] => {
            d.set(
                CsvPhase::Failed,
                CsvReason::NoOperatorGroup,
                "csv in namespace with no operatorgroups",
            );
            return Gate::Stop(d);
        }
        [only] => only.as_ref(),
        many => {
            let mut names: Vec<&str> = many
                .iter()
                .filter_map(|g| g.metadata.name.as_deref())
                .collect();
            names.sort();
            // Known pain: name the groups so the user knows what to delete.
            d.set(
                CsvPhase::Failed,
                CsvReason::TooManyOperatorGroups,
                format!(
                    "csv created in namespace with multiple operatorgroups, can't pick one automatically: {}",
                    names.join(", ")
                ),
            );
            return Gate::Stop(d);
        }
    };
    if group_annotations_differ(&csv.metadata, group) {
        let wanted = group_annotations(group);
        let current = csv.metadata.annotations.clone().unwrap_or_default();
        if wanted.iter().any(|(k, v)| current.get(k) != v.as_ref()) {
            d.act(Action::SetAnnotations(wanted));
        }
        if !selects_something(group) {
            d.set(
                CsvPhase::Failed,
                CsvReason::NoTargetNamespaces,
                "no targetNamespaces are matched operatorgroups namespace selection",
            );
        }
        return Gate::Stop(d);
    }
    // Step 7.
    let modes = match InstallModeSet::new(csv.spec.install_modes.as_deref().unwrap_or_default()) {
        Ok(modes) => modes,
        Err(message) => {
            d.set(CsvPhase::Failed, CsvReason::InvalidInstallModes, message);
            return Gate::Stop(d);
        }
    };
    // Step 8. The membership check above already rewrites a missing annotation; this stays
    // for a CSV whose annotation vanished between that check's input and this one's.
    let Some(targets) = annotation(csv, TARGET_NAMESPACES_ANNOTATION) else {
        d.set(
            CsvPhase::Failed,
            CsvReason::NoTargetNamespaces,
            "csv missing olm.targetNamespaces annotation",
        );
        return Gate::Stop(d);
    };
    if let Err(message) = modes.supports(namespace(csv), &split_targets(targets)) {
        d.set(
            CsvPhase::Failed,
            CsvReason::UnsupportedOperatorGroup,
            message,
        );
        return Gate::Stop(d);
    }
    // Step 9.
    let all: Vec<&OperatorGroup> = seen
        .all_operator_groups
        .iter()
        .map(|g| g.as_ref())
        .collect();
    let decision = reconcile_provided_apis(&apis, group, &all);
    let conflict_already = d.reason() == Some(&CsvReason::InterOperatorGroupOwnerConflict);
    let group_name = group.metadata.name.clone().unwrap_or_default();
    match decision {
        ProvidedApiDecision::Continue => {}
        ProvidedApiDecision::Add { .. } | ProvidedApiDecision::Remove { .. }
            if group.spec.is_static() =>
        {
            if !conflict_already {
                d.set(
                    CsvPhase::Failed,
                    CsvReason::CannotModifyStaticOperatorGroupProvidedApis,
                    "static provided api operatorgroup cannot be modified by these apis",
                );
                d.act(Action::DeleteDeployments(strategy_deployments(csv)));
            }
            return Gate::Stop(d);
        }
        ProvidedApiDecision::Add { annotation } | ProvidedApiDecision::Remove { annotation } => {
            d.act(Action::SetProvidedApis {
                group: group_name,
                annotation,
            })
            .requeue(Requeue::After(std::time::Duration::ZERO));
            return Gate::Stop(d);
        }
        ProvidedApiDecision::Conflict { apis, groups } => {
            if !conflict_already {
                let apis: Vec<String> = apis.iter().map(ToString::to_string).collect();
                // Known pain: say which API and which group.
                d.set(
                    CsvPhase::Failed,
                    CsvReason::InterOperatorGroupOwnerConflict,
                    format!(
                        "intersecting operatorgroups provide the same apis: {} (provided by operatorgroup {})",
                        apis.join(", "),
                        groups.join(", ")
                    ),
                );
                d.act(Action::DeleteDeployments(strategy_deployments(csv)));
            }
            return Gate::Stop(d);
        }
    }
    Gate::Pass { decision: d, group }
}

/// The three membership annotations for `group`; `None` removes a key. A group that selects
/// no namespace gets no `olm.targetNamespaces` (a stale `""` would read as "all namespaces").
pub fn group_annotations(group: &OperatorGroup) -> BTreeMap<String, Option<String>> {
    BTreeMap::from([
        (
            OPERATOR_GROUP_ANNOTATION.to_owned(),
            group.metadata.name.clone(),
        ),
        (
            OPERATOR_GROUP_NAMESPACE_ANNOTATION.to_owned(),
            group.metadata.namespace.clone(),
        ),
        (
            TARGET_NAMESPACES_ANNOTATION.to_owned(),
            selects_something(group).then(|| target_text(group)),
        ),
    ])
}

fn selects_something(group: &OperatorGroup) -> bool {
    group
        .status
        .as_ref()
        .and_then(|s| s.namespaces.as_ref())
        .is_some_and(|n| !n.is_empty())
}

/// The group's targets as `olm.targetNamespaces` text: sorted, comma-joined, `""` for all.
pub fn target_text(group: &OperatorGroup) -> String {
    let mut targets = group
        .status
        .as_ref()
        .and_then(|s| s.namespaces.clone())
        .unwrap_or_default();
    targets.sort();
    targets.join(",")
}

/// OLM's comparison: group name, group namespace and targets must all match. A group that
/// selects nothing never matches (OLM would read a left-over `""` as all namespaces).
fn group_annotations_differ(meta: &ObjectMeta, group: &OperatorGroup) -> bool {
    let get = |k: &str| {
        meta.annotations
            .as_ref()
            .and_then(|a| a.get(k))
            .map(String::as_str)
    };
    !selects_something(group)
        || get(OPERATOR_GROUP_ANNOTATION) != group.metadata.name.as_deref()
        || get(OPERATOR_GROUP_NAMESPACE_ANNOTATION) != group.metadata.namespace.as_deref()
        || get(TARGET_NAMESPACES_ANNOTATION) != Some(target_text(group).as_str())
}

fn strategy_deployments(csv: &ClusterServiceVersion) -> Vec<String> {
    deployment_strategy(csv)
        .map(|s| s.deployments.iter().map(|d| d.name.clone()).collect())
        .unwrap_or_default()
}

/// csv.md §1.1: a Role, RoleBinding or ServiceAccount of the namespace created or updated since
/// the CSV failed, or a change of the group's service account (its `lastUpdated`), lifts the
/// NoRetry freeze. Timestamps come from `creationTimestamp` and `managedFields[].time`.
fn cluster_changed_since_failure(csv: &ClusterServiceVersion, seen: &Observed) -> bool {
    let Some(failed_at) = csv
        .status
        .as_ref()
        .and_then(|s| s.last_update_time.as_ref())
        .map(|t| t.0)
    else {
        return true;
    };
    let ns = namespace(csv);
    let touched = |meta: &ObjectMeta| {
        meta.namespace.as_deref() == Some(ns)
            && meta
                .creation_timestamp
                .iter()
                .map(|t| t.0)
                .chain(
                    meta.managed_fields
                        .iter()
                        .flatten()
                        .filter_map(|f| f.time.as_ref().map(|t| t.0)),
                )
                .any(|t| t >= failed_at)
    };
    let rbac_changed = seen.roles.iter().any(|r| touched(&r.metadata))
        || seen.role_bindings.iter().any(|r| touched(&r.metadata))
        || seen.service_accounts.iter().any(|s| touched(&s.metadata));
    let group_changed = seen.operator_groups.iter().any(|g| {
        g.status
            .as_ref()
            .is_some_and(|s| s.last_updated.0 >= failed_at && s.service_account_ref.is_some())
    });
    rbac_changed || group_changed
}

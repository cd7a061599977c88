//! The checks every sync runs before the phase switch (docs/csv-phases.md §2): copies, the NoRetry freeze,
//! the API surface, OperatorGroup membership, install modes, targets and provided APIs.
//!
//! Membership, install modes and provided-API reconciliation are OperatorGroup semantics: they
//! come from [`crate::operator_group`], which the OperatorGroup sync uses too, so both
//! controllers agree on what a member CSV's annotations must be.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::api::keys::TARGET_NAMESPACES_ANNOTATION;
use crate::api::{CSV_FINALIZER, ClusterServiceVersion, CsvPhase, CsvReason, OperatorGroup};
use crate::operator_group::{
    ApiReconciliation, CrdNameWithoutGroup, GroupApis, MemberAnnotations, check_install_modes,
    csv_provided_apis, is_copied, reconcile_provided_apis,
};

use super::identity::{annotation, namespace};
use super::observed::Observed;
use super::outcome::{Action, Decision, Requeue};
use super::strategy::deployment_strategy;

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

/// Runs docs/csv-phases.md §2 steps 1–9 (deletion is handled by the caller before this).
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
    if is_copied(csv) {
        d.note("copied CSVs are not driven by the CSV sync");
        return Gate::Stop(d);
    }
    // Step 3, plus the trigger of docs/csv-phases.md §1.1 that lifts the freeze.
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
    // Step 4: a CRD name without a dot aborts the sync without a status change.
    let apis = match csv_provided_apis(csv)
        .and_then(|apis| check_required_crd_names(csv).map(|()| apis))
    {
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
    let wanted = match MemberAnnotations::for_group(group) {
        Ok(wanted) => wanted,
        Err(err) => {
            d.note(format!(
                "operatorgroup {}/{} has an invalid status.namespaces: {err}",
                group.metadata.namespace.as_deref().unwrap_or_default(),
                group.metadata.name.as_deref().unwrap_or_default()
            ));
            return Gate::Stop(d);
        }
    };
    // A group that selects nothing never "matches" (OLM would read a left-over `""` as all
    // namespaces), so such a CSV always ends here.
    if wanted.target_namespaces.is_none() || !wanted.present_in(csv.metadata.annotations.as_ref()) {
        if !wanted.present_in(csv.metadata.annotations.as_ref()) {
            d.act(Action::SetAnnotations(wanted.entries()));
        }
        if wanted.target_namespaces.is_none() {
            d.set(
                CsvPhase::Failed,
                CsvReason::NoTargetNamespaces,
                "no targetNamespaces are matched operatorgroups namespace selection",
            );
        }
        return Gate::Stop(d);
    }
    // Steps 7–8. The membership check above already rewrites a missing annotation; this stays
    // for a CSV whose annotation vanished between that check's input and this one's.
    let Some(targets) = annotation(csv, TARGET_NAMESPACES_ANNOTATION) else {
        d.set(
            CsvPhase::Failed,
            CsvReason::NoTargetNamespaces,
            "csv missing olm.targetNamespaces annotation",
        );
        return Gate::Stop(d);
    };
    let modes = csv.spec.install_modes.as_deref().unwrap_or_default();
    if let Err(err) = check_install_modes(modes, namespace(csv), targets) {
        d.set(CsvPhase::Failed, err.reason(), err.to_string());
        return Gate::Stop(d);
    }
    // Step 9.
    let all: Vec<GroupApis> = seen
        .all_operator_groups
        .iter()
        .map(|g| GroupApis::from_group(g))
        .collect();
    let mine = GroupApis::from_group(group);
    let conflict_already = d.reason() == Some(&CsvReason::InterOperatorGroupOwnerConflict);
    let outcome = reconcile_provided_apis(&apis, &mine, &all);
    match outcome {
        ApiReconciliation::Continue => {}
        ApiReconciliation::AddApis(annotation) | ApiReconciliation::RemoveApis(annotation) => {
            d.act(Action::SetProvidedApis {
                group: mine.name,
                annotation,
            })
            .requeue(Requeue::After(std::time::Duration::ZERO));
            return Gate::Stop(d);
        }
        ApiReconciliation::Conflict { .. } | ApiReconciliation::StaticGroupCannotChange => {
            // Both are no-ops for a CSV already failed for a conflict (docs/operator-groups.md §6.2).
            if !conflict_already {
                let reason = match outcome {
                    ApiReconciliation::Conflict { .. } => {
                        CsvReason::InterOperatorGroupOwnerConflict
                    }
                    _ => CsvReason::CannotModifyStaticOperatorGroupProvidedApis,
                };
                d.set(
                    CsvPhase::Failed,
                    reason,
                    outcome.message().unwrap_or_default(),
                );
                d.act(Action::DeleteDeployments(strategy_deployments(csv)));
            }
            return Gate::Stop(d);
        }
    }
    Gate::Pass { decision: d, group }
}

/// Required CRD names must contain a dot too (docs/csv-phases.md §2 step 4), like the owned ones
/// [`csv_provided_apis`] checks.
fn check_required_crd_names(csv: &ClusterServiceVersion) -> Result<(), CrdNameWithoutGroup> {
    let crds = csv.spec.custom_resource_definitions.as_ref();
    for crd in crds.and_then(|c| c.required.as_deref()).unwrap_or_default() {
        if crd.plural_and_group().is_none() {
            return Err(CrdNameWithoutGroup {
                namespace: namespace(csv).to_owned(),
                csv: super::identity::name(csv).to_owned(),
                list: "required",
                crd: crd.name.clone(),
            });
        }
    }
    Ok(())
}

fn strategy_deployments(csv: &ClusterServiceVersion) -> Vec<String> {
    deployment_strategy(csv)
        .map(|s| s.deployments.iter().map(|d| d.name.clone()).collect())
        .unwrap_or_default()
}

/// docs/csv-phases.md §1.1: a Role, RoleBinding or ServiceAccount of the namespace created or updated since
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
    // Only changes made by someone else count: the failed install attempt itself writes the
    // CSV's Roles and RoleBindings (as olm-rs) within the same second as the failure, and
    // counting those lifted the freeze at once, over and over, until the clock's second
    // turned. Timestamps have seconds resolution, so a change in that same second still counts.
    let touched = |meta: &ObjectMeta| {
        let fields = meta.managed_fields.as_deref().unwrap_or_default();
        let by_others = fields
            .iter()
            .filter(|f| f.manager.as_deref() != Some(crate::k8s::MANAGER));
        let times: Vec<_> = if fields.is_empty() {
            // No field records (an older server, a kubelet-made object): its creation.
            meta.creation_timestamp.iter().map(|t| t.0).collect()
        } else {
            by_others
                .filter_map(|f| f.time.as_ref().map(|t| t.0))
                .collect()
        };
        meta.namespace.as_deref() == Some(ns) && times.into_iter().any(|t| t >= failed_at)
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

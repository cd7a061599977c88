//! What one OperatorGroup sync does (docs/operator-groups.md §2), decided from
//! what the stores hold and returned as [`Effects`]: the status (guarded by the group's
//! resourceVersion), the ServiceAccount label, the membership annotations of its CSVs (guarded by
//! each CSV's resourceVersion; the CSV controller alone writes CSV status), the three group
//! ClusterRoles, the pruned `olm.providedAPIs`, and the Warning event of invalid targets. Also
//! the clean-up of a deleted group.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, ObjectReference, ServiceAccount};
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::PartialObjectMeta;

use crate::api::event::ObjectEvent;
use crate::api::keys::{MANAGED_LABEL, MANAGED_LABEL_VALUE, PROVIDED_APIS_ANNOTATION};
use crate::api::{ClusterServiceVersion, CsvPhase, OperatorGroup};
use crate::k8s::effects::{Body, Effects, Write};
use crate::k8s::owned_set::OwnedSet;
use crate::k8s::write::{ObjectKey, Ownership};
use crate::olm_hash::{OgRoleSuffix, og_cluster_role_name};

use super::cluster_roles::{
    cluster_role_matches, operator_group_cluster_roles, operator_group_owner_labels,
};
use super::membership::{MemberAnnotations, is_copied};
use super::provided_apis::{
    ApiSet, ProviderState, csv_provided_apis, format_provided_apis, parse_provided_apis,
    prune_provided_apis,
};
use super::status::{Observed, ServiceAccountState, desired_status};
use super::targets::{TargetError, select_targets};

/// Reason of the Warning event when targets cannot be computed.
pub const INVALID_TARGETS_EVENT: &str = "InvalidTargetNamespaces";

/// How soon a sync that left work for a fresher copy of an object looks again (the watch event
/// of its own write usually comes first).
pub const LOOK_AGAIN: Duration = Duration::from_secs(1);

/// What a group sync reads.
#[derive(Debug, Clone, Copy)]
pub struct GroupObserved<'a> {
    pub group: &'a OperatorGroup,
    /// Names of every OperatorGroup in the group's namespace, this one included.
    pub groups_in_namespace: &'a [String],
    /// Every namespace (metadata), for selector groups.
    pub namespaces: &'a [Arc<PartialObjectMeta<Namespace>>],
    /// The ServiceAccount `spec.serviceAccountName` names, when the spec names one and it
    /// exists.
    pub service_account: Option<&'a ServiceAccountSeen>,
    /// The CSVs of the group's namespace.
    pub csvs: &'a [Arc<ClusterServiceVersion>],
    /// The group's ClusterRoles that exist (looked up by [`group_role_names`]).
    pub roles: &'a [Arc<ClusterRole>],
    pub now: &'a Time,
}

/// A ServiceAccount as a group sync needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceAccountSeen {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub resource_version: String,
    /// Carries `olm.managed: "true"`.
    pub managed: bool,
}

/// Why a decided sync still failed; the group is retried with back-off.
#[derive(Debug, Clone, PartialEq)]
pub enum GroupProblem {
    Targets(TargetError),
    ServiceAccountMissing(String),
}

/// A group sync's decision.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupDecision {
    pub effects: Effects,
    pub problem: Option<GroupProblem>,
}

/// The names of the group's three ClusterRoles.
pub fn group_role_names(og_namespace: &str, og_name: &str) -> [String; 3] {
    OgRoleSuffix::ALL.map(|suffix| og_cluster_role_name(og_namespace, og_name, suffix))
}

/// Decides one sync of `seen.group`.
pub fn decide_group_sync(seen: &GroupObserved<'_>) -> GroupDecision {
    let og = seen.group;
    let namespace = og.metadata.namespace.as_deref().unwrap_or_default();
    let name = og.name_any();
    let mut effects = Effects::default();

    // Targets from the spec and the namespaces that exist.
    let targets = select_targets(
        og.spec.target_namespaces.as_deref(),
        og.spec.selector.as_ref(),
        seen.namespaces.iter().map(|ns| {
            (
                ns.metadata.name.as_deref().unwrap_or_default(),
                ns.metadata.labels.as_ref(),
            )
        }),
    );

    // The service account. OLM's caches only see labelled accounts; a merge patch leaves the
    // user's other labels (and their field ownership) alone. The status records the account
    // as labelled (its reference carries the resourceVersion), so it waits for the label's
    // watch event.
    let account = match og
        .spec
        .service_account_name
        .as_deref()
        .filter(|n| !n.is_empty())
    {
        None => ServiceAccountState::NotRequested,
        Some(wanted) => match seen.service_account {
            None => ServiceAccountState::Missing(wanted.to_owned()),
            Some(sa) if !sa.managed => {
                effects
                    .write(label_service_account(namespace, wanted))
                    .requeue_after(LOOK_AGAIN);
                return GroupDecision {
                    effects,
                    problem: None,
                };
            }
            Some(sa) => ServiceAccountState::Found(account_reference(sa)),
        },
    };

    // A new service-account reference (with its `lastUpdated`) is also what releases member
    // CSVs parked in `InstallComponentFailedNoRetry`: the CSV controller, which owns CSV
    // status, sees the group change and lifts the freeze itself (docs/csv-phases.md).
    let observed = Observed {
        groups_in_namespace: seen.groups_in_namespace,
        targets: targets.as_ref().ok(),
        service_account: &account,
        now: seen.now,
    };
    let mut current = og.clone();
    let mut status_written = false;
    if let Some(status) = desired_status(og, &observed) {
        // A group never read from a server has no resourceVersion to guard with: nothing is
        // written blind.
        if let Some(write) = Write::status(og, status.clone()) {
            effects.write(write);
            status_written = true;
        }
        current.status = Some(status);
    }

    if let Err(source) = targets {
        effects.event_on(
            og,
            ObjectEvent::warning(INVALID_TARGETS_EVENT, source.to_string()),
        );
        return GroupDecision {
            effects,
            problem: Some(GroupProblem::Targets(source)),
        };
    }

    // Only for the one group of a namespace: with two groups each would stamp its own name and
    // the CSVs would flip between them (they are TooManyOperatorGroups anyway).
    if seen.groups_in_namespace.len() == 1 {
        annotate_members(&current, seen.csvs, &mut effects);
    }

    // The group's aggregated ClusterRoles, from the annotation and the members' APIs.
    let annotation = current
        .annotations()
        .get(PROVIDED_APIS_ANNOTATION)
        .map(|v| parse_provided_apis(v))
        .unwrap_or_default();
    let mut providers = Vec::new();
    let mut all_apis: ApiSet = annotation.clone();
    for csv in seen.csvs.iter().filter(|csv| !is_copied(csv)) {
        // A CSV with an ungrouped CRD name is reported by the CSV sync; it provides nothing here.
        if let Ok(apis) = csv_provided_apis(csv) {
            all_apis.extend(apis.iter().cloned());
            providers.push(ProviderState {
                apis,
                phase: csv
                    .status
                    .as_ref()
                    .map(|s| s.phase())
                    .unwrap_or(CsvPhase::None),
                deleting: csv.metadata.deletion_timestamp.is_some(),
            });
        }
    }
    ensure_group_roles(namespace, &name, &all_apis, seen.roles, &mut effects);

    // Prune APIs no member provides any more. Guarded by the group's resourceVersion, so an
    // API the CSV controller adds meanwhile is not lost; after a status write that version is
    // gone, so the prune waits for the next sync (the status write's own watch event).
    if !current.spec.is_static()
        && current.annotations().contains_key(PROVIDED_APIS_ANNOTATION)
        && let Some(pruned) = prune_provided_apis(&annotation, &providers)
    {
        if status_written {
            effects.requeue_after(LOOK_AGAIN);
        } else {
            effects.write(Write::MergePatch {
                key: ObjectKey::of(og),
                patch: Body::new(serde_json::json!({"metadata": {"annotations": {
                    PROVIDED_APIS_ANNOTATION: format_provided_apis(&pruned)
                }}})),
                resource_version: og.resource_version(),
            });
        }
    }

    let problem = match account {
        ServiceAccountState::Missing(account) => Some(GroupProblem::ServiceAccountMissing(account)),
        _ => None,
    };
    GroupDecision { effects, problem }
}

fn label_service_account(namespace: &str, name: &str) -> Write {
    Write::MergePatch {
        key: ObjectKey::new::<ServiceAccount>(Some(namespace), name),
        patch: Body::new(
            serde_json::json!({"metadata": {"labels": {MANAGED_LABEL: MANAGED_LABEL_VALUE}}}),
        ),
        resource_version: None,
    }
}

fn account_reference(sa: &ServiceAccountSeen) -> ObjectReference {
    let known = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    ObjectReference {
        kind: Some("ServiceAccount".to_owned()),
        api_version: Some("v1".to_owned()),
        namespace: Some(sa.namespace.clone()),
        name: Some(sa.name.clone()),
        uid: known(&sa.uid),
        resource_version: known(&sa.resource_version),
        ..Default::default()
    }
}

/// The membership annotations on every CSV of the namespace that lacks them, each patch
/// guarded by the version of the CSV it was decided on.
fn annotate_members(
    og: &OperatorGroup,
    csvs: &[Arc<ClusterServiceVersion>],
    effects: &mut Effects,
) {
    let Ok(wanted) = MemberAnnotations::for_group(og) else {
        return;
    };
    for csv in csvs {
        if is_copied(csv) || wanted.present_in(csv.metadata.annotations.as_ref()) {
            continue;
        }
        effects.write(Write::MergePatch {
            key: ObjectKey::of(csv.as_ref()),
            patch: Body::new(wanted.merge_patch()),
            resource_version: csv.resource_version(),
        });
    }
}

/// The group's roles as an owned set: each one missing or differing from what `apis` ask for
/// is applied, the others kept. `existing` are the roles of today's names, so a live group
/// never loses a role here; the roles of a deleted group go in [`decide_deleted_group`].
fn ensure_group_roles(
    namespace: &str,
    name: &str,
    apis: &ApiSet,
    existing: &[Arc<ClusterRole>],
    effects: &mut Effects,
) {
    let mut roles = OwnedSet::new();
    for desired in operator_group_cluster_roles(namespace, name, apis) {
        let key = ObjectKey::of(&desired);
        let found = existing
            .iter()
            .find(|r| r.metadata.name == desired.metadata.name);
        if found.is_some_and(|r| cluster_role_matches(r, &desired)) {
            roles.keep(key);
            continue;
        }
        let drop_rule = desired.aggregation_rule.is_none()
            && found.is_some_and(|r| r.aggregation_rule.is_some());
        // These roles are olm-rs's alone; forcing takes them over from OLM v0 after a
        // migration (same names).
        roles.want(Write::apply(desired, Ownership::Force));
        if drop_rule {
            // No APIs, no aggregation rule. Named explicitly: an apply that omits a field
            // keeps it when another manager (OLM v0) set it.
            roles.want(Write::MergePatch {
                key,
                patch: Body::new(serde_json::json!({"aggregationRule": null})),
                resource_version: None,
            });
        }
    }
    roles.found(existing.iter().map(Arc::as_ref));
    roles.into_effects(effects);
}

/// The clean-up after the group `namespace/name` went: its ClusterRoles (those of `roles` that
/// carry its owner labels) are an owned set of which nothing is wanted, each deleted only as
/// observed. Namespace labels and member CSVs are handled by their own loops.
pub fn decide_deleted_group(namespace: &str, name: &str, roles: &[Arc<ClusterRole>]) -> Effects {
    let owner: BTreeMap<String, String> = operator_group_owner_labels(namespace, name);
    let mut orphans = OwnedSet::new();
    orphans.found(
        roles
            .iter()
            .filter(|role| owner.iter().all(|(k, v)| role.labels().get(k) == Some(v)))
            .map(Arc::as_ref),
    );
    let mut effects = Effects::default();
    orphans.into_effects(&mut effects);
    effects
}

#[cfg(test)]
mod tests;

//! One OperatorGroup sync (docs/operator-groups.md §2), or the clean-up after a deleted group:
//! observe from the stores, decide in `operator_group::group_decision`, execute the effects.

use std::sync::Arc;

use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::Api;

use crate::api::OperatorGroup;
use crate::k8s::effects::{Effects, execute};
use crate::k8s::read;
use crate::k8s::write::ApiError;
use crate::operator_group::group_decision::{
    GroupObserved, GroupProblem, decide_deleted_group, decide_group_sync, group_role_names,
};
use crate::operator_group::targets::TargetError;

use super::shared::{NamespacedName, RACE_RETRY, Shared};
use crate::reconcile::work_queue::Next;

/// Why a group sync failed; the group is retried with back-off.
#[derive(Debug, thiserror::Error)]
pub enum GroupSyncError {
    #[error("OperatorGroup {group}: {source}")]
    Targets {
        group: NamespacedName,
        #[source]
        source: TargetError,
    },
    #[error("OperatorGroup {group}: spec.serviceAccountName: ServiceAccount {account} not found")]
    ServiceAccountMissing {
        group: NamespacedName,
        account: String,
    },
    #[error("OperatorGroup {group}: {source}")]
    Api {
        group: NamespacedName,
        #[source]
        source: ApiError,
    },
}

impl crate::k8s::errors::ReconcileFailure for GroupSyncError {
    fn error_label(&self) -> &'static str {
        match self {
            GroupSyncError::Targets { .. } | GroupSyncError::ServiceAccountMissing { .. } => {
                crate::k8s::errors::DECISION
            }
            GroupSyncError::Api { source, .. } => source.metric_label(),
        }
    }
}

pub async fn sync(shared: &Shared, key: &NamespacedName) -> Result<Next, GroupSyncError> {
    let stores = &shared.stores;
    let Some(og) = stores.groups.get(&key.namespace, &key.name) else {
        return clean_up_deleted(shared, key).await;
    };
    let siblings: Vec<String> = stores
        .groups_in(&key.namespace)
        .iter()
        .map(|g| g.name_any())
        .collect();
    let namespaces = stores.all_namespaces();
    let service_account = og
        .spec
        .service_account_name
        .as_deref()
        .filter(|n| !n.is_empty())
        .and_then(|name| stores.service_account(&key.namespace, name));
    let csvs = stores.csvs_in(&key.namespace);
    let roles = existing_roles(shared, key);
    let now = Time(shared.ctx.clock.now());
    let decision = decide_group_sync(&GroupObserved {
        group: &og,
        groups_in_namespace: &siblings,
        namespaces: &namespaces,
        service_account: service_account.as_ref(),
        csvs: &csvs,
        roles: &roles,
        now: &now,
    });
    if let Some(next) = carry_out(shared, key, &decision.effects).await? {
        return Ok(next);
    }
    match decision.problem {
        Some(GroupProblem::Targets(source)) => Err(GroupSyncError::Targets {
            group: key.clone(),
            source,
        }),
        Some(GroupProblem::ServiceAccountMissing(account)) => {
            Err(GroupSyncError::ServiceAccountMissing {
                group: key.clone(),
                account,
            })
        }
        None => Ok(decision.effects.requeue.map_or(Next::Done, Next::After)),
    }
}

/// The group's ClusterRoles as the store holds them.
fn existing_roles(shared: &Shared, key: &NamespacedName) -> Vec<Arc<ClusterRole>> {
    group_role_names(&key.namespace, &key.name)
        .iter()
        .filter_map(|name| shared.stores.group_role(name))
        .collect()
}

/// Executes `effects`; `Some(next)` when a write found its object changed (409) or gone (404)
/// since it was observed: the decision was made on an old copy, so the key is synced again
/// shortly on fresh data rather than reported.
async fn carry_out(
    shared: &Shared,
    key: &NamespacedName,
    effects: &Effects,
) -> Result<Option<Next>, GroupSyncError> {
    match execute(&shared.ctx.client, &shared.ctx.events, effects).await {
        Ok(_) => Ok(None),
        Err(err) if err.is_conflict() || err.is_not_found() => {
            tracing::debug!(group = %key, error = %err, "decided on an old copy; syncing again");
            Ok(Some(Next::After(RACE_RETRY)))
        }
        Err(source) => Err(GroupSyncError::Api {
            group: key.clone(),
            source,
        }),
    }
}

/// A group that no longer exists: delete its ClusterRoles. Namespace labels and member CSVs
/// are handled by their own loops (the delete event queued them).
async fn clean_up_deleted(shared: &Shared, key: &NamespacedName) -> Result<Next, GroupSyncError> {
    // Every group role, not only the names of today's scheme: roles an older OLM named
    // differently carry the same owner labels.
    let roles = shared.stores.group_roles();
    let effects = decide_deleted_group(&key.namespace, &key.name, &roles);
    if effects.is_empty() {
        return Ok(Next::Done);
    }
    // The one live read of this side: the group store may lag a group deleted and re-created
    // under the same name, whose roles have the same names; deleting them would strip the
    // permissions of its operators' users until the next sync re-creates them.
    let groups: Api<OperatorGroup> = Api::namespaced(shared.ctx.client.clone(), &key.namespace);
    let live = read::get(&groups, &key.name)
        .await
        .map_err(|source| GroupSyncError::Api {
            group: key.clone(),
            source,
        })?;
    if live.is_some() {
        return Ok(Next::Done);
    }
    Ok(carry_out(shared, key, &effects)
        .await?
        .unwrap_or(Next::Done))
}

//! One OperatorGroup sync (docs/operator-groups.md §2), or the clean-up after a deleted group.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ObjectReference, ServiceAccount};
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::{Resource, ResourceExt};

use crate::api::keys::{MANAGED_LABEL, MANAGED_LABEL_VALUE, PROVIDED_APIS_ANNOTATION};
use crate::api::{ClusterServiceVersion, CsvPhase, OperatorGroup};
use crate::k8s::MANAGER;
use crate::k8s::errors::is_not_found;
use crate::operator_group::cluster_roles::{
    cluster_role_matches, operator_group_cluster_roles, operator_group_owner_labels,
};
use crate::operator_group::membership::{MemberAnnotations, is_copied};
use crate::operator_group::provided_apis::{
    ApiSet, ProviderState, csv_provided_apis, format_provided_apis, parse_provided_apis,
    prune_provided_apis,
};
use crate::operator_group::status::{
    Observed, ServiceAccountState, desired_status, status_merge_patch,
};
use crate::operator_group::targets::{TargetError, select_targets};

use super::{ObjectKey, Shared, merge_params};
use crate::reconcile::work_queue::Next;

/// Why a group sync failed; the group is retried with back-off.
#[derive(Debug, thiserror::Error)]
pub enum GroupSyncError {
    #[error("OperatorGroup {group}: {source}")]
    Targets {
        group: ObjectKey,
        #[source]
        source: TargetError,
    },
    #[error("OperatorGroup {group}: spec.serviceAccountName: ServiceAccount {account} not found")]
    ServiceAccountMissing { group: ObjectKey, account: String },
    #[error("OperatorGroup {group}: cannot {action}: {source}")]
    Api {
        group: ObjectKey,
        action: String,
        #[source]
        source: kube::Error,
    },
}

fn api_error(
    group: &ObjectKey,
    action: impl Into<String>,
) -> impl FnOnce(kube::Error) -> GroupSyncError {
    let group = group.clone();
    let action = action.into();
    move |source| GroupSyncError::Api {
        group,
        action,
        source,
    }
}

/// Reason of the Warning event when targets cannot be computed.
const INVALID_TARGETS_EVENT: &str = "InvalidTargetNamespaces";

pub async fn sync(shared: &Shared, key: &ObjectKey) -> Result<Next, GroupSyncError> {
    let found = shared.caches.groups.find(|og| {
        og.metadata.namespace.as_deref() == Some(&key.namespace) && og.name_any() == key.name
    });
    let Some(og) = found else {
        return clean_up_deleted(shared, key).await;
    };
    let ctx = &shared.ctx;
    let now = Time(ctx.clock.now());
    let siblings: Vec<String> = shared
        .caches
        .groups_in(&key.namespace)
        .iter()
        .map(|g| g.name_any())
        .collect();

    // §1: targets from the spec and the namespaces that exist.
    let namespaces = shared.caches.namespaces.state();
    let targets = select_targets(
        og.spec.target_namespaces.as_deref(),
        og.spec.selector.as_ref(),
        namespaces.iter().map(|ns| {
            (
                ns.metadata.name.as_deref().unwrap_or_default(),
                ns.metadata.labels.as_ref(),
            )
        }),
    );
    drop(namespaces);
    let target_error = targets.as_ref().err().cloned();

    // §8: the service account.
    let account = service_account_state(shared, &og, key).await?;

    let observed = Observed {
        groups_in_namespace: &siblings,
        targets: targets.as_ref().ok(),
        service_account: &account,
        now: &now,
    };
    // A new service-account reference (with its `lastUpdated`) is also what releases member
    // CSVs parked in `InstallComponentFailedNoRetry`: the CSV controller, which owns CSV status,
    // sees the group change and lifts the freeze itself (docs/csv-phases.md §1.1). Writing the
    // CSVs' status from here raced that controller's guarded writes.
    let mut current = (*og).clone();
    if let Some(status) = desired_status(&og, &observed) {
        let api: Api<OperatorGroup> = Api::namespaced(ctx.client.clone(), &key.namespace);
        current = api
            .patch_status(
                &key.name,
                &merge_params(),
                &Patch::Merge(guarded(
                    status_merge_patch(&status),
                    og.metadata.resource_version.as_deref(),
                )),
            )
            .await
            .map_err(api_error(key, "write status"))?;
    }

    if let Some(source) = target_error {
        ctx.events
            .warning(&object_ref(&og), INVALID_TARGETS_EVENT, source.to_string())
            .await;
        return Err(GroupSyncError::Targets {
            group: key.clone(),
            source,
        });
    }

    // §2 step 4, only for the one group of a namespace: with two groups each would stamp its
    // own name and the CSVs would flip between them (they are TooManyOperatorGroups anyway).
    if siblings.len() == 1 {
        annotate_members(shared, &current, key).await?;
    }

    // §2 step 5 and §9.1: the group's aggregated ClusterRoles.
    let members: Vec<_> = shared
        .caches
        .csvs_in(&key.namespace)
        .into_iter()
        .filter(|csv| !is_copied(csv))
        .collect();
    let annotation = current
        .annotations()
        .get(PROVIDED_APIS_ANNOTATION)
        .map(|v| parse_provided_apis(v))
        .unwrap_or_default();
    let mut providers = Vec::new();
    let mut all_apis: ApiSet = annotation.clone();
    for csv in &members {
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
    ensure_group_roles(shared, key, &all_apis).await?;

    // §2 step 7 / §6.3.
    if !current.spec.is_static()
        && current.annotations().contains_key(PROVIDED_APIS_ANNOTATION)
        && let Some(pruned) = prune_provided_apis(&annotation, &providers)
    {
        let patch = serde_json::json!({"metadata": {"annotations": {
            PROVIDED_APIS_ANNOTATION: format_provided_apis(&pruned)
        }}});
        Api::<OperatorGroup>::namespaced(ctx.client.clone(), &key.namespace)
            .patch(&key.name, &merge_params(), &Patch::Merge(&patch))
            .await
            .map_err(api_error(key, "prune the olm.providedAPIs annotation"))?;
    }

    if let ServiceAccountState::Missing(account) = account {
        return Err(GroupSyncError::ServiceAccountMissing {
            group: key.clone(),
            account,
        });
    }
    Ok(Next::Done)
}

fn object_ref(og: &OperatorGroup) -> ObjectReference {
    og.object_ref(&())
}

async fn service_account_state(
    shared: &Shared,
    og: &OperatorGroup,
    key: &ObjectKey,
) -> Result<ServiceAccountState, GroupSyncError> {
    let Some(name) = og
        .spec
        .service_account_name
        .as_deref()
        .filter(|n| !n.is_empty())
    else {
        return Ok(ServiceAccountState::NotRequested);
    };
    let api: Api<ServiceAccount> = Api::namespaced(shared.ctx.client.clone(), &key.namespace);
    let Some(mut account) = api
        .get_opt(name)
        .await
        .map_err(api_error(key, format!("read ServiceAccount {name}")))?
    else {
        return Ok(ServiceAccountState::Missing(name.to_owned()));
    };
    // §8: OLM's caches only see labelled accounts; a merge patch leaves the user's other
    // labels (and their field ownership) alone.
    if account.labels().get(MANAGED_LABEL).map(String::as_str) != Some(MANAGED_LABEL_VALUE) {
        let patch =
            serde_json::json!({"metadata": {"labels": {MANAGED_LABEL: MANAGED_LABEL_VALUE}}});
        account = api
            .patch(name, &merge_params(), &Patch::Merge(&patch))
            .await
            .map_err(api_error(key, format!("label ServiceAccount {name}")))?;
    }
    Ok(ServiceAccountState::Found(ObjectReference {
        kind: Some("ServiceAccount".to_owned()),
        api_version: Some("v1".to_owned()),
        namespace: account.metadata.namespace.clone(),
        name: account.metadata.name.clone(),
        uid: account.metadata.uid.clone(),
        resource_version: account.metadata.resource_version.clone(),
        ..Default::default()
    }))
}

/// §2 step 4: stamps the membership annotations on every non-copied CSV of the namespace.
async fn annotate_members(
    shared: &Shared,
    og: &OperatorGroup,
    key: &ObjectKey,
) -> Result<(), GroupSyncError> {
    let Ok(wanted) = MemberAnnotations::for_group(og) else {
        return Ok(());
    };
    let api: Api<ClusterServiceVersion> =
        Api::namespaced(shared.ctx.client.clone(), &key.namespace);
    for csv in shared.caches.csvs_in(&key.namespace) {
        if is_copied(&csv) || wanted.present_in(csv.metadata.annotations.as_ref()) {
            continue;
        }
        let name = csv.name_any();
        match api
            .patch(&name, &merge_params(), &Patch::Merge(&wanted.merge_patch()))
            .await
        {
            Ok(_) => {}
            // Deleted meanwhile: nothing to annotate.
            Err(err) if is_not_found(&err) => {}
            Err(source) => {
                return Err(api_error(key, format!("annotate CSV {name}"))(source));
            }
        }
    }
    Ok(())
}

/// Applies the three group roles where the cache shows them missing or different.
async fn ensure_group_roles(
    shared: &Shared,
    key: &ObjectKey,
    apis: &ApiSet,
) -> Result<(), GroupSyncError> {
    let api: Api<ClusterRole> = Api::all(shared.ctx.client.clone());
    for desired in operator_group_cluster_roles(&key.namespace, &key.name, apis) {
        let name = desired.name_any();
        let existing = shared.caches.group_roles.find(|r| r.name_any() == name);
        if existing
            .as_ref()
            .is_some_and(|r| cluster_role_matches(r, &desired))
        {
            continue;
        }
        let drop_rule = desired.aggregation_rule.is_none()
            && existing
                .as_ref()
                .is_some_and(|r| r.aggregation_rule.is_some());
        // These roles are olm-rs's alone; forcing takes them over from OLM v0 after a migration
        // (same names, docs/api-types.md §6).
        let mut body = serde_json::to_value(&desired).map_err(|e| GroupSyncError::Api {
            group: key.clone(),
            action: format!("encode ClusterRole {name}"),
            source: kube::Error::SerdeError(e),
        })?;
        body["apiVersion"] = "rbac.authorization.k8s.io/v1".into();
        body["kind"] = "ClusterRole".into();
        api.patch(
            &name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&body),
        )
        .await
        .map_err(api_error(key, format!("apply ClusterRole {name}")))?;
        if drop_rule {
            // §9.1: no APIs, no aggregation rule. Named explicitly: an apply that omits a field
            // keeps it when another manager (OLM v0) set it.
            let patch = serde_json::json!({"aggregationRule": null});
            api.patch(&name, &merge_params(), &Patch::Merge(&patch))
                .await
                .map_err(api_error(
                    key,
                    format!("drop the aggregation rule of ClusterRole {name}"),
                ))?;
        }
    }
    Ok(())
}

/// A group that no longer exists: delete its ClusterRoles (found by owner labels). Namespace
/// labels and member CSVs are handled by their own loops (the delete event queued them).
async fn clean_up_deleted(shared: &Shared, key: &ObjectKey) -> Result<Next, GroupSyncError> {
    let owner: BTreeMap<String, String> = operator_group_owner_labels(&key.namespace, &key.name);
    let roles = shared
        .caches
        .group_roles
        .state_filter(|role| owner.iter().all(|(k, v)| role.labels().get(k) == Some(v)));
    if roles.is_empty() {
        return Ok(Next::Done);
    }
    // The cache may lag a re-created group: ask the API before deleting anything.
    let groups: Api<OperatorGroup> = Api::namespaced(shared.ctx.client.clone(), &key.namespace);
    if groups
        .get_metadata_opt(&key.name)
        .await
        .map_err(api_error(key, "check the group still exists"))?
        .is_some()
    {
        return Ok(Next::Done);
    }
    let api: Api<ClusterRole> = Api::all(shared.ctx.client.clone());
    for role in roles {
        let name = role.name_any();
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(err) if is_not_found(&err) => {}
            Err(source) => {
                return Err(api_error(key, format!("delete ClusterRole {name}"))(source));
            }
        }
    }
    Ok(Next::Done)
}

/// `patch` guarded by the resourceVersion it was computed from: the API server refuses it with
/// 409 when the group changed meanwhile, and the next sync computes from the newer group.
fn guarded(mut patch: serde_json::Value, resource_version: Option<&str>) -> serde_json::Value {
    if let (Some(rv), Some(body)) = (resource_version, patch.as_object_mut()) {
        body.insert(
            "metadata".into(),
            serde_json::json!({"resourceVersion": rv}),
        );
    }
    patch
}

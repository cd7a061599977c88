//! RBAC of an active member CSV outside its namespace: Roles and RoleBindings copied next to its
//! copies (docs/operator-groups.md §9.2), lifted to cluster scope for all-namespace groups (docs/operator-groups.md §9.3), and
//! the per-API ClusterRoles while it is `Succeeded` (docs/operator-groups.md §9.1).
//!
//! Decisions where OLM is weak (docs/operator-groups.md §11 item 6): copied Roles *and* RoleBindings are kept in sync
//! with their sources, and lifted ClusterRoles/Bindings follow permission changes; OLM creates
//! them once. The "already permitted" check OLM runs first is skipped: the copies only ever
//! grant what the CSV asked for in its own namespace, so writing them is always safe.

use std::collections::BTreeSet;
use std::hash::{Hash, Hasher};

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::Api;
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::super::shared::{NamespacedName, Shared};
use super::super::stores::CLUSTER;
use crate::api::keys::TARGET_NAMESPACES_ANNOTATION;
use crate::api::{ClusterServiceVersion, CsvPhase};
use crate::k8s::write::{self, Ownership};
use crate::operator_group::api_roles::{ApiOwner, api_service_cluster_roles, crd_cluster_roles};
use crate::operator_group::member_rbac::{
    CsvOwner, copied_role, copied_role_binding, lifted_cluster_role, lifted_cluster_role_binding,
};
use crate::operator_group::targets::TargetNamespaces;

use super::{CopyLoopState, CopySyncError, lock};

/// What was last ensured for one original.
#[derive(Debug, Default)]
pub struct RbacMemo {
    /// Hash of the source Roles/RoleBindings last written.
    sources: Option<u64>,
    /// `(namespace, copy uid)` pairs whose copied RBAC matches `sources`.
    copied: BTreeSet<(String, String)>,
    lifted: bool,
    /// Hash of the owned API descriptions whose roles were ensured.
    api_roles: Option<u64>,
}

fn hash_of(value: &impl Serialize) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_string(value)
        .unwrap_or_default()
        .hash(&mut hasher);
    hasher.finish()
}

/// Server-side apply, forced: these objects are made and owned by olm-rs alone (and by OLM v0
/// before a takeover, whose field manager must not block the update).
async fn apply_owned<K>(api: &Api<K>, obj: &K, key: &NamespacedName) -> Result<(), CopySyncError>
where
    K: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + std::fmt::Debug,
{
    write::apply(api, obj, Ownership::Force)
        .await
        .map_err(|source| CopySyncError::Api {
            original: key.clone(),
            source,
        })?;
    Ok(())
}

pub async fn ensure_member_rbac(
    shared: &Shared,
    state: &CopyLoopState,
    key: &NamespacedName,
    csv: &ClusterServiceVersion,
) -> Result<(), CopySyncError> {
    let targets = csv
        .annotations()
        .get(TARGET_NAMESPACES_ANNOTATION)
        .and_then(|t| TargetNamespaces::from_annotation(t).ok());
    let owner = CsvOwner {
        namespace: key.namespace.clone(),
        name: key.name.clone(),
        uid: csv.metadata.uid.clone().unwrap_or_default(),
    };
    match targets {
        Some(TargetNamespaces::All) => lift(shared, state, key, &owner).await?,
        Some(t @ TargetNamespaces::Named(_)) if !t.is_only(&key.namespace) && !t.is_empty() => {
            copy_to_targets(shared, state, key, &owner).await?
        }
        _ => {}
    }
    if csv.status.as_ref().map(|s| s.phase()) == Some(CsvPhase::Succeeded) {
        ensure_api_roles(shared, state, key, csv).await?;
    }
    Ok(())
}

/// The Roles and RoleBindings of the operator namespace carrying the CSV's owner labels, as
/// the stores hold them.
fn owned_sources(
    shared: &Shared,
    key: &NamespacedName,
    owner: &CsvOwner,
) -> (Vec<Role>, Vec<RoleBinding>) {
    let roles = shared
        .stores
        .csv_roles
        .in_namespace(&key.namespace)
        .iter()
        .filter(|r| owner.labels_own(&r.metadata))
        .map(|r| (**r).clone())
        .collect();
    let bindings = shared
        .stores
        .csv_role_bindings
        .in_namespace(&key.namespace)
        .iter()
        .filter(|b| owner.labels_own(&b.metadata))
        .map(|b| (**b).clone())
        .collect();
    (roles, bindings)
}

fn content_hash(roles: &[Role], bindings: &[RoleBinding]) -> u64 {
    let roles: Vec<_> = roles
        .iter()
        .map(|r| (&r.metadata.name, &r.metadata.labels, &r.rules))
        .collect();
    let bindings: Vec<_> = bindings
        .iter()
        .map(|b| {
            (
                &b.metadata.name,
                &b.metadata.labels,
                &b.role_ref,
                &b.subjects,
            )
        })
        .collect();
    hash_of(&(roles, bindings))
}

/// docs/operator-groups.md §9.3: the CSV's Roles and RoleBindings as ClusterRoles and ClusterRoleBindings.
async fn lift(
    shared: &Shared,
    state: &CopyLoopState,
    key: &NamespacedName,
    owner: &CsvOwner,
) -> Result<(), CopySyncError> {
    let (roles, bindings) = owned_sources(shared, key, owner);
    let roles: Vec<Role> = roles
        .into_iter()
        .filter(|r| owner.labels_own(&r.metadata))
        .collect();
    let bindings: Vec<RoleBinding> = bindings
        .into_iter()
        .filter(|b| owner.labels_own(&b.metadata))
        .collect();
    let hash = content_hash(&roles, &bindings);
    {
        let memos = lock(&state.rbac);
        if memos
            .get(key)
            .is_some_and(|m| m.lifted && m.sources == Some(hash))
        {
            return Ok(());
        }
    }
    let cluster_roles: Api<ClusterRole> = Api::all(shared.ctx.client.clone());
    for role in &roles {
        apply_owned(&cluster_roles, &lifted_cluster_role(role), key).await?;
    }
    let cluster_bindings: Api<ClusterRoleBinding> = Api::all(shared.ctx.client.clone());
    for binding in &bindings {
        apply_owned(
            &cluster_bindings,
            &lifted_cluster_role_binding(binding),
            key,
        )
        .await?;
    }
    let mut memos = lock(&state.rbac);
    let memo = memos.entry(key.clone()).or_default();
    memo.sources = Some(hash);
    memo.lifted = true;
    Ok(())
}

/// docs/operator-groups.md §9.2: the CSV's Roles and RoleBindings next to each of its copies, owned by the copy.
async fn copy_to_targets(
    shared: &Shared,
    state: &CopyLoopState,
    key: &NamespacedName,
    owner: &CsvOwner,
) -> Result<(), CopySyncError> {
    let copies: Vec<(String, String)> = shared
        .stores
        .copies
        .of(key)
        .into_iter()
        .filter(|c| !c.uid.is_empty())
        .map(|c| (c.namespace, c.uid))
        .collect();
    if copies.is_empty() {
        return Ok(());
    }
    let (roles, bindings) = owned_sources(shared, key, owner);
    let roles: Vec<Role> = roles
        .into_iter()
        .filter(|r| owner.owns(&r.metadata))
        .collect();
    let bindings: Vec<RoleBinding> = bindings
        .into_iter()
        .filter(|b| owner.owns(&b.metadata))
        .collect();
    let hash = content_hash(&roles, &bindings);
    let pending: Vec<(String, String)> = {
        let mut memos = lock(&state.rbac);
        let memo = memos.entry(key.clone()).or_default();
        if memo.sources != Some(hash) {
            memo.sources = Some(hash);
            memo.copied.clear();
        }
        copies
            .into_iter()
            .filter(|c| !memo.copied.contains(c))
            .collect()
    };
    for (namespace, uid) in pending {
        let copy = CsvOwner {
            namespace: namespace.clone(),
            name: key.name.clone(),
            uid: uid.clone(),
        };
        let role_api: Api<Role> = Api::namespaced(shared.ctx.client.clone(), &namespace);
        for role in &roles {
            apply_owned(&role_api, &copied_role(role, &copy, &key.namespace), key).await?;
        }
        let binding_api: Api<RoleBinding> = Api::namespaced(shared.ctx.client.clone(), &namespace);
        for binding in &bindings {
            apply_owned(
                &binding_api,
                &copied_role_binding(binding, &copy, &key.namespace),
                key,
            )
            .await?;
        }
        lock(&state.rbac)
            .entry(key.clone())
            .or_default()
            .copied
            .insert((namespace, uid));
    }
    Ok(())
}

/// docs/operator-groups.md §9.1 second table: per-API ClusterRoles, owned by the CRD or APIService they grant.
async fn ensure_api_roles(
    shared: &Shared,
    state: &CopyLoopState,
    key: &NamespacedName,
    csv: &ClusterServiceVersion,
) -> Result<(), CopySyncError> {
    let crds = csv
        .spec
        .custom_resource_definitions
        .as_ref()
        .and_then(|d| d.owned.clone())
        .unwrap_or_default();
    let services = csv
        .spec
        .api_service_definitions
        .as_ref()
        .and_then(|d| d.owned.clone())
        .unwrap_or_default();
    let hash = hash_of(&(&crds, &services));
    if lock(&state.rbac)
        .get(key)
        .is_some_and(|m| m.api_roles == Some(hash))
    {
        return Ok(());
    }
    let roles_api: Api<ClusterRole> = Api::all(shared.ctx.client.clone());
    let mut complete = true;
    for crd in &crds {
        let Some(found) = shared.stores.crds.get(CLUSTER, &crd.name) else {
            // Not installed yet: the CSV cannot be Succeeded for long without it; try again
            // on a later run.
            complete = false;
            continue;
        };
        let owner = ApiOwner {
            name: crd.name.clone(),
            uid: found.metadata.uid.clone().unwrap_or_default(),
        };
        for role in crd_cluster_roles(crd, &owner).unwrap_or_default() {
            apply_owned(&roles_api, &role, key).await?;
        }
    }
    for desc in &services {
        let name = desc.api_service_name();
        let Some(found) = shared.stores.api_services.get(CLUSTER, &name) else {
            complete = false;
            continue;
        };
        let owner = ApiOwner {
            name,
            uid: found.metadata.uid.clone().unwrap_or_default(),
        };
        for role in api_service_cluster_roles(desc, &owner) {
            apply_owned(&roles_api, &role, key).await?;
        }
    }
    if complete {
        lock(&state.rbac).entry(key.clone()).or_default().api_roles = Some(hash);
    }
    Ok(())
}

//! RBAC of an active member CSV outside its namespace: Roles and RoleBindings copied next to its
//! copies (docs/operator-groups.md §9.2), lifted to cluster scope for all-namespace groups
//! (§9.3), and the per-API ClusterRoles while it is `Succeeded` (§9.1). Decided by
//! `operator_group::member_rbac_decision` from the stores; executed here, skipping what was
//! already written for the same sources.
//!
//! Decisions where OLM is weak (docs/operator-groups.md §11 item 6): copied Roles *and*
//! RoleBindings are kept in sync with their sources, and lifted ClusterRoles/Bindings follow
//! permission changes; OLM creates them once. The "already permitted" check OLM runs first is
//! skipped: the copies only ever grant what the CSV asked for in its own namespace, so writing
//! them is always safe.

use std::collections::BTreeSet;

use super::super::shared::{NamespacedName, Shared};
use super::super::stores::CLUSTER;
use crate::api::ClusterServiceVersion;
use crate::k8s::effects::{Effects, Write, execute};
use crate::operator_group::member_rbac_decision::{
    MemberRbacObserved, MemberRbacScope, decide_member_rbac,
};

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

async fn write_all(
    shared: &Shared,
    key: &NamespacedName,
    writes: Vec<Write>,
) -> Result<(), CopySyncError> {
    let effects = Effects {
        writes,
        ..Effects::default()
    };
    execute(&shared.ctx.client, &shared.ctx.events, &effects)
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
    let stores = &shared.stores;
    let roles = stores.csv_roles_in(&key.namespace);
    let bindings = stores.csv_bindings_in(&key.namespace);
    let copies = stores.copies.of(key);
    let crd_uid = |name: &str| {
        stores
            .crds
            .get(CLUSTER, name)
            .map(|c| c.metadata.uid.clone().unwrap_or_default())
    };
    let api_service_uid = |name: &str| {
        stores
            .api_services
            .get(CLUSTER, name)
            .map(|s| s.metadata.uid.clone().unwrap_or_default())
    };
    let cluster_role = |name: &str| stores.cluster_roles.get(CLUSTER, name);
    let decision = decide_member_rbac(&MemberRbacObserved {
        csv,
        roles: &roles,
        bindings: &bindings,
        copies: &copies,
        crd_uid: &crd_uid,
        api_service_uid: &api_service_uid,
        cluster_role: &cluster_role,
    });
    let hash = decision.sources;
    match decision.scope {
        MemberRbacScope::OwnNamespace => {}
        MemberRbacScope::Lifted(writes) => {
            let done = lock(&state.rbac)
                .get(key)
                .is_some_and(|m| m.lifted && m.sources == Some(hash));
            if !done {
                write_all(shared, key, writes).await?;
                let mut memos = lock(&state.rbac);
                let memo = memos.entry(key.clone()).or_default();
                memo.sources = Some(hash);
                memo.lifted = true;
            }
        }
        // Nothing copied yet: nothing to do, and nothing remembered.
        MemberRbacScope::Copied(copies) if copies.is_empty() => {}
        MemberRbacScope::Copied(copies) => {
            let pending: Vec<_> = {
                let mut memos = lock(&state.rbac);
                let memo = memos.entry(key.clone()).or_default();
                if memo.sources != Some(hash) {
                    memo.sources = Some(hash);
                    memo.copied.clear();
                }
                copies
                    .into_iter()
                    .filter(|(copy, _)| !memo.copied.contains(copy))
                    .collect()
            };
            for (copy, writes) in pending {
                write_all(shared, key, writes).await?;
                lock(&state.rbac)
                    .entry(key.clone())
                    .or_default()
                    .copied
                    .insert(copy);
            }
        }
    }
    if let Some(api_roles) = decision.api_roles {
        let done = lock(&state.rbac)
            .get(key)
            .is_some_and(|m| m.api_roles == Some(api_roles.hash));
        if !done {
            // Empty when every role is already in place (as OLM left them after a move).
            if !api_roles.writes.is_empty() {
                write_all(shared, key, api_roles.writes).await?;
            }
            if api_roles.complete {
                lock(&state.rbac).entry(key.clone()).or_default().api_roles = Some(api_roles.hash);
            }
        }
    }
    Ok(())
}

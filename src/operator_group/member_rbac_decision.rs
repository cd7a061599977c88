//! What RBAC an active member CSV gets outside its namespace (docs/operator-groups.md §9),
//! decided from what the stores hold: its Roles and RoleBindings lifted to cluster scope
//! (all-namespace groups, §9.3) or copied next to each of its copies (explicit targets, §9.2),
//! and the per-API ClusterRoles while it is `Succeeded` (§9.1). Every write is a forced apply:
//! these objects are olm-rs's alone (and OLM v0's before a takeover, whose field manager must not
//! block the update).
//!
//! The decision also returns content hashes, with which the copy loop skips what it already
//! wrote for the same sources.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use k8s_openapi::api::rbac::v1::{ClusterRole, Role, RoleBinding};
use kube::ResourceExt;
use serde::Serialize;

use crate::api::keys::TARGET_NAMESPACES_ANNOTATION;
use crate::api::{ClusterServiceVersion, CsvPhase};
use crate::k8s::effects::Write;
use crate::k8s::write::Ownership;

use super::api_roles::{ApiOwner, api_service_cluster_roles, crd_cluster_roles};
use super::copied_csv::CopyRecord;
use super::member_rbac::{
    CsvOwner, copied_role, copied_role_binding, lifted_cluster_role, lifted_cluster_role_binding,
};
use super::targets::TargetNamespaces;

/// What the RBAC step reads.
pub struct MemberRbacObserved<'a> {
    pub csv: &'a ClusterServiceVersion,
    /// Roles and RoleBindings of the CSV's namespace owned by CSVs (the CSV's own are picked
    /// by its owner labels and ownerReference).
    pub roles: &'a [Arc<Role>],
    pub bindings: &'a [Arc<RoleBinding>],
    /// The CSV's copies.
    pub copies: &'a [CopyRecord],
    /// The uid of the CRD of this name, when it exists.
    pub crd_uid: &'a dyn Fn(&str) -> Option<String>,
    /// The uid of the APIService of this name, when it exists.
    pub api_service_uid: &'a dyn Fn(&str) -> Option<String>,
    /// The ClusterRole of this name as it is, when it exists.
    pub cluster_role: &'a dyn Fn(&str) -> Option<Arc<ClusterRole>>,
}

/// Where the CSV's Roles and RoleBindings go.
#[derive(Debug, Clone, PartialEq)]
pub enum MemberRbacScope {
    /// The group targets only the CSV's namespace (or nothing yet): nowhere.
    OwnNamespace,
    /// All namespaces: lifted to ClusterRoles and ClusterRoleBindings.
    Lifted(Vec<Write>),
    /// Named namespaces: copied next to each copy, `(namespace, copy uid)`, owned by it.
    Copied(Vec<((String, String), Vec<Write>)>),
}

/// The RBAC step's decision.
#[derive(Debug, Clone, PartialEq)]
pub struct MemberRbac {
    pub scope: MemberRbacScope,
    /// Hash of the sources `scope` was computed from.
    pub sources: u64,
    /// The per-API ClusterRoles, when the CSV is `Succeeded`.
    pub api_roles: Option<ApiRoles>,
}

/// Per-API ClusterRoles and what they were computed from.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiRoles {
    pub writes: Vec<Write>,
    /// Hash of the owned API descriptions.
    pub hash: u64,
    /// Every owned CRD and APIService exists; otherwise the roles of the missing ones are left
    /// for a later run.
    pub complete: bool,
}

/// Decides the RBAC of `seen.csv` outside its namespace.
pub fn decide_member_rbac(seen: &MemberRbacObserved<'_>) -> MemberRbac {
    let csv = seen.csv;
    let namespace = csv.metadata.namespace.clone().unwrap_or_default();
    let owner = CsvOwner {
        namespace: namespace.clone(),
        name: csv.name_any(),
        uid: csv.metadata.uid.clone().unwrap_or_default(),
    };
    let targets = csv
        .annotations()
        .get(TARGET_NAMESPACES_ANNOTATION)
        .and_then(|t| TargetNamespaces::from_annotation(t).ok());
    let (scope, sources) = match targets {
        Some(TargetNamespaces::All) => {
            // Lifted by owner labels alone (OLM's selection).
            let (roles, bindings) = sources(seen, |meta| owner.labels_own(meta));
            let mut writes: Vec<Write> = roles
                .iter()
                .map(|r| Write::apply(lifted_cluster_role(r), Ownership::Force))
                .collect();
            writes.extend(
                bindings
                    .iter()
                    .map(|b| Write::apply(lifted_cluster_role_binding(b), Ownership::Force)),
            );
            (
                MemberRbacScope::Lifted(writes),
                content_hash(&roles, &bindings),
            )
        }
        Some(t @ TargetNamespaces::Named(_)) if !t.is_only(&namespace) && !t.is_empty() => {
            // Copied only when both owner labels and ownerReference say the CSV's.
            let (roles, bindings) = sources(seen, |meta| owner.owns(meta));
            let copied = seen
                .copies
                .iter()
                .filter(|c| !c.uid.is_empty())
                .map(|c| {
                    let copy = CsvOwner {
                        namespace: c.namespace.clone(),
                        name: owner.name.clone(),
                        uid: c.uid.clone(),
                    };
                    let mut writes: Vec<Write> = roles
                        .iter()
                        .map(|r| Write::apply(copied_role(r, &copy, &namespace), Ownership::Force))
                        .collect();
                    writes.extend(bindings.iter().map(|b| {
                        Write::apply(copied_role_binding(b, &copy, &namespace), Ownership::Force)
                    }));
                    ((c.namespace.clone(), c.uid.clone()), writes)
                })
                .collect();
            (
                MemberRbacScope::Copied(copied),
                content_hash(&roles, &bindings),
            )
        }
        _ => (MemberRbacScope::OwnNamespace, 0),
    };
    let succeeded = csv.status.as_ref().map(|s| s.phase()) == Some(CsvPhase::Succeeded);
    MemberRbac {
        scope,
        sources,
        api_roles: succeeded.then(|| api_roles(seen)),
    }
}

fn sources(
    seen: &MemberRbacObserved<'_>,
    mine: impl Fn(&k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> bool,
) -> (Vec<Role>, Vec<RoleBinding>) {
    let roles = seen
        .roles
        .iter()
        .filter(|r| mine(&r.metadata))
        .map(|r| (**r).clone())
        .collect();
    let bindings = seen
        .bindings
        .iter()
        .filter(|b| mine(&b.metadata))
        .map(|b| (**b).clone())
        .collect();
    (roles, bindings)
}

/// §9.1 second table: per-API ClusterRoles, owned by the CRD or APIService they grant.
fn api_roles(seen: &MemberRbacObserved<'_>) -> ApiRoles {
    let spec = &seen.csv.spec;
    let crds = spec
        .custom_resource_definitions
        .as_ref()
        .and_then(|d| d.owned.as_deref())
        .unwrap_or_default();
    let services = spec
        .api_service_definitions
        .as_ref()
        .and_then(|d| d.owned.as_deref())
        .unwrap_or_default();
    let mut writes = Vec::new();
    let mut complete = true;
    for crd in crds {
        // Not installed yet: the CSV cannot be Succeeded for long without it; a later run
        // writes its roles.
        let Some(uid) = (seen.crd_uid)(&crd.name) else {
            complete = false;
            continue;
        };
        let owner = ApiOwner {
            name: crd.name.clone(),
            uid,
        };
        writes.extend(
            crd_cluster_roles(crd, &owner)
                .unwrap_or_default()
                .into_iter()
                .filter(|r| !in_place(r, seen))
                .map(|r| Write::apply(r, Ownership::Force)),
        );
    }
    for desc in services {
        let name = desc.api_service_name();
        let Some(uid) = (seen.api_service_uid)(&name) else {
            complete = false;
            continue;
        };
        let owner = ApiOwner { name, uid };
        writes.extend(
            api_service_cluster_roles(desc, &owner)
                .into_iter()
                .filter(|r| !in_place(r, seen))
                .map(|r| Write::apply(r, Ownership::Force)),
        );
    }
    ApiRoles {
        writes,
        hash: hash_of(&(crds, services)),
        complete,
    }
}

/// Whether the per-API ClusterRole `want` is already there as it should be: the same rules,
/// every label it should have, and an owner reference to the same object. The owner's kind is
/// compared without case: OLM v0.31 writes `customresourcedefinition` (docs/operator-groups.md
/// §9.1), and a role OLM made is taken as it is rather than rewritten after a move.
fn in_place(want: &ClusterRole, seen: &MemberRbacObserved<'_>) -> bool {
    let Some(live) = want.metadata.name.as_deref().and_then(seen.cluster_role) else {
        return false;
    };
    let labels_kept = want.metadata.labels.iter().flatten().all(|(k, v)| {
        live.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(k))
            .is_some_and(|have| have == v)
    });
    let owned = want.metadata.owner_references.iter().flatten().all(|o| {
        live.metadata.owner_references.iter().flatten().any(|have| {
            have.uid == o.uid
                && have.name == o.name
                && have.api_version == o.api_version
                && have.kind.eq_ignore_ascii_case(&o.kind)
        })
    });
    live.rules == want.rules
        && live.aggregation_rule == want.aggregation_rule
        && labels_kept
        && owned
}

fn hash_of(value: &impl Serialize) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_string(value)
        .unwrap_or_default()
        .hash(&mut hasher);
    hasher.finish()
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

#[cfg(test)]
mod tests;

//! The ServiceAccounts and RBAC an InstallPlan creates for a CSV (docs/install-plans.md
//! §8), so the CSV controller can put back what was deleted or edited (docs/csv-phases.md §11 item 1:
//! a deleted ServiceAccount or RoleBinding used to leave the CSV Pending forever).
//!
//! Only CSVs that an InstallPlan installed are repaired, and never in groups with a scoping
//! ServiceAccount: the objects are exactly what the install plan already granted, so repairing
//! them grants nothing new, while a hand-made CSV must not obtain RBAC by asking for it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, Role, RoleBinding, RoleRef, Subject,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::api::keys::{MANAGED_LABEL, MANAGED_LABEL_VALUE, PERMISSIONS_HASH_LABEL};
use crate::api::{ClusterServiceVersion, OperatorGroup, StrategyDeploymentPermissions};
use crate::olm_hash::{
    GoJsonError, RoleRefKind, binding_hash, cluster_role_name, role_name, rules_hash,
};

use super::identity::{label, managed_owner_labels, name, namespace, owner_reference};
use super::observed::Observed;
use super::strategy::deployment_strategy;

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// Objects to apply; each list may be empty.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PermissionObjects {
    pub service_accounts: Vec<ServiceAccount>,
    pub roles: Vec<Role>,
    pub role_bindings: Vec<RoleBinding>,
    pub cluster_roles: Vec<ClusterRole>,
    pub cluster_role_bindings: Vec<ClusterRoleBinding>,
}

impl PermissionObjects {
    pub fn is_empty(&self) -> bool {
        self.service_accounts.is_empty()
            && self.roles.is_empty()
            && self.role_bindings.is_empty()
            && self.cluster_roles.is_empty()
            && self.cluster_role_bindings.is_empty()
    }

    /// `ServiceAccount a, RoleBinding b, ...` for events and logs.
    pub fn describe(&self) -> String {
        let named = |kind: &str, meta: &ObjectMeta| {
            format!("{kind} {}", meta.name.as_deref().unwrap_or_default())
        };
        let mut items: Vec<String> = Vec::new();
        items.extend(
            self.service_accounts
                .iter()
                .map(|o| named("ServiceAccount", &o.metadata)),
        );
        items.extend(self.roles.iter().map(|o| named("Role", &o.metadata)));
        items.extend(
            self.role_bindings
                .iter()
                .map(|o| named("RoleBinding", &o.metadata)),
        );
        items.extend(
            self.cluster_roles
                .iter()
                .map(|o| named("ClusterRole", &o.metadata)),
        );
        items.extend(
            self.cluster_role_bindings
                .iter()
                .map(|o| named("ClusterRoleBinding", &o.metadata)),
        );
        items.join(", ")
    }
}

fn labels_with(csv: &ClusterServiceVersion, hash: Option<String>) -> BTreeMap<String, String> {
    let mut labels = managed_owner_labels(csv);
    if let Some(hash) = hash {
        labels.insert(PERMISSIONS_HASH_LABEL.to_owned(), hash);
    }
    labels
}

fn permission_value(
    perm: &StrategyDeploymentPermissions,
) -> Result<serde_json::Value, GoJsonError> {
    serde_json::to_value(perm).map_err(|e| GoJsonError::WrongType {
        path: format!("permission of {}: {e}", perm.service_account_name),
        expected: "a permission",
        found: "something else",
    })
}

fn sa_subject(sa: &str, ns: &str) -> Subject {
    Subject {
        kind: "ServiceAccount".to_owned(),
        name: sa.to_owned(),
        namespace: Some(ns.to_owned()),
        api_group: None,
    }
}

/// Everything the install plan makes for the CSV's `permissions` and `clusterPermissions`.
pub fn install_plan_permissions(
    csv: &ClusterServiceVersion,
) -> Result<PermissionObjects, GoJsonError> {
    let Ok(strategy) = deployment_strategy(csv) else {
        return Ok(PermissionObjects::default());
    };
    let ns = namespace(csv);
    let mut out = PermissionObjects::default();
    let add_sa = |sa: &str, out: &mut PermissionObjects| {
        let exists = out
            .service_accounts
            .iter()
            .any(|s| s.metadata.name.as_deref() == Some(sa));
        if sa != "default" && !exists {
            out.service_accounts.push(ServiceAccount {
                metadata: ObjectMeta {
                    name: Some(sa.to_owned()),
                    namespace: Some(ns.to_owned()),
                    labels: Some(BTreeMap::from([(
                        MANAGED_LABEL.to_owned(),
                        MANAGED_LABEL_VALUE.to_owned(),
                    )])),
                    owner_references: Some(vec![owner_reference(csv)]),
                    ..Default::default()
                },
                ..Default::default()
            });
        }
    };
    for perm in strategy.permissions.iter().flatten() {
        let sa = perm.service_account_name.as_str();
        add_sa(sa, &mut out);
        let value = permission_value(perm)?;
        let object_name = role_name(name(csv), &value)?;
        let rules = serde_json::to_value(&perm.rules).unwrap_or_default();
        out.roles.push(Role {
            metadata: ObjectMeta {
                name: Some(object_name.clone()),
                namespace: Some(ns.to_owned()),
                labels: Some(labels_with(csv, Some(rules_hash(&rules)?))),
                owner_references: Some(vec![owner_reference(csv)]),
                ..Default::default()
            },
            rules: Some(perm.rules.clone()),
        });
        out.role_bindings.push(RoleBinding {
            metadata: ObjectMeta {
                name: Some(object_name.clone()),
                namespace: Some(ns.to_owned()),
                labels: Some(labels_with(
                    csv,
                    Some(binding_hash(RoleRefKind::Role, &object_name, sa, ns)),
                )),
                owner_references: Some(vec![owner_reference(csv)]),
                ..Default::default()
            },
            role_ref: RoleRef {
                api_group: RBAC_GROUP.to_owned(),
                kind: "Role".to_owned(),
                name: object_name,
            },
            subjects: Some(vec![sa_subject(sa, ns)]),
        });
    }
    for perm in strategy.cluster_permissions.iter().flatten() {
        let sa = perm.service_account_name.as_str();
        add_sa(sa, &mut out);
        let value = permission_value(perm)?;
        let object_name = cluster_role_name(name(csv), ns, &value)?;
        let rules = serde_json::to_value(&perm.rules).unwrap_or_default();
        out.cluster_roles.push(ClusterRole {
            metadata: ObjectMeta {
                name: Some(object_name.clone()),
                labels: Some(labels_with(csv, Some(rules_hash(&rules)?))),
                ..Default::default()
            },
            rules: Some(perm.rules.clone()),
            aggregation_rule: None,
        });
        out.cluster_role_bindings.push(ClusterRoleBinding {
            metadata: ObjectMeta {
                name: Some(object_name.clone()),
                labels: Some(labels_with(
                    csv,
                    Some(binding_hash(RoleRefKind::ClusterRole, &object_name, sa, ns)),
                )),
                ..Default::default()
            },
            role_ref: RoleRef {
                api_group: RBAC_GROUP.to_owned(),
                kind: "ClusterRole".to_owned(),
                name: object_name,
            },
            subjects: Some(vec![sa_subject(sa, ns)]),
        });
    }
    Ok(out)
}

/// Why the CSV's permissions may not be repaired, or `Ok` when they may.
pub fn may_repair_permissions(
    csv: &ClusterServiceVersion,
    group: Option<&OperatorGroup>,
    seen: &Observed,
) -> Result<(), &'static str> {
    if label(csv, MANAGED_LABEL) != Some(MANAGED_LABEL_VALUE) {
        return Err("the CSV was not created by an InstallPlan (no olm.managed label)");
    }
    let me = name(csv);
    let subscribed = seen.subscriptions.iter().any(|s| {
        s.status.as_ref().is_some_and(|st| {
            st.installed_csv.as_deref() == Some(me) || st.current_csv.as_deref() == Some(me)
        })
    });
    if !subscribed {
        return Err("no Subscription in the namespace installed this CSV");
    }
    let scoped = group
        .and_then(|g| g.spec.service_account_name.as_deref())
        .is_some_and(|sa| !sa.is_empty());
    if scoped {
        return Err("the OperatorGroup scopes installs to a ServiceAccount");
    }
    Ok(())
}

/// The subset of [`install_plan_permissions`] that is missing, or whose rules, role reference
/// or subjects differ from what the install plan made.
pub fn permissions_to_repair(
    csv: &ClusterServiceVersion,
    seen: &Observed,
) -> Result<PermissionObjects, GoJsonError> {
    let want = install_plan_permissions(csv)?;
    let find = |meta: &ObjectMeta| meta.name.as_deref().unwrap_or_default().to_owned();
    let service_accounts = want
        .service_accounts
        .into_iter()
        .filter(|sa| seen.service_account(&find(&sa.metadata)).is_none())
        .collect();
    let roles = want
        .roles
        .into_iter()
        .filter(|r| {
            let live = seen.roles.iter().find(|l| {
                l.metadata.name == r.metadata.name && l.metadata.namespace == r.metadata.namespace
            });
            live.is_none_or(|l| l.rules != r.rules)
        })
        .collect();
    let role_bindings = want
        .role_bindings
        .into_iter()
        .filter(|b| {
            let live = seen.role_bindings.iter().find(|l| {
                l.metadata.name == b.metadata.name && l.metadata.namespace == b.metadata.namespace
            });
            live.is_none_or(|l| l.role_ref != b.role_ref || l.subjects != b.subjects)
        })
        .collect();
    let cluster_roles = want
        .cluster_roles
        .into_iter()
        .filter(|r| {
            let live = seen
                .cluster_roles
                .iter()
                .find(|l| l.metadata.name == r.metadata.name);
            live.is_none_or(|l| l.rules != r.rules)
        })
        .collect();
    let cluster_role_bindings = want
        .cluster_role_bindings
        .into_iter()
        .filter(|b| {
            let live = seen
                .cluster_role_bindings
                .iter()
                .find(|l| l.metadata.name == b.metadata.name);
            live.is_none_or(|l| l.role_ref != b.role_ref || l.subjects != b.subjects)
        })
        .collect();
    Ok(PermissionObjects {
        service_accounts,
        roles,
        role_bindings,
        cluster_roles,
        cluster_role_bindings,
    })
}

#[cfg(test)]
mod tests;

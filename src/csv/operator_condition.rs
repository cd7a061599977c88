//! The OperatorCondition OLM keeps for every (non-copied) CSV, and what it says about upgrades
//! (docs/csv-phases.md §3.1 "OperatorCondition check", docs/csv-phases.md §7.2 env, §10 step 3; docs/operator-conditions.md).
//!
//! For CSV `X` in namespace `N` OLM keeps, in `N`:
//! * OperatorCondition `X`, owned by the CSV (controller), with `spec.serviceAccounts` and
//!   `spec.deployments` from the install strategy;
//! * Role and RoleBinding `X`, owned by the OperatorCondition (controller), letting those
//!   ServiceAccounts get, update and patch OperatorCondition `X` and nothing else;
//! * `status.conditions` = what the operator wrote in `spec.conditions`, stamped with the
//!   generation it was read at (so a stale answer is recognisable).
//!
//! Kubernetes garbage collection removes all three with the CSV. [`plan`] compares what should
//! exist with what is observed and returns only the writes that change something.

use jiff::Timestamp;
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};

use crate::api::keys::{MANAGED_LABEL, MANAGED_LABEL_VALUE};
use crate::api::{
    CONDITION_UPGRADEABLE, ClusterServiceVersion, GROUP, OperatorCondition, OperatorConditionSpec,
    OperatorConditionStatus, V2, set_condition,
};

use crate::k8s::effects::Write;
use crate::k8s::write::Ownership;

use super::identity::{name, namespace};
use super::observed::Observed;
use super::outcome::truncate_to_seconds;

/// The kind in the owner references of the Role and RoleBinding.
const OPERATOR_CONDITION_KIND: &str = "OperatorCondition";
/// The verbs the operator's ServiceAccounts get on their own OperatorCondition.
const OPERATOR_VERBS: [&str; 3] = ["get", "update", "patch"];
/// Used when the strategy names no ServiceAccount (pods then run as `default`).
const DEFAULT_SERVICE_ACCOUNT: &str = "default";

/// The writes that bring a CSV's OperatorCondition, Role and RoleBinding to what they should be.
/// Each is `None` when the observed object already is.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OperatorConditionWrites {
    /// Create the OperatorCondition, or set its owner, `serviceAccounts` and `deployments`.
    pub condition: Option<OperatorCondition>,
    pub role: Option<Role>,
    pub role_binding: Option<RoleBinding>,
    /// The new `status` of the observed OperatorCondition (the operator's conditions copied).
    pub status: Option<OperatorConditionStatus>,
}

impl OperatorConditionWrites {
    pub fn is_empty(&self) -> bool {
        self.condition.is_none()
            && self.role.is_none()
            && self.role_binding.is_none()
            && self.status.is_none()
    }
}

/// What to write for `csv`'s OperatorCondition. The Role and RoleBinding are owned by the
/// OperatorCondition, so they are planned once it has been observed (it has a uid); its watch
/// event brings the CSV back.
pub fn plan(
    csv: &ClusterServiceVersion,
    seen: &Observed,
    now: Timestamp,
) -> OperatorConditionWrites {
    let want = desired_condition(csv);
    let live = seen.operator_condition(name(csv));
    let mut writes = OperatorConditionWrites::default();
    if live.is_none_or(|oc| !condition_matches(oc, &want)) {
        writes.condition = Some(want.clone());
    }
    let Some(live) = live else {
        return writes;
    };
    let Some(uid) = live.metadata.uid.as_deref().filter(|u| !u.is_empty()) else {
        return writes;
    };
    let owner = condition_owner(name(csv), uid);
    let role = desired_role(csv, &owner);
    if seen.role(name(csv)).is_none_or(|r| {
        r.rules != role.rules
            || !has_owner(r.metadata.owner_references.as_ref(), &owner)
            || !managed(&r.metadata)
    }) {
        writes.role = Some(role);
    }
    let service_accounts = want.spec.service_accounts.clone().unwrap_or_default();
    let binding = desired_role_binding(csv, &owner, &service_accounts);
    if seen.role_binding(name(csv)).is_none_or(|b| {
        !same_subjects(
            b.subjects.as_deref(),
            binding.subjects.as_deref(),
            namespace(csv),
        ) || b.role_ref != binding.role_ref
            || !has_owner(b.metadata.owner_references.as_ref(), &owner)
            || !managed(&b.metadata)
    }) {
        writes.role_binding = Some(binding);
    }
    writes.status = observed_status(live, now);
    writes
}

/// The writes of `planned`, in order: the status first, replaced only at the version of the
/// OperatorCondition it was copied from (a stale copy is refused with a conflict and the
/// condition's own watch event brings the CSV back), then the OperatorCondition, its Role and
/// RoleBinding, applied in the CSV's namespace.
pub fn writes(
    csv: &ClusterServiceVersion,
    seen: &Observed,
    planned: OperatorConditionWrites,
) -> Vec<Write> {
    let ns = namespace(csv);
    let mut out = Vec::new();
    if let (Some(status), Some(live)) = (planned.status, seen.operator_condition(name(csv)))
        && let Some(write) = Write::status(live, status)
    {
        out.push(write);
    }
    if let Some(mut condition) = planned.condition {
        condition.metadata.namespace = Some(ns.to_owned());
        out.push(Write::apply(condition, Ownership::Force));
    }
    if let Some(mut role) = planned.role {
        role.metadata.namespace = Some(ns.to_owned());
        out.push(Write::apply(role, Ownership::Force));
    }
    if let Some(mut binding) = planned.role_binding {
        binding.metadata.namespace = Some(ns.to_owned());
        out.push(Write::apply(binding, Ownership::Force));
    }
    out
}

/// OperatorCondition `<csv>` as OLM makes it: owned by the CSV, listing the strategy's
/// ServiceAccounts (one entry per cluster permission, then per namespaced permission, repeats
/// kept as OLM keeps them; `default` when none) and Deployments. Other spec fields belong to the
/// operator and the admin. A de-duplicated list would differ from the one OLM wrote and make
/// olm-rs rewrite the condition and its RoleBinding after a move (docs/operator-conditions.md).
pub fn desired_condition(csv: &ClusterServiceVersion) -> OperatorCondition {
    let strategy = csv.spec.install.spec.as_ref();
    let mut service_accounts: Vec<String> = Vec::new();
    let permissions = strategy
        .into_iter()
        .flat_map(|s| s.cluster_permissions.iter().flatten())
        .chain(
            strategy
                .into_iter()
                .flat_map(|s| s.permissions.iter().flatten()),
        );
    for sa in permissions.map(|p| &p.service_account_name) {
        if !sa.is_empty() {
            service_accounts.push(sa.clone());
        }
    }
    if service_accounts.is_empty() {
        service_accounts.push(DEFAULT_SERVICE_ACCOUNT.to_owned());
    }
    let deployments: Vec<String> = strategy
        .into_iter()
        .flat_map(|s| s.deployments.iter())
        .map(|d| d.name.clone())
        .filter(|n| !n.is_empty())
        .collect();
    let mut oc = OperatorCondition::new(
        name(csv),
        OperatorConditionSpec {
            service_accounts: Some(service_accounts),
            deployments: Some(deployments),
            overrides: None,
            conditions: None,
        },
    );
    oc.metadata.namespace = Some(namespace(csv).to_owned());
    oc.metadata.owner_references = Some(vec![csv_controller_reference(csv)]);
    oc
}

/// The CSV as controller of its OperatorCondition (not blocking deletion, as OLM sets it).
fn csv_controller_reference(csv: &ClusterServiceVersion) -> OwnerReference {
    OwnerReference {
        controller: Some(true),
        ..super::identity::owner_reference(csv)
    }
}

fn condition_owner(name: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: V2.to_owned(),
        kind: OPERATOR_CONDITION_KIND.to_owned(),
        name: name.to_owned(),
        uid: uid.to_owned(),
        controller: Some(true),
        block_owner_deletion: Some(false),
    }
}

fn has_owner(refs: Option<&Vec<OwnerReference>>, owner: &OwnerReference) -> bool {
    refs.into_iter()
        .flatten()
        .any(|r| r.kind == owner.kind && r.uid == owner.uid && r.controller == Some(true))
}

fn condition_matches(live: &OperatorCondition, want: &OperatorCondition) -> bool {
    let owned = want.metadata.owner_references.iter().flatten().all(|o| {
        live.metadata
            .owner_references
            .iter()
            .flatten()
            .any(|r| r.uid == o.uid && r.kind == o.kind && r.controller == o.controller)
    });
    owned
        && live.spec.service_accounts == want.spec.service_accounts
        && live.spec.deployments == want.spec.deployments
}

/// The Role's and RoleBinding's metadata: owned by the condition, and labelled `olm.managed`
/// as OLM v0.31's are (its informers see only labelled objects: without the label, OLM started
/// again after olm-rs would not find them — tests/e2e_takeover).
fn metadata(csv: &ClusterServiceVersion, owner: &OwnerReference) -> ObjectMeta {
    ObjectMeta {
        name: Some(name(csv).to_owned()),
        namespace: Some(namespace(csv).to_owned()),
        owner_references: Some(vec![owner.clone()]),
        labels: Some(
            [(MANAGED_LABEL.to_owned(), MANAGED_LABEL_VALUE.to_owned())]
                .into_iter()
                .collect(),
        ),
        ..Default::default()
    }
}

/// Whether `meta` carries `olm.managed: "true"`.
fn managed(meta: &ObjectMeta) -> bool {
    meta.labels
        .as_ref()
        .and_then(|l| l.get(MANAGED_LABEL))
        .is_some_and(|v| v == MANAGED_LABEL_VALUE)
}

/// Role `<csv>`: get, update and patch on OperatorCondition `<csv>` only.
pub fn desired_role(csv: &ClusterServiceVersion, owner: &OwnerReference) -> Role {
    Role {
        metadata: metadata(csv, owner),
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec![GROUP.to_owned()]),
            resources: Some(vec!["operatorconditions".to_owned()]),
            resource_names: Some(vec![name(csv).to_owned()]),
            verbs: OPERATOR_VERBS.iter().map(|v| (*v).to_owned()).collect(),
            non_resource_urls: None,
        }]),
    }
}

/// Whether two RoleBindings' subjects bind the same accounts: a ServiceAccount subject without
/// a namespace is the binding's own namespace's (the RBAC authorizer's rule), so OLM's subjects
/// (no namespace) and those an earlier olm-rs wrote (the namespace spelled out) are the same.
fn same_subjects(a: Option<&[Subject]>, b: Option<&[Subject]>, ns: &str) -> bool {
    let normal = |subjects: Option<&[Subject]>| -> Vec<Subject> {
        subjects
            .unwrap_or_default()
            .iter()
            .map(|s| {
                let mut s = s.clone();
                if s.kind == "ServiceAccount" && s.namespace.as_deref().is_none_or(str::is_empty) {
                    s.namespace = Some(ns.to_owned());
                }
                s
            })
            .collect()
    };
    normal(a) == normal(b)
}

/// RoleBinding `<csv>`: Role `<csv>` for each of `service_accounts`. As OLM writes them, the
/// subjects name no namespace: they are the binding's (the CSV's) own (docs/operator-conditions.md).
pub fn desired_role_binding(
    csv: &ClusterServiceVersion,
    owner: &OwnerReference,
    service_accounts: &[String],
) -> RoleBinding {
    RoleBinding {
        metadata: metadata(csv, owner),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".to_owned(),
            kind: "Role".to_owned(),
            name: name(csv).to_owned(),
        },
        subjects: Some(
            service_accounts
                .iter()
                .map(|sa| Subject {
                    kind: "ServiceAccount".to_owned(),
                    name: sa.clone(),
                    namespace: None,
                    api_group: None,
                })
                .collect(),
        ),
    }
}

/// `status.conditions` with every condition of `spec.conditions` copied in, stamped with the
/// object's generation; `None` when nothing changes. A condition whose status is unchanged and
/// already observed at this generation is left alone; an unchanged status keeps its
/// `lastTransitionTime`.
pub fn observed_status(oc: &OperatorCondition, now: Timestamp) -> Option<OperatorConditionStatus> {
    let generation = oc.metadata.generation;
    let mut conditions = oc
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let now = Time(truncate_to_seconds(now));
    let mut changed = false;
    for reported in oc.spec.conditions.iter().flatten() {
        let current = conditions.iter().find(|c| c.type_ == reported.type_);
        if current
            .is_some_and(|c| c.status == reported.status && c.observed_generation == generation)
        {
            continue;
        }
        let mut observed = reported.clone();
        observed.observed_generation = generation;
        changed |= set_condition(&mut conditions, observed, &now);
    }
    changed.then_some(OperatorConditionStatus {
        conditions: Some(conditions),
    })
}

/// Why the replaced CSV's OperatorCondition holds an upgrade back; the text is OLM's detail.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotUpgradeable {
    /// An administrator's override says not `True`.
    #[error("The operator is not upgradeable: {message}")]
    Overridden { message: String },
    /// The operator reported `Upgradeable=False`.
    #[error("The operator is not upgradeable: {message}")]
    Reported { message: String },
    /// The operator has not yet reported on the condition's current generation.
    #[error("The operatorcondition status \"{CONDITION_UPGRADEABLE}\"=\"{status}\" is outdated")]
    Outdated { status: String },
}

/// docs/csv-phases.md §3.1 "OperatorCondition check" on the replaced CSV's OperatorCondition.
/// No OperatorCondition means upgradeable.
pub fn upgradeable(condition: Option<&OperatorCondition>) -> Result<(), NotUpgradeable> {
    let Some(oc) = condition else {
        return Ok(());
    };
    if let Some(admin) = oc.override_of(CONDITION_UPGRADEABLE) {
        return if admin.status == "True" {
            Ok(())
        } else {
            Err(NotUpgradeable::Overridden {
                message: admin.message.clone(),
            })
        };
    }
    if let Some(reported) = oc.status_condition(CONDITION_UPGRADEABLE) {
        if reported.observed_generation.unwrap_or(0) < oc.metadata.generation.unwrap_or(0) {
            return Err(NotUpgradeable::Outdated {
                status: reported.status.clone(),
            });
        }
        if reported.status == "False" {
            return Err(NotUpgradeable::Reported {
                message: reported.message.clone(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;

//! Provided-API reconciliation across intersecting OperatorGroups (docs/operator-groups.md §6.2), run
//! by the CSV sync (docs/csv-phases.md §2 step 9). Pure: the caller passes the CSV's APIs and every group.

use crate::api::OperatorGroup;
use crate::api::keys::PROVIDED_APIS_ANNOTATION;

use super::provided_apis::{ApiSet, format_provided_apis, parse_provided_apis};
use super::targets::{TargetNamespaces, groups_intersect};

/// OLM's message for `InterOperatorGroupOwnerConflict`; [`ApiReconciliation::message`] appends
/// which APIs and groups collide (docs/operator-groups.md §11 item 2).
pub const INTERSECTING_GROUPS_MESSAGE: &str = "intersecting operatorgroups provide the same apis";
/// OLM's message for `CannotModifyStaticOperatorGroupProvidedAPIs`.
pub const STATIC_GROUP_MESSAGE: &str =
    "static provided api operatorgroup cannot be modified by these apis";

/// One OperatorGroup as the reconciliation sees it.
#[derive(Debug, Clone)]
pub struct GroupApis {
    pub namespace: String,
    pub name: String,
    /// `status.namespaces`.
    pub targets: TargetNamespaces,
    /// `olm.providedAPIs`.
    pub provided: ApiSet,
    /// `spec.staticProvidedAPIs`.
    pub is_static: bool,
}

impl GroupApis {
    /// Reads a group as the CSV sync sees it: `status.namespaces` (absent or invalid = none),
    /// the `olm.providedAPIs` annotation and the static flag.
    pub fn from_group(og: &OperatorGroup) -> Self {
        let targets = og
            .status
            .as_ref()
            .and_then(|s| TargetNamespaces::from_status(s.namespaces.as_deref()).ok())
            .unwrap_or(TargetNamespaces::Named(Default::default()));
        Self {
            namespace: og.metadata.namespace.clone().unwrap_or_default(),
            name: og.metadata.name.clone().unwrap_or_default(),
            targets,
            provided: og
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(PROVIDED_APIS_ANNOTATION))
                .map(|v| parse_provided_apis(v))
                .unwrap_or_default(),
            is_static: og.spec.is_static(),
        }
    }
}

/// The outcome of §6.2's table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiReconciliation {
    /// Nothing to change: go on to the phase switch.
    Continue,
    /// Write this `olm.providedAPIs` value on the CSV's group (P ∪ A), requeue the CSV, end.
    AddApis(String),
    /// Write this value (P \ A), requeue, end; the next sync yields `Conflict`.
    RemoveApis(String),
    /// `Failed / InterOperatorGroupOwnerConflict`; delete the CSV's Deployments.
    Conflict {
        /// The CSV's APIs also claimed by intersecting groups.
        apis: ApiSet,
        /// `namespace/name` of those groups.
        groups: Vec<String>,
    },
    /// `Failed / CannotModifyStaticOperatorGroupProvidedAPIs`; delete the CSV's Deployments.
    StaticGroupCannotChange,
}

impl ApiReconciliation {
    /// The CSV status message for the two failure outcomes.
    pub fn message(&self) -> Option<String> {
        match self {
            Self::Conflict { apis, groups } => Some(format!(
                "{INTERSECTING_GROUPS_MESSAGE}: {} also provided by operatorgroup(s) {}",
                format_provided_apis(apis),
                groups.join(", ")
            )),
            Self::StaticGroupCannotChange => Some(STATIC_GROUP_MESSAGE.to_owned()),
            _ => None,
        }
    }
}

/// §6.2: compares the CSV's APIs `csv_apis` with its group's annotation and with the
/// annotations of every other group that intersects it. `all_groups` may include `group`
/// itself; it is skipped.
pub fn reconcile_provided_apis(
    csv_apis: &ApiSet,
    group: &GroupApis,
    all_groups: &[GroupApis],
) -> ApiReconciliation {
    let mut claimed = ApiSet::new();
    let mut claimants = Vec::new();
    for other in all_groups {
        if other.namespace == group.namespace && other.name == group.name {
            continue;
        }
        if !groups_intersect(
            &group.targets,
            &group.namespace,
            &other.targets,
            &other.namespace,
        ) {
            continue;
        }
        let overlap: ApiSet = other.provided.intersection(csv_apis).cloned().collect();
        if !overlap.is_empty() {
            claimants.push(format!("{}/{}", other.namespace, other.name));
            claimed.extend(overlap);
        }
    }
    // Stable text whatever order the caller's store lists the groups in.
    claimants.sort();
    let in_group = csv_apis.is_subset(&group.provided);
    let conflict = !claimed.is_empty();
    match (in_group, conflict) {
        (true, false) => ApiReconciliation::Continue,
        (false, true) => ApiReconciliation::Conflict {
            apis: claimed,
            groups: claimants,
        },
        _ if group.is_static => ApiReconciliation::StaticGroupCannotChange,
        // No "text already equal" case (§6.2): `ApiKey::parse` reads back every entry
        // `format_provided_apis` writes, so A ⊄ P_G always changes the text.
        (false, false) => {
            let union: ApiSet = group.provided.union(csv_apis).cloned().collect();
            ApiReconciliation::AddApis(format_provided_apis(&union))
        }
        (true, true) => {
            let rest: ApiSet = group.provided.difference(csv_apis).cloned().collect();
            ApiReconciliation::RemoveApis(format_provided_apis(&rest))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operator_group::provided_apis::parse_provided_apis;

    fn group(ns: &str, name: &str, targets: TargetNamespaces, provided: &str) -> GroupApis {
        GroupApis {
            namespace: ns.into(),
            name: name.into(),
            targets,
            provided: parse_provided_apis(provided),
            is_static: false,
        }
    }

    fn named(list: &[&str]) -> TargetNamespaces {
        TargetNamespaces::Named(list.iter().map(|s| s.to_string()).collect())
    }

    const A: &str = "Etcd.v1.etcd.io";

    #[test]
    fn the_four_rows_of_the_table() {
        let apis = parse_provided_apis(A);
        let mine = group("ns1", "og", named(&["ns1"]), "");
        // Not in the group, nobody else: add.
        assert_eq!(
            reconcile_provided_apis(&apis, &mine, std::slice::from_ref(&mine)),
            ApiReconciliation::AddApis(A.into())
        );
        // In the group, nobody else: continue.
        let mine = group("ns1", "og", named(&["ns1"]), A);
        assert_eq!(
            reconcile_provided_apis(&apis, &mine, &[]),
            ApiReconciliation::Continue
        );
        // An all-namespaces group elsewhere claims it.
        let global = group("operators", "global", TargetNamespaces::All, A);
        assert_eq!(
            reconcile_provided_apis(&apis, &mine, std::slice::from_ref(&global)),
            ApiReconciliation::RemoveApis(String::new())
        );
        let fresh = group("ns1", "og", named(&["ns1"]), "");
        let conflict = reconcile_provided_apis(&apis, &fresh, &[global]);
        assert_eq!(
            conflict.message().unwrap(),
            "intersecting operatorgroups provide the same apis: Etcd.v1.etcd.io also provided by operatorgroup(s) operators/global"
        );
    }

    #[test]
    fn disjoint_groups_do_not_conflict() {
        let apis = parse_provided_apis(A);
        let mine = group("ns1", "og", named(&["ns1"]), "");
        let other = group("ns2", "og", named(&["ns2"]), A);
        assert_eq!(
            reconcile_provided_apis(&apis, &mine, &[other]),
            ApiReconciliation::AddApis(A.into())
        );
    }

    #[test]
    fn static_groups_never_change_their_annotation() {
        let apis = parse_provided_apis(A);
        let mut mine = group("ns1", "og", named(&["ns1"]), "");
        mine.is_static = true;
        assert_eq!(
            reconcile_provided_apis(&apis, &mine, &[]),
            ApiReconciliation::StaticGroupCannotChange
        );
        let mut reserved = group("ns1", "og", named(&["ns1"]), A);
        reserved.is_static = true;
        assert_eq!(
            reconcile_provided_apis(&apis, &reserved, &[]),
            ApiReconciliation::Continue
        );
    }
}

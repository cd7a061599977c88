//! ServiceAccount entries of the requirement check (docs/csv-phases.md §6.1 last row, §6.4).

use k8s_openapi::api::rbac::v1::PolicyRule;

use crate::api::{
    ClusterServiceVersion, DependentStatus, RequirementStatus, RequirementStatusReason,
    StrategyDetailsDeployment,
};
use crate::olm_hash::go_json::{self, GoType};

use super::identity::{CSV_KIND, is_owned_by, namespace};
use super::observed::Observed;
use super::rbac_eval::{Scope, ServiceAccountUser};
use super::strategy::StrategyError;

/// A rule must name verbs and may not mix resources with non-resource URLs (OLM validates this
/// before evaluating; here it is checked for every rule, whether or not its account exists).
pub fn validate_rules(strategy: &StrategyDetailsDeployment) -> Result<(), StrategyError> {
    let all = strategy
        .permissions
        .iter()
        .flatten()
        .chain(strategy.cluster_permissions.iter().flatten());
    for perm in all {
        for rule in &perm.rules {
            if rule.verbs.is_empty() {
                return Err(StrategyError::RuleWithoutVerbs {
                    service_account: perm.service_account_name.clone(),
                });
            }
            let resources = [&rule.api_groups, &rule.resources, &rule.resource_names]
                .iter()
                .map(|l| l.as_ref().map_or(0, Vec::len))
                .sum::<usize>();
            let urls = rule.non_resource_urls.as_ref().map_or(0, Vec::len);
            if resources > 0 && urls > 0 {
                return Err(StrategyError::RuleMixesResourcesAndUrls {
                    service_account: perm.service_account_name.clone(),
                });
            }
        }
    }
    Ok(())
}

/// The ServiceAccount entries and what is unmet among them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PermissionCheck {
    pub statuses: Vec<RequirementStatus>,
    pub unmet: Vec<String>,
    /// Accounts that are missing or lack rules.
    pub gaps: Vec<String>,
}

/// One entry per distinct `serviceAccountName` (first appearance order, `permissions` before
/// `clusterPermissions`), each with one dependent per rule.
pub fn permission_statuses(
    csv: &ClusterServiceVersion,
    strategy: &StrategyDetailsDeployment,
    seen: &Observed,
) -> PermissionCheck {
    let ns = namespace(csv);
    let rbac = seen.rbac();
    let mut entries: Vec<(RequirementStatus, Option<String>)> = Vec::new();
    let scoped = [
        (
            strategy.permissions.as_deref().unwrap_or_default(),
            Scope::Namespace(ns),
        ),
        (
            strategy.cluster_permissions.as_deref().unwrap_or_default(),
            Scope::Cluster,
        ),
    ];
    for (perms, scope) in scoped {
        for perm in perms {
            let sa_name = perm.service_account_name.as_str();
            let index = match entries.iter().position(|(e, _)| e.name == sa_name) {
                Some(i) => i,
                None => {
                    entries.push((new_entry(sa_name), None));
                    entries.len() - 1
                }
            };
            let (status, denial) = &mut entries[index];
            let Some(sa) = seen.service_account(sa_name) else {
                status.status = RequirementStatusReason::NotPresent;
                status.message = "Service account does not exist".to_owned();
                status.dependents = None;
                continue;
            };
            if status.status == RequirementStatusReason::NotPresent {
                continue;
            }
            status.uuid = sa.metadata.uid.clone();
            let refs = sa.metadata.owner_references.as_ref();
            let foreign_owner =
                refs.into_iter().flatten().any(|r| r.kind == CSV_KIND) && !is_owned_by(csv, refs);
            if foreign_owner {
                status.status = RequirementStatusReason::PresentNotSatisfied;
                status.message =
                    "Service account is owned by another ClusterServiceVersion".to_owned();
                continue;
            }
            let grants = rbac.grants_for(&ServiceAccountUser::new(ns, sa_name), scope);
            for rule in &perm.rules {
                let denied = grants.first_denied(rule);
                let dependents = status.dependents.get_or_insert_with(Vec::new);
                dependents.push(dependent(rule, scope, denied.is_none()));
                if let Some(request) = denied {
                    status.status = RequirementStatusReason::PresentNotSatisfied;
                    if denial.is_none() {
                        let place = match scope {
                            Scope::Namespace(ns) => format!(" in namespace \"{ns}\""),
                            Scope::Cluster => " cluster-wide".to_owned(),
                        };
                        *denial = Some(format!("{request}{place}"));
                    }
                }
            }
            if let Some(why) = denial.as_deref() {
                status.message = format!("Policy rule not satisfied for service account: {why}");
            }
        }
    }
    let mut check = PermissionCheck::default();
    for (status, denial) in entries {
        if status.status != RequirementStatusReason::Present {
            let why = match &denial {
                Some(d) => format!("ServiceAccount {} {d}", status.name),
                None => format!("ServiceAccount {}: {}", status.name, status.message),
            };
            check.unmet.push(why);
            let owned_elsewhere =
                status.status == RequirementStatusReason::PresentNotSatisfied && denial.is_none();
            if !owned_elsewhere {
                check.gaps.push(status.name.clone());
            }
        }
        check.statuses.push(status);
    }
    check
}

fn new_entry(sa_name: &str) -> RequirementStatus {
    RequirementStatus {
        group: String::new(),
        version: "v1".to_owned(),
        kind: "ServiceAccount".to_owned(),
        name: sa_name.to_owned(),
        status: RequirementStatusReason::Present,
        message: String::new(),
        uuid: None,
        dependents: None,
    }
}

/// `{"group":"rbac.authorization.k8s.io","kind":"PolicyRule","version":"v1",...}` with
/// message `namespaced rule:<rule JSON>` or `cluster rule:<rule JSON>` (Go's encoding).
fn dependent(rule: &PolicyRule, scope: Scope<'_>, satisfied: bool) -> DependentStatus {
    let prefix = match scope {
        Scope::Namespace(_) => "namespaced",
        Scope::Cluster => "cluster",
    };
    DependentStatus {
        group: "rbac.authorization.k8s.io".to_owned(),
        version: "v1".to_owned(),
        kind: "PolicyRule".to_owned(),
        status: if satisfied {
            RequirementStatusReason::Satisfied
        } else {
            RequirementStatusReason::NotSatisfied
        },
        uuid: None,
        message: Some(format!("{prefix} rule:{}", rule_json(rule))),
    }
}

/// Go's `json.Marshal` of one PolicyRule.
fn rule_json(rule: &PolicyRule) -> String {
    let value = serde_json::to_value(vec![rule]).unwrap_or_default();
    match go_json::encode(&value, GoType::POLICY_RULES) {
        Ok(list) => list
            .strip_prefix('[')
            .and_then(|s| s.strip_suffix(']'))
            .map(str::to_owned)
            .unwrap_or(list),
        Err(_) => serde_json::to_string(rule).unwrap_or_default(),
    }
}

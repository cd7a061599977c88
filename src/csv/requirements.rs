//! The requirement check (docs/csv-phases.md §6): is everything the CSV needs present, and may its service
//! accounts do what it asks? Produces `status.requirementStatus` in OLM's order.

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;

use crate::api::keys::INSTALLED_ALONGSIDE_ANNOTATION_PREFIX;
use crate::api::{
    ApiServiceDescription, ClusterServiceVersion, CrdDescription, RequirementStatus,
    RequirementStatusReason, parse_operator_version,
};

use super::identity::{name, namespace};
use super::observed::{Observed, Served, ServerVersion};
use super::permissions::{permission_statuses, validate_rules};
use super::replacement::ancestors;
use super::strategy::{StrategyError, deployment_strategy};
use crate::operator_group::is_copied;

/// The outcome of one requirement check.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RequirementCheck {
    /// Every requirement is present (AND of all entries).
    pub met: bool,
    /// `status.requirementStatus`, in OLM's order.
    pub statuses: Vec<RequirementStatus>,
    /// Lookups that failed (discovery, server version): "unknown", not "absent" — callers must
    /// not tear down a running operator because of them (docs/csv-phases.md §11 item 3).
    pub unknown: Vec<String>,
    /// One plain sentence per unmet requirement, for the status message and events.
    pub unmet: Vec<String>,
    /// ServiceAccounts that are missing or lack permissions (candidates for recovery).
    pub service_account_gaps: Vec<String>,
}

impl RequirementCheck {
    /// Unmet only because of failed lookups: worth a retry, not a phase change.
    pub fn only_unknown(&self) -> bool {
        !self.met && !self.unknown.is_empty() && self.unmet.is_empty()
    }

    /// A short summary of what is missing (first three items).
    pub fn summary(&self) -> String {
        let mut items: Vec<&str> = self.unmet.iter().map(String::as_str).take(3).collect();
        if self.unmet.len() > 3 {
            items.push("...");
        }
        items.join("; ")
    }

    fn push(&mut self, status: RequirementStatus, unmet: Option<String>) {
        if let Some(why) = unmet {
            self.unmet.push(why);
        }
        self.statuses.push(status);
    }
}

const CRD_GROUP: &str = "apiextensions.k8s.io";
const APISERVICE_GROUP: &str = "apiregistration.k8s.io";

fn entry(group: &str, version: &str, kind: &str, name: &str) -> RequirementStatus {
    RequirementStatus {
        group: group.to_owned(),
        version: version.to_owned(),
        kind: kind.to_owned(),
        name: name.to_owned(),
        status: RequirementStatusReason::Present,
        message: String::new(),
        uuid: None,
        dependents: None,
    }
}

/// Runs every check of docs/csv-phases.md §6.1. An invalid strategy (unknown strategy name, a rule without
/// verbs or mixing resources with URLs) is an error: the CSV goes `Failed /
/// InvalidInstallStrategy`.
pub fn check_requirements(
    csv: &ClusterServiceVersion,
    seen: &Observed,
) -> Result<RequirementCheck, StrategyError> {
    let strategy = deployment_strategy(csv)?;
    validate_rules(&strategy)?;
    let mut check = RequirementCheck::default();
    check_min_kube_version(csv, seen, &mut check);
    check_crds(csv, seen, &mut check);
    check_required_api_services(csv, seen, &mut check);
    check_owned_api_services(csv, &strategy, &mut check);
    check_native_apis(csv, seen, &mut check);
    let permissions = permission_statuses(csv, &strategy, seen);
    check.statuses.extend(permissions.statuses);
    check.unmet.extend(permissions.unmet);
    check.service_account_gaps = permissions.gaps;
    check.met = check.unmet.is_empty() && check.unknown.is_empty();
    Ok(check)
}

fn check_min_kube_version(
    csv: &ClusterServiceVersion,
    seen: &Observed,
    check: &mut RequirementCheck,
) {
    let Some(min) = csv
        .spec
        .min_kube_version
        .as_deref()
        .filter(|m| !m.is_empty())
    else {
        return;
    };
    let mut status = entry(
        "operators.coreos.com",
        "v1alpha1",
        "ClusterServiceVersion",
        name(csv),
    );
    let outcome = match &seen.server_version {
        ServerVersion::Unavailable(err) => {
            check.unknown.push(format!("server version: {err}"));
            Err("Server version discovery error".to_owned())
        }
        ServerVersion::Known(server) => {
            match (parse_server_version(server), parse_operator_version(min)) {
                (None, _) => Err("Server version parsing error".to_owned()),
                (_, Err(_)) => Err("CSV version parsing error".to_owned()),
                (Some(server_v), Ok(min_v)) => {
                    let min_v = semver::Version::new(min_v.major, min_v.minor, min_v.patch);
                    if server_v >= min_v {
                        Ok(format!(
                            "CSV minKubeVersion ({min}) less than server version ({server})"
                        ))
                    } else {
                        Err(format!(
                            "CSV version requirement not met: minKubeVersion ({min}) > server version ({server})"
                        ))
                    }
                }
            }
        }
    };
    match outcome {
        Ok(message) => {
            status.message = message;
            check.push(status, None);
        }
        Err(message) => {
            status.status = RequirementStatusReason::PresentNotSatisfied;
            let discovery_failed = matches!(seen.server_version, ServerVersion::Unavailable(_));
            let why = (!discovery_failed).then(|| message.clone());
            status.message = message;
            check.push(status, why);
        }
    }
}

/// `v1.33.1-gke.100+abc` → 1.33.1 (leading `v`, pre-release and build suffixes dropped).
fn parse_server_version(text: &str) -> Option<semver::Version> {
    let text = text.trim().trim_start_matches('v');
    let core = text.split(['-', '+']).next()?;
    let v = parse_operator_version(core).ok()?;
    Some(semver::Version::new(v.major, v.minor, v.patch))
}

/// Owned ∪ required CRDs, deduplicated by name (owned wins), sorted by name.
fn all_crds(csv: &ClusterServiceVersion) -> BTreeMap<&str, (&CrdDescription, bool)> {
    let mut out = BTreeMap::new();
    let crds = csv.spec.custom_resource_definitions.as_ref();
    for desc in crds.and_then(|c| c.required.as_deref()).unwrap_or_default() {
        out.insert(desc.name.as_str(), (desc, false));
    }
    for desc in crds.and_then(|c| c.owned.as_deref()).unwrap_or_default() {
        out.insert(desc.name.as_str(), (desc, true));
    }
    out
}

fn check_crds(csv: &ClusterServiceVersion, seen: &Observed, check: &mut RequirementCheck) {
    for (crd_name, (desc, owned)) in all_crds(csv) {
        let mut status = entry(CRD_GROUP, "v1", "CustomResourceDefinition", crd_name);
        let Some(crd) = seen.crd(crd_name) else {
            status.status = RequirementStatusReason::NotPresent;
            status.message = "CRD is not present".to_owned();
            check.push(status, Some(format!("CRD {crd_name} is not present")));
            continue;
        };
        let blockers = if owned {
            installed_alongside_blockers(csv, crd, seen)
        } else {
            Vec::new()
        };
        if !blockers.is_empty() {
            status.status = RequirementStatusReason::PresentNotSatisfied;
            status.message = format!(
                "CRD installed alongside other CSV(s): {}",
                blockers.join(", ")
            );
            let why = format!(
                "CRD {crd_name} was installed alongside {}",
                blockers.join(", ")
            );
            check.push(status, Some(why));
            continue;
        }
        if !version_served(crd, &desc.version) {
            status.status = RequirementStatusReason::NotPresent;
            status.message = "CRD version not served".to_owned();
            let why = format!("CRD {crd_name} does not serve version {}", desc.version);
            check.push(status, Some(why));
            continue;
        }
        status.uuid = crd.metadata.uid.clone();
        if crd_condition_true(crd, "Established") && crd_condition_true(crd, "NamesAccepted") {
            status.message = "CRD is present and Established condition is true".to_owned();
            check.push(status, None);
        } else {
            status.status = RequirementStatusReason::PresentNotAvailable;
            status.message =
                "CRD is present but the Established condition is False (not available)".to_owned();
            check.push(status, Some(format!("CRD {crd_name} is not established")));
        }
    }
}

fn version_served(crd: &CustomResourceDefinition, version: &str) -> bool {
    crd.spec
        .versions
        .iter()
        .any(|v| v.name == version && v.served)
}

fn crd_condition_true(crd: &CustomResourceDefinition, type_: &str) -> bool {
    crd.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == type_ && c.status == "True")
}

/// docs/csv-phases.md §6.2: the CRD was last applied alongside an ancestor of this CSV (in its replaces
/// chain, same namespace, not a copy) and not alongside this CSV — its own install plan has
/// not applied the CRD yet.
fn installed_alongside_blockers(
    csv: &ClusterServiceVersion,
    crd: &CustomResourceDefinition,
    seen: &Observed,
) -> Vec<String> {
    let referenced: Vec<&str> = crd
        .metadata
        .annotations
        .iter()
        .flatten()
        .filter(|(k, _)| k.starts_with(INSTALLED_ALONGSIDE_ANNOTATION_PREFIX))
        .map(|(_, v)| v.as_str())
        .collect();
    let me = format!("{}/{}", namespace(csv), name(csv));
    if referenced.iter().any(|r| *r == me) {
        return Vec::new();
    }
    let ancestors = ancestors(csv, seen);
    let mut blockers: Vec<String> = referenced
        .iter()
        .filter_map(|r| r.split_once('/'))
        .filter(|(ns, _)| *ns == namespace(csv))
        .filter(|(_, n)| ancestors.iter().any(|a| name(a) == *n && !is_copied(a)))
        .map(|(_, n)| n.to_owned())
        .collect();
    blockers.sort();
    blockers.dedup();
    blockers
}

fn api_service_descriptions(
    csv: &ClusterServiceVersion,
) -> (&[ApiServiceDescription], &[ApiServiceDescription]) {
    let defs = csv.spec.api_service_definitions.as_ref();
    (
        defs.and_then(|d| d.owned.as_deref()).unwrap_or_default(),
        defs.and_then(|d| d.required.as_deref()).unwrap_or_default(),
    )
}

fn check_required_api_services(
    csv: &ClusterServiceVersion,
    seen: &Observed,
    check: &mut RequirementCheck,
) {
    let (owned, required) = api_service_descriptions(csv);
    let mut wanted: BTreeMap<String, &ApiServiceDescription> = BTreeMap::new();
    for desc in required {
        let key = desc.api_service_name();
        if owned.iter().any(|o| o.api_service_name() == key) {
            continue;
        }
        wanted.entry(key).or_insert(desc);
    }
    for (api_name, desc) in wanted {
        let mut status = entry(APISERVICE_GROUP, "v1", "APIService", &api_name);
        let present = match seen
            .discovery
            .kind_served(&desc.group, &desc.version, &desc.kind)
        {
            Served::Unknown(err) => {
                check
                    .unknown
                    .push(format!("discovery of {api_name}: {err}"));
                None
            }
            Served::No => Some(false),
            Served::Yes => Some(
                seen.api_service(&api_name)
                    .filter(|a| api_service_available(a))
                    .map(|a| status.uuid = a.metadata.uid.clone())
                    .is_some(),
            ),
        };
        if present == Some(true) {
            check.push(status, None);
        } else {
            status.status = RequirementStatusReason::NotPresent;
            let why = present.map(|_| format!("APIService {api_name} is not available"));
            check.push(status, why);
        }
    }
}

/// Whether the APIService reports `Available=True`.
pub fn api_service_available(api: &APIService) -> bool {
    api.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Available" && c.status == "True")
}

fn check_owned_api_services(
    csv: &ClusterServiceVersion,
    strategy: &crate::api::StrategyDetailsDeployment,
    check: &mut RequirementCheck,
) {
    let (owned, _) = api_service_descriptions(csv);
    for desc in owned {
        let api_name = desc.api_service_name();
        let mut status = entry(APISERVICE_GROUP, "v1", "APIService", &api_name);
        let deployment = desc.deployment_name.as_deref().unwrap_or_default();
        if strategy.deployments.iter().any(|d| d.name == deployment) {
            status.status = RequirementStatusReason::DeploymentFound;
            check.push(status, None);
        } else {
            status.status = RequirementStatusReason::DeploymentNotFound;
            let why = format!(
                "APIService {api_name} names deployment {deployment:?}, which the install strategy lacks"
            );
            check.push(status, Some(why));
        }
    }
}

fn check_native_apis(csv: &ClusterServiceVersion, seen: &Observed, check: &mut RequirementCheck) {
    for gvk in csv.spec.native_apis.iter().flatten() {
        let entry_name = format!("{}.{}", gvk.version, gvk.group);
        let mut status = entry(&gvk.group, &gvk.version, &gvk.kind, &entry_name);
        match seen
            .discovery
            .kind_served(&gvk.group, &gvk.version, &gvk.kind)
        {
            Served::Yes => {
                status.message = "Native API exists".to_owned();
                check.push(status, None);
            }
            Served::No => {
                status.status = RequirementStatusReason::NotPresent;
                status.message = "Native API does not exist".to_owned();
                let why = format!("native API {} {entry_name} is not served", gvk.kind);
                check.push(status, Some(why));
            }
            Served::Unknown(err) => {
                status.status = RequirementStatusReason::NotPresent;
                status.message = "Native API does not exist".to_owned();
                check
                    .unknown
                    .push(format!("discovery of {entry_name}: {err}"));
                check.push(status, None);
            }
        }
    }
}

#[cfg(test)]
mod tests;

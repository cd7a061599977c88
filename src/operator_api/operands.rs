//! Operands: the custom resources of the CRDs an operator's CSV owns (docs/operator-api.md §2).
//!
//! olm-rs holds no right on operand kinds. It reads and labels operands as the operator's own
//! ServiceAccount, the one the CSV grants rights on the CRD's resource, through a watch of
//! their metadata in every namespace the CSV targets (everywhere for an all-namespaces
//! operator or a cluster-scoped CRD). This module decides which watches an Operator needs and
//! which operands still lack its label; the shell (`reconcile::operator::operands`) runs the
//! watches and writes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::rbac::v1::PolicyRule;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;

use super::component::Component;
use crate::api::keys::TARGET_NAMESPACES_ANNOTATION;
use crate::api::{ClusterServiceVersion, CsvPhase};
use crate::k8s::effects::{Body, Write};
use crate::k8s::write::ObjectKey;
use crate::operator_group::TargetNamespaces;

/// One CRD a CSV owns, as its operands are read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedApi {
    /// `<plural>.<group>`.
    pub crd: String,
    /// The version the CSV names (`spec.customresourcedefinitions.owned[].version`).
    pub version: String,
    /// The CSV's ServiceAccount that reads and labels the operands; `None` when the CSV names
    /// no account at all.
    pub account: Option<String>,
}

/// The CRDs `csv` owns and, for each, the account that acts on its operands: the first one
/// the CSV grants `list` on the CRD's resource (in `clusterPermissions`, then `permissions`),
/// else the first Deployment's account. The API server has the last word: an account the
/// CSV grants too little is refused, and that refusal is reported (docs/operator-api.md §5).
pub fn owned_apis(csv: &ClusterServiceVersion) -> Vec<OwnedApi> {
    let strategy = csv.spec.install.spec.as_ref();
    let grants: Vec<(&str, &[PolicyRule])> = strategy
        .into_iter()
        .flat_map(|s| {
            s.cluster_permissions
                .iter()
                .flatten()
                .chain(s.permissions.iter().flatten())
        })
        .map(|p| (p.service_account_name.as_str(), p.rules.as_slice()))
        .collect();
    let fallback = strategy
        .and_then(|s| s.deployments.first())
        .and_then(|d| d.spec.template.spec.as_ref())
        .and_then(|p| p.service_account_name.clone())
        .filter(|a| !a.is_empty())
        .or_else(|| grants.first().map(|(a, _)| (*a).to_owned()))
        .filter(|a| !a.is_empty());
    csv.spec
        .custom_resource_definitions
        .iter()
        .flat_map(|d| d.owned.iter().flatten())
        .map(|d| {
            let (plural, group) = d.name.split_once('.').unwrap_or((&d.name, ""));
            let granted = grants
                .iter()
                .find(|(account, rules)| {
                    !account.is_empty() && rules.iter().any(|r| allows_list(r, group, plural))
                })
                .map(|(account, _)| (*account).to_owned());
            OwnedApi {
                crd: d.name.clone(),
                version: d.version.clone(),
                account: granted.or_else(|| fallback.clone()),
            }
        })
        .collect()
}

fn allows_list(rule: &PolicyRule, group: &str, plural: &str) -> bool {
    let has = |list: Option<&Vec<String>>, want: &str| {
        list.into_iter().flatten().any(|v| v == want || v == "*")
    };
    has(rule.api_groups.as_ref(), group)
        && has(rule.resources.as_ref(), plural)
        && rule.verbs.iter().any(|v| v == "list" || v == "*")
}

/// One watch of operand metadata: a CRD's resource, as one CSV's account sees it, in one
/// namespace or (`namespace: None`) everywhere.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OperandWatch {
    /// The Operator whose label the operands get.
    pub operator: String,
    pub csv_namespace: String,
    pub csv_name: String,
    /// The ServiceAccount (in the CSV's namespace) the watch and the labels act as.
    pub account: String,
    pub crd: String,
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub namespace: Option<String>,
}

impl OperandWatch {
    /// The API the operands are reached through.
    pub fn resource(&self) -> ApiResource {
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(&self.group, &self.version, &self.kind),
            &self.plural,
        )
    }

    /// What the watch reads, for logs and events: `widgets.example.com in ns` or `… in every
    /// namespace`.
    pub fn scope(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{}.{} in namespace {ns}", self.plural, self.group),
            None => format!("{}.{} in every namespace", self.plural, self.group),
        }
    }
}

/// A CSV whose operands join the Operator: its name, targets and owned APIs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperandSource {
    pub namespace: String,
    pub name: String,
    /// `olm.targetNamespaces`; `None` while the CSV is not yet a member of its group.
    pub targets: Option<TargetNamespaces>,
    /// Whether the CSV got past its requirements (phase `Installing` or later): before that
    /// its account's RBAC may not exist yet, and a watch would only be refused.
    pub installed: bool,
    pub apis: Vec<OwnedApi>,
}

impl OperandSource {
    pub fn of(csv: &ClusterServiceVersion) -> Self {
        Self {
            namespace: csv.namespace().unwrap_or_default(),
            name: csv.name_any(),
            targets: csv
                .annotations()
                .get(TARGET_NAMESPACES_ANNOTATION)
                .and_then(|t| TargetNamespaces::from_annotation(t).ok()),
            installed: csv.status.as_ref().is_some_and(|s| {
                matches!(
                    s.phase.as_ref().unwrap_or(&CsvPhase::None),
                    CsvPhase::Installing
                        | CsvPhase::Succeeded
                        | CsvPhase::Failed
                        | CsvPhase::Replacing
                        | CsvPhase::Deleting
                )
            }),
            apis: owned_apis(csv),
        }
    }
}

/// The watches the Operator `operator` needs: for each CSV and owned CRD that exists and
/// serves a version, one per target namespace, or one everywhere for a cluster-scoped CRD or
/// an all-namespaces CSV. A CRD gone, a CSV not yet installed, without targets or without an
/// account: none.
pub fn operand_watches(
    operator: &str,
    sources: &[OperandSource],
    crd: impl Fn(&str) -> Option<Arc<CustomResourceDefinition>>,
) -> BTreeSet<OperandWatch> {
    let mut out = BTreeSet::new();
    for source in sources {
        let Some(targets) = source.targets.as_ref().filter(|_| source.installed) else {
            continue;
        };
        for api in &source.apis {
            let (Some(account), Some(crd)) = (&api.account, crd(&api.crd)) else {
                continue;
            };
            let Some(version) = served_version(&crd, &api.version) else {
                continue;
            };
            let base = OperandWatch {
                operator: operator.to_owned(),
                csv_namespace: source.namespace.clone(),
                csv_name: source.name.clone(),
                account: account.clone(),
                crd: api.crd.clone(),
                group: crd.spec.group.clone(),
                version,
                kind: crd.spec.names.kind.clone(),
                plural: crd.spec.names.plural.clone(),
                namespace: None,
            };
            match targets {
                _ if crd.spec.scope == "Cluster" => {
                    out.insert(base);
                }
                TargetNamespaces::All => {
                    out.insert(base);
                }
                TargetNamespaces::Named(namespaces) => {
                    out.extend(namespaces.iter().map(|ns| OperandWatch {
                        namespace: Some(ns.clone()),
                        ..base.clone()
                    }));
                }
            }
        }
    }
    out
}

/// The version operands are read at: the CSV's if the CRD serves it, else the first served.
fn served_version(crd: &CustomResourceDefinition, wanted: &str) -> Option<String> {
    let served = || crd.spec.versions.iter().filter(|v| v.served);
    served()
        .find(|v| v.name == wanted)
        .or_else(|| served().next())
        .map(|v| v.name.clone())
}

/// One operand as a watch reported it (metadata only: operands' refs carry no conditions).
#[derive(Debug, Clone, PartialEq)]
pub struct Operand {
    pub watch: OperandWatch,
    pub component: Component,
}

impl Operand {
    pub fn new(
        watch: &OperandWatch,
        namespace: Option<String>,
        name: &str,
        labels: BTreeMap<String, String>,
    ) -> Self {
        Self {
            watch: watch.clone(),
            component: Component {
                key: ObjectKey {
                    resource: watch.resource(),
                    namespace,
                    name: name.to_owned(),
                },
                labels,
                owners: Vec::new(),
                conditions: Vec::new(),
            },
        }
    }
}

/// The label patches operands still need, each with the watch (and so the account) it is
/// written as: a merge patch of the one label, for operands that lack it. An operand already
/// labelled is never written again, so labelling wakes each operand's own controller once.
pub fn operand_labels<'a>(key: &str, operands: &'a [Operand]) -> Vec<(&'a OperandWatch, Write)> {
    let mut seen = BTreeSet::new();
    operands
        .iter()
        .filter(|o| !o.component.has_label(key))
        .filter(|o| seen.insert(o.component.key.to_string()))
        .map(|o| {
            let write = Write::MergePatch {
                key: o.component.key.clone(),
                patch: Body::new(json!({"metadata": {"labels": {key: ""}}})),
                resource_version: None,
            };
            (&o.watch, write)
        })
        .collect()
}

#[cfg(test)]
#[path = "operands_tests.rs"]
mod tests;

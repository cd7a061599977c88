//! Checks a Pending CSV passes before it may install (docs/csv-phases.md §3.1 Pending steps 5–7): webhook
//! definitions are valid, no unrelated CSV owns its CRDs, its APIServices are adoptable.

use std::collections::BTreeSet;

use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;

use crate::api::keys::{OWNER_KIND_LABEL, OWNER_LABEL, OWNER_NAMESPACE_LABEL};
use crate::api::{ClusterServiceVersion, CsvPhase};

use super::identity::{CSV_KIND, name, namespace, replaces};
use super::observed::Observed;
use super::replacement::chain_names;
use crate::operator_group::is_copied;

/// Why a CSV's webhook definitions are invalid (docs/certificates.md §8); the text is the
/// status message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum InvalidWebhooks {
    #[error("CSV contains repeated WebhookDescription name")]
    RepeatedName,
    #[error("webhook rules cannot include all groups")]
    AllGroups,
    #[error("webhook rules cannot include the OLM group")]
    OlmGroup,
    #[error(
        "webhook rules cannot include MutatingWebhookConfiguration or ValidatingWebhookConfiguration resources"
    )]
    WebhookConfigurations,
}

/// docs/certificates.md §8.
pub fn validate_webhooks(csv: &ClusterServiceVersion) -> Result<(), InvalidWebhooks> {
    let mut names = BTreeSet::new();
    for desc in csv.spec.webhook_definitions.iter().flatten() {
        if !names.insert(desc.generate_name.as_str()) {
            return Err(InvalidWebhooks::RepeatedName);
        }
        for rule in desc.rules.iter().flatten() {
            let groups = rule.api_groups.as_deref().unwrap_or_default();
            let resources = rule.resources.as_deref().unwrap_or_default();
            if groups.iter().any(|g| g == "*") {
                return Err(InvalidWebhooks::AllGroups);
            }
            if groups.iter().any(|g| g == crate::api::GROUP) {
                return Err(InvalidWebhooks::OlmGroup);
            }
            // OLM checks only the literal kind names; the real plural resource names are
            // rejected too so a webhook cannot intercept its own configuration objects.
            let forbidden = [
                "*",
                "MutatingWebhookConfiguration",
                "ValidatingWebhookConfiguration",
                "mutatingwebhookconfigurations",
                "validatingwebhookconfigurations",
            ];
            if groups.iter().any(|g| g == "admissionregistration.k8s.io")
                && resources.iter().any(|r| forbidden.contains(&r.as_str()))
            {
                return Err(InvalidWebhooks::WebhookConfigurations);
            }
        }
    }
    Ok(())
}

fn owned_crd_names(csv: &ClusterServiceVersion) -> impl Iterator<Item = &str> {
    csv.spec
        .custom_resource_definitions
        .as_ref()
        .and_then(|c| c.owned.as_ref())
        .into_iter()
        .flatten()
        .map(|d| d.name.as_str())
}

/// docs/csv-phases.md §6.3: another CSV of the namespace, outside this one's replacement chain, owns one
/// of its CRDs. Returns that CSV's name and the CRD.
pub fn crd_owner_conflict(
    csv: &ClusterServiceVersion,
    seen: &Observed,
) -> Option<(String, String)> {
    let chain = chain_names(csv, seen);
    let mine: BTreeSet<&str> = owned_crd_names(csv).collect();
    let mut others: Vec<&ClusterServiceVersion> = seen
        .csvs
        .iter()
        .map(|c| c.as_ref())
        .filter(|c| !is_copied(c) && !chain.contains(name(c)))
        .collect();
    others.sort_by(|a, b| name(a).cmp(name(b)));
    others.into_iter().find_map(|other| {
        owned_crd_names(other)
            .find(|crd| mine.contains(crd))
            .map(|crd| (name(other).to_owned(), crd.to_owned()))
    })
}

/// docs/certificates.md §9: an existing APIService is adoptable only when its owner labels name this CSV,
/// the CSV it replaces, or an owner that is itself being replaced or deleted.
pub fn api_service_adoptable(
    csv: &ClusterServiceVersion,
    api: &APIService,
    seen: &Observed,
) -> bool {
    let labels = api.metadata.labels.clone().unwrap_or_default();
    let get = |k: &str| labels.get(k).map(String::as_str).unwrap_or_default();
    let (owner, owner_ns, kind) = (
        get(OWNER_LABEL),
        get(OWNER_NAMESPACE_LABEL),
        get(OWNER_KIND_LABEL),
    );
    if owner.is_empty() || owner_ns.is_empty() || kind != CSV_KIND {
        return false;
    }
    if owner_ns != namespace(csv) {
        return false;
    }
    if owner == name(csv) || replaces(csv) == Some(owner) {
        return true;
    }
    seen.csv(owner).is_some_and(|current| {
        let phase = current
            .status
            .as_ref()
            .map(|s| s.phase())
            .unwrap_or(CsvPhase::None);
        matches!(phase, CsvPhase::Replacing | CsvPhase::Deleting)
    })
}

/// The first owned APIService that exists and cannot be adopted.
pub fn api_service_owner_conflict(csv: &ClusterServiceVersion, seen: &Observed) -> Option<String> {
    let owned = csv
        .spec
        .api_service_definitions
        .as_ref()
        .and_then(|d| d.owned.as_ref());
    owned.into_iter().flatten().find_map(|desc| {
        let api_name = desc.api_service_name();
        seen.api_service(&api_name)
            .filter(|api| !api_service_adoptable(csv, api, seen))
            .map(|_| api_name)
    })
}

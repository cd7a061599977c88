//! Reading the install strategy out of a CSV (docs/api-types.md §2.2) and what makes it invalid.

use std::borrow::Cow;

use crate::api::{ClusterServiceVersion, INSTALL_STRATEGY_DEPLOYMENT, StrategyDetailsDeployment};

/// Why a strategy cannot be used; shown as "install strategy invalid: <this>" with reason
/// `InvalidInstallStrategy`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StrategyError {
    #[error("unrecognized install strategy")]
    Unrecognized { strategy: String },
    #[error("rule invalid: policy rule must have at least one verb")]
    RuleWithoutVerbs { service_account: String },
    #[error("rule invalid: rule cannot apply to both regular resources and non-resource URLs")]
    RuleMixesResourcesAndUrls { service_account: String },
}

/// The `deployment` strategy's details; a `deployment` strategy without `spec` installs
/// nothing (an empty deployment list, as OLM decodes it).
pub fn deployment_strategy(
    csv: &ClusterServiceVersion,
) -> Result<Cow<'_, StrategyDetailsDeployment>, StrategyError> {
    let install = &csv.spec.install;
    if install.strategy != INSTALL_STRATEGY_DEPLOYMENT {
        return Err(StrategyError::Unrecognized {
            strategy: install.strategy.clone(),
        });
    }
    Ok(match &install.spec {
        Some(spec) => Cow::Borrowed(spec),
        None => Cow::Owned(StrategyDetailsDeployment::default()),
    })
}

/// Whether the CSV owns APIServices or webhooks, which need serving certificates (docs/certificates.md §1).
pub fn needs_certificates(csv: &ClusterServiceVersion) -> bool {
    let owned_api_services = csv
        .spec
        .api_service_definitions
        .as_ref()
        .and_then(|d| d.owned.as_ref())
        .is_some_and(|o| !o.is_empty());
    let webhooks = csv
        .spec
        .webhook_definitions
        .as_ref()
        .is_some_and(|w| !w.is_empty());
    owned_api_services || webhooks
}

/// Names of the strategy deployments that serve an owned APIService or a webhook.
pub fn certificate_deployments(csv: &ClusterServiceVersion) -> Vec<String> {
    let mut names: Vec<String> = csv
        .spec
        .api_service_definitions
        .as_ref()
        .and_then(|d| d.owned.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|d| d.deployment_name.clone())
        .chain(
            csv.spec
                .webhook_definitions
                .iter()
                .flatten()
                .filter_map(|w| w.deployment_name.clone()),
        )
        .collect();
    names.sort();
    names.dedup();
    names
}

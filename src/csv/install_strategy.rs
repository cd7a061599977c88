//! The Deployments a CSV's install strategy asks for, built exactly as OLM builds them
//! (docs/csv-phases.md §7.2, docs/api-types.md §6.3): template annotations from the CSV, Subscription config,
//! `OPERATOR_CONDITION_NAME`, `revisionHistoryLimit: 1`, owner labels and the spec hash.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use crate::api::keys::DEPLOYMENT_SPEC_HASH_LABEL;
use crate::api::{ClusterServiceVersion, StrategyDeploymentSpec, SubscriptionConfig};
use crate::olm_hash::{
    GoJsonError, deployment_spec_hash, merge_csv_annotations, set_operator_condition_name,
    set_revision_history_limit,
};

use crate::certs::ServiceName;

use super::config_overrides::apply_config;
use super::identity::{
    has_owner_labels, is_owned_by, managed_owner_labels, name, namespace, owner_reference,
};
use super::strategy::{StrategyError, certificate_deployments, deployment_strategy};
use crate::certs::deployment::add_cert_volumes;

/// One Deployment as it must exist.
#[derive(Clone, Debug, PartialEq)]
pub struct DesiredDeployment {
    pub name: String,
    /// The full object to apply (apiVersion, kind, metadata, spec).
    pub deployment: Deployment,
    /// `olm.deployment-spec-hash`.
    pub spec_hash: String,
    /// Serves an owned APIService or a webhook (docs/certificates.md §5 changes applied when its CA hash
    /// was known).
    pub serves_certificates: bool,
}

/// Why the desired Deployments cannot be computed ("calculated deployment install is bad").
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    #[error(transparent)]
    Strategy(#[from] StrategyError),
    #[error("deployment {deployment}: {source}")]
    Encoding {
        deployment: String,
        #[source]
        source: GoJsonError,
    },
    #[error("deployment {deployment}: {message}")]
    Shape { deployment: String, message: String },
}

/// Every strategy Deployment, in strategy order, without certificate changes.
pub fn desired_deployments(
    csv: &ClusterServiceVersion,
    config: Option<&SubscriptionConfig>,
) -> Result<Vec<DesiredDeployment>, BuildError> {
    desired_deployments_with_certs(csv, config, &BTreeMap::new())
}

/// Every strategy Deployment, in strategy order; a cert deployment named in `ca_hashes` gets
/// the docs/certificates.md §5 changes with that `olmcahash` before anything else (docs/csv-phases.md §7.2), so the
/// spec hash covers them.
pub fn desired_deployments_with_certs(
    csv: &ClusterServiceVersion,
    config: Option<&SubscriptionConfig>,
    ca_hashes: &BTreeMap<String, String>,
) -> Result<Vec<DesiredDeployment>, BuildError> {
    let strategy = deployment_strategy(csv)?;
    let cert_deployments = certificate_deployments(csv);
    strategy
        .deployments
        .iter()
        .map(|d| {
            let serves = cert_deployments.contains(&d.name);
            let ca_hash = ca_hashes.get(&d.name).filter(|_| serves);
            let mut desired = build_one(csv, d, config, ca_hash.map(String::as_str))?;
            desired.serves_certificates = serves;
            Ok(desired)
        })
        .collect()
}

fn build_one(
    csv: &ClusterServiceVersion,
    entry: &StrategyDeploymentSpec,
    config: Option<&SubscriptionConfig>,
    ca_hash: Option<&str>,
) -> Result<DesiredDeployment, BuildError> {
    let deployment = entry.name.clone();
    let encoding = |source| BuildError::Encoding {
        deployment: deployment.clone(),
        source,
    };
    let shape = |err: serde_json::Error| BuildError::Shape {
        deployment: deployment.clone(),
        message: err.to_string(),
    };
    // Step 1: certificate volumes, mounts and `olmcahash` (docs/certificates.md §5).
    let mut value = match ca_hash {
        Some(hash) => {
            let mut spec = entry.spec.clone();
            let secret = ServiceName::for_deployment(&entry.name, namespace(csv)).secret_name();
            add_cert_volumes(&mut spec, &secret, hash);
            serde_json::to_value(&spec).map_err(shape)?
        }
        None => serde_json::to_value(&entry.spec).map_err(shape)?,
    };
    // Step 2: the CSV's annotations on top of the template's own.
    let csv_annotations = csv.metadata.annotations.clone().unwrap_or_default();
    merge_csv_annotations(&mut value, &csv_annotations).map_err(encoding)?;
    // Step 3: Subscription config.
    let mut deployment_annotations = BTreeMap::new();
    if let Some(config) = config {
        let mut spec: DeploymentSpec = serde_json::from_value(value).map_err(shape)?;
        deployment_annotations = apply_config(&mut spec, config);
        value = serde_json::to_value(&spec).map_err(shape)?;
    }
    // Steps 4 and 5.
    set_operator_condition_name(&mut value, name(csv)).map_err(encoding)?;
    set_revision_history_limit(&mut value).map_err(encoding)?;
    let spec_hash = deployment_spec_hash(&value).map_err(encoding)?;
    let spec: DeploymentSpec = serde_json::from_value(value).map_err(shape)?;

    let mut labels = entry.label.clone().unwrap_or_default();
    labels.extend(managed_owner_labels(csv));
    labels.insert(DEPLOYMENT_SPEC_HASH_LABEL.to_owned(), spec_hash.clone());
    let object = Deployment {
        metadata: ObjectMeta {
            name: Some(entry.name.clone()),
            namespace: Some(namespace(csv).to_owned()),
            labels: Some(labels),
            annotations: (!deployment_annotations.is_empty()).then_some(deployment_annotations),
            owner_references: Some(vec![owner_reference(csv)]),
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    };
    Ok(DesiredDeployment {
        name: entry.name.clone(),
        deployment: object,
        spec_hash,
        serves_certificates: false,
    })
}

/// docs/csv-phases.md §7.1 step 3: Deployments labelled for this CSV and owned by it whose names the
/// strategy no longer lists (a Deployment renamed between versions, or dropped).
pub fn orphaned_deployments<'a>(
    csv: &ClusterServiceVersion,
    desired: &[DesiredDeployment],
    live: impl IntoIterator<Item = &'a Deployment>,
) -> Vec<String> {
    let mut out: Vec<String> = live
        .into_iter()
        .filter(|d| has_owner_labels(csv, d.metadata.labels.as_ref()))
        .filter(|d| is_owned_by(csv, d.metadata.owner_references.as_ref()))
        .filter_map(|d| d.metadata.name.clone())
        .filter(|n| !desired.iter().any(|w| &w.name == n))
        .collect();
    out.sort();
    out
}

/// The template annotations OLM expects on every live Deployment: all of the CSV's annotations.
pub fn expected_template_annotations(csv: &ClusterServiceVersion) -> BTreeMap<String, String> {
    csv.metadata.annotations.clone().unwrap_or_default()
}

/// A Deployment spec as JSON (for comparisons).
pub fn spec_value(deployment: &Deployment) -> Value {
    deployment
        .spec
        .as_ref()
        .and_then(|s| serde_json::to_value(s).ok())
        .unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests;

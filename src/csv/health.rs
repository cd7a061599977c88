//! "Is it installed?" — the Deployment part of OLM's health evaluation (docs/csv-phases.md §8). The
//! APIService and webhook part is [`super::certs::check::cert_health`].

use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;

use crate::api::ClusterServiceVersion;
use crate::api::keys::DEPLOYMENT_SPEC_HASH_LABEL;

use super::drift::first_difference;
use super::identity::has_owner_labels;
use super::install_strategy::{DesiredDeployment, expected_template_annotations, spec_value};

/// The outcome for all strategy Deployments, first problem wins.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Health {
    Healthy,
    /// A Deployment is missing or still rolling out; the message says which and why.
    NotReady(String),
    /// The spec hash or template annotations differ from what the CSV wants: reinstall.
    Changed(String),
    /// The rollout exceeded its progress deadline: the install failed.
    Unrecoverable(String),
}

/// Evaluates every desired Deployment against the live ones carrying this CSV's owner labels.
pub fn evaluate(
    csv: &ClusterServiceVersion,
    desired: &[DesiredDeployment],
    live: &[Arc<Deployment>],
) -> Health {
    let annotations = expected_template_annotations(csv);
    for want in desired {
        let Some(found) = live.iter().map(Arc::as_ref).find(|d| {
            d.metadata.name.as_deref() == Some(want.name.as_str())
                && has_owner_labels(csv, d.metadata.labels.as_ref())
        }) else {
            return Health::NotReady(format!("missing deployment with name={}", want.name));
        };
        match rollout(found) {
            Rollout::Done => {}
            Rollout::Waiting(why) => {
                return Health::NotReady(format!(
                    "waiting for deployment {} to become ready: {why}",
                    want.name
                ));
            }
            Rollout::TimedOut(why) => {
                return Health::Unrecoverable(format!(
                    "deployment {} not ready before timeout: {why}",
                    want.name
                ));
            }
        }
        let template = found
            .spec
            .as_ref()
            .and_then(|s| s.template.metadata.as_ref())
            .and_then(|m| m.annotations.as_ref());
        if !annotations.is_empty() && template.is_none() {
            return Health::Changed("no annotations found on deployment".to_owned());
        }
        for (key, value) in &annotations {
            if template.and_then(|t| t.get(key)) != Some(value) {
                return Health::Changed(format!(
                    "annotations on deployment don't match. couldn't find {key}: {value}"
                ));
            }
        }
        let live_hash = found
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(DEPLOYMENT_SPEC_HASH_LABEL));
        match live_hash {
            None => {
                return Health::Changed(
                    "deployment doesn't have a spec hash, update it".to_owned(),
                );
            }
            Some(hash) if *hash != want.spec_hash => {
                return Health::Changed(format!(
                    "deployment changed old hash={hash}, new hash={}",
                    want.spec_hash
                ));
            }
            Some(_) => {}
        }
    }
    Health::Healthy
}

enum Rollout {
    Done,
    Waiting(String),
    TimedOut(String),
}

/// OLM's Deployment status viewer: observed generation, progress deadline, old replicas,
/// `Available`. `Available` (not "all replicas ready") is what counts, so a Deployment within
/// its `maxUnavailable` budget is healthy.
fn rollout(deployment: &Deployment) -> Rollout {
    let name = deployment.metadata.name.as_deref().unwrap_or_default();
    let generation = deployment.metadata.generation.unwrap_or(0);
    let status = deployment.status.clone().unwrap_or_default();
    if generation > status.observed_generation.unwrap_or(0) {
        return Rollout::Waiting("waiting for deployment spec update to be observed".to_owned());
    }
    let conditions = status.conditions.unwrap_or_default();
    let progress_deadline = conditions.iter().any(|c| {
        c.type_ == "Progressing" && c.reason.as_deref() == Some("ProgressDeadlineExceeded")
    });
    if progress_deadline {
        return Rollout::TimedOut(format!(
            "deployment \"{name}\" exceeded its progress deadline"
        ));
    }
    let replicas = status.replicas.unwrap_or(0);
    let updated = status.updated_replicas.unwrap_or(0);
    if replicas > updated {
        return Rollout::Waiting(format!(
            "{} old replicas are pending termination",
            replicas - updated
        ));
    }
    match conditions.iter().find(|c| c.type_ == "Available") {
        Some(c) if c.status == "True" => Rollout::Done,
        Some(c) => Rollout::Waiting(format!(
            "deployment \"{name}\" not available: {}",
            c.message.as_deref().unwrap_or_default()
        )),
        None => Rollout::Waiting(format!("deployment \"{name}\" not available")),
    }
}

/// Strategy Deployments whose live object differs in a field olm-rs sets (docs/csv-phases.md §11 item 6), with
/// the first differing path. Missing Deployments are not listed (health handles them).
pub fn drifted<'a>(
    desired: &'a [DesiredDeployment],
    live: &[Arc<Deployment>],
) -> Vec<(&'a DesiredDeployment, String)> {
    desired
        .iter()
        .filter_map(|want| {
            let found = live
                .iter()
                .find(|d| d.metadata.name.as_deref() == Some(want.name.as_str()))?;
            let path = first_difference(&spec_value(&want.deployment), &spec_value(found))?;
            Some((want, format!("spec{path}")))
        })
        .collect()
}

#[cfg(test)]
mod tests;

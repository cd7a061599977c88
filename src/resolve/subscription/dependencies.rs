//! The dependencies a Subscription's plan installs with its bundle (docs/install-plans.md §5,
//! docs/install-plans.md §5.3): each dependency bundle's steps, and a Subscription for
//! each package no Subscription of the namespace covers yet, so `kubectl get sub` shows every
//! installed operator and the dependency follows its own channel afterwards.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::json;

use crate::api::BundleLookup;
use crate::api::keys::{MANAGED_LABEL, MANAGED_LABEL_VALUE};
use crate::plan::{
    BundleSource, PlannedStep, StepObject, bundle_lookup, bundle_source, bundle_steps,
};
use crate::resolve::outcome::{Dependency, Target};

use super::UnplannableBundle;
use crate::resolve::input::NamespaceInput;

/// `<package>-<channel>-<catalogName>-<catalogNamespace>` (OLM's name for a dependency
/// Subscription).
pub fn dependency_subscription_name(dep: &Dependency) -> String {
    format!(
        "{}-{}-{}-{}",
        dep.package, dep.channel, dep.catalog.name, dep.catalog.namespace
    )
}

/// Steps for every dependency of `target`, and a bundle lookup for each dependency known only
/// by its image (its steps are appended once it is pulled), or why one cannot be installed.
pub fn dependency_steps(
    input: &NamespaceInput<'_>,
    target: &Target,
    now: &Time,
) -> Result<(Vec<PlannedStep>, Vec<BundleLookup>), UnplannableBundle> {
    let mut steps = Vec::new();
    let mut lookups = Vec::new();
    for dep in &target.dependencies {
        // A Subscription of the namespace already installs this package: it is its business.
        if input
            .subscriptions
            .iter()
            .any(|s| s.spec.name == dep.package)
        {
            continue;
        }
        let index = input
            .catalog(&dep.catalog)
            .and_then(|c| c.index())
            .ok_or_else(|| UnplannableBundle::CatalogUnreadable {
                catalog: dep.catalog.clone(),
            })?;
        let bundle = index.bundle(&dep.package, &dep.bundle).ok_or_else(|| {
            UnplannableBundle::DependencyMissing {
                bundle: dep.bundle.clone(),
                required_by: dep.required_by.clone(),
                catalog: dep.catalog.clone(),
            }
        })?;
        let of_dependency = |source: UnplannableBundle| UnplannableBundle::Dependency {
            bundle: dep.bundle.clone(),
            required_by: dep.required_by.clone(),
            source: Box::new(source),
        };
        match bundle_source(bundle, &dep.catalog).map_err(|e| of_dependency(e.into()))? {
            BundleSource::Inline(content) => steps.extend(
                bundle_steps(&content, input.namespace, None)
                    .map_err(|e| of_dependency(e.into()))?,
            ),
            BundleSource::Image { image, properties } => lookups.push(bundle_lookup(
                &dep.bundle,
                &image,
                &dep.catalog,
                None,
                &properties,
                now,
            )),
        }
        steps.push(subscription_step(input.namespace, dep)?);
    }
    Ok((steps, lookups))
}

fn subscription_step(namespace: &str, dep: &Dependency) -> Result<PlannedStep, UnplannableBundle> {
    let name = dependency_subscription_name(dep);
    let manifest = json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "Subscription",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {MANAGED_LABEL: MANAGED_LABEL_VALUE},
        },
        "spec": {
            "source": dep.catalog.name,
            "sourceNamespace": dep.catalog.namespace,
            "name": dep.package,
            "channel": dep.channel,
            "startingCSV": dep.bundle,
            "installPlanApproval": "Automatic",
        },
    });
    let object = StepObject::from_manifest(&dep.bundle, 0, manifest)?;
    Ok(PlannedStep {
        resolving: dep.bundle.clone(),
        catalog: dep.catalog.clone(),
        object,
    })
}

#[cfg(test)]
#[path = "dependencies_tests.rs"]
mod tests;

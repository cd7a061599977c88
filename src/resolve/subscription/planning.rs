//! From a Subscription's target to the plan that installs it (pure): the draft, the marks a
//! downgrade or a rollback puts on the CSV it installs, and whether the CRD rule lets it go back
//! (docs/upgrades.md).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::{Approval, CatalogRef, Subscription};
use crate::plan::downgrade_safety::{
    ClusterCrd, DowngradeRefused, check_downgrade, check_downgrade_apis,
};
use crate::plan::{
    BundleSource, ContentError, PlanDraft, PlanError, ServedSubscription, bundle_lookup,
    bundle_source, bundle_steps, order_plan,
};

use super::super::input::NamespaceInput;
use super::super::outcome::{Target, Why};
use super::super::version_request::DOWNGRADED_FROM;
use super::dependencies;

/// Why the bundle a Subscription resolved to cannot be planned; the text is the message of its
/// `BundleUnpackFailed` condition.
#[derive(Debug, thiserror::Error)]
pub enum UnplannableBundle {
    #[error("catalog source {catalog} is no longer readable")]
    CatalogUnreadable { catalog: CatalogRef },
    #[error(
        "bundle {bundle} is listed in channel {channel:?} of package {package:?} in catalog {catalog} but the catalog has no such bundle"
    )]
    BundleMissing {
        bundle: String,
        channel: String,
        package: String,
        catalog: CatalogRef,
    },
    #[error(transparent)]
    Content(#[from] ContentError),
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error("dependency {bundle} of {required_by} is not in catalog {catalog}")]
    DependencyMissing {
        bundle: String,
        required_by: String,
        catalog: CatalogRef,
    },
    #[error("dependency {bundle} of {required_by}: {source}")]
    Dependency {
        bundle: String,
        required_by: String,
        #[source]
        source: Box<UnplannableBundle>,
    },
}

/// The plan installing each target for its Subscription (one, or the members of a
/// co-upgrade), or why a bundle cannot be installed. A bundle known only by its image gets a
/// bundle lookup instead of steps: the InstallPlan controller pulls it and appends its steps.
pub(super) fn plan_for(
    input: &NamespaceInput<'_>,
    targets: &[(&Subscription, &Target)],
    generation: i64,
    now: &Time,
) -> Result<PlanDraft, UnplannableBundle> {
    let mut steps = Vec::new();
    let mut lookups = Vec::new();
    let mut subscriptions = Vec::new();
    for (sub, target) in targets {
        let index = input
            .catalog(&target.catalog)
            .and_then(|c| c.index())
            .ok_or_else(|| UnplannableBundle::CatalogUnreadable {
                catalog: target.catalog.clone(),
            })?;
        let bundle = index
            .bundle(&target.package, &target.bundle)
            .ok_or_else(|| UnplannableBundle::BundleMissing {
                bundle: target.bundle.clone(),
                channel: target.channel.clone(),
                package: target.package.clone(),
                catalog: target.catalog.clone(),
            })?;
        match bundle_source(bundle, &target.catalog)? {
            BundleSource::Inline(content) => {
                let mut planned =
                    bundle_steps(&content, input.namespace, target.replaces.as_deref())?;
                if matches!(target.why, Why::Downgrade | Why::Rollback)
                    && let Some(replaced) = &target.replaces
                {
                    mark_downgrade(&mut planned, &target.bundle, replaced);
                }
                steps.extend(planned);
            }
            BundleSource::Image { image, properties } => lookups.push(bundle_lookup(
                &target.bundle,
                &image,
                &target.catalog,
                target.replaces.as_deref(),
                &properties,
                now,
            )),
        }
        let (dependency_steps, dependency_lookups) =
            dependencies::dependency_steps(input, target, now)?;
        steps.extend(dependency_steps);
        lookups.extend(dependency_lookups);
        subscriptions.push(ServedSubscription {
            name: sub.metadata.name.clone().unwrap_or_default(),
            uid: sub.metadata.uid.clone().unwrap_or_default(),
            bundle: target.bundle.clone(),
            replaces: target.replaces.clone(),
            catalog: target.catalog.to_string(),
        });
    }
    // A rollback restores what was approved before: it needs no approval (docs/upgrades.md §3).
    let approval = match targets.first() {
        Some((_, target)) if target.why == Why::Rollback => Approval::Automatic,
        Some((sub, _)) => sub.spec.effective_approval(),
        None => Approval::Automatic,
    };
    Ok(PlanDraft {
        namespace: input.namespace.to_owned(),
        subscriptions,
        approval,
        generation,
        steps: order_plan(steps),
        lookups,
    })
}

/// Marks the CSV a downgrade installs with the CSV it replaces (`DOWNGRADED_FROM`): the newer CSV
/// still names the older one in its own `spec.replaces`, and the mark says which of the two
/// replaces the other (csv/replacement.rs, docs/upgrades.md).
fn mark_downgrade(steps: &mut [crate::plan::PlannedStep], bundle: &str, replaced: &str) {
    for step in steps
        .iter_mut()
        .filter(|s| s.object.kind == "ClusterServiceVersion" && s.object.name == bundle)
    {
        if let Some(meta) = step
            .object
            .manifest
            .get_mut("metadata")
            .and_then(|m| m.as_object_mut())
        {
            let annotations = meta
                .entry("annotations")
                .or_insert_with(|| serde_json::json!({}));
            if let Some(a) = annotations.as_object_mut() {
                a.insert(DOWNGRADED_FROM.to_owned(), replaced.into());
            }
        }
    }
}

/// Whether the downgrade to `target` keeps every CRD readable (docs/upgrades.md); a bundle the
/// catalog cannot show is left to planning, which reports it.
pub(super) fn downgrade_allowed(
    input: &NamespaceInput<'_>,
    target: &Target,
    crds: &[ClusterCrd],
) -> Result<(), DowngradeRefused> {
    let Some(bundle) = input
        .catalog(&target.catalog)
        .and_then(|c| c.index())
        .and_then(|index| index.bundle(&target.package, &target.bundle))
    else {
        return Ok(());
    };
    match bundle_source(bundle, &target.catalog) {
        Ok(BundleSource::Inline(content)) => {
            check_downgrade(&target.bundle, &content.manifests, crds)
        }
        Ok(BundleSource::Image { properties, .. }) => {
            check_downgrade_apis(&target.bundle, &properties, crds)
        }
        Err(_) => Ok(()),
    }
}

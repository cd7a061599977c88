//! The bundle lookups of a plan (shell): pull the bundle images `plan::lookups` asks for, and
//! hand each result back to it (docs/install-plans.md §9, without Jobs). The plan's status is
//! updated from the report by `plan::decision::PlanSync::lookups_worked`.

use jiff::Timestamp;

use crate::api::BundleLookup;
use crate::plan::image_bundle::lookup_catalog;
use crate::plan::lookups::{LookupsWorked, PulledContent};
use crate::plan::unpack::{UnpackAnnotationError, UnpackPolicy};
use crate::reconcile::Context;

/// Works every lookup once, pulling the bundles whose time has come.
pub async fn work_lookups(
    ctx: &Context,
    namespace: &str,
    lookups: &[BundleLookup],
    policy: Result<UnpackPolicy, UnpackAnnotationError>,
    now: Timestamp,
) -> LookupsWorked {
    let mut worked = LookupsWorked::default();
    for lookup in lookups {
        let Some(pull) = worked.attempt(lookup.clone(), &policy, now) else {
            continue;
        };
        let catalog = lookup_catalog(&pull.lookup);
        let credentials = ctx.bundle_images.credentials(&ctx.client, &catalog).await;
        let pulled = ctx
            .bundle_images
            .pull(&pull.lookup.path, &credentials, pull.within)
            .await
            .map(|bundle| PulledContent {
                manifests: bundle.manifests(),
                digest: bundle.digest.clone(),
            });
        worked.pulled(pull, pulled, namespace, now);
    }
    worked
}

//! The bundle lookups of a plan (shell): pull the bundle images `plan::lookups` asks for, and
//! hand each result back to it (docs/install-plans.md §9, without Jobs). A pull the node may
//! succeed at where the controller failed goes to an unpack pod (`unpack_pod`;
//! docs/bundle-images.md, "When only the node can pull"). The plan's status is updated from
//! the report by `plan::decision::PlanSync::lookups_worked`.

use jiff::Timestamp;

use super::unpack_pod;
use crate::api::BundleLookup;
use crate::plan::image_bundle::lookup_catalog;
use crate::plan::lookups::{LookupsWorked, PulledContent, in_pod, node_may_pull};
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
        let pods = unpack_pod::enabled(ctx, &lookup.path);
        let Some(pull) = worked.attempt(lookup.clone(), &policy, now) else {
            continue;
        };
        let catalog = lookup_catalog(&pull.lookup);
        // An unpack pod already works on it: in-process is tried again on the next attempt.
        if let Some(options) = pods
            && in_pod(&pull.lookup)
        {
            unpack_pod::work(
                ctx,
                options,
                pull,
                &catalog,
                None,
                namespace,
                now,
                &mut worked,
            )
            .await;
            continue;
        }
        let credentials = ctx.bundle_images.credentials(&ctx.client, &catalog).await;
        let pulled = ctx
            .bundle_images
            .pull(&pull.lookup.path, &credentials, pull.within)
            .await
            .map(|bundle| PulledContent {
                manifests: bundle.manifests(),
                digest: bundle.digest.clone(),
            });
        match (pods, pulled) {
            (Some(options), Err(failure)) if node_may_pull(&failure) => {
                let cause = failure.message;
                unpack_pod::work(
                    ctx,
                    options,
                    pull,
                    &catalog,
                    Some(&cause),
                    namespace,
                    now,
                    &mut worked,
                )
                .await;
            }
            (_, pulled) => worked.pulled(pull, pulled, namespace, now),
        }
    }
    worked
}

//! The bundle lookups of a plan (shell): pull each bundle image whose time has come and report
//! the steps of those pulled and the failures (docs/install-plans.md §9, without Jobs); the
//! plan's status is updated from the report by `plan::decision::PlanSync::lookups_worked`.

use std::time::Duration;

use jiff::Timestamp;

use crate::api::BundleLookup;
use crate::api::install_plan::bundle_lookup_reason as reason;
use crate::plan::decision::{LookupFailure, LookupsWorked};
use crate::plan::image_bundle::{image_bundle_steps, lookup_catalog, lookup_content};
use crate::plan::unpack::{
    DEFAULT_FAILED_RETRY, NextAttempt, PullFailure, UnpackPolicy, lookup_failure, next_attempt,
    record_failure,
};
use crate::plan::wire_step;
use crate::reconcile::Context;

/// Works every lookup once, pulling the bundles whose time has come (the timing is
/// `plan::unpack`'s). A lookup whose bundle was pulled is dropped and the bundle's steps
/// reported; nothing from a bundle that did not pull completely (or whose content cannot be
/// planned) is.
pub async fn work_lookups(
    ctx: &Context,
    namespace: &str,
    lookups: &[BundleLookup],
    policy: Result<UnpackPolicy, String>,
    now: Timestamp,
) -> LookupsWorked {
    let mut worked = LookupsWorked::default();
    let mut remaining = Vec::with_capacity(lookups.len());
    let requeue = |d: Duration, w: &mut LookupsWorked| {
        w.requeue = Some(w.requeue.map_or(d, |r: Duration| r.min(d)));
    };
    for lookup in lookups {
        let mut lookup = lookup.clone();
        let policy = match &policy {
            Ok(policy) => *policy,
            Err(message) => {
                let failure = PullFailure {
                    reason: reason::PULL_FAILED,
                    message: message.clone(),
                    transient: false,
                };
                let fallback = UnpackPolicy {
                    timeout: None,
                    failed_retry: DEFAULT_FAILED_RETRY,
                };
                let (after, changed) = record_failure(&mut lookup, &failure, &fallback, now);
                if changed {
                    worked.failures.push(LookupFailure {
                        bundle: lookup.identifier.clone(),
                        reason: failure.reason,
                        message: failure.message,
                    });
                }
                requeue(after, &mut worked);
                remaining.push(lookup);
                continue;
            }
        };
        let (next, changed) = next_attempt(&mut lookup, &policy, now);
        let within = match next {
            NextAttempt::Wait(after) => {
                // Changed while waiting: it has just passed its deadline.
                if changed && let Some((_, message)) = lookup_failure(&lookup) {
                    worked.failures.push(LookupFailure {
                        bundle: lookup.identifier.clone(),
                        reason: reason::DEADLINE_EXCEEDED,
                        message: message.to_owned(),
                    });
                }
                requeue(after, &mut worked);
                remaining.push(lookup);
                continue;
            }
            NextAttempt::PullNow { within } => within,
        };
        let catalog = lookup_catalog(&lookup);
        let credentials = ctx.bundle_images.credentials(&ctx.client, &catalog).await;
        let pulled = ctx
            .bundle_images
            .pull(&lookup.path, &credentials, within)
            .await;
        let failure = match pulled {
            Ok(bundle) => {
                let content = lookup_content(&lookup, bundle.manifests());
                let replaces = Some(lookup.replaces.as_str()).filter(|r| !r.is_empty());
                match image_bundle_steps(
                    &content,
                    namespace,
                    replaces,
                    &lookup.path,
                    &bundle.digest,
                ) {
                    Ok(steps)
                        if steps.first().map(|s| s.object.name.as_str())
                            == Some(lookup.identifier.as_str()) =>
                    {
                        worked.steps.extend(steps.iter().map(wire_step));
                        if !worked.catalog_sources.contains(&catalog.name) {
                            worked.catalog_sources.push(catalog.name.clone());
                        }
                        worked.pulled.push(lookup.identifier.clone());
                        continue;
                    }
                    Ok(steps) => PullFailure {
                        reason: reason::INVALID_BUNDLE_CONTENT,
                        message: format!(
                            "bundle image {} holds the ClusterServiceVersion {}, but catalog {catalog} lists it as {}",
                            lookup.path,
                            steps
                                .first()
                                .map(|s| s.object.name.as_str())
                                .unwrap_or_default(),
                            lookup.identifier
                        ),
                        transient: false,
                    },
                    Err(error) => PullFailure {
                        reason: reason::INVALID_BUNDLE_CONTENT,
                        message: format!("bundle image {}: {error}", lookup.path),
                        transient: false,
                    },
                }
            }
            Err(failure) => failure,
        };
        let (after, changed) = record_failure(&mut lookup, &failure, &policy, now);
        if changed && !failure.transient {
            worked.failures.push(LookupFailure {
                bundle: lookup.identifier.clone(),
                reason: failure.reason,
                message: failure.message,
            });
        }
        requeue(after, &mut worked);
        remaining.push(lookup);
    }
    worked.remaining = remaining;
    worked
}

//! The bundle lookups of a plan (shell): pull each bundle image whose time has come, append the
//! steps of those pulled, record the failures (docs/install-plans.md §9, without Jobs).

use std::time::Duration;

use jiff::Timestamp;

use crate::api::install_plan::bundle_lookup_reason as reason;
use crate::api::{InstallPlanStatus, OperatorGroup};
use crate::plan::image_bundle::{image_bundle_steps, lookup_catalog, lookup_content};
use crate::plan::unpack::{
    DEFAULT_FAILED_RETRY, NextAttempt, PullFailure, UnpackPolicy, lookup_failure, next_attempt,
    record_failure, unpack_policy,
};
use crate::plan::wire_step;
use crate::reconcile::Context;
use crate::reconcile::catalog_source::spec_check::parse_go_duration;

/// What working the lookups did.
#[derive(Debug, Default)]
pub struct LookupsWorked {
    /// When to look again (a lookup still pending or failed).
    pub requeue: Option<Duration>,
    /// Failures newly recorded, for events: (bundle, reason, message).
    pub failures: Vec<(String, &'static str, String)>,
    /// Bundles whose steps were appended.
    pub pulled: Vec<String>,
}

/// The unpack timing of the namespace: its OperatorGroup's annotations (when it has exactly
/// one) over `--bundle-unpack-timeout`.
pub fn namespace_policy(ctx: &Context, groups: &[OperatorGroup]) -> Result<UnpackPolicy, String> {
    let annotations = match groups {
        [one] => one.metadata.annotations.as_ref(),
        _ => None,
    };
    unpack_policy(
        annotations,
        ctx.bundle_images.options.unpack_timeout,
        parse_go_duration,
    )
}

/// Works every lookup of `status` once. A lookup whose bundle was pulled is removed and the
/// bundle's steps appended to `status.plan`; nothing from a bundle that did not pull completely
/// (or whose content cannot be planned) reaches the plan.
pub async fn work_lookups(
    ctx: &Context,
    namespace: &str,
    status: &mut InstallPlanStatus,
    policy: Result<UnpackPolicy, String>,
    now: Timestamp,
) -> LookupsWorked {
    let mut worked = LookupsWorked::default();
    let mut lookups = status.bundle_lookups.take().unwrap_or_default();
    let mut remaining = Vec::with_capacity(lookups.len());
    let requeue = |d: Duration, w: &mut LookupsWorked| {
        w.requeue = Some(w.requeue.map_or(d, |r: Duration| r.min(d)));
    };
    for mut lookup in lookups.drain(..) {
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
                    worked.failures.push((
                        lookup.identifier.clone(),
                        failure.reason,
                        failure.message,
                    ));
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
                    worked.failures.push((
                        lookup.identifier.clone(),
                        reason::DEADLINE_EXCEEDED,
                        message.to_owned(),
                    ));
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
                        let plan = status.plan.get_or_insert_with(Vec::new);
                        plan.extend(steps.iter().map(wire_step));
                        if !status.catalog_sources.contains(&catalog.name) {
                            status.catalog_sources.push(catalog.name.clone());
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
            worked
                .failures
                .push((lookup.identifier.clone(), failure.reason, failure.message));
        }
        requeue(after, &mut worked);
        remaining.push(lookup);
    }
    status.bundle_lookups = Some(remaining).filter(|l| !l.is_empty());
    worked
}

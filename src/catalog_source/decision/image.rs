//! An image catalog served in-process by default (docs/catalog-images.md §3–§7), decided once
//! per sync: whether the memo's fallback routes it to its registry pod, what the in-process
//! check found, the status, and the memos after. What to observe follows from the memos alone
//! ([`to_observe`]): a check runs when one is due, the registry is observed while a registry
//! pod serves. A check that fails in a way the node may not meet is remembered as a fallback,
//! and the next sync — which then observes the registry — serves the catalog from its pod.

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use kube::{Resource, ResourceExt};

use crate::api::CatalogSource;
use crate::api::event::ObjectEvent;
use crate::catalog::CatalogIndex;
use crate::catalog_source::fallback::{self, Fallback, Route};
use crate::catalog_source::in_process::{self as pure, CheckOutcome, Served, Step};
use crate::catalog_source::memo::Memo;
use crate::catalog_source::registry::{self, RegistryObserved, RegistryWrites};
use crate::catalog_source::serving::SERVING_ANNOTATION;
use crate::catalog_source::spec::{self, Source};
use crate::k8s::effects::Effects;

use super::{Decision, Link, Observed, Outcome, RegistryFailure, RegistrySeen, SourceSeen};

/// How soon a catalog whose check just fell back is synced again, to be served by its
/// registry pod (the status write of this sync also brings it back).
pub const TAKE_OVER: Duration = Duration::from_secs(1);

/// What was observed of an image catalog served in-process by default.
pub struct InProcessSeen<'a> {
    /// What the check [`to_observe`] asked for found.
    pub check: Option<CheckSeen>,
    /// The registry, observed while [`to_observe`] says a registry pod serves.
    pub registry: Option<RegistrySeen<'a>>,
    /// The catalog's registry objects left from pod mode (owned by it).
    pub leftovers: &'a RegistryObserved,
}

/// What an in-process check found: the image's digest and, when new, its content.
#[derive(Debug, Clone)]
pub struct CheckSeen {
    pub outcome: CheckOutcome,
    /// What is served after the check: the memo's, unless new content was loaded.
    pub served: Option<Served>,
    /// The content loaded (with [`CheckOutcome::Swapped`]).
    pub content: Option<Arc<CatalogIndex>>,
    /// Pull secrets that could not be used.
    pub warnings: Vec<ObjectEvent>,
}

/// The I/O a sync of an in-process image catalog runs before it decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToObserve {
    /// Run the in-process check: the image's digest, and its content when new.
    pub check: bool,
    /// Observe the registry objects (and the digest, when a poll is due): a pod serves.
    pub registry: bool,
}

/// What to observe, from the memos: a check when one is due, or while a fallback waits for its
/// next try; the registry while a registry pod serves.
pub fn to_observe(cs: &CatalogSource, memo: &Memo, now: Timestamp) -> ToObserve {
    let image = cs.spec.image.as_deref().unwrap_or_default();
    let touched = fallback::fingerprint(cs);
    match fallback::route(memo.fallback.as_ref(), image, &touched, now) {
        Route::RegistryPod(_) => ToObserve {
            check: false,
            registry: true,
        },
        // Whether the controller can pull it now; until it can, the pod keeps serving.
        Route::Retry(_) => ToObserve {
            check: true,
            registry: true,
        },
        Route::InProcess => ToObserve {
            check: matches!(pure::next_step(&view(cs, memo, now).0), Step::Check { .. }),
            registry: false,
        },
    }
}

/// The core's view of an in-process catalog, and why its poll interval does not parse.
fn view<'a>(
    cs: &'a CatalogSource,
    memo: &'a Memo,
    now: Timestamp,
) -> (pure::Observed<'a>, Option<String>) {
    let image = cs.spec.image.as_deref().unwrap_or_default();
    let source = Source::Image(image.to_owned());
    let (poll_interval, problem) = match spec::poll_interval(&cs.spec, &source) {
        None => (None, None),
        Some(Ok(interval)) => (Some(interval), None),
        Some(Err((fallback, message))) => (Some(fallback), Some(message)),
    };
    let observed = pure::Observed {
        image,
        poll_interval,
        created: cs.meta().creation_timestamp.as_ref().map(|t| t.0),
        last_poll: cs
            .status
            .as_ref()
            .and_then(|s| s.latest_image_registry_poll.as_ref())
            .map(|t| t.0),
        served: memo.served.as_ref(),
        failing_since: memo.failing_since,
        now,
    };
    (observed, problem)
}

/// Decides one sync of an image catalog served in-process by default.
pub(super) fn decide(seen: &Observed<'_>, ip: &InProcessSeen<'_>) -> Decision {
    let cs = seen.catalog;
    let memo = seen.memo;
    let image = cs.spec.image.clone().unwrap_or_default();
    let touched = fallback::fingerprint(cs);
    // Annotated in-process: the failure is reported, the catalog never moved to a pod.
    let may_fall_back = !cs.annotations().contains_key(SERVING_ANNOTATION);
    let check = ip.check.as_ref().filter(|_| may_fall_back);
    match fallback::route(memo.fallback.as_ref(), &image, &touched, seen.now) {
        Route::RegistryPod(f) => by_registry_pod(seen, ip, f.clone()),
        Route::Retry(f) => {
            // Still out of reach: the registry pod keeps serving until the next try. Reached,
            // or failing for another cause: in-process serving takes over (and reports it).
            let next = check.and_then(|c| {
                let retry = seen.fallback_retry;
                fallback::after_check(
                    &c.outcome,
                    false,
                    &image,
                    &touched,
                    Some(f),
                    seen.now,
                    retry,
                )
            });
            match next {
                Some(next) => by_registry_pod(seen, ip, next),
                None => in_process(seen, ip),
            }
        }
        Route::InProcess => {
            let mut decision = in_process(seen, ip);
            let fell_back = check.and_then(|c| {
                let served = decision.memo.served.is_some();
                let (now, retry) = (seen.now, seen.fallback_retry);
                let previous = memo.fallback.as_ref();
                fallback::after_check(&c.outcome, served, &image, &touched, previous, now, retry)
            });
            if let Some(f) = fell_back {
                decision.outcome.effects.requeue_after(TAKE_OVER);
                decision.memo.fallback = Some(f);
                decision.if_registry_fails.memo.fallback = decision.memo.fallback.clone();
            }
            decision
        }
    }
}

/// The catalog served by its registry pod for the reason `f` gives, remembered.
fn by_registry_pod(seen: &Observed<'_>, ip: &InProcessSeen<'_>, f: Fallback) -> Decision {
    let Some(registry) = &ip.registry else {
        // The observation missed the registry the memo asked for: nothing is decided on it;
        // look again at once.
        let mut effects = Effects::default();
        effects.requeue_after(Duration::ZERO);
        return Decision {
            registry: RegistryWrites::default(),
            outcome: Outcome {
                effects,
                link: Link::Leave,
                cache: Vec::new(),
                ready: false,
            },
            memo: seen.memo.clone(),
            retire: None,
            if_registry_fails: RegistryFailure::new(seen, seen.memo.clone()),
        };
    };
    let registry = SourceSeen::Registry(RegistrySeen {
        objects: registry.objects,
        found: registry.found,
        network_policies: registry.network_policies,
        digest: registry.digest.clone(),
    });
    let mut decision = super::decide_source(seen, &registry, Some(&f));
    decision.memo.fallback = Some(f.clone());
    decision.if_registry_fails.memo.fallback = Some(f);
    decision
}

/// The catalog served in-process: the check's outcome in the cache, the status and the memos;
/// the registry objects of pod mode (or of a fallback) removed.
fn in_process(seen: &Observed<'_>, ip: &InProcessSeen<'_>) -> Decision {
    let cs = seen.catalog;
    let (observed, interval_problem) = view(cs, seen.memo, seen.now);
    let mut memo = seen.memo.clone();
    memo.fallback = None;
    let mut retire = None;
    let (step, outcome, served, content, warnings) = match &ip.check {
        None => (
            pure::next_step(&observed),
            None,
            seen.memo.served.clone(),
            None,
            Vec::new(),
        ),
        Some(c) => {
            // A check ran (due, or a fallback's try): it is this sync's step.
            let poll = matches!(pure::next_step(&observed), Step::Check { poll: true });
            let failing = matches!(c.outcome, CheckOutcome::Failed { .. });
            memo.served = c.served.clone();
            memo.failing_since = failing.then(|| seen.memo.failing_since.unwrap_or(seen.now));
            if c.outcome == CheckOutcome::Swapped {
                retire = seen.memo.served.as_ref().map(|old| old.digest.clone());
            }
            (
                Step::Check { poll },
                Some(c.outcome.clone()),
                c.served.clone(),
                c.content.clone(),
                c.warnings.clone(),
            )
        }
    };
    // The new content is served (and the old released) before unused content is collected.
    let cache = pure::cache_updates(cs, outcome.as_ref(), served.as_ref(), content);
    let observed_status = cs.status.clone().unwrap_or_default();
    let mut status = pure::decide_status(
        &observed_status,
        &observed,
        step,
        outcome.as_ref(),
        served.as_ref(),
        cs.meta().generation,
    );
    status.events.extend(warnings);
    let ready = status
        .status
        .connection_state
        .as_ref()
        .is_some_and(|c| c.last_observed_state == crate::api::ConnectionState::Ready);
    let leftovers = registry::decide_leftovers(ip.leftovers);
    let notes = super::source_to_observe(cs, seen.serving_default).1;
    let effects = pure::effects(cs, status, leftovers, interval_problem, notes);
    Decision {
        registry: RegistryWrites::default(),
        // Nothing to dial: the content is served from this process (docs/catalog-images.md).
        outcome: Outcome {
            effects,
            link: Link::Close,
            cache,
            ready,
        },
        if_registry_fails: RegistryFailure::new(seen, memo.clone()),
        memo,
        retire,
    }
}

#[cfg(test)]
#[path = "image_tests.rs"]
mod tests;

//! In-process image catalogs (docs/catalog-images.md §3–§4): when to ask the registry for the
//! image's digest, and the status that tells the user what is served. Pure: the controller
//! passes what it observed and the outcome of the check it was told to run.
//!
//! Polling is by digest: one manifest HEAD per interval; new content is pulled only when the
//! digest changed, and a reference pinned to a digest is never polled.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::conditions::{ConditionStatus, meta_condition, set_condition};
use crate::api::event::ObjectEvent;
use crate::api::{
    CatalogSource, CatalogSourceReason, CatalogSourceStatus, ConnectionState, GrpcConnectionState,
};
use crate::catalog::CatalogIndex;
use crate::k8s::effects::{Effects, Write};
use kube::ResourceExt;
use std::sync::Arc;

use super::cache_update::{CacheUpdate, Unhealthy};
use super::pod_plan::until_next_poll;

/// The condition olm-rs adds to an in-process image catalog: what it serves, or why the
/// image's content could not be served.
pub const CONTENT_CONDITION: &str = "CatalogContentServed";
/// Reason of [`CONTENT_CONDITION`] when the current digest is served.
pub const SERVING: &str = "Serving";
/// The longest a catalog waits without a sync (OLM's resync).
pub const RESYNC: Duration = Duration::from_secs(15 * 60);
/// How soon a catalog whose image failed for a passing reason is tried again.
pub const RETRY_TRANSIENT: Duration = Duration::from_secs(10);
/// How soon a catalog whose image failed for a lasting reason is tried again (a fixed secret
/// or a pushed image is also noticed by then without any event).
pub const RETRY_LASTING: Duration = Duration::from_secs(60);

/// What this controller serves for one catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served {
    /// `spec.image` as it was when the content was pulled.
    pub image: String,
    pub digest: String,
    /// Packages in the catalog (for the status message).
    pub packages: usize,
    /// When this digest started being served.
    pub since: Timestamp,
}

/// What the controller observed for one in-process image catalog.
#[derive(Debug, Clone, Copy)]
pub struct Observed<'a> {
    pub image: &'a str,
    /// `Some` when `spec.updateStrategy.registryPoll` asks for polling (already parsed, with
    /// OLM's fallback applied).
    pub poll_interval: Option<Duration>,
    pub created: Option<Timestamp>,
    /// `status.latestImageRegistryPoll`.
    pub last_poll: Option<Timestamp>,
    pub served: Option<&'a Served>,
    /// The last check failed: retry it after the back-off.
    pub failing_since: Option<Timestamp>,
    pub now: Timestamp,
}

/// What to do for this catalog now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Ask the registry for the digest and serve its content if it is new. `poll` says the
    /// check is the interval's poll (recorded in `latestImageRegistryPoll`).
    Check { poll: bool },
    /// Nothing to ask; look again after `requeue`.
    Wait { requeue: Duration },
}

fn pinned(image: &str) -> bool {
    image.contains('@')
}

/// The next step of an image catalog.
pub fn next_step(o: &Observed<'_>) -> Step {
    let polls = o.poll_interval.filter(|_| !pinned(o.image));
    let served_current = o.served.is_some_and(|s| s.image == o.image);
    let due = polls.is_some_and(|interval| {
        // As OLM: an interval after the last poll, or after the catalog's creation.
        until_next_poll(o.last_poll.or(o.created), None, interval, o.now).is_zero()
    });
    if !served_current || o.failing_since.is_some() {
        // Loading content is not a poll (OLM records only polls), unless one is due anyway.
        return Step::Check { poll: due };
    }
    let Some(interval) = polls else {
        return Step::Wait { requeue: RESYNC };
    };
    let since = o.last_poll.or(o.created);
    let wait = until_next_poll(since, None, interval, o.now);
    if wait.is_zero() {
        Step::Check { poll: true }
    } else {
        Step::Wait {
            requeue: wait.min(RESYNC),
        }
    }
}

/// How a check ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckOutcome {
    /// The digest is the one already served.
    Unchanged,
    /// New content is served (the first, or a new digest).
    Swapped,
    /// The digest or the content could not be had; `kind` is a CamelCase word for the cause,
    /// `message` names the image and the cause in plain words.
    Failed {
        kind: String,
        message: String,
        transient: bool,
    },
}

/// The status to write, the events to publish and when to sync again.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub status: CatalogSourceStatus,
    pub events: Vec<ObjectEvent>,
    pub requeue: Duration,
}

/// The status of an in-process image catalog after `step` ran with `outcome`; `served` is what
/// is served afterwards (the new content, or the last good one after a failure).
pub fn decide_status(
    observed: &CatalogSourceStatus,
    o: &Observed<'_>,
    step: Step,
    outcome: Option<&CheckOutcome>,
    served: Option<&Served>,
    generation: Option<i64>,
) -> Decision {
    let now = Time(o.now);
    let mut status = CatalogSourceStatus {
        // Not served by a pod: no registry Service, no ConfigMap.
        registry_service: None,
        config_map_reference: None,
        message: None,
        reason: None,
        ..observed.clone()
    };
    let mut events = Vec::new();
    if let Step::Check { poll: true } = step {
        status.latest_image_registry_poll = Some(now.clone());
    }
    if o.poll_interval.is_none() {
        status.latest_image_registry_poll = None;
    }
    let state = if served.is_some() {
        ConnectionState::Ready
    } else {
        ConnectionState::TransientFailure
    };
    let previous = observed.connection_state.as_ref();
    let last_connect = match previous {
        Some(p) if p.last_observed_state == state && p.address.is_none() => p.last_connect.clone(),
        _ => Some(now.clone()),
    };
    status.connection_state = Some(GrpcConnectionState {
        address: None,
        last_observed_state: state,
        last_connect,
    });

    let mut conditions = observed.conditions.clone().unwrap_or_default();
    let mut requeue = match step {
        Step::Wait { requeue } => requeue,
        Step::Check { .. } => next_wait(o),
    };
    match outcome {
        Some(CheckOutcome::Failed {
            kind,
            message,
            transient,
        }) => {
            let still = served
                .map(|s| format!("; still serving {}@{}", s.image, s.digest))
                .unwrap_or_default();
            let text = format!("{message}{still}");
            status.reason = Some(CatalogSourceReason::RegistryServerError);
            status.message = Some(format!("couldn't serve catalog image - {text}"));
            let changed = set_condition(
                &mut conditions,
                meta_condition(
                    CONTENT_CONDITION,
                    ConditionStatus::False,
                    kind,
                    &text,
                    generation,
                    &now,
                ),
                &now,
            );
            // A refusal by the image policy is a security event: said once per change, with
            // the image, the scope and why (docs/image-signatures.md §6).
            if changed && kind == IMAGE_POLICY_REFUSED {
                events.push(ObjectEvent::warning(IMAGE_POLICY_REFUSED, text.clone()));
            }
            requeue = if *transient {
                RETRY_TRANSIENT
            } else {
                RETRY_LASTING
            };
        }
        _ => {
            if let Some(s) = served {
                let text = format!(
                    "serving {}@{} in-process: {} package(s)",
                    s.image, s.digest, s.packages
                );
                let changed = set_condition(
                    &mut conditions,
                    meta_condition(
                        CONTENT_CONDITION,
                        ConditionStatus::True,
                        SERVING,
                        &text,
                        generation,
                        &now,
                    ),
                    &now,
                );
                if changed && outcome == Some(&CheckOutcome::Swapped) {
                    events.push(ObjectEvent::normal("CatalogContentServed", text));
                }
            }
        }
    }
    status.conditions = (!conditions.is_empty()).then_some(conditions);
    Decision {
        status,
        events,
        requeue,
    }
}

/// Everything an in-process image catalog asks the cluster for, in order: the registry objects
/// pod mode left (`leftovers`, deletions), the status when it changed (guarded by the version
/// observed), the events — `notes`, the decision's, and those of the status transition — and
/// the requeue. `interval_problem` is the message of an unparsable poll interval.
pub fn effects(
    cs: &CatalogSource,
    decision: Decision,
    leftovers: Vec<Write>,
    interval_problem: Option<String>,
    mut notes: Vec<ObjectEvent>,
) -> Effects {
    let mut status = decision.status;
    if status.reason.is_none()
        && let Some(message) = interval_problem
    {
        status.reason = Some(CatalogSourceReason::InvalidIntervalError);
        status.message = Some(message);
    }
    if !leftovers.is_empty() {
        notes.push(ObjectEvent::normal(
            "RegistryPodRemoved",
            format!(
                "serving in-process; removing {} registry object(s) of pod mode",
                leftovers.len()
            ),
        ));
    }
    notes.extend(decision.events);
    let status_effects = super::effects_of(cs, status, notes);
    let mut effects = Effects {
        writes: leftovers,
        ..Effects::default()
    };
    effects.writes.extend(status_effects.writes);
    effects.events = status_effects.events;
    effects.requeue_after(decision.requeue);
    effects
}

/// The catalog cache entry of an in-process catalog after a sync, in order: the content a check
/// just loaded (`content`, with [`CheckOutcome::Swapped`]), and its health —
/// ready while something is served, else why nothing is.
pub fn cache_updates(
    cs: &CatalogSource,
    outcome: Option<&CheckOutcome>,
    served: Option<&Served>,
    content: Option<Arc<CatalogIndex>>,
) -> Vec<CacheUpdate> {
    let mut updates = Vec::new();
    if let (Some(CheckOutcome::Swapped), Some(index)) = (outcome, content) {
        updates.push(CacheUpdate::Index(index));
    }
    match (served, outcome) {
        (Some(_), _) => updates.push(CacheUpdate::Ready),
        (None, Some(CheckOutcome::Failed { kind, message, .. })) => {
            let reason = if kind == "InvalidCatalog"
                || kind == "NotACatalog"
                || kind == IMAGE_POLICY_REFUSED
            {
                Unhealthy::Invalid
            } else {
                Unhealthy::Unreachable
            };
            updates.push(CacheUpdate::Unhealthy {
                reason,
                message: format!(
                    "catalog {}/{}: {message}",
                    cs.namespace().unwrap_or_default(),
                    cs.name_any()
                ),
                drop_index: false,
            });
        }
        (None, _) => {}
    }
    updates
}

/// The kind of a pull the image policy refused (`PullError::kind`), the condition's reason and
/// the event's.
pub const IMAGE_POLICY_REFUSED: &str = "ImagePolicyRefused";

/// After a check: until the next poll, or the resync.
fn next_wait(o: &Observed<'_>) -> Duration {
    match o.poll_interval.filter(|_| !pinned(o.image)) {
        Some(interval) => interval.min(RESYNC),
        None => RESYNC,
    }
}

#[cfg(test)]
#[path = "in_process_tests.rs"]
mod tests;

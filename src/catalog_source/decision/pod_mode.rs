//! Stage 3 of a sync, for an image catalog served by a registry pod (docs/catalog.md §3):
//! when to ask the image registry for the digest (§3.4), the registry writes, the pod rollout
//! (§3.3) and the connection to the catalog's Service. Pure; part of `decision`.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{Resource, ResourceExt};

use crate::api::event::ObjectEvent;
use crate::api::{CatalogSource, CatalogSourceStatus, ConnectionState};
use crate::catalog_source::registry_objects::{self, RegistryObjects, RegistryObjectsError};

use super::{Observed, RESYNC, Sync};
use crate::catalog_source::pod_plan::{self, PodView};
use crate::catalog_source::registry::{self, RegistryObserved, RegistryWrites};
use crate::catalog_source::spec::{self, Source};

/// How soon to look again after (re)creating a registry pod.
pub const AFTER_RECREATE: Duration = Duration::from_secs(5);
/// How soon to look again while pods for two digests coexist.
pub const ROLLOUT_RECHECK: Duration = Duration::from_secs(10);
/// How soon to look again while a pod just created is not in the store yet.
pub const AWAITING_POD: Duration = Duration::from_secs(1);

/// The registry of a pod-mode image catalog as observed (docs/catalog.md §3).
pub struct RegistrySeen<'a> {
    /// The objects the spec asks for (from the namespace's labels and the ServiceAccount's pull
    /// secrets), or why there are none.
    pub objects: Result<&'a RegistryObjects, &'a RegistryObjectsError>,
    pub found: &'a RegistryObserved,
    /// Whether the server serves NetworkPolicies.
    pub network_policies: bool,
    /// The registry's answer for the image's digest, when [`digest_check`] asked for one.
    pub digest: Option<DigestSeen>,
}

/// The image registry's answer to a digest check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DigestSeen {
    /// The check was the interval's poll (recorded in `latestImageRegistryPoll`).
    pub due: bool,
    pub answer: DigestAnswer,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DigestAnswer {
    Digest(String),
    /// The check failed; the warning event's text.
    Failed(String),
}

/// What the connection was last made for, to remember (`Memo::serving_pods`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServingPods {
    /// These settled pods serve now.
    Settled(Vec<String>),
    /// Pods of several kinds serve: the next settled set counts as a change.
    Mixed,
}

/// Polling settings of an image catalog that polls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Poll {
    pub interval: Duration,
    /// `status.latestImageRegistryPoll`.
    pub last: Option<Timestamp>,
}

/// The catalog's polling, when it polls: the interval (OLM's fallback applied) and, when the
/// interval does not parse, the status message saying so.
pub fn poll_of(cs: &CatalogSource, source: &Source) -> (Option<Poll>, Option<String>) {
    let last = cs
        .status
        .as_ref()
        .and_then(|s| s.latest_image_registry_poll.as_ref())
        .map(|t| t.0);
    match spec::poll_interval(&cs.spec, source) {
        None => (None, None),
        Some(Ok(interval)) => (Some(Poll { interval, last }), None),
        Some(Err((interval, message))) => (Some(Poll { interval, last }), Some(message)),
    }
}

/// Whether to ask the image registry for the digest now (docs/catalog.md §3.4): a poll is due,
/// or no pod serves the current spec (the new pod is made for the current digest). `Some(due)`
/// when to ask.
pub fn digest_check(
    cs: &CatalogSource,
    poll: Option<Poll>,
    views: &[PodView],
    objects: &RegistryObjects,
    now: Timestamp,
) -> Option<bool> {
    let poll = poll?;
    let desired = registry::desired_pod(objects);
    let created = cs.meta().creation_timestamp.as_ref().map(|t| t.0);
    let serving = views.iter().any(|v| {
        !v.deleting
            && v.images == desired.images
            && v.spec_hash.as_deref() == Some(&desired.spec_hash)
    });
    let due = pod_plan::poll_due(poll.last, created, poll.interval, now);
    (due || !serving).then_some(due)
}

/// Stage 3 of a pod-mode image catalog (docs/catalog.md §3): the registry writes, the poll,
/// the pod rollout, and the connection to the catalog's Service. `awaiting`: the pod created
/// last (`Memo::created_pod`) is not in the store yet. Returns the registry writes.
pub(super) fn pod_mode(
    sync: &mut Sync,
    seen: &Observed<'_>,
    registry: &RegistrySeen<'_>,
    objects: &RegistryObjects,
    poll: Option<Poll>,
    awaiting: bool,
    observed: &CatalogSourceStatus,
) -> RegistryWrites {
    let cs = seen.catalog;
    let now = seen.now;
    let image = cs.spec.image.as_deref().unwrap_or_default();
    let views: Vec<PodView> = registry
        .found
        .pods
        .iter()
        .map(|p| registry::pod_view(p))
        .collect();
    let desired = registry::desired_pod(objects);

    let mut warning = None;
    let mut digest = None;
    let mut polled_at = None;
    if let Some(check) = &registry.digest {
        match &check.answer {
            DigestAnswer::Digest(d) => digest = Some(d.as_str()),
            DigestAnswer::Failed(message) => warning = Some(message.clone()),
        }
        if check.due {
            polled_at = Some(now);
        }
    }
    let mut requeue = poll.map(|poll| {
        let created = cs.meta().creation_timestamp.as_ref().map(|t| t.0);
        let last = polled_at.or(poll.last);
        pod_plan::until_next_poll(last, created, poll.interval, now).min(RESYNC)
    });

    let plan = pod_plan::plan_pods(&views, &desired, digest);
    // A pod this controller created may not be in the store yet; deciding pods again before
    // it is would start a second one (pods are created from `generateName`, so a create never
    // conflicts). Until the store shows it, or a short while passed, pods are left alone.
    let writes = registry::decide_registry(
        objects,
        registry.found,
        &plan,
        registry.network_policies,
        awaiting,
        now,
    );
    let pods_written = writes.touches_pods();
    let (mut recreated, mut switched, mut rolled_to) = (false, false, None);
    let mut became_ready = false;
    if awaiting {
        requeue = Some(AWAITING_POD);
    } else {
        // Reconnecting right when older pods are deleted could reach one of them, still
        // terminating, through the Service, and keep its content for ever: wait until they are
        // gone from the store (their deletion queues a sync).
        match pod_plan::settled_pods(&views, &desired) {
            Some(names) if !pods_written => {
                let before = seen.memo.serving_pods.as_deref();
                switched = before.is_some_and(|prev| prev != names);
                // The registry pod has just become Ready while the connection waits out its
                // back-off from failing against a pod that was not: dial now, not at the next
                // attempt, which can be up to a minute away (docs/catalog.md §3.1).
                became_ready = before.is_none()
                    && seen
                        .connection
                        .is_some_and(|c| c.state == ConnectionState::TransientFailure);
                sync.serving_pods = Some(ServingPods::Settled(names));
            }
            _ => {
                if pod_plan::mixed_pods(&views, &desired) {
                    sync.serving_pods = Some(ServingPods::Mixed);
                }
            }
        }
        if let Some(pod_digest) = &plan.create
            && !plan.recreating
        {
            rolled_to = pod_digest.clone();
        }
        if plan.failed_update.is_some() {
            warning = plan.failed_update.clone();
        }
        recreated = plan.recreating;
        if plan.rolling {
            requeue = Some(requeue.map_or(ROLLOUT_RECHECK, |d| d.min(ROLLOUT_RECHECK)));
        }
    }

    if let Some(at) = polled_at {
        sync.status.latest_image_registry_poll = Some(Time(at));
    }
    sync.status.registry_service = Some(registry::registry_service(
        cs,
        observed.registry_service.as_ref(),
        now,
        recreated,
    ));
    if recreated {
        requeue = Some(requeue.map_or(AFTER_RECREATE, |d| d.min(AFTER_RECREATE)));
        sync.notes.push(ObjectEvent::normal(
            "RegistryPodCreated",
            format!("created a registry pod for image {image}"),
        ));
    }
    if let Some(digest) = rolled_to {
        sync.notes.push(ObjectEvent::normal(
            "CatalogImageUpdated",
            format!(
                "image {image} now points at {digest}; starting a registry pod for it beside the serving one"
            ),
        ));
    }
    if let Some(warning) = warning {
        sync.notes
            .push(ObjectEvent::warning("CatalogImagePollFailed", warning));
    }
    sync.requeue = requeue;
    let address =
        registry_objects::service_address(&cs.name_any(), &cs.namespace().unwrap_or_default());
    // New pod, new content: read it again from the start.
    sync.connect(seen, &address, recreated || switched || became_ready);
    writes
}

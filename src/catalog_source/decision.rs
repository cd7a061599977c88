//! One sync of a CatalogSource (docs/catalog.md §1–§4), decided once from what was observed:
//! the spec, the registry connection's state, the controller's memos of the catalog
//! ([`Memo`]), the ConfigMap's content, the registry objects in the stores, the image digest
//! the registry answered and, for an image served in-process, what its check found
//! (`decision/image.rs`). Pure: the controller (`reconcile::catalog_source::sync`) observes all
//! of it first, then carries out the [`Decision`] — API writes through `k8s::effects::execute`,
//! the connection and the catalog cache as [`Link`] and [`CacheUpdate`] say, and the memos as
//! [`Decision::memo`] says.
//!
//! `status.reason`/`message` are cleared first and carry the first stage that failed: the spec,
//! the poll interval, the ConfigMap, the registry server, the connection.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;

use crate::api::event::ObjectEvent;
use crate::api::{
    CatalogSource, CatalogSourceReason, CatalogSourceStatus, ConnectionState, GrpcConnectionState,
    RegistryServiceStatus,
};
use crate::catalog::CatalogIndex;
use crate::k8s::effects::Effects;

use super::cache_update::{CacheUpdate, Unhealthy};
use super::fallback::{Fallback, mark_status};
use super::memo::Memo;
mod config_map;
mod image;
mod pod_mode;
mod registry_failure;
use super::registry::RegistryWrites;
use super::serving::{SERVING_ANNOTATION, ServingMode, serving_mode};
use super::spec::{self, Source, SpecError};
use config_map::{config_map, remember_config_map};
pub use image::{CheckSeen, InProcessSeen, ToObserve, to_observe};
use pod_mode::pod_mode;
pub use pod_mode::{
    AFTER_RECREATE, AWAITING_POD, DigestAnswer, DigestSeen, Poll, ROLLOUT_RECHECK, RegistrySeen,
    ServingPods, digest_check, poll_of,
};
pub use registry_failure::RegistryFailure;

/// Requeue period when nothing else asks for one (OLM's informer resync).
pub const RESYNC: Duration = Duration::from_secs(15 * 60);
/// A registry connection as it is now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkView {
    /// The address dialled (after overrides).
    pub address: String,
    pub state: ConnectionState,
    /// When `state` was entered.
    pub since: Timestamp,
    /// Why the registry could not be reached, while in `TRANSIENT_FAILURE`.
    pub error: Option<String>,
    /// Why the content the registry served was refused.
    pub content_error: Option<String>,
}

/// What was observed of one CatalogSource.
pub struct Observed<'a> {
    pub catalog: &'a CatalogSource,
    pub now: Timestamp,
    /// The monotonic time, for [`Memo::created_pod`].
    pub instant: Instant,
    /// Dialled address → address actually dialled (`catalog_sources.address_overrides`).
    pub address_overrides: &'a BTreeMap<String, String>,
    /// The controller's `--catalog-serving`.
    pub serving_default: ServingMode,
    /// How long a fallback to the registry pod lasts before in-process serving is tried again
    /// (docs/catalog-images.md §7).
    pub fallback_retry: Duration,
    /// The catalog's registry connection, if one is open.
    pub connection: Option<&'a LinkView>,
    /// What the controller remembered of the catalog at the end of its last sync.
    pub memo: &'a Memo,
    /// What was read for the kind of catalog the spec describes.
    pub source: SourceSeen<'a>,
}

/// The spec's kind of catalog ([`spec::source`]) and what was read for it.
pub enum SourceSeen<'a> {
    Invalid(SpecError),
    Address(String),
    ConfigMap {
        name: String,
        seen: ConfigMapSeen,
    },
    /// An image catalog served by a registry pod.
    Registry(RegistrySeen<'a>),
    /// An image catalog served in-process by default ([`source_to_observe`] says `None`).
    InProcess(InProcessSeen<'a>),
}

/// A catalog's ConfigMap as read (docs/catalog.md §4).
#[derive(Debug, Clone)]
pub enum ConfigMapSeen {
    /// Missing or refused to us; the text is the status message.
    Unreadable(String),
    /// Loading it stopped before it ended; the cache keeps what it had.
    Stopped(String),
    Read {
        uid: Option<String>,
        resource_version: Option<String>,
        content: ConfigMapContent,
    },
}

/// What a read ConfigMap holds.
#[derive(Debug, Clone)]
pub enum ConfigMapContent {
    /// The version loaded before; `refused` says why its content was refused, if it was.
    Unchanged { refused: Option<String> },
    /// Loaded now.
    Loaded(Arc<CatalogIndex>),
    /// Loaded now and refused: why.
    Refused(String),
}

/// What to do with the catalog's registry connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Link {
    /// Leave it as it is.
    Leave,
    /// None is needed (ConfigMap catalog, invalid spec): close it.
    Close,
    /// Keep one open to this (dialled) address, opening it if needed.
    Ensure(String),
    /// Drop it and dial this address again: the registry's content changed.
    Redial(String),
}

/// What a sync does once the registry writes (if any) went through.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The status write, the events and the requeue.
    pub effects: Effects,
    pub link: Link,
    /// In order.
    pub cache: Vec<CacheUpdate>,
    /// The connection is READY (the `catalog_source_ready` metric).
    pub ready: bool,
}

/// A sync's decision: the registry writes first, then [`Outcome`] and the memos to keep. When
/// the registry writes fail, the shell picks [`Decision::if_registry_fails`] instead, made
/// beforehand (docs/architecture.md §2).
#[derive(Debug, Clone)]
pub struct Decision {
    pub registry: RegistryWrites,
    pub outcome: Outcome,
    /// The catalog's memos after this sync. A registry pod created by `registry` is added by
    /// the shell from the API server's answer ([`Memo::pod_created`]): only that answer names it.
    pub memo: Memo,
    /// A digest this catalog no longer serves in-process: its content may be collected once
    /// nothing reads it (docs/catalog-images.md §4).
    pub retire: Option<String>,
    pub if_registry_fails: RegistryFailure,
}

/// The catalog's kind of source as the observation must read it, or `None` when it is an image
/// catalog served in-process (synced by `in_process::next_step`/`decide_status` instead), with the
/// events of an annotation that names no serving mode.
pub fn source_to_observe(
    cs: &CatalogSource,
    default: ServingMode,
) -> (Option<Result<Source, SpecError>>, Vec<ObjectEvent>) {
    let source = spec::source(&cs.spec);
    if !matches!(source, Ok(Source::Image(_))) {
        return (Some(source), Vec::new());
    }
    let (mode, unknown) = serving_mode(cs.annotations(), default);
    let notes = unknown
        .map(|e| {
            ObjectEvent::warning(
                "InvalidServingMode",
                format!(
                    "annotation {SERVING_ANNOTATION}: {e}; serving {}",
                    mode.as_str()
                ),
            )
        })
        .into_iter()
        .collect();
    match mode {
        ServingMode::InProcess => (None, notes),
        ServingMode::Pod => (Some(source), notes),
    }
}

/// Decides one sync.
pub fn decide(seen: &Observed<'_>) -> Decision {
    match &seen.source {
        SourceSeen::InProcess(image) => image::decide(seen, image),
        source => decide_source(seen, source, None),
    }
}

/// One sync of an address, ConfigMap or registry-pod catalog; `fallback` says why an image
/// catalog served in-process by default is served by its registry pod.
fn decide_source(
    seen: &Observed<'_>,
    source: &SourceSeen<'_>,
    fallback: Option<&Fallback>,
) -> Decision {
    let cs = seen.catalog;
    let observed = cs.status.clone().unwrap_or_default();
    let mut memo = seen.memo.clone();
    let mut sync = Sync {
        status: CatalogSourceStatus {
            message: None,
            reason: None,
            ..observed.clone()
        },
        problem: None,
        notes: Vec::new(),
        requeue: None,
        link: Link::Leave,
        cache: Vec::new(),
        serving_pods: None,
    };
    if let SourceSeen::Invalid(error) = source {
        let message = error.to_string();
        sync.link = Link::Close;
        sync.cache.push(CacheUpdate::Unhealthy {
            reason: Unhealthy::SpecInvalid,
            message: format!("catalog {} has an invalid spec: {message}", key(cs)),
            drop_index: true,
        });
        sync.problem = Some((CatalogSourceReason::SpecInvalidError, message));
        let failure = RegistryFailure::new(seen, memo.clone());
        return Decision {
            registry: RegistryWrites::default(),
            outcome: sync.finish(cs).0,
            memo,
            retire: None,
            if_registry_fails: failure,
        };
    }
    if observed.reason == Some(CatalogSourceReason::SpecInvalidError) {
        // Valid again: start from a clean status (conditions belong to other features).
        sync.status = CatalogSourceStatus {
            conditions: observed.conditions.clone(),
            ..CatalogSourceStatus::default()
        };
    }
    let mut registry_writes = RegistryWrites::default();
    match source {
        SourceSeen::Invalid(_) | SourceSeen::InProcess(_) => {}
        SourceSeen::ConfigMap { name, seen: cm } => {
            sync.link = Link::Close;
            sync.status.registry_service = None;
            sync.status.connection_state = None;
            config_map(&mut sync, cs, name, cm, seen.now);
            remember_config_map(&mut memo, cm);
        }
        SourceSeen::Address(address) => {
            sync.status.config_map_reference = None;
            sync.status.registry_service = Some(address_registry_service(
                observed.registry_service.as_ref(),
                seen.now,
            ));
            sync.connect(seen, address, false);
        }
        SourceSeen::Registry(registry) => {
            let source = Source::Image(cs.spec.image.clone().unwrap_or_default());
            let (poll, interval_problem) = poll_of(cs, &source);
            if let Some(message) = interval_problem {
                sync.problem = Some((CatalogSourceReason::InvalidIntervalError, message));
            }
            sync.notes
                .extend(source_to_observe(cs, seen.serving_default).1);
            sync.status.config_map_reference = None;
            match registry.objects {
                Ok(objects) => {
                    let names = registry.found.pods.iter();
                    let awaiting = seen.memo.awaiting_pod(
                        names.map(|p| p.metadata.name.as_deref().unwrap_or_default()),
                        seen.instant,
                    );
                    if !awaiting {
                        memo.created_pod = None;
                    }
                    registry_writes = pod_mode(
                        &mut sync, seen, registry, objects, poll, awaiting, &observed,
                    );
                    mark_status(
                        &mut sync.status,
                        fallback,
                        cs.metadata.generation,
                        seen.now,
                        &mut sync.notes,
                    );
                    if let Some(f) = fallback {
                        let until = Duration::try_from(f.retry_at.duration_since(seen.now))
                            .unwrap_or(Duration::ZERO);
                        sync.requeue = Some(sync.requeue.unwrap_or(RESYNC).min(until));
                    }
                }
                Err(error) => {
                    let failure = RegistryFailure::new(seen, memo.clone());
                    return Decision {
                        registry: RegistryWrites::default(),
                        outcome: failure.outcome(cs, error),
                        memo,
                        retire: None,
                        if_registry_fails: failure,
                    };
                }
            }
        }
    }
    // What only a carried-out registry write makes true is not remembered when it fails.
    let failure = RegistryFailure::new(seen, memo.clone());
    let (outcome, serving_pods) = sync.finish(cs);
    match serving_pods {
        Some(ServingPods::Settled(names)) => memo.serving_pods = Some(names),
        Some(ServingPods::Mixed) => memo.serving_pods = Some(Vec::new()),
        None => {}
    }
    Decision {
        registry: registry_writes,
        outcome,
        memo,
        retire: None,
        if_registry_fails: failure,
    }
}

/// A sync being decided.
pub(super) struct Sync {
    pub(super) status: CatalogSourceStatus,
    /// The first stage that failed.
    pub(super) problem: Option<(CatalogSourceReason, String)>,
    pub(super) notes: Vec<ObjectEvent>,
    pub(super) requeue: Option<Duration>,
    pub(super) link: Link,
    pub(super) cache: Vec<CacheUpdate>,
    pub(super) serving_pods: Option<ServingPods>,
}

impl Sync {
    /// Stage 4: a connection to `address`, its state mirrored in the status. A connection
    /// opened (or `redial`led) now starts `IDLE`.
    pub(super) fn connect(&mut self, seen: &Observed<'_>, address: &str, redial: bool) {
        let dial = seen
            .address_overrides
            .get(address)
            .cloned()
            .unwrap_or_else(|| address.to_owned());
        let open = seen
            .connection
            .filter(|c| c.address == dial && !redial)
            .cloned();
        let conn = open.unwrap_or_else(|| LinkView {
            address: dial.clone(),
            state: ConnectionState::Idle,
            since: seen.now,
            error: None,
            content_error: None,
        });
        self.link = if redial {
            Link::Redial(dial)
        } else {
            Link::Ensure(dial)
        };
        self.status.connection_state = Some(GrpcConnectionState {
            address: Some(address.to_owned()),
            last_observed_state: conn.state.clone(),
            // When the state was entered: a sync with nothing new writes nothing.
            last_connect: Some(Time(conn.since)),
        });
        if conn.state == ConnectionState::TransientFailure
            && let Some(error) = conn.error
        {
            self.problem.get_or_insert((
                CatalogSourceReason::RegistryServerError,
                format!("couldn't connect to registry - {error}"),
            ));
        }
        if let Some(error) = conn.content_error {
            self.problem
                .get_or_insert((CatalogSourceReason::RegistryServerError, error));
        }
    }

    fn finish(mut self, cs: &CatalogSource) -> (Outcome, Option<ServingPods>) {
        if let Some((reason, message)) = self.problem {
            self.status.reason = Some(reason);
            self.status.message = Some(message);
        }
        let ready = self
            .status
            .connection_state
            .as_ref()
            .is_some_and(|c| c.last_observed_state == ConnectionState::Ready);
        let mut effects = super::effects_of(cs, self.status, self.notes);
        effects.requeue_after(self.requeue.unwrap_or(RESYNC));
        let outcome = Outcome {
            effects,
            link: self.link,
            cache: self.cache,
            ready,
        };
        (outcome, self.serving_pods)
    }
}

fn key(cs: &CatalogSource) -> String {
    format!("{}/{}", cs.namespace().unwrap_or_default(), cs.name_any())
}

/// `{protocol: grpc, createdAt}` for address catalogs, created once (docs/catalog.md §2).
fn address_registry_service(
    previous: Option<&RegistryServiceStatus>,
    now: Timestamp,
) -> RegistryServiceStatus {
    match previous {
        Some(p)
            if p.protocol.as_deref() == Some("grpc")
                && p.service_name.is_none()
                && p.created_at.is_some() =>
        {
            p.clone()
        }
        _ => RegistryServiceStatus {
            protocol: Some("grpc".to_owned()),
            created_at: Some(Time(now)),
            ..RegistryServiceStatus::default()
        },
    }
}

#[cfg(test)]
#[path = "decision_tests/mod.rs"]
mod tests;

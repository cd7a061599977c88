//! One sync of a CatalogSource that is not served in-process (docs/catalog.md §1–§4), decided
//! from what was observed: the spec, the registry connection's state, the ConfigMap's content,
//! the registry objects in the stores and the image digest the registry answered. Pure: the
//! controller (`reconcile::catalog_source::sync`) observes all of it first, then carries out
//! the [`Decision`] — API writes through `k8s::effects::execute`, the connection and the catalog
//! cache as [`Link`] and [`CacheUpdate`] say.
//!
//! `status.reason`/`message` are cleared first and carry the first stage that failed: the spec,
//! the poll interval, the ConfigMap, the registry server, the connection.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;

use crate::api::event::ObjectEvent;
use crate::api::{
    CatalogSource, CatalogSourceReason, CatalogSourceStatus, ConfigMapResourceReference,
    ConnectionState, GrpcConnectionState, RegistryServiceStatus,
};
use crate::catalog::CatalogIndex;
use crate::k8s::effects::Effects;

use super::cache_update::{CacheUpdate, Unhealthy};
use super::fallback::{Fallback, mark_status};
mod pod_mode;
use super::registry::RegistryWrites;
use super::serving::{SERVING_ANNOTATION, ServingMode, serving_mode};
use super::spec::{self, Source, SpecError};
use pod_mode::pod_mode;
pub use pod_mode::{
    AFTER_RECREATE, AWAITING_POD, DigestAnswer, DigestSeen, Poll, ROLLOUT_RECHECK, RegistrySeen,
    ServingPods, digest_check, poll_of,
};

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
    /// Dialled address → address actually dialled (`catalog_sources.address_overrides`).
    pub address_overrides: &'a BTreeMap<String, String>,
    /// The controller's `--catalog-serving`.
    pub serving_default: ServingMode,
    /// The catalog's registry connection, if one is open.
    pub connection: Option<&'a LinkView>,
    /// Why an image catalog served in-process by default is served by its registry pod
    /// instead (docs/catalog-images.md §7).
    pub fallback: Option<&'a Fallback>,
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
    pub serving_pods: Option<ServingPods>,
    /// The connection is READY (the `catalog_source_ready` metric).
    pub ready: bool,
}

/// A sync's decision: the registry writes first, then [`Outcome`]. When the registry writes
/// fail, [`registry_failed`] decides instead.
#[derive(Debug, Clone)]
pub struct Decision {
    pub registry: RegistryWrites,
    pub outcome: Outcome,
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
    let cs = seen.catalog;
    let observed = cs.status.clone().unwrap_or_default();
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
    if let SourceSeen::Invalid(error) = &seen.source {
        let message = error.to_string();
        sync.link = Link::Close;
        sync.cache.push(CacheUpdate::Unhealthy {
            reason: Unhealthy::SpecInvalid,
            message: format!("catalog {} has an invalid spec: {message}", key(cs)),
            drop_index: true,
        });
        sync.problem = Some((CatalogSourceReason::SpecInvalidError, message));
        return Decision {
            registry: RegistryWrites::default(),
            outcome: sync.finish(cs),
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
    match &seen.source {
        SourceSeen::Invalid(_) => {}
        SourceSeen::ConfigMap { name, seen: cm } => {
            sync.link = Link::Close;
            sync.status.registry_service = None;
            sync.status.connection_state = None;
            config_map(&mut sync, cs, name, cm, seen.now);
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
                    registry_writes = pod_mode(&mut sync, seen, registry, objects, poll, &observed);
                    mark_status(
                        &mut sync.status,
                        seen.fallback,
                        cs.metadata.generation,
                        seen.now,
                        &mut sync.notes,
                    );
                    if let Some(f) = seen.fallback {
                        let until = Duration::try_from(f.retry_at.duration_since(seen.now))
                            .unwrap_or(Duration::ZERO);
                        sync.requeue = Some(sync.requeue.unwrap_or(RESYNC).min(until));
                    }
                }
                Err(error) => {
                    return Decision {
                        registry: RegistryWrites::default(),
                        outcome: registry_failed(seen, error),
                    };
                }
            }
        }
    }
    Decision {
        registry: registry_writes,
        outcome: sync.finish(cs),
    }
}

/// The sync of a pod-mode image catalog whose registry objects could not be written (or built):
/// the catalog is unhealthy, and the status says why.
pub fn registry_failed(seen: &Observed<'_>, error: &dyn std::fmt::Display) -> Outcome {
    let cs = seen.catalog;
    let observed = cs.status.clone().unwrap_or_default();
    let mut status = CatalogSourceStatus {
        message: None,
        reason: None,
        ..observed.clone()
    };
    if observed.reason == Some(CatalogSourceReason::SpecInvalidError) {
        status = CatalogSourceStatus {
            conditions: observed.conditions.clone(),
            ..CatalogSourceStatus::default()
        };
    }
    status.config_map_reference = None;
    let sync = Sync {
        status,
        problem: Some((
            CatalogSourceReason::RegistryServerError,
            format!("couldn't ensure registry server - {error}"),
        )),
        notes: source_to_observe(cs, seen.serving_default).1,
        requeue: None,
        link: Link::Leave,
        cache: vec![CacheUpdate::Unhealthy {
            reason: Unhealthy::Unreachable,
            message: format!("catalog {}: registry server not ensured: {error}", key(cs)),
            drop_index: false,
        }],
        serving_pods: None,
    };
    sync.finish(cs)
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

    fn finish(mut self, cs: &CatalogSource) -> Outcome {
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
        Outcome {
            effects,
            link: self.link,
            cache: self.cache,
            serving_pods: self.serving_pods,
            ready,
        }
    }
}

fn key(cs: &CatalogSource) -> String {
    format!("{}/{}", cs.namespace().unwrap_or_default(), cs.name_any())
}

/// Stage 2 (docs/catalog.md §4): the ConfigMap's reference in the status, its content in the
/// cache.
fn config_map(sync: &mut Sync, cs: &CatalogSource, name: &str, cm: &ConfigMapSeen, now: Timestamp) {
    let (uid, resource_version, content) = match cm {
        ConfigMapSeen::Unreadable(message) => {
            sync.cache.push(CacheUpdate::Unhealthy {
                reason: Unhealthy::SpecInvalid,
                message: message.clone(),
                drop_index: true,
            });
            sync.problem = Some((CatalogSourceReason::ConfigMapError, message.clone()));
            return;
        }
        ConfigMapSeen::Stopped(message) => {
            sync.problem = Some((CatalogSourceReason::ConfigMapError, message.clone()));
            return;
        }
        ConfigMapSeen::Read {
            uid,
            resource_version,
            content,
        } => (uid, resource_version, content),
    };
    let previous = cs
        .status
        .as_ref()
        .and_then(|s| s.config_map_reference.as_ref())
        .filter(|p| p.name == name && &p.uid == uid && &p.resource_version == resource_version);
    sync.status.config_map_reference = Some(ConfigMapResourceReference {
        name: name.to_owned(),
        namespace: cs.namespace().unwrap_or_default(),
        uid: uid.clone(),
        resource_version: resource_version.clone(),
        last_update_time: previous
            .and_then(|p| p.last_update_time.clone())
            .or(Some(Time(now))),
    });
    let refused = match content {
        ConfigMapContent::Unchanged { refused } => refused.clone(),
        ConfigMapContent::Loaded(index) => {
            sync.cache.push(CacheUpdate::Index(Arc::clone(index)));
            None
        }
        ConfigMapContent::Refused(message) => {
            sync.cache.push(CacheUpdate::Unhealthy {
                reason: Unhealthy::Invalid,
                message: message.clone(),
                drop_index: true,
            });
            Some(message.clone())
        }
    };
    if let Some(message) = refused {
        sync.problem = Some((CatalogSourceReason::ConfigMapError, message));
    }
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

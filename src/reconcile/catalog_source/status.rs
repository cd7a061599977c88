//! The sync chain of docs/catalog.md §1 — spec check, ConfigMap, registry server, connection —
//! producing the status to write. `status.reason`/`message` are cleared at the start and carry
//! the first stage that failed.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{Resource, ResourceExt};

use crate::api::event::ObjectEvent;
use crate::api::{
    CatalogSource, CatalogSourceReason, CatalogSourceStatus, ConnectionState, GrpcConnectionState,
    RegistryServiceStatus,
};
use crate::catalog_source::serving::{SERVING_ANNOTATION, ServingMode, serving_mode};
use crate::registry::cache::{CatalogHealth, CatalogRef, HealthReason};
use crate::registry::connection::LinkState;
use crate::registry::pod;

use super::spec_check::{self, Source};
use super::{Reconciler, configmap, image};

/// How soon to look again after (re)creating a registry pod.
const AFTER_RECREATE: Duration = Duration::from_secs(5);

/// Something to tell the user as an Event.
pub(super) type Note = ObjectEvent;

pub(super) struct SyncOutcome {
    pub status: CatalogSourceStatus,
    pub requeue: Option<Duration>,
    pub notes: Vec<Note>,
}

type Problem = (CatalogSourceReason, String);

pub(super) async fn sync(r: &Reconciler, cs: &CatalogSource, key: &CatalogRef) -> SyncOutcome {
    let now = r.ctx.clock.now();
    let observed = cs.status.clone().unwrap_or_default();
    r.ctx.catalogs.register(
        key,
        cs.meta().uid.as_deref(),
        cs.spec.priority.unwrap_or(0),
        now,
    );
    let mut status = CatalogSourceStatus {
        message: None,
        reason: None,
        ..observed.clone()
    };
    let mut notes = Vec::new();

    let source = match spec_check::source(&cs.spec) {
        Ok(source) => source,
        Err(error) => {
            let message = error.to_string();
            r.connections.close(key);
            r.ctx.catalogs.set_health(
                key,
                CatalogHealth::unhealthy(
                    HealthReason::SpecInvalid,
                    format!("catalog {key} has an invalid spec: {message}"),
                    now,
                ),
                true,
            );
            status.reason = Some(CatalogSourceReason::SpecInvalidError);
            status.message = Some(message);
            return SyncOutcome {
                status,
                requeue: None,
                notes,
            };
        }
    };
    if observed.reason == Some(CatalogSourceReason::SpecInvalidError) {
        // Valid again: start from a clean status (conditions belong to other features).
        status = CatalogSourceStatus {
            conditions: observed.conditions.clone(),
            ..CatalogSourceStatus::default()
        };
    }

    let mut problem: Option<Problem> = None;
    let poll = match spec_check::poll_interval(&cs.spec, &source) {
        None => None,
        Some(Ok(interval)) => Some(interval),
        Some(Err((fallback, message))) => {
            problem = Some((CatalogSourceReason::InvalidIntervalError, message));
            Some(fallback)
        }
    };
    let mut requeue = None;

    match &source {
        Source::ConfigMap(name) => {
            r.connections.close(key);
            status.registry_service = None;
            status.connection_state = None;
            match configmap::sync(r, cs, key, name).await {
                Ok((reference, outcome)) => {
                    status.config_map_reference = Some(reference);
                    if let Err(invalid) = outcome {
                        problem = Some((CatalogSourceReason::ConfigMapError, invalid.to_string()));
                    }
                }
                Err(e) => problem = Some((CatalogSourceReason::ConfigMapError, e.to_string())),
            }
        }
        Source::Address(address) => {
            status.config_map_reference = None;
            status.registry_service = Some(address_registry_service(
                observed.registry_service.as_ref(),
                now,
            ));
            connect(r, key, address, &mut status, &mut problem);
        }
        Source::Image(_) => {
            let (mode, unknown) =
                serving_mode(cs.annotations(), r.ctx.options.catalog_sources.serving);
            if let Some(e) = unknown {
                notes.push(ObjectEvent::warning(
                    "InvalidServingMode",
                    format!(
                        "annotation {SERVING_ANNOTATION}: {e}; serving {}",
                        mode.as_str()
                    ),
                ));
            }
            if mode == ServingMode::InProcess {
                // Synced by `in_process::reconcile` before this chain is reached.
                return SyncOutcome {
                    status,
                    requeue: None,
                    notes,
                };
            }
            status.config_map_reference = None;
            let poll = poll.map(|interval| image::Poll {
                interval,
                last: observed.latest_image_registry_poll.as_ref().map(|t| t.0),
            });
            match image::ensure(r, cs, poll).await {
                Ok(outcome) => {
                    if let Some(at) = outcome.polled_at {
                        status.latest_image_registry_poll = Some(Time(at));
                    }
                    status.registry_service = Some(image::registry_service(
                        cs,
                        observed.registry_service.as_ref(),
                        now,
                        outcome.recreated,
                    ));
                    if outcome.recreated || outcome.switched {
                        // New pod, new content: read it again from the start.
                        r.connections.reconnect(key);
                    }
                    requeue = outcome.requeue;
                    if outcome.recreated {
                        requeue = Some(requeue.map_or(AFTER_RECREATE, |d| d.min(AFTER_RECREATE)));
                        notes.push(ObjectEvent::normal(
                            "RegistryPodCreated",
                            format!(
                                "created a registry pod for image {}",
                                cs.spec.image.as_deref().unwrap_or_default()
                            ),
                        ));
                    }
                    if let Some(digest) = outcome.rolled_to {
                        notes.push(ObjectEvent::normal("CatalogImageUpdated", format!(
                                "image {} now points at {digest}; starting a registry pod for it beside the serving one",
                                cs.spec.image.as_deref().unwrap_or_default()
                            )));
                    }
                    if let Some(warning) = outcome.warning {
                        notes.push(ObjectEvent::warning("CatalogImagePollFailed", warning));
                    }
                    let address = pod::service_address(&cs.name_any(), &key.namespace);
                    connect(r, key, &address, &mut status, &mut problem);
                }
                Err(message) => {
                    r.ctx.catalogs.set_health(
                        key,
                        CatalogHealth::unhealthy(
                            HealthReason::Unreachable,
                            format!("catalog {key}: registry server not ensured: {message}"),
                            now,
                        ),
                        false,
                    );
                    problem = Some((
                        CatalogSourceReason::RegistryServerError,
                        format!("couldn't ensure registry server - {message}"),
                    ));
                }
            }
        }
    }
    if let Some((reason, message)) = problem {
        status.reason = Some(reason);
        status.message = Some(message);
    }
    SyncOutcome {
        status,
        requeue,
        notes,
    }
}

/// `{protocol: grpc, createdAt}` for address catalogs, created once (docs/catalog.md §2).
fn address_registry_service(
    previous: Option<&RegistryServiceStatus>,
    now: jiff::Timestamp,
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

/// Stage 4: make sure the connection exists and mirror its state.
fn connect(
    r: &Reconciler,
    key: &CatalogRef,
    address: &str,
    status: &mut CatalogSourceStatus,
    problem: &mut Option<Problem>,
) {
    let conn = r.connections.ensure(key, &r.dial_address(address));
    status.connection_state = Some(GrpcConnectionState {
        address: Some(address.to_owned()),
        last_observed_state: ConnectionState::from_wire(conn.state.as_str()),
        // When the state was entered: a sync with nothing new writes nothing.
        last_connect: Some(Time(conn.since)),
    });
    if conn.state == LinkState::TransientFailure
        && let Some(error) = conn.error
    {
        problem.get_or_insert((
            CatalogSourceReason::RegistryServerError,
            format!("couldn't connect to registry - {error}"),
        ));
    }
    if let Some(error) = conn.content_error {
        problem.get_or_insert((CatalogSourceReason::RegistryServerError, error));
    }
}

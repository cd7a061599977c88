//! One sync of a catalog not served in-process, in the one controller shape (docs/catalog.md
//! §1): observe everything the decision needs — the connection's state, the ConfigMap, the
//! registry objects and the image digest —, decide (`catalog_source::decision::decide`, pure),
//! then carry it out: the registry writes and the status through the one executor, the
//! connection and the catalog cache as the decision says.

use kube::ResourceExt;

use crate::api::CatalogRef;
use crate::api::CatalogSource;
use crate::catalog_source::decision::{
    self, Decision, Link, LinkView, Observed, Outcome, ServingPods, SourceSeen,
};
use crate::catalog_source::fallback::Fallback;
use crate::catalog_source::registry::RegistryWrites;
use crate::catalog_source::spec::{Source, SpecError};
use crate::k8s::effects::{Effects, Write, execute};
use crate::reconcile::work_queue::Next;
use crate::registry::connection::ConnectionStatus;

use super::{CONFLICT_RETRY, Error, Reconciler, configmap, executed_failure, pod_mode};

pub(super) async fn sync_catalog(
    r: &Reconciler,
    cs: &CatalogSource,
    key: &CatalogRef,
    source: Result<Source, SpecError>,
    fallback: Option<&Fallback>,
) -> Result<Next, Error> {
    // Observe.
    let now = r.ctx.clock.now();
    let connection = r.connections.status(key).map(link_view);
    let registry;
    let source = match source {
        Err(error) => SourceSeen::Invalid(error),
        Ok(Source::Address(address)) => SourceSeen::Address(address),
        Ok(Source::ConfigMap(name)) => {
            let seen = configmap::observe(r, cs, key, &name).await;
            SourceSeen::ConfigMap { name, seen }
        }
        Ok(source @ Source::Image(_)) => {
            let (poll, _) = decision::poll_of(cs, &source);
            registry = pod_mode::observe(r, cs, key, poll, now).await;
            SourceSeen::Registry(registry.seen())
        }
    };
    let options = &r.ctx.options.catalog_sources;
    let seen = Observed {
        catalog: cs,
        now,
        address_overrides: &options.address_overrides,
        serving_default: options.serving,
        connection: connection.as_ref(),
        fallback,
        source,
    };

    // Decide, then execute.
    let Decision { registry, outcome } = decision::decide(&seen);
    let outcome = match write_registry(r, key, registry).await {
        Ok(()) => outcome,
        // A pod changed since it was observed (deletes are only of what was seen): decide again
        // on the newer copy.
        Err(err) if err.is_conflict() => return Ok(Next::After(CONFLICT_RETRY)),
        Err(err) => decision::registry_failed(&seen, &err),
    };
    carry_out(r, key, seen.now, &outcome);
    if let Err(err) = execute(&r.ctx.client, &r.ctx.events, &outcome.effects).await {
        return executed_failure(key, err);
    }
    r.ctx
        .metrics
        .catalog_source_ready(&key.namespace, &key.name, outcome.ready);
    Ok(Next::After(
        outcome.effects.requeue.unwrap_or(decision::RESYNC),
    ))
}

/// Writes the registry objects, then deletes the pods not kept; a pod created is remembered
/// (until the store shows it) before any deletion can fail.
async fn write_registry(
    r: &Reconciler,
    key: &CatalogRef,
    writes: RegistryWrites,
) -> Result<(), crate::k8s::write::ApiError> {
    for batch in [writes.objects, writes.orphans] {
        if batch.is_empty() {
            continue;
        }
        let effects = Effects {
            writes: batch,
            ..Effects::default()
        };
        let executed = execute(&r.ctx.client, &r.ctx.events, &effects).await?;
        for (write, written) in effects.writes.iter().zip(executed.written) {
            if let (Write::Create { .. }, Some(pod)) = (write, written) {
                r.expect_pod(key, pod.name_any());
            }
        }
    }
    Ok(())
}

/// What the decision asks beyond API writes: the connection, the catalog cache, and what the
/// connection was made for.
fn carry_out(r: &Reconciler, key: &CatalogRef, now: jiff::Timestamp, outcome: &Outcome) {
    r.update_cache(key, now, &outcome.cache);
    match &outcome.serving_pods {
        Some(ServingPods::Settled(names)) => r.record_serving(key, names.clone()),
        Some(ServingPods::Mixed) => r.record_serving(key, Vec::new()),
        None => {}
    }
    match &outcome.link {
        Link::Leave => {}
        Link::Close => r.connections.close(key),
        Link::Ensure(address) => {
            r.connections.ensure(key, address);
        }
        Link::Redial(address) => {
            r.connections.reconnect(key);
            r.connections.ensure(key, address);
        }
    }
}

fn link_view(status: ConnectionStatus) -> LinkView {
    LinkView {
        address: status.address,
        state: crate::api::ConnectionState::from_wire(status.state.as_str()),
        since: status.since,
        error: status.error,
        content_error: status.content_error,
    }
}

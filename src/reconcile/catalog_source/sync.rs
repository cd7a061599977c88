//! One sync of a catalog, in the one controller shape (docs/catalog.md §1): observe everything
//! the decision needs — the connection's state, the catalog's memos, the ConfigMap, the
//! registry objects, the image digest and, for an image served in-process, the check its memos
//! ask for —, decide once (`catalog_source::decision::decide`, pure), then carry it out: the
//! registry writes and the status through the one executor, the connection, the catalog cache
//! and the memos as the decision says.

use std::time::Instant;

use kube::ResourceExt;

use crate::api::CatalogRef;
use crate::api::CatalogSource;
use crate::catalog_source::decision::{
    self, Decision, InProcessSeen, Link, LinkView, Observed, SourceSeen,
};
use crate::catalog_source::memo::Memo;
use crate::catalog_source::registry::RegistryWrites;
use crate::catalog_source::spec::Source;
use crate::k8s::effects::{Effects, Write, execute};
use crate::k8s::write::ApiError;
use crate::reconcile::work_queue::Next;
use crate::registry::connection::ConnectionStatus;

use super::{CONFLICT_RETRY, Error, Reconciler, configmap, executed_failure, in_process, pod_mode};

pub(super) async fn sync_catalog(
    r: &Reconciler,
    cs: &CatalogSource,
    key: &CatalogRef,
) -> Result<Next, Error> {
    // Observe.
    let now = r.ctx.clock.now();
    let instant = Instant::now();
    let options = &r.ctx.options.catalog_sources;
    let memo = r.memo(key);
    let connection = r.connections.status(key).map(link_view);
    let mut registry = None;
    let leftovers;
    let to_observe = decision::source_to_observe(cs, options.serving).0;
    let in_process = to_observe.is_none();
    let source = match to_observe {
        None => {
            let plan = decision::to_observe(cs, &memo, now);
            let check = match plan.check {
                true => Some(in_process::check(r, cs, key, &memo).await),
                false => None,
            };
            if plan.registry {
                let image = Source::Image(cs.spec.image.clone().unwrap_or_default());
                let (poll, _) = decision::poll_of(cs, &image);
                registry = Some(pod_mode::observe(r, cs, poll, now).await);
            }
            leftovers = r.registry_stores.observe_leftovers(cs);
            SourceSeen::InProcess(InProcessSeen {
                check,
                registry: registry
                    .as_ref()
                    .map(|o: &pod_mode::RegistryObservation| o.seen()),
                leftovers: &leftovers,
            })
        }
        Some(Err(error)) => SourceSeen::Invalid(error),
        Some(Ok(Source::Address(address))) => SourceSeen::Address(address),
        Some(Ok(Source::ConfigMap(name))) => {
            let seen = configmap::observe(r, cs, key, &name, memo.config_map.as_ref()).await;
            SourceSeen::ConfigMap { name, seen }
        }
        Some(Ok(source @ Source::Image(_))) => {
            let (poll, _) = decision::poll_of(cs, &source);
            let observation = registry.insert(pod_mode::observe(r, cs, poll, now).await);
            SourceSeen::Registry(observation.seen())
        }
    };
    let seen = Observed {
        catalog: cs,
        now,
        instant,
        address_overrides: &options.address_overrides,
        serving_default: options.serving,
        fallback_retry: options
            .fallback_retry
            .unwrap_or(crate::catalog_source::fallback::RETRY_IN_PROCESS),
        connection: connection.as_ref(),
        memo: &memo,
        source,
    };

    // Decide, once.
    let Decision {
        registry,
        outcome,
        memo,
        retire,
        if_registry_fails,
    } = decision::decide(&seen);

    // Execute: the registry, then what the decision asks of this process, then the status.
    let (outcome, memo) = match write_registry(r, registry).await {
        Ok(created) => (outcome, remember_created(memo, created)),
        Err((err, created)) => {
            let memo = remember_created(if_registry_fails.memo.clone(), created);
            if err.is_conflict() {
                // A pod changed since it was observed (deletes are only of what was seen):
                // decide again on the newer copy.
                r.memos().insert(key.clone(), memo);
                return Ok(Next::After(CONFLICT_RETRY));
            }
            (if_registry_fails.outcome(cs, &err), memo)
        }
    };
    r.memos().insert(key.clone(), memo);
    r.update_cache(key, now, &outcome.cache);
    if let Some(digest) = retire {
        r.retired().push(digest);
    }
    if in_process {
        // Content this catalog stopped serving (or none serves) is removed from disk.
        in_process::collect(r);
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

/// Writes the registry objects, then deletes the pods not kept. Returns the names of the pods
/// created — with the failure, if a write failed: a pod created is remembered (until the store
/// shows it) whatever happens after.
async fn write_registry(
    r: &Reconciler,
    writes: RegistryWrites,
) -> Result<Vec<String>, (ApiError, Vec<String>)> {
    let mut created = Vec::new();
    for batch in [writes.objects, writes.orphans] {
        if batch.is_empty() {
            continue;
        }
        let effects = Effects {
            writes: batch,
            ..Effects::default()
        };
        let executed = match execute(&r.ctx.client, &r.ctx.events, &effects).await {
            Ok(executed) => executed,
            Err(err) => return Err((err, created)),
        };
        for (write, written) in effects.writes.iter().zip(executed.written) {
            if let (Write::Create { .. }, Some(pod)) = (write, written) {
                created.push(pod.name_any());
            }
        }
    }
    Ok(created)
}

/// The memos with the pods the API server created (named by its answer).
fn remember_created(mut memo: Memo, created: Vec<String>) -> Memo {
    let now = Instant::now();
    for name in created {
        memo.pod_created(name, now);
    }
    memo
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

//! The Subscription reconciler (thin shell). Resolution is per namespace (docs/resolution.md §1), so
//! the unit of work is a namespace: any change to a Subscription, InstallPlan, installed CSV or
//! OperatorGroup of a namespace with Subscriptions queues it, as does a catalog change, a change
//! to a CRD a downgrade or rollback refusal there names (docs/upgrades.md §2), or the periodic
//! resync. Each sync reads the namespace from the shared stores, asks the pure core
//! (`resolve::subscription::decide_effects`) what to do, and executes it.

mod catalogs;
mod observe;
mod stores;
mod sync;

use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};

pub use catalogs::{CatalogSnapshots, LoadError, catalog_changes, load_index};
pub use observe::Observed;
pub use stores::{SubscriptionStores, Touched, installed_view};
pub use sync::{NamespaceSynced, SubscriptionSyncError, sync_namespace};

use crate::metrics::CountedKind;
use crate::reconcile::Context;
use crate::reconcile::work_queue::{Loop, Next, WorkQueue, run_workers};
use crate::resolve::subscription::RETRY_SOON;

/// Every namespace with Subscriptions is synced at least this often (OLM resyncs too).
pub const RESYNC: Duration = Duration::from_secs(300);
/// Namespaces synced in parallel.
pub const WORKERS: usize = 2;

/// How long the first syncs wait for the catalogs that exist to be loaded once.
const FIRST_LOAD_WAIT: Duration = Duration::from_secs(30);

/// Waits (at most [`FIRST_LOAD_WAIT`]) until every CatalogSource of the cluster is registered
/// and past its first load. A namespace synced before would record its catalogs missing or
/// unhealthy, then healthy again a second later: after a restart, or a move from OLM, that is
/// three rewrites of every Subscription for nothing (found by tests/e2e_takeover).
async fn wait_for_first_loads(ctx: &Context, catalogs: &dyn CatalogSnapshots) {
    use crate::api::CatalogRef;
    use crate::api::CatalogSource;

    let api: kube::Api<CatalogSource> = kube::Api::all(ctx.client.clone());
    let keys: Vec<CatalogRef> = match api.list_metadata(&Default::default()).await {
        Ok(list) => list
            .items
            .iter()
            .map(|c| {
                CatalogRef::new(
                    c.metadata.namespace.clone().unwrap_or_default(),
                    c.metadata.name.clone().unwrap_or_default(),
                )
            })
            .collect(),
        Err(error) => {
            tracing::debug!(%error, "cannot list CatalogSources; not waiting for their loads");
            return;
        }
    };
    let loaded = || keys.iter().all(|key| catalogs.first_load_done(key));
    let waited = tokio::time::timeout(FIRST_LOAD_WAIT, async {
        let mut changes = ctx.catalogs.changes();
        while !loaded() {
            if changes.changed().await.is_err() {
                return;
            }
        }
    })
    .await;
    if waited.is_err() {
        tracing::info!(
            catalogs = keys.len(),
            "catalogs not all loaded after {}s; syncing Subscriptions anyway",
            FIRST_LOAD_WAIT.as_secs()
        );
    }
}

/// Runs the Subscription controller until the process stops. `catalog_changes` yields whenever
/// a catalog's content or health changed (every namespace with Subscriptions is then synced).
pub async fn run(
    ctx: Arc<Context>,
    catalogs: Arc<dyn CatalogSnapshots>,
    catalog_changes: impl Stream<Item = ()> + Send + 'static,
) {
    let (stores, touched) = SubscriptionStores::start(&ctx.watches);
    let queue: WorkQueue<String> = WorkQueue::new();

    let changes = {
        let (queue, stores, metrics) = (queue.clone(), stores.clone(), ctx.metrics.clone());
        touched.for_each(move |touched| {
            match touched {
                // A Subscription's namespace is synced even when it was the last one (the sync
                // then forgets its metrics).
                Touched::Subscription(ns) => {
                    metrics.set_count(CountedKind::Subscription, stores.subscriptions.len());
                    queue.add(ns);
                }
                Touched::Other(ns) if stores.subscriptions.has_namespace(&ns) => queue.add(ns),
                Touched::Other(_) => {}
            }
            async {}
        })
    };
    let catalog_events = {
        let (queue, stores) = (queue.clone(), stores.clone());
        catalog_changes.for_each(move |()| {
            queue.add_all(stores.subscriptions.namespaces());
            async {}
        })
    };
    let resync = {
        let (queue, stores) = (queue.clone(), stores.clone());
        async move {
            let mut tick = tokio::time::interval(RESYNC);
            loop {
                tick.tick().await;
                queue.add_all(stores.subscriptions.namespaces());
            }
        }
    };
    let workers = async {
        // A sync on a half-listed store would take plans for deleted and CSVs for missing.
        if let Err(error) = stores.ready().await {
            tracing::warn!(%error, "subscription stores never filled; the controller stops");
            return;
        }
        wait_for_first_loads(&ctx, catalogs.as_ref()).await;
        let spec = Loop {
            kind: "Subscription",
            workers: WORKERS,
            metrics: ctx.metrics.clone(),
        };
        run_workers(spec, queue.clone(), move |ns: String| {
            let (ctx, stores, catalogs) = (ctx.clone(), stores.clone(), catalogs.clone());
            async move {
                let synced = sync_namespace(&ctx, &stores, catalogs.as_ref(), &ns).await?;
                // Rate-limited on failure (`run_workers`), as OLM retries a failed namespace
                // sync (docs/resolution.md §9).
                Ok::<_, SubscriptionSyncError>(if synced.retry_soon {
                    Next::After(RETRY_SOON)
                } else {
                    Next::Done
                })
            }
        })
        .await;
    };
    tokio::select! {
        () = changes => tracing::warn!("subscription controller watches ended"),
        () = catalog_events => tracing::warn!("catalog change stream ended"),
        () = resync => {},
        () = workers => {},
    }
}

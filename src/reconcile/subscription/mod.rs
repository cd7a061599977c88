//! The Subscription reconciler (thin shell). Resolution is per namespace (docs/resolution.md §1), so
//! the unit of work is a namespace: any event on a Subscription, InstallPlan, CSV or
//! OperatorGroup of a namespace with Subscriptions queues it, as does a catalog change or the
//! periodic resync. Each sync reads the namespace, calls the pure core
//! (`resolve::subscription`), and writes.

mod catalogs;
mod observe;
mod sync;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{Stream, StreamExt};
use kube::ResourceExt;
use kube::api::{Api, PartialObjectMeta};
use kube_runtime::WatchStreamExt;
use kube_runtime::reflector;
use kube_runtime::watcher::{self, Event};

pub use catalogs::{CatalogSnapshots, LoadError, StaticCatalogs, catalog_changes, load_index};
pub use observe::csv_resource;
pub use sync::{NamespaceSynced, SubscriptionSyncError, sync_namespace};

use crate::api::keys::COPIED_FROM_LABEL;
use crate::api::{ClusterServiceVersion, InstallPlan, OperatorGroup, Subscription};
use crate::metrics::CountedKind;
use crate::reconcile::Context;
use crate::reconcile::work_queue::WorkQueue;

/// Every namespace with Subscriptions is synced at least this often (OLM resyncs too).
pub const RESYNC: Duration = Duration::from_secs(300);
/// Delay before looking again at a namespace whose resolution an error prevented or whose
/// status write conflicted (a failed sync backs off instead: `WorkQueue::retry`).
pub const RETRY: Duration = Duration::from_secs(5);
/// Namespaces synced in parallel.
pub const WORKERS: usize = 2;

/// Runs the Subscription controller until the process stops. `catalog_changes` yields whenever
/// a catalog's content or health changed (every namespace with Subscriptions is then synced).
pub async fn run(
    ctx: Arc<Context>,
    catalogs: Arc<dyn CatalogSnapshots>,
    catalog_changes: impl Stream<Item = ()> + Send + 'static,
) {
    let queue: WorkQueue<String> = WorkQueue::new();
    let known = KnownNamespaces::default();
    let client = ctx.client.clone();

    let subscriptions = {
        let (queue, known) = (queue.clone(), known.clone());
        // The store only feeds `subscription_count`; syncs read the namespace afresh.
        let (store, writer) = reflector::store::<Subscription>();
        let metrics = ctx.metrics.clone();
        namespaces_of(
            watcher::watcher(
                Api::<Subscription>::all(client.clone()),
                watcher::Config::default(),
            )
            .reflect(writer),
        )
        .for_each(move |ns| {
            metrics.set_count(CountedKind::Subscription, store.state().len());
            known.insert(&ns);
            queue.add(ns);
            async {}
        })
    };
    // The next three watches only say which namespace changed, so they carry metadata only.
    // Copied CSVs are left out (the resolver never counts them, docs/resolution.md §3): an
    // all-namespaces operator has one in every namespace, 35 kB each for a typical CSV, and
    // watching them in full made this watch most of the controller's memory.
    let plans = follow(
        namespaces_of(watcher::watcher(
            Api::<PartialObjectMeta<InstallPlan>>::all(client.clone()),
            watcher::Config::default(),
        )),
        queue.clone(),
        known.clone(),
    );
    let groups = follow(
        namespaces_of(watcher::watcher(
            Api::<PartialObjectMeta<OperatorGroup>>::all(client.clone()),
            watcher::Config::default(),
        )),
        queue.clone(),
        known.clone(),
    );
    let csvs = follow(
        namespaces_of(watcher::watcher(
            Api::<PartialObjectMeta<ClusterServiceVersion>>::all(client.clone()),
            watcher::Config::default().labels(&format!("!{COPIED_FROM_LABEL}")),
        )),
        queue.clone(),
        known.clone(),
    );
    let catalog_events = {
        let (queue, known) = (queue.clone(), known.clone());
        catalog_changes.for_each(move |()| {
            queue.add_all(known.snapshot());
            async {}
        })
    };
    let resync = {
        let (queue, known) = (queue.clone(), known.clone());
        async move {
            let mut tick = tokio::time::interval(RESYNC);
            loop {
                tick.tick().await;
                queue.add_all(known.snapshot());
            }
        }
    };
    let workers = futures::future::join_all(
        (0..WORKERS).map(|_| worker(ctx.clone(), catalogs.clone(), queue.clone(), known.clone())),
    );
    tokio::select! {
        () = subscriptions => tracing::warn!("subscription watch ended"),
        () = plans => tracing::warn!("install plan watch ended"),
        () = groups => tracing::warn!("operator group watch ended"),
        () = csvs => tracing::warn!("csv watch ended"),
        () = catalog_events => tracing::warn!("catalog change stream ended"),
        () = resync => {},
        _ = workers => {},
    }
}

async fn worker(
    ctx: Arc<Context>,
    catalogs: Arc<dyn CatalogSnapshots>,
    queue: WorkQueue<String>,
    known: KnownNamespaces,
) {
    loop {
        let ns = queue.next().await;
        let synced = ctx
            .metrics
            .timed_reconcile(
                "Subscription",
                &ns,
                sync_namespace(&ctx, catalogs.as_ref(), &ns),
            )
            .await;
        match synced {
            Ok(report) => {
                // The set shrinks when a sync finds no Subscription left, and a sync that finds
                // some puts the namespace back (a Subscription created meanwhile).
                if report.no_subscriptions {
                    known.remove(&ns);
                } else {
                    known.insert(&ns);
                }
                queue.forget(&ns);
                if report.retry_soon {
                    queue.add_after(ns.clone(), RETRY);
                }
            }
            Err(error) => {
                // Rate-limited, as OLM retries a failed namespace sync (docs/resolution.md §9).
                let after = queue.retry(ns.clone());
                tracing::warn!(namespace = %ns, %error, ?after, "subscription sync failed; retrying");
            }
        }
        queue.done(&ns);
    }
}

/// Namespaces of the objects a watch reports (restarting the watch on errors).
fn namespaces_of<K>(
    events: impl Stream<Item = Result<Event<K>, watcher::Error>> + Send + 'static,
) -> impl Stream<Item = String> + Send
where
    K: kube::Resource + Clone + Send + 'static,
{
    events.default_backoff().filter_map(|event| async move {
        match event {
            Ok(Event::Apply(o) | Event::Delete(o) | Event::InitApply(o)) => o.namespace(),
            Ok(_) => None,
            Err(error) => {
                tracing::debug!(%error, "watch error; the watch restarts");
                None
            }
        }
    })
}

/// Queues namespaces that have Subscriptions.
async fn follow(
    events: impl Stream<Item = String>,
    queue: WorkQueue<String>,
    known: KnownNamespaces,
) {
    events
        .for_each(move |ns| {
            if known.contains(&ns) {
                queue.add(ns);
            }
            async {}
        })
        .await;
}

/// The namespaces that have Subscriptions, as far as the last event or sync knows.
#[derive(Clone, Default)]
struct KnownNamespaces(Arc<Mutex<HashSet<String>>>);

impl KnownNamespaces {
    fn set(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn insert(&self, ns: &str) {
        if !self.contains(ns) {
            self.set().insert(ns.to_owned());
        }
    }

    fn remove(&self, ns: &str) {
        self.set().remove(ns);
    }

    fn contains(&self, ns: &str) -> bool {
        self.set().contains(ns)
    }

    fn snapshot(&self) -> Vec<String> {
        self.set().iter().cloned().collect()
    }
}

//! The OperatorGroup side of the olm-operator: the group sync (docs/operator-groups.md §2), namespace
//! labels (§4), the group ClusterRoles (§9.1) and — through [`copied_csv`] — copied
//! CSVs, their RBAC and the OLMConfig switch (docs/operator-groups.md §10).
//!
//! One set of watches ([`cache`]) feeds four queues ([`routes`]); each queue has its own
//! workers. Decisions come from `crate::operator_group`.

pub mod cache;
pub mod copied_csv;
mod group_sync;
mod namespace_sync;
pub mod routes;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use kube_runtime::watcher::Event;

use crate::reconcile::Context;
use crate::reconcile::work_queue;

pub use cache::{Caches, CopyCache};
pub use routes::Queues;

/// A namespaced object's key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    pub namespace: String,
    pub name: String,
}

impl ObjectKey {
    pub fn new(namespace: &str, name: &str) -> Self {
        Self {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }
}

impl std::fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Parameters of the JSON merge patches this side sends: olm-rs's field manager. Merge patches
/// are used for metadata of objects users own (CSVs, OperatorGroups, Namespaces,
/// ServiceAccounts) — they touch exactly the keys named — and for whole-status writes.
pub fn merge_params() -> kube::api::PatchParams {
    crate::k8s::patch_params()
}

/// Settings of the OperatorGroup side.
#[derive(Debug, Clone)]
pub struct OperatorGroupOptions {
    /// Namespaces that keep their copied CSVs when copying is disabled (OLM's
    /// `--protectedCopiedCSVNamespaces`).
    pub protected_copied_csv_namespaces: BTreeSet<String>,
    /// Concurrent writes of copies for one original; the API server's own limits
    /// (max-requests-inflight, APF) are the real bound, so this only needs to keep it busy.
    pub copy_write_concurrency: usize,
    /// Workers per queue.
    pub workers: usize,
    /// Everything is queued again this often, catching events lost while a watch reconnected.
    pub resync: Duration,
}

impl Default for OperatorGroupOptions {
    fn default() -> Self {
        Self {
            protected_copied_csv_namespaces: BTreeSet::new(),
            copy_write_concurrency: 32,
            workers: 4,
            resync: Duration::from_secs(300),
        }
    }
}

/// What every loop of this side shares.
pub struct Shared {
    pub ctx: Arc<Context>,
    pub caches: Caches,
    pub queues: Queues,
    pub options: OperatorGroupOptions,
    pub copy_state: copied_csv::CopyLoopState,
}

/// Runs the OperatorGroup side with default options until the process stops.
pub async fn run(ctx: Arc<Context>) {
    run_with(ctx, OperatorGroupOptions::default()).await;
}

/// Runs the OperatorGroup side until the process stops.
pub async fn run_with(ctx: Arc<Context>, options: OperatorGroupOptions) {
    let (caches, feeds) = cache::watch_all(&ctx.client);
    let shared = Arc::new(Shared {
        ctx,
        caches,
        queues: Queues::default(),
        options,
        copy_state: copied_csv::CopyLoopState::default(),
    });
    let mut tasks: Vec<BoxFuture<'static, ()>> = drive_feeds(&shared, feeds);
    tasks.push(Box::pin(workers(shared.clone())));
    futures::future::join_all(tasks).await;
}

fn drive_feeds(shared: &Arc<Shared>, feeds: cache::Feeds) -> Vec<BoxFuture<'static, ()>> {
    let s = shared.clone();
    let groups = feeds.groups.for_each(move |event| {
        if let Event::Apply(og) | Event::Delete(og) | Event::InitApply(og) = &event {
            s.queues.on_group(&s.caches, og);
        }
        async {}
    });
    let s = shared.clone();
    let csvs = feeds.csvs.for_each(move |event| {
        if let Event::Apply(csv) | Event::Delete(csv) | Event::InitApply(csv) = &event {
            s.queues.on_csv(&s.caches, csv);
        }
        async {}
    });
    let s = shared.clone();
    let copies = feeds.copies.for_each(move |event| {
        if let Some(change) = s.caches.copies.apply(event) {
            s.queues.on_copy(&s.caches, change);
        }
        async {}
    });
    let s = shared.clone();
    let namespaces = feeds.namespaces.for_each(move |event| {
        match &event {
            Event::Apply(ns) | Event::InitApply(ns) => s.queues.on_namespace(&s.caches, ns, false),
            Event::Delete(ns) => s.queues.on_namespace(&s.caches, ns, true),
            Event::Init | Event::InitDone => {}
        }
        async {}
    });
    let s = shared.clone();
    let roles = feeds.group_roles.for_each(move |event| {
        if let Event::Apply(role) | Event::Delete(role) | Event::InitApply(role) = &event {
            s.queues.on_group_role(role);
        }
        async {}
    });
    let s = shared.clone();
    let configs = feeds.olm_configs.for_each(move |event| {
        if matches!(event, Event::Apply(_) | Event::Delete(_) | Event::InitDone) {
            s.queues.on_olm_config(&s.caches);
        }
        async {}
    });
    vec![
        Box::pin(groups),
        Box::pin(csvs),
        Box::pin(copies),
        Box::pin(namespaces),
        Box::pin(roles),
        Box::pin(configs),
    ]
}

/// How long start-up waits for the OLMConfig watch; a cluster without the OLMConfig CRD never
/// fills that cache, and copying then stays enabled (docs/operator-groups.md §10: no OLMConfig = enabled).
const OLM_CONFIG_WAIT: Duration = Duration::from_secs(5);

async fn workers(shared: Arc<Shared>) {
    // Nothing is decided on half-filled caches: a selector group evaluated before the
    // namespaces are listed would drop its targets and restart its operators' pods.
    let c = &shared.caches;
    let _ = c.groups.wait_until_ready().await;
    let _ = c.csvs.wait_until_ready().await;
    let _ = c.namespaces.wait_until_ready().await;
    let _ = c.group_roles.wait_until_ready().await;
    c.copies.wait_until_ready().await;
    if tokio::time::timeout(OLM_CONFIG_WAIT, c.olm_configs.wait_until_ready())
        .await
        .is_err()
    {
        tracing::warn!("OLMConfig is not served; copied CSVs stay enabled");
    }
    shared.queues.resync(c);

    let n = shared.options.workers;
    let s = shared.clone();
    let groups = work_queue::run_workers(
        "operatorgroup",
        shared.queues.groups.clone(),
        n,
        move |key| {
            let s = s.clone();
            async move { group_sync::sync(&s, &key).await }
        },
    );
    let s = shared.clone();
    let namespaces = work_queue::run_workers(
        "namespace",
        shared.queues.namespaces.clone(),
        n,
        move |name| {
            let s = s.clone();
            async move { namespace_sync::sync(&s, &name).await }
        },
    );
    let s = shared.clone();
    let copies =
        work_queue::run_workers("copied-csv", shared.queues.copies.clone(), n, move |key| {
            let s = s.clone();
            async move { copied_csv::sync(&s, &key).await }
        });
    let s = shared.clone();
    let config = work_queue::run_workers(
        "olmconfig",
        shared.queues.olm_config.clone(),
        1,
        move |()| {
            let s = s.clone();
            async move { copied_csv::sync_olm_config(&s).await }
        },
    );
    let s = shared.clone();
    let resync = async move {
        let mut tick = tokio::time::interval(s.options.resync);
        tick.tick().await;
        loop {
            tick.tick().await;
            s.queues.resync(&s.caches);
        }
    };
    futures::join!(groups, namespaces, copies, config, resync);
}

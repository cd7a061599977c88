//! The OperatorGroup side of the olm-operator: the group sync (docs/operator-groups.md §2), namespace
//! labels (§4), the group ClusterRoles (§9.1) and — through [`copied_csv`] — copied
//! CSVs, their RBAC and the OLMConfig switch (docs/operator-groups.md §10).
//!
//! One set of watches ([`stores`]) feeds four queues ([`routes`]); each queue has its own
//! workers, each sync timed and its failures counted by kind of error
//! (`olm_rs_reconcile_duration_seconds`, `olm_rs_reconcile_errors_total`, kinds `OperatorGroup`,
//! `Namespace`, `CopiedCSV`, `OLMConfig`). Every sync has the one reconciler shape (docs/controller-startup.md): observe from
//! the stores, decide in `crate::operator_group` (pure), execute through `k8s::effects` (for copies,
//! its fan-out, `execute_fan_out`).

pub mod copied_csv;
pub mod copy_index;
mod group_sync;
mod namespace_sync;
pub mod namespaced_name;
pub mod routes;
pub mod shared;
pub mod stores;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use kube::ResourceExt;

use crate::reconcile::Context;
use crate::reconcile::work_queue::{Loop, run_workers};

pub use copy_index::CopyIndex;
pub use routes::Queues;
pub use shared::{NamespacedName, OperatorGroupOptions, Shared};
pub use stores::Stores;

/// Runs the OperatorGroup side with default options until the process stops.
pub async fn run(ctx: Arc<Context>) {
    run_with(ctx, OperatorGroupOptions::default()).await;
}

/// Runs the OperatorGroup side until the process stops.
pub async fn run_with(ctx: Arc<Context>, options: OperatorGroupOptions) {
    let (stores, feeds) = stores::watch_all(&ctx.client, &ctx.watches);
    let shared = Arc::new(Shared {
        ctx,
        stores,
        queues: Queues::default(),
        options,
    });
    let mut tasks: Vec<BoxFuture<'static, ()>> = drive_feeds(&shared, feeds);
    tasks.push(Box::pin(workers(shared.clone())));
    futures::future::join_all(tasks).await;
}

fn drive_feeds(shared: &Arc<Shared>, feeds: stores::Feeds) -> Vec<BoxFuture<'static, ()>> {
    let s = shared.clone();
    let groups = feeds.groups.for_each(move |og| {
        s.queues.on_group(&s.stores, &og);
        async {}
    });
    let s = shared.clone();
    let csvs = feeds.csvs.for_each(move |csv| {
        s.queues.on_csv(&s.stores, &csv);
        async {}
    });
    let s = shared.clone();
    let copies = feeds.copies.for_each(move |event| {
        if let Some(change) = s.stores.copies.apply(event) {
            s.queues.on_copy(&s.stores, change);
        }
        async {}
    });
    let s = shared.clone();
    let namespaces = feeds.namespaces.for_each(move |ns| {
        // The store already holds what the event said: a namespace it lacks was deleted.
        let deleted = s
            .stores
            .namespaces
            .get(stores::CLUSTER, &ns.name_any())
            .is_none();
        s.queues.on_namespace(&s.stores, &ns, deleted);
        async {}
    });
    let s = shared.clone();
    let accounts = feeds.service_accounts.for_each(move |account| {
        let key = NamespacedName::new(
            account.metadata.namespace.as_deref().unwrap_or_default(),
            &account.name_any(),
        );
        s.queues.on_service_account(&s.stores, &key);
        async {}
    });
    let s = shared.clone();
    let roles = feeds.cluster_roles.for_each(move |role| {
        s.queues.on_group_role(&role);
        async {}
    });
    let s = shared.clone();
    let csv_roles = feeds.roles.for_each(move |role| {
        s.queues.on_csv_rbac(&role.metadata);
        async {}
    });
    let s = shared.clone();
    let csv_bindings = feeds.role_bindings.for_each(move |binding| {
        s.queues.on_csv_rbac(&binding.metadata);
        async {}
    });
    let s = shared.clone();
    let configs = feeds.olm_configs.for_each(move |_| {
        s.queues.on_olm_config(&s.stores);
        async {}
    });
    // Kept current for the copy loop's RBAC step; their changes queue nothing.
    let crds = feeds.crds.for_each(|_| async {});
    let api_services = feeds.api_services.for_each(|_| async {});
    vec![
        Box::pin(groups),
        Box::pin(csvs),
        Box::pin(copies),
        Box::pin(namespaces),
        Box::pin(accounts),
        Box::pin(roles),
        Box::pin(csv_roles),
        Box::pin(csv_bindings),
        Box::pin(configs),
        Box::pin(crds),
        Box::pin(api_services),
    ]
}

/// How long start-up waits for the OLMConfig watch; a cluster without the OLMConfig CRD never
/// fills that cache, and copying then stays enabled (docs/operator-groups.md §10: no OLMConfig = enabled).
const OLM_CONFIG_WAIT: Duration = Duration::from_secs(5);

async fn workers(shared: Arc<Shared>) {
    // Nothing is decided on half-filled stores: a selector group evaluated before the
    // namespaces are listed would drop its targets and restart its operators' pods.
    // A store whose watch ended (only at shutdown) is as ready as it will get.
    let c = &shared.stores;
    let _ = c.groups.wait_until_ready().await;
    let _ = c.csvs.wait_until_ready().await;
    let _ = c.namespaces.wait_until_ready().await;
    let _ = c.service_accounts.wait_until_ready().await;
    let _ = c.cluster_roles.wait_until_ready().await;
    let _ = c.roles.wait_until_ready().await;
    let _ = c.role_bindings.wait_until_ready().await;
    let _ = c.crds.wait_until_ready().await;
    let _ = c.api_services.wait_until_ready().await;
    c.copies.wait_until_ready().await;
    if tokio::time::timeout(OLM_CONFIG_WAIT, c.olm_configs.wait_until_ready())
        .await
        .is_err()
    {
        tracing::warn!("OLMConfig is not served; copied CSVs stay enabled");
    }
    shared.queues.resync(c);

    let n = shared.options.workers;
    let spec = |kind: &'static str, workers: usize| Loop {
        kind,
        workers,
        metrics: shared.ctx.metrics.clone(),
    };
    let s = shared.clone();
    let groups = run_workers(
        spec("OperatorGroup", n),
        shared.queues.groups.clone(),
        move |key| {
            let s = s.clone();
            async move { group_sync::sync(&s, &key).await }
        },
    );
    let s = shared.clone();
    let namespaces = run_workers(
        spec("Namespace", n),
        shared.queues.namespaces.clone(),
        move |name| {
            let s = s.clone();
            async move { namespace_sync::sync(&s, &name).await }
        },
    );
    let copy_state = Arc::new(copied_csv::CopyLoopState::default());
    let s = shared.clone();
    let state = copy_state.clone();
    // Keyed by the original CSV; its own kind would mix with the CSV controller's.
    let copies = run_workers(
        spec("CopiedCSV", n),
        shared.queues.copies.clone(),
        move |key| {
            let (s, state) = (s.clone(), state.clone());
            async move { copied_csv::sync(&s, &state, &key).await }
        },
    );
    let s = shared.clone();
    let config = run_workers(
        spec("OLMConfig", 1),
        shared.queues.olm_config.clone(),
        move |_| {
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
            // What was ensured is checked against the cluster again: RBAC someone removed
            // since is put back.
            copy_state.clear_memos();
            s.queues.resync(&s.stores);
        }
    };
    futures::join!(groups, namespaces, copies, config, resync);
}

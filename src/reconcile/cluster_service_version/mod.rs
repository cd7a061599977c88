//! The ClusterServiceVersion controller: the thin shell around [`crate::csv`].
//!
//! It runs on olm-rs's one engine (`reconcile::work_queue`): the watches of [`feeds`] queue the
//! keys of the CSVs each change concerns, and each run of [`sync`] observes from the stores
//! ([`observe`]), asks the core for the writes of one sync, hands them to the one executor
//! (`k8s::effects`) and says when to look again (docs/csv-phases.md §1).

mod certs;
mod created;
mod feeds;
mod observe;
mod stores;
mod sync;

use std::sync::Arc;
use std::time::Duration;

use crate::k8s::write::ApiError;
use crate::reconcile::keys::NamespacedName;
use crate::reconcile::work_queue::{Backoff, Loop, WorkQueue, run_workers};

use super::Context;
use stores::Stores;

/// How often a CSV is re-synced without events (OLM: 5 minutes); the default of
/// [`crate::reconcile::ControllerOptions::csv_resync`].
pub const RESYNC: Duration = Duration::from_secs(5 * 60);

/// A failed sync is retried after 1 s, doubling per consecutive failure of the CSV up to
/// [`RESYNC`].
pub const BACKOFF: Backoff = Backoff {
    first: Duration::from_secs(1),
    max: RESYNC,
};

/// CSVs synced at once.
pub const WORKERS: usize = 8;

/// Why a sync failed; the CSV is retried with back-off (a conflict soon, `run_workers`).
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error(transparent)]
    Api(#[from] ApiError),
    #[error("CSV {csv}: {reason}")]
    Backoff { csv: String, reason: String },
}

impl crate::k8s::errors::ReconcileFailure for ReconcileError {
    fn error_label(&self) -> &'static str {
        match self {
            ReconcileError::Api(e) => e.metric_label(),
            ReconcileError::Backoff { .. } => crate::k8s::errors::DECISION,
        }
    }
}

/// What every sync shares.
struct Shared {
    ctx: Arc<Context>,
    stores: Stores,
    /// Webhook configurations created and not yet in the stores (`created.rs`).
    created: created::CreatedWebhooks,
    /// The controller's queue: the feeds, hand-offs between CSVs and requeues add to it.
    queue: WorkQueue<NamespacedName>,
}

/// Runs the CSV controller until the process stops.
pub async fn run(ctx: Arc<Context>) {
    let queue = WorkQueue::with_backoff(BACKOFF);
    let (stores, feeds) = feeds::watch(&ctx, &queue);
    let shared = Arc::new(Shared {
        ctx,
        stores,
        created: created::CreatedWebhooks::default(),
        queue,
    });
    let workers = {
        let shared = Arc::clone(&shared);
        async move {
            // Deciding on half-filled stores would see requirements as missing.
            if let Err(error) = shared.stores.ready().await {
                tracing::warn!(%error, "CSV stores never filled; the controller stops");
                return;
            }
            let spec = Loop {
                kind: "ClusterServiceVersion",
                workers: WORKERS,
                metrics: Arc::clone(&shared.ctx.metrics),
            };
            let handle = {
                let shared = Arc::clone(&shared);
                move |key: NamespacedName| {
                    let shared = Arc::clone(&shared);
                    async move { sync::sync(&shared, &key).await }
                }
            };
            run_workers(spec, shared.queue.clone(), handle).await;
        }
    };
    let mut tasks = feeds;
    tasks.push(Box::pin(workers));
    futures::future::join_all(tasks).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ClusterServiceVersion;
    use crate::k8s::errors::ReconcileFailure;
    use crate::k8s::write::{ObjectKey, Operation};

    #[test]
    fn failed_syncs_are_labelled_by_their_kind_of_failure() {
        let conflict = ApiError::new(
            Operation::WriteStatus,
            ObjectKey::new::<ClusterServiceVersion>(Some("ns"), "a.v1"),
            kube::Error::Api(
                kube::core::Status::failure("the object has been modified", "Conflict")
                    .with_code(409)
                    .boxed(),
            ),
        );
        assert_eq!(ReconcileError::Api(conflict).error_label(), "conflict");
        let not_ready = ReconcileError::Backoff {
            csv: "a.v1".into(),
            reason: "waiting for deployment".into(),
        };
        assert_eq!(not_ready.error_label(), "decision");
    }
}

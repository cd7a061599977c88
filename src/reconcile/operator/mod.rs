//! The Operator controller: the thin shell around [`crate::operator_api`]
//! (docs/operator-api.md). OLM splits this work between an adoption controller (labels) and an
//! Operator controller (the Operator and its status); here one loop keyed by Operator name
//! does both, on the one engine (`reconcile::work_queue`) with the one executor.
//!
//! [`feeds`] maps every change of a component kind to the Operators it concerns; each run
//! observes from the shared stores ([`observe`]) and the Operator's operand watches
//! ([`operands`]), asks [`crate::operator_api::decide`] and executes the writes.

mod feeds;
mod observe;
pub mod operands;

use std::sync::Arc;
use std::time::Duration;

use kube::core::GroupVersionKind;

use crate::k8s::effects::execute;
use crate::k8s::write::ApiError;
use crate::reconcile::work_queue::{Loop, Next, WorkQueue, run_workers};

use super::Context;
use observe::Stores;
use operands::{OperandWatches, TRANSIENT_RETRY};

/// Operators synced at once.
const WORKERS: usize = 2;
/// How often a cluster without the Operator CRD is asked again whether it serves it.
const CRD_RECHECK: Duration = Duration::from_secs(30);
/// When a label patch finds its object gone, the sync runs again after this long, when the
/// stores know.
const GONE_RETRY: Duration = Duration::from_secs(1);

/// Why a sync failed; the Operator is retried with back-off (a conflict soon).
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error(transparent)]
    Api(#[from] ApiError),
}

impl crate::k8s::errors::ReconcileFailure for ReconcileError {
    fn error_label(&self) -> &'static str {
        match self {
            ReconcileError::Api(e) => e.metric_label(),
        }
    }
}

/// Runs the Operator controller until the process stops. On a cluster that does not serve
/// the Operator CRD (an upgrade whose CRDs were not updated) it says so and checks again
/// every [`CRD_RECHECK`] (docs/operator-api.md §5).
pub async fn run(ctx: Arc<Context>) {
    wait_for_crd(&ctx).await;
    let queue = WorkQueue::new();
    let (stores, feeds) = feeds::watch(&ctx, &queue);
    let stores = Arc::new(stores);
    let operands = Arc::new(OperandWatches::new(&queue));
    let workers = {
        let (ctx, stores, queue) = (Arc::clone(&ctx), Arc::clone(&stores), queue.clone());
        async move {
            if let Err(error) = stores.ready().await {
                tracing::warn!(%error, "Operator stores never filled; the controller stops");
                return;
            }
            let spec = Loop {
                kind: "Operator",
                workers: WORKERS,
                metrics: Arc::clone(&ctx.metrics),
            };
            let handle = move |name: String| {
                let (ctx, stores) = (Arc::clone(&ctx), Arc::clone(&stores));
                let operands = Arc::clone(&operands);
                async move { sync(&ctx, &stores, &operands, &name).await }
            };
            run_workers(spec, queue, handle).await;
        }
    };
    let mut tasks = feeds;
    tasks.push(Box::pin(workers));
    futures::future::join_all(tasks).await;
}

async fn wait_for_crd(ctx: &Context) {
    let gvk = GroupVersionKind::gvk(crate::api::GROUP, "v1", "Operator");
    let mut told = false;
    loop {
        match ctx.served_apis.resource_of(&ctx.client, &gvk).await {
            Ok(Some(_)) => return,
            Ok(None) if !told => {
                tracing::warn!(
                    "the API server does not serve operators.operators.coreos.com: the \
                     Operator API is off until its CRD is installed (`olm-rs crds | kubectl \
                     apply --server-side -f -`)"
                );
                told = true;
            }
            Ok(None) => {}
            Err(error) => tracing::debug!(%error, "discovery of the Operator CRD failed"),
        }
        tokio::time::sleep(CRD_RECHECK).await;
        ctx.served_apis.invalidate();
    }
}

/// One sync of the Operator `name`: observe (starting or stopping its operand watches),
/// decide, execute; then the operands' labels, as the operator's account.
async fn sync(
    ctx: &Arc<Context>,
    stores: &Stores,
    operands: &OperandWatches,
    name: &str,
) -> Result<Next, ReconcileError> {
    let Some(mut observed) = observe::observe(stores, name) else {
        operands.ensure(ctx, name, &Default::default());
        return Ok(Next::Done);
    };
    operands.ensure(ctx, name, &observed.operand_watches(name, &stores.crds));
    let found = operands.operands(name);
    let labels = observed.add_operands(&found);
    let effects = observed.decide(name);
    match execute(&ctx.client, &ctx.events, &effects).await {
        Ok(_) => {}
        // A component deleted since the stores saw it: decide again once they know.
        Err(e) if e.is_not_found() => return Ok(Next::After(GONE_RETRY)),
        Err(e) => return Err(e.into()),
    }
    // docs/operator-api.md §5: refusals are told, never returned (no error loop).
    if operands.label(ctx, labels).await {
        return Ok(Next::After(TRANSIENT_RETRY));
    }
    Ok(Next::Done)
}

//! The InstallPlan reconciler (thin shell, docs/controller-startup.md "One reconciler shape"):
//! observe the plan and its namespace's OperatorGroups from stores; let
//! `plan::decision::PlanSync` decide, doing for it only what it cannot (pull bundle images, run
//! an execution pass); execute the resulting `Effects` (events, the status write guarded by the
//! plan's resourceVersion, when to look again).

pub mod apis;
mod bundle_steps;
mod execute;
mod lookups;
mod unpack_pod;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::ResourceExt;

use crate::api::{InstallPlan, OperatorGroup, Subscription};
use crate::go_duration::parse_go_duration;
use crate::k8s::effects::{Effects, execute};
use crate::k8s::warnings::{self, WarningLog};
use crate::k8s::write::ApiError;
use crate::metrics::CountedKind;
use crate::plan::decision::PlanSync;
use crate::plan::execution::PassReport;
use crate::plan::phase::PassOutcome;
use crate::plan::scope::ExecuteAs;
use crate::plan::superseded::superseded_by;
use crate::reconcile::Context;
use crate::reconcile::operator_group::namespaced_name::NamespacedName;
use crate::reconcile::work_queue::{Backoff, Loop, Next, WorkQueue, run_workers};

pub use crate::plan::decision::INSTALLING_RESYNC;
use execute::Pass;

/// How soon a plan whose status write met a newer copy is synced again.
const CONFLICT_RETRY: Duration = Duration::from_millis(200);

#[derive(Debug, thiserror::Error)]
pub enum InstallPlanError {
    #[error("install plan {namespace}/{name}: {source}")]
    Api {
        namespace: String,
        name: String,
        #[source]
        source: Box<ApiError>,
    },
    #[error("install plan {namespace}/{name}: cannot act as service account {account}: {source}")]
    Identity {
        namespace: String,
        name: String,
        account: String,
        #[source]
        source: http::header::InvalidHeaderValue,
    },
}

impl crate::k8s::errors::ReconcileFailure for InstallPlanError {
    fn error_label(&self) -> &'static str {
        match self {
            InstallPlanError::Api { source, .. } => source.metric_label(),
            // The OperatorGroup names a service account no request can carry.
            InstallPlanError::Identity { .. } => crate::k8s::errors::DECISION,
        }
    }
}

/// What one sync did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Synced {
    /// The plan is terminal, waiting for approval or not written yet.
    Idle,
    /// Its status moved, or it is to be looked at again after the delay when given.
    Progressed { requeue: Option<Duration> },
}

/// Syncs one plan: the whole InstallPlan state machine for one pass. `plan`, the
/// OperatorGroups and the Subscriptions of its namespace are as observed (from the
/// controller's stores).
pub async fn sync_install_plan<G>(
    ctx: &Context,
    plan: &InstallPlan,
    operator_groups: &[G],
    subscriptions: &[Arc<Subscription>],
) -> Result<Synced, InstallPlanError>
where
    G: std::borrow::Borrow<OperatorGroup>,
{
    let namespace = plan.namespace().unwrap_or_default();
    let now = ctx.clock.now();
    let Some(mut sync) = PlanSync::begin(plan, now) else {
        return Ok(Synced::Idle);
    };
    let timeout = ctx.bundle_images.options.unpack_timeout;
    if let Some((lookups, policy)) = sync.lookups(operator_groups, timeout, parse_go_duration) {
        let worked = lookups::work_lookups(ctx, &namespace, lookups, policy, now).await;
        sync.lookups_worked(worked);
    }
    let superseded = superseded_by(plan, subscriptions.iter().map(Arc::as_ref));
    if let Some(identity) = sync.gate(operator_groups, superseded.as_ref()) {
        let report = run_pass(ctx, plan, &namespace, &identity, sync.take_steps()).await?;
        ctx.metrics.install_plan_warnings(
            u64::try_from(report.steps_with_api_warnings()).unwrap_or(u64::MAX),
        );
        sync.pass_ran(report);
    }
    let effects = sync.finish();
    perform(ctx, plan, &effects).await
}

/// One execution pass as `identity`, over `steps` with every bundle reference replaced by the
/// object it stands for.
async fn run_pass(
    ctx: &Context,
    plan: &InstallPlan,
    namespace: &str,
    identity: &ExecuteAs,
    steps: Vec<crate::api::Step>,
) -> Result<PassReport, InstallPlanError> {
    let steps_client = match identity {
        ExecuteAs::Controller => ctx.client.clone(),
        ExecuteAs::ServiceAccount {
            namespace: ns,
            name: sa,
        } => crate::k8s::impersonate::impersonating(&ctx.client, ns, sa).map_err(|source| {
            InstallPlanError::Identity {
                namespace: namespace.to_owned(),
                name: plan.name_any(),
                account: sa.clone(),
                source,
            }
        })?,
    };
    // Both clients keep the API server's warnings, reported per step.
    let api_warnings = WarningLog::default();
    let admin = warnings::recording(&ctx.client, &api_warnings);
    let steps_client = warnings::recording(&steps_client, &api_warnings);
    let pass = Pass {
        admin: &admin,
        steps: &steps_client,
        identity,
        namespace,
        api_warnings: &api_warnings,
        served_apis: &ctx.served_apis,
    };
    Ok(
        match bundle_steps::with_bundle_objects(ctx, namespace, &steps).await {
            Err(unavailable) => PassReport {
                steps,
                outcome: PassOutcome::StepFailed {
                    message: unavailable.to_string(),
                    failure: crate::plan::phase::StepFailure::Retryable,
                },
                warnings: Vec::new(),
            },
            Ok(None) => pass.run(steps).await,
            // The plan keeps its references; only the statuses of the pass are recorded.
            Ok(Some(expanded)) => {
                let mut report = pass.run(expanded).await;
                let mut recorded = steps;
                for (step, ran) in recorded.iter_mut().zip(&report.steps) {
                    step.status = ran.status.clone();
                }
                report.steps = recorded;
                report
            }
        },
    )
}

/// Executes the decided effects. A 409 on the status write means the plan changed since it was
/// read (a user approved it, say): it is synced again soon, on fresh data.
async fn perform(
    ctx: &Context,
    plan: &InstallPlan,
    effects: &Effects,
) -> Result<Synced, InstallPlanError> {
    match execute(&ctx.client, &ctx.events, effects).await {
        Ok(_) if effects.writes.is_empty() && effects.requeue.is_none() => Ok(Synced::Idle),
        Ok(_) => Ok(Synced::Progressed {
            requeue: effects.requeue,
        }),
        Err(err) if err.is_conflict() => Ok(Synced::Progressed {
            requeue: Some(CONFLICT_RETRY),
        }),
        Err(source) => Err(api_error(plan, source)),
    }
}

fn api_error(plan: &InstallPlan, source: ApiError) -> InstallPlanError {
    InstallPlanError::Api {
        namespace: plan.namespace().unwrap_or_default(),
        name: plan.name_any(),
        source: Box::new(source),
    }
}

/// How many plans are synced at once (a pass may wait on bundle pulls).
const WORKERS: usize = 8;

/// A failed sync is tried again after 5 s (a plan waiting on an API call failing), doubling to
/// 5 minutes while it keeps failing.
const BACKOFF: Backoff = Backoff {
    first: Duration::from_secs(5),
    max: Duration::from_secs(300),
};

/// Runs the InstallPlan controller until the process stops, on the one engine
/// (`reconcile::work_queue`), keyed by the plan's namespace and name.
pub async fn run(ctx: Arc<Context>) {
    let queue: WorkQueue<NamespacedName> = WorkQueue::with_backoff(BACKOFF);
    // The plans are the process's shared store (the Subscription controller reads them too).
    // Each change of one schedules its sync and keeps `install_plan_count` exact (deletes
    // included: the sync of a deleted plan finds it gone and does nothing).
    let (plans, plan_changes) = ctx.watches.install_plans();
    let plan_feed = {
        let (queue, metrics, plans) = (queue.clone(), ctx.metrics.clone(), plans.clone());
        plan_changes.for_each(move |plan| {
            metrics.set_count(CountedKind::InstallPlan, plans.len());
            queue.add(key_of(plan.as_ref()));
            futures::future::ready(())
        })
    };
    // A change of an OperatorGroup (its status naming the namespace, its service account)
    // syncs the plans of its namespace: one waiting on the OperatorGroup check goes on at once.
    let (operator_groups, group_changes) = ctx.watches.operator_groups();
    let group_feed = {
        let (queue, plans) = (queue.clone(), plans.clone());
        group_changes.for_each(move |group| {
            let namespace = group.namespace().unwrap_or_default();
            queue.add_all(plans.in_namespace(&namespace).iter().map(|p| key_of(p)));
            futures::future::ready(())
        })
    };
    // Which plan each Subscription references: a plan they all moved past writes nothing more.
    let (subscriptions, _) = ctx.watches.subscriptions();
    // What the server serves changes with CRDs and APIServices: then discovery is asked again.
    let (_, crd_changes) = ctx.watches.crds();
    let (_, api_service_changes) = ctx.watches.api_services();
    let served_apis = Arc::clone(&ctx.served_apis);
    let forget_kinds =
        futures::stream::select(crd_changes.map(|_| ()), api_service_changes.map(|_| ())).for_each(
            move |()| {
                served_apis.invalidate();
                futures::future::ready(())
            },
        );
    let workers = async move {
        // A check on a half-listed cache would report "no operator group" where there is one.
        if plans.wait_until_ready().await.is_err()
            || operator_groups.wait_until_ready().await.is_err()
            || subscriptions.wait_until_ready().await.is_err()
        {
            return;
        }
        let spec = Loop {
            kind: "InstallPlan",
            workers: WORKERS,
            metrics: ctx.metrics.clone(),
        };
        run_workers(spec, queue, move |key: NamespacedName| {
            let (ctx, plans, operator_groups, subscriptions) = (
                ctx.clone(),
                plans.clone(),
                operator_groups.clone(),
                subscriptions.clone(),
            );
            async move {
                // A plan gone from the store was deleted: nothing to do.
                let Some(plan) = plans.get(&key.namespace, &key.name) else {
                    return Ok::<_, InstallPlanError>(Next::Done);
                };
                let groups = operator_groups.in_namespace(&key.namespace);
                let subs = subscriptions.in_namespace(&key.namespace);
                Ok(
                    match sync_install_plan(&ctx, &plan, &groups, &subs).await? {
                        Synced::Progressed {
                            requeue: Some(after),
                        } => Next::After(after),
                        _ => Next::Done,
                    },
                )
            }
        })
        .await;
    };
    tokio::select! {
        () = plan_feed => tracing::error!("the InstallPlan watch of the InstallPlan controller ended"),
        () = group_feed => tracing::error!("the OperatorGroup watch of the InstallPlan controller ended"),
        () = forget_kinds => tracing::error!("the CRD and APIService watches of the InstallPlan controller ended"),
        () = workers => {}
    }
}

fn key_of(plan: &InstallPlan) -> NamespacedName {
    NamespacedName::new(
        plan.metadata.namespace.as_deref().unwrap_or_default(),
        &plan.name_any(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k8s::errors::ReconcileFailure;
    use crate::k8s::write::{ObjectKey, Operation};

    #[test]
    fn a_failed_write_is_counted_by_its_kind_of_failure() {
        let refused = ApiError::new(
            Operation::WriteStatus,
            ObjectKey::new::<InstallPlan>(Some("ns"), "install-abcde"),
            kube::Error::Api(
                kube::core::Status::failure("forbidden", "Forbidden")
                    .with_code(403)
                    .boxed(),
            ),
        );
        let error = InstallPlanError::Api {
            namespace: "ns".into(),
            name: "install-abcde".into(),
            source: Box::new(refused),
        };
        assert_eq!(error.error_label(), "forbidden");
        let text = error.to_string();
        assert!(
            text.starts_with(
                "install plan ns/install-abcde: write the status of InstallPlan ns/install-abcde: "
            ),
            "{text}"
        );
    }
}

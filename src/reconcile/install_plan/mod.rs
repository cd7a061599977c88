//! The InstallPlan reconciler (thin shell): approval, the OperatorGroup check, one execution
//! pass, the phase machine of `plan::phase`, one status write.

mod apis;
mod bundle_steps;
mod execute;
mod identity;
mod lookups;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Api, ListParams};
use kube::{Resource, ResourceExt};
use kube_runtime::controller::{Action, Controller};
use kube_runtime::{WatchStreamExt, reflector, watcher};

use crate::api::{InstallPlan, InstallPlanPhase, OperatorGroup};
use crate::k8s::errors::is_conflict;
use crate::k8s::warnings::{self, WarningLog};
use crate::metrics::CountedKind;
use crate::plan::phase::{self, Gate, PassOutcome};
use crate::plan::scope::{ExecuteAs, execution_identity};
use crate::reconcile::Context;

pub use execute::{APPLIED_WITH_WARNINGS, Pass, PlanWarning, Warnings};

/// How often an installing plan is looked at again (OLM: 5 s).
pub const INSTALLING_RESYNC: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum InstallPlanError {
    #[error("install plan {namespace}/{name}: {source}")]
    Api {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("install plan {namespace}/{name}: cannot act as service account {account}: {reason}")]
    Identity {
        namespace: String,
        name: String,
        account: String,
        reason: String,
    },
}

/// What one sync did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Synced {
    /// The plan is gone, terminal, waiting for approval or not written yet.
    Idle,
    /// Its status moved; look again after the delay when given.
    Progressed { requeue: Option<Duration> },
}

/// Syncs one plan: the whole InstallPlan state machine for one pass.
pub async fn sync_install_plan(
    ctx: &Context,
    namespace: &str,
    name: &str,
) -> Result<Synced, InstallPlanError> {
    let err = |source| InstallPlanError::Api {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        source,
    };
    let plans: Api<InstallPlan> = Api::namespaced(ctx.client.clone(), namespace);
    let Some(mut plan) = plans.get_opt(name).await.map_err(err)? else {
        return Ok(Synced::Idle);
    };
    // A plan with neither steps nor bundle lookups is still being written by the Subscription
    // sync, which also repairs one whose status write was lost.
    let Some(mut status) = plan.status.clone() else {
        return Ok(Synced::Idle);
    };
    if status.plan.is_none() && status.bundle_lookups.is_none() {
        return Ok(Synced::Idle);
    }
    let before = status.clone();
    let now = ctx.clock.now();
    let mut requeue = None;
    if status
        .bundle_lookups
        .as_ref()
        .is_some_and(|l| !l.is_empty())
    {
        let groups: Api<OperatorGroup> = Api::namespaced(ctx.client.clone(), namespace);
        let groups = groups
            .list(&ListParams::default())
            .await
            .map_err(err)?
            .items;
        let policy = lookups::namespace_policy(ctx, &groups);
        let worked = lookups::work_lookups(ctx, namespace, &mut status, policy, now).await;
        requeue = worked.requeue;
        let reference = object_reference(&plan);
        for (bundle, reason, message) in worked.failures {
            ctx.events
                .warning(
                    &reference,
                    "BundleUnpackFailed",
                    format!("bundle {bundle}: {reason}: {message}"),
                )
                .await;
        }
        for bundle in worked.pulled {
            ctx.events
                .normal(
                    &reference,
                    "BundleUnpacked",
                    format!("pulled the bundle image of {bundle} and added its steps to the plan"),
                )
                .await;
        }
    }
    // Nothing runs until every bundle of the plan is here.
    let gate = if status.bundle_lookups.is_some() {
        Gate::Idle
    } else {
        phase::gate(&mut status, plan.spec.approved)
    };
    if gate == Gate::Execute {
        phase::start(&mut status, now);
        let groups: Api<OperatorGroup> = Api::namespaced(ctx.client.clone(), namespace);
        let groups = groups
            .list(&ListParams::default())
            .await
            .map_err(err)?
            .items;
        match execution_identity(namespace, &groups) {
            Err(message) => {
                phase::check_failed(&mut status, &message, now);
                requeue = Some(INSTALLING_RESYNC);
            }
            Ok(identity) => {
                phase::check_passed(&mut status, now);
                if let ExecuteAs::ServiceAccount {
                    namespace: ns,
                    name: sa,
                } = &identity
                {
                    status.attenuated_service_account_ref = Some(ObjectReference {
                        api_version: Some("v1".into()),
                        kind: Some("ServiceAccount".into()),
                        name: Some(sa.clone()),
                        namespace: Some(ns.clone()),
                        ..ObjectReference::default()
                    });
                }
                let steps_client = match &identity {
                    ExecuteAs::Controller => ctx.client.clone(),
                    ExecuteAs::ServiceAccount {
                        namespace: ns,
                        name: sa,
                    } => identity::impersonating(&ctx.client, ns, sa).map_err(|e| {
                        InstallPlanError::Identity {
                            namespace: namespace.to_owned(),
                            name: name.to_owned(),
                            account: sa.clone(),
                            reason: e.to_string(),
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
                    namespace,
                    api_warnings: &api_warnings,
                };
                let mut warnings = Vec::new();
                let mut steps = status.plan.take().unwrap_or_default();
                let outcome = match bundle_steps::with_bundle_objects(ctx, namespace, &steps).await
                {
                    Err(message) => PassOutcome::StepFailed {
                        message,
                        permanent: false,
                    },
                    Ok(None) => pass.run(&mut steps, &mut warnings).await,
                    Ok(Some(mut expanded)) => {
                        let outcome = pass.run(&mut expanded, &mut warnings).await;
                        for (step, ran) in steps.iter_mut().zip(expanded) {
                            step.status = ran.status;
                        }
                        outcome
                    }
                };
                status.plan = Some(steps);
                phase::after_pass(&mut status, &outcome, now);
                if status.phase == InstallPlanPhase::Installing {
                    requeue = Some(INSTALLING_RESYNC);
                }
                let reference = object_reference(&plan);
                // OLM counts the steps that drew API-server warnings, not its own notes.
                let drew_warnings = warnings
                    .iter()
                    .filter(|w| w.reason == APPLIED_WITH_WARNINGS)
                    .count();
                ctx.metrics
                    .install_plan_warnings(u64::try_from(drew_warnings).unwrap_or(u64::MAX));
                for warning in warnings {
                    let about = ObjectReference {
                        field_path: warning.step.map(|i| format!("status.plan[{i}]")),
                        ..reference.clone()
                    };
                    ctx.events
                        .warning(&about, warning.reason, warning.message)
                        .await;
                }
                if let PassOutcome::StepFailed { message, .. } = &outcome
                    && status.phase == InstallPlanPhase::Failed
                {
                    ctx.events
                        .warning(&reference, "InstallComponentFailed", message.clone())
                        .await;
                }
            }
        }
    }
    if status.phase == InstallPlanPhase::Complete && before.phase != InstallPlanPhase::Complete {
        ctx.events
            .normal(
                &object_reference(&plan),
                "InstallSucceeded",
                "every step of the plan is applied",
            )
            .await;
    }
    if status == before {
        return Ok(if requeue.is_some() {
            Synced::Progressed { requeue }
        } else {
            Synced::Idle
        });
    }
    plan.status = Some(status);
    match plans
        .replace_status(name, &crate::k8s::post_params(), &plan)
        .await
    {
        Ok(_) => Ok(Synced::Progressed { requeue }),
        // Someone else wrote the plan (e.g. a user approved it): run again on fresh data.
        Err(err) if is_conflict(&err) => Ok(Synced::Progressed {
            requeue: Some(Duration::from_millis(200)),
        }),
        Err(e) => Err(err(e)),
    }
}

fn object_reference(plan: &InstallPlan) -> ObjectReference {
    ObjectReference {
        api_version: Some(InstallPlan::api_version(&()).into_owned()),
        kind: Some(InstallPlan::kind(&()).into_owned()),
        name: plan.metadata.name.clone(),
        namespace: plan.metadata.namespace.clone(),
        uid: plan.metadata.uid.clone(),
        ..ObjectReference::default()
    }
}

/// Runs the InstallPlan controller until the process stops.
pub async fn run(ctx: Arc<Context>) {
    let plans: Api<InstallPlan> = Api::all(ctx.client.clone());
    // The reflector feeds both the controller and `install_plan_count` (kept exact on deletes,
    // which the controller itself does not reconcile).
    let (store, writer) = reflector::store::<InstallPlan>();
    let (metrics, counted) = (ctx.metrics.clone(), store.clone());
    let events = watcher::watcher(plans, watcher::Config::default())
        .default_backoff()
        .reflect(writer)
        .inspect(move |_| metrics.set_count(CountedKind::InstallPlan, counted.state().len()))
        .applied_objects();
    Controller::for_stream(events, store)
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "install plan reconcile");
            }
        })
        .await;
}

async fn reconcile(plan: Arc<InstallPlan>, ctx: Arc<Context>) -> Result<Action, InstallPlanError> {
    let namespace = plan.namespace().unwrap_or_default();
    let synced = ctx
        .metrics
        .timed_reconcile(
            "InstallPlan",
            &format!("{namespace}/{}", plan.name_any()),
            sync_install_plan(&ctx, &namespace, &plan.name_any()),
        )
        .await?;
    match synced {
        Synced::Progressed {
            requeue: Some(after),
        } => Ok(Action::requeue(after)),
        _ => Ok(Action::await_change()),
    }
}

fn error_policy(plan: Arc<InstallPlan>, error: &InstallPlanError, _ctx: Arc<Context>) -> Action {
    tracing::warn!(plan = %plan.name_any(), %error, "install plan sync failed; retrying");
    Action::requeue(Duration::from_secs(5))
}

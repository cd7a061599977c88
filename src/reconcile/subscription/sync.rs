//! One sync of a namespace's Subscriptions: observe from the stores, decide once
//! (`resolve::subscription::decide_effects`, pure), execute each Subscription's effects on its
//! own, then the garbage collection.
//!
//! A plan is created and attached (its first status, the Subscription's `installPlanRef`) by
//! that one decision: the writes that name the plan by the uid and resourceVersion the API
//! server gives it are `Write::StatusAfter`s, which the executor completes from the create's
//! answer (docs/subscription-plans.md, "One sync"). A write refused because the decision was made
//! on an older copy ends the sync with a look again soon; it is never decided again within the
//! sync.

use std::time::Instant;

use kube::ResourceExt;
use kube::core::DynamicObject;

use super::catalogs::CatalogSnapshots;
use super::observe::observe;
use super::stores::SubscriptionStores;
use crate::k8s::effects::{Answers, Effects, Write, execute_answered};
use crate::k8s::write::ApiError;
use crate::metrics::Outcome;
use crate::reconcile::Context;
use crate::resolve::NamespaceInput;
use crate::resolve::subscription::{
    NamespaceDecision, NamespaceState, NamespaceView, PlanChoice, decide_effects,
};

#[derive(Debug, thiserror::Error)]
pub enum SubscriptionSyncError {
    #[error("namespace {namespace}: {source}")]
    Api {
        namespace: String,
        #[source]
        source: ApiError,
    },
}

impl crate::k8s::errors::ReconcileFailure for SubscriptionSyncError {
    fn error_label(&self) -> &'static str {
        match self {
            SubscriptionSyncError::Api { source, .. } => source.metric_label(),
        }
    }
}

/// What a namespace sync did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NamespaceSynced {
    /// InstallPlans created.
    pub created_plans: Vec<String>,
    /// Existing plans adopted for a resolution (e.g. after a crash).
    pub adopted_plans: Vec<String>,
    pub deleted_plans: Vec<String>,
    /// Subscriptions whose status was written.
    pub updated: Vec<String>,
    /// Whether to look again soon (a write conflicted, or an error prevented resolution).
    pub retry_soon: bool,
    /// The namespace has no Subscription (any more).
    pub no_subscriptions: bool,
}

/// Syncs every Subscription of `namespace`.
pub async fn sync_namespace(
    ctx: &Context,
    stores: &SubscriptionStores,
    catalogs: &dyn CatalogSnapshots,
    namespace: &str,
) -> Result<NamespaceSynced, SubscriptionSyncError> {
    let failed = |source| SubscriptionSyncError::Api {
        namespace: namespace.to_owned(),
        source,
    };
    let mut report = NamespaceSynced::default();
    let observed = observe(&ctx.client, stores, namespace)
        .await
        .map_err(failed)?;
    let present: Vec<String> = observed
        .subscriptions
        .iter()
        .map(|s| s.name_any())
        .collect();
    ctx.metrics.forget_subscriptions_except(namespace, &present);
    if observed.subscriptions.is_empty() {
        report.no_subscriptions = true;
        return Ok(report);
    }
    let global = ctx.options.global_catalog_namespace.as_str();
    let visible = catalogs.visible_from(namespace, global);
    let started = Instant::now();
    let decision = decide_effects(&NamespaceView {
        state: NamespaceState {
            input: NamespaceInput {
                namespace,
                subscriptions: &observed.subscriptions,
                installed: &observed.installed,
                catalogs: &visible,
                operator_groups: &observed.operator_groups,
                global_catalog_namespace: global,
            },
            plans: &observed.plans,
            crds: &observed.crds,
            rollback: &observed.rollback,
            now: ctx.clock.now(),
        },
        gone_plans: &observed.gone_plans,
        namespace_uid: observed.namespace_uid.as_deref(),
    });
    // The resolution runs inside the decision; its wall time is the resolution latency
    // (`olm_resolution_duration_seconds`).
    let outcome = if decision.resolution_failed {
        Outcome::Failed
    } else {
        Outcome::Succeeded
    };
    ctx.metrics
        .resolution_duration(outcome, started.elapsed().as_secs_f64());
    match carry_out(ctx, &decision, &mut report).await {
        Some(source) => Err(failed(source)),
        None => Ok(report),
    }
}

/// Executes `decision`: each Subscription's effects on their own, then the garbage collection.
/// The answers of every part are kept for the parts after it: a co-upgrade's plan, created
/// with its first member's effects, is named in the others' statuses. Returns the first
/// failure that is not a conflict.
async fn carry_out(
    ctx: &Context,
    decision: &NamespaceDecision,
    report: &mut NamespaceSynced,
) -> Option<ApiError> {
    report.retry_soon |= decision.requeue().is_some();
    let mut answers = Answers::default();
    let mut first_error = None;
    for one in &decision.subscriptions {
        ctx.metrics.subscription_synced(&one.decided);
        if !perform(ctx, &one.effects, &mut answers, report, &mut first_error).await {
            continue;
        }
        match &one.plan {
            // Each member of a co-upgrade reports the one plan.
            Some(PlanChoice::Create(name)) => report.created_plans.push(name.clone()),
            Some(PlanChoice::Adopt(name)) if !report.adopted_plans.contains(name) => {
                report.adopted_plans.push(name.clone());
            }
            _ => {}
        }
    }
    perform(
        ctx,
        &decision.garbage,
        &mut answers,
        report,
        &mut first_error,
    )
    .await;
    first_error
}

/// Executes one part of a decision; returns whether every write succeeded. A conflict (the
/// decision was made on an older copy) or a vanished object asks for another look soon; any
/// other failure is kept for the sync's result.
async fn perform(
    ctx: &Context,
    effects: &Effects,
    answers: &mut Answers,
    report: &mut NamespaceSynced,
    first_error: &mut Option<ApiError>,
) -> bool {
    if effects.is_empty() {
        return true;
    }
    match execute_answered(&ctx.client, &ctx.events, effects, answers).await {
        Ok(executed) => {
            for (write, written) in effects.writes.iter().zip(executed.written) {
                record(write, written, report);
            }
            true
        }
        Err(error) if error.is_conflict() || error.is_not_found() => {
            tracing::debug!(%error, "decided on an older copy; looking again soon");
            report.retry_soon = true;
            false
        }
        Err(error) => {
            tracing::warn!(%error, "subscription sync write failed");
            first_error.get_or_insert(error);
            false
        }
    }
}

/// Notes one write in the report.
fn record(write: &Write, written: Option<DynamicObject>, report: &mut NamespaceSynced) {
    let key = write.key();
    match (write, key.resource.kind.as_str()) {
        (Write::Delete { .. }, "InstallPlan") => report.deleted_plans.push(key.name.clone()),
        (Write::Delete { .. }, _) => {}
        (_, "Subscription") if written.is_some() && !report.updated.contains(&key.name) => {
            report.updated.push(key.name.clone());
        }
        _ => {}
    }
}

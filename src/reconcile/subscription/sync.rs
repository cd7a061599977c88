//! One sync of a namespace's Subscriptions: observe from the stores, decide
//! (`resolve::subscription::decide_effects`, pure), execute each Subscription's effects on its
//! own, then the garbage collection.
//!
//! A decision that created a plan is followed by another on what the writes returned, which
//! attaches the plan (its status, the Subscription's `installPlanRef`): a fresh install or an
//! upgrade is planned and recorded in one sync, and each step is still a decision made on the
//! objects as they are.

use std::time::Instant;

use kube::ResourceExt;
use kube::core::DynamicObject;

use super::catalogs::CatalogSnapshots;
use super::observe::{Observed, observe};
use super::stores::SubscriptionStores;
use crate::api::{InstallPlan, Subscription};
use crate::k8s::effects::{Effects, Write, execute};
use crate::k8s::write::ApiError;
use crate::metrics::Outcome;
use crate::reconcile::Context;
use crate::resolve::NamespaceInput;
use crate::resolve::subscription::{
    NamespaceDecision, NamespaceState, NamespaceView, PlanChoice, decide_effects,
};

/// At most this many decisions per sync: the second attaches what the first created; a third
/// only when a write answered with something the second did not expect.
const MAX_DECISIONS: usize = 3;

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
    let mut observed = observe(&ctx.client, stores, namespace)
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
    let mut first_error = None;
    for round in 0..MAX_DECISIONS {
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
        if round == 0 {
            // The resolution runs inside the decision; its wall time is the resolution latency
            // (`olm_resolution_duration_seconds`).
            let outcome = if decision.resolution_failed {
                Outcome::Failed
            } else {
                Outcome::Succeeded
            };
            ctx.metrics
                .resolution_duration(outcome, started.elapsed().as_secs_f64());
        }
        let created = carry_out(ctx, &decision, &mut observed, &mut report, &mut first_error).await;
        if !created {
            break;
        }
    }
    match first_error {
        Some(source) => Err(failed(source)),
        None => Ok(report),
    }
}

/// Executes `decision`: each Subscription's effects on their own, then the garbage collection.
/// What the writes return replaces the observed objects for the next decision. Returns whether
/// a plan was created (the next decision attaches it).
async fn carry_out(
    ctx: &Context,
    decision: &NamespaceDecision,
    observed: &mut Observed,
    report: &mut NamespaceSynced,
    first_error: &mut Option<ApiError>,
) -> bool {
    report.retry_soon |= decision.requeue().is_some();
    let mut created = false;
    for one in &decision.subscriptions {
        ctx.metrics.subscription_synced(&one.decided);
        if !perform(ctx, &one.effects, observed, report, first_error).await {
            continue;
        }
        match &one.plan {
            Some(PlanChoice::Create(name)) => {
                report.created_plans.push(name.clone());
                created = true;
            }
            Some(PlanChoice::Adopt(name))
                if !report.created_plans.contains(name) && !report.adopted_plans.contains(name) =>
            {
                report.adopted_plans.push(name.clone());
            }
            _ => {}
        }
    }
    perform(ctx, &decision.garbage, observed, report, first_error).await;
    created
}

/// Executes one part of a decision; returns whether every write succeeded. A conflict (the
/// decision was made on an older copy) or a vanished object asks for another look soon; any
/// other failure is kept for the sync's result.
async fn perform(
    ctx: &Context,
    effects: &Effects,
    observed: &mut Observed,
    report: &mut NamespaceSynced,
    first_error: &mut Option<ApiError>,
) -> bool {
    if effects.is_empty() {
        return true;
    }
    match execute(&ctx.client, &ctx.events, effects).await {
        Ok(executed) => {
            for (write, written) in effects.writes.iter().zip(executed.written) {
                record(write, written, observed, report);
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

/// Notes one write in the report and in what the next decision observes.
fn record(
    write: &Write,
    written: Option<DynamicObject>,
    observed: &mut Observed,
    report: &mut NamespaceSynced,
) {
    let key = write.key();
    let kind = key.resource.kind.as_str();
    if let Write::Delete { .. } = write {
        if kind == "InstallPlan" {
            observed.remove_plan(&key.name);
            report.deleted_plans.push(key.name.clone());
        }
        return;
    }
    let Some(written) = written else {
        return;
    };
    let Ok(json) = serde_json::to_value(&written) else {
        return;
    };
    match kind {
        "InstallPlan" => {
            if let Ok(plan) = serde_json::from_value::<InstallPlan>(json) {
                observed.put_plan(plan);
            }
        }
        "Subscription" => {
            if !report.updated.contains(&key.name) {
                report.updated.push(key.name.clone());
            }
            if let Ok(sub) = serde_json::from_value::<Subscription>(json) {
                observed.put_subscription(sub);
            }
        }
        _ => {}
    }
}

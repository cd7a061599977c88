//! One sync of a namespace's Subscriptions: garbage-collect old plans, compute statuses and
//! plans (pure), ensure each plan exactly once, write the statuses that changed.

use k8s_openapi::api::core::v1::{Namespace, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams, ListParams, Preconditions};
use kube::{Resource, ResourceExt};

use super::catalogs::CatalogSnapshots;
use super::observe::observe;
use crate::api::{ConditionStatus, InstallPlan, Subscription, SubscriptionConditionType};
use crate::k8s::errors::{is_conflict, is_not_found};
use crate::metrics::Outcome;
use crate::plan::{PlanDraft, PlanForGc, RESOLUTION_LABEL, install_plan_name, plans_to_delete};
use crate::reconcile::Context;
use crate::resolve::subscription::{NamespaceState, SupersededPlan, attach_plan, decide_namespace};
use crate::resolve::{ERROR_PREVENTED_RESOLUTION, NamespaceInput};

#[derive(Debug, thiserror::Error)]
pub enum SubscriptionSyncError {
    #[error("namespace {namespace}: {action}: {source}")]
    Api {
        namespace: String,
        action: String,
        #[source]
        source: kube::Error,
    },
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
    catalogs: &dyn CatalogSnapshots,
    namespace: &str,
) -> Result<NamespaceSynced, SubscriptionSyncError> {
    let api_err = |action: &str| {
        let action = action.to_owned();
        move |source| SubscriptionSyncError::Api {
            namespace: namespace.to_owned(),
            action: action.clone(),
            source,
        }
    };
    let mut report = NamespaceSynced::default();
    let observed = observe(&ctx.client, namespace)
        .await
        .map_err(api_err("reading the namespace"))?;
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
    let plans_api: Api<InstallPlan> = Api::namespaced(ctx.client.clone(), namespace);
    let global = ctx.options.global_catalog_namespace.as_str();
    let visible = catalogs.visible_from(namespace, global);
    let input = NamespaceInput {
        namespace,
        subscriptions: &observed.subscriptions,
        installed: &observed.installed,
        catalogs: &visible,
        operator_groups: &observed.operator_groups,
        global_catalog_namespace: global,
    };
    let now = ctx.clock.now();
    // The resolution runs inside the pure status computation; its wall time is the
    // resolution latency (`olm_resolution_duration_seconds`).
    let started = std::time::Instant::now();
    let updates = decide_namespace(&NamespaceState {
        input,
        plans: &observed.plans,
        now,
    });
    let resolution_failed = updates.iter().any(|u| {
        u.status.conditions.iter().flatten().any(|c| {
            c.type_ == SubscriptionConditionType::ResolutionFailed
                && c.status == ConditionStatus::True
        })
    });
    ctx.metrics.resolution_duration(
        if resolution_failed {
            Outcome::Failed
        } else {
            Outcome::Succeeded
        },
        started.elapsed().as_secs_f64(),
    );
    let subs_api: Api<Subscription> = Api::namespaced(ctx.client.clone(), namespace);
    let mut referenced: Vec<String> = Vec::new();
    let mut namespace_notes: Vec<String> = Vec::new();
    for (update, sub) in updates.into_iter().zip(&observed.subscriptions) {
        let mut status = update.status;
        let mut changed = update.changed;
        if let Some(superseded) = &update.superseded {
            match delete_superseded(&plans_api, superseded).await {
                Ok(()) => report.deleted_plans.push(superseded.name.clone()),
                // Approved (or changed) since it was read: it is no longer superseded without
                // a second look, which its change queues; this Subscription waits for it.
                Err(err) if is_conflict(&err) => {
                    report.retry_soon = true;
                    referenced.push(superseded.name.clone());
                    continue;
                }
                Err(e) => return Err(api_err("deleting a superseded install plan")(e)),
            }
        }
        if let Some(request) = &update.plan {
            let (plan, created) = ensure_plan(&plans_api, &request.draft)
                .await
                .map_err(api_err("creating an install plan"))?;
            let name = plan.name_any();
            if created {
                // The Subscription's main transition: an install or upgrade is planned.
                let what = match &request.target.replaces {
                    Some(old) => format!("upgrade from {old} to {}", request.target.bundle),
                    None => format!("install of {}", request.target.bundle),
                };
                ctx.events
                    .normal(
                        &object_reference(sub),
                        "InstallPlanCreated",
                        format!("created InstallPlan {name} for the {what}"),
                    )
                    .await;
                report.created_plans.push(name);
            } else {
                report.adopted_plans.push(name);
            }
            attach_plan(&mut status, &plan, &request.target.bundle, &Time(now));
            status.last_updated = Time(now);
            changed = true;
        }
        let reference = object_reference(sub);
        for note in &update.notes {
            if note.reason == RESOLUTION_FAILED_EVENT && !namespace_notes.contains(&note.message) {
                namespace_notes.push(note.message.clone());
            }
        }
        for note in &update.notes {
            ctx.events.emit(&reference, note).await;
        }
        let failed_by_error = status.conditions.iter().flatten().any(|c| {
            c.type_ == SubscriptionConditionType::ResolutionFailed
                && c.reason.as_deref() == Some(ERROR_PREVENTED_RESOLUTION)
        });
        report.retry_soon |= failed_by_error;
        referenced.extend(
            status
                .install_plan_ref
                .as_ref()
                .and_then(|r| r.name.clone()),
        );
        referenced.extend(status.install_plan.as_ref().map(|r| r.name.clone()));
        let mut written = sub.clone();
        written.status = Some(status);
        ctx.metrics.subscription_synced(&written);
        if !changed {
            continue;
        }
        match subs_api
            .replace_status(&sub.name_any(), &crate::k8s::post_params(), &written)
            .await
        {
            Ok(_) => report.updated.push(sub.name_any()),
            // Changed meanwhile: the change itself queues another sync; retry soon anyway.
            Err(err) if is_not_found(&err) || is_conflict(&err) => report.retry_soon = true,
            Err(e) => return Err(api_err("writing a subscription status")(e)),
        }
    }
    // OLM reports a failed resolution on the Namespace (docs/resolution.md §9); tools that watch
    // namespace events keep working. The same words are also on each Subscription above, where
    // `kubectl describe sub` shows them.
    if !namespace_notes.is_empty() {
        let reference = namespace_reference(ctx, namespace).await;
        for message in namespace_notes {
            ctx.events
                .warning(&reference, RESOLUTION_FAILED_EVENT, message)
                .await;
        }
    }
    // Garbage collection last, against the references just written: a plan created a moment
    // ago (or adopted after a crash) is never mistaken for an old one.
    for name in plans_to_delete(&gc_view(&observed.plans, &referenced)) {
        match plans_api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => report.deleted_plans.push(name),
            Err(err) if is_not_found(&err) => {}
            Err(e) => return Err(api_err("deleting an old install plan")(e)),
        }
    }
    Ok(report)
}

/// Deletes a plan superseded while it awaited approval, only as it was observed; a plan
/// already gone is fine.
async fn delete_superseded(
    api: &Api<InstallPlan>,
    plan: &SupersededPlan,
) -> Result<(), kube::Error> {
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            resource_version: plan.resource_version.clone(),
            uid: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(&plan.name, &params).await {
        Ok(_) => Ok(()),
        Err(err) if is_not_found(&err) => Ok(()),
        Err(e) => Err(e),
    }
}

/// The plan for `draft`: an existing one made for the same resolution (whose status is written
/// if a crash lost it), or a new one. Returns the plan and whether it was created now.
async fn ensure_plan(
    api: &Api<InstallPlan>,
    draft: &PlanDraft,
) -> Result<(InstallPlan, bool), kube::Error> {
    let key = draft.resolution_key();
    let selector = format!("{RESOLUTION_LABEL}={key}");
    let existing = api
        .list(&ListParams::default().labels(&selector))
        .await?
        .items;
    // A server that ignores the selector must not make us adopt the wrong plan.
    let existing = existing
        .into_iter()
        .find(|p| p.labels().get(RESOLUTION_LABEL) == Some(&key));
    if let Some(mut plan) = existing {
        if plan.status.is_none() {
            plan.status = Some(draft.initial_status_named(&plan.name_any()));
            plan = api
                .replace_status(&plan.name_any(), &crate::k8s::post_params(), &plan)
                .await?;
        }
        return Ok((plan, false));
    }
    let mut attempts = 0;
    let created = loop {
        // The thread-local generator must not live across an await (it is not Send).
        let name = install_plan_name(&mut rand::rng());
        match api
            .create(&crate::k8s::post_params(), &draft.install_plan(&name))
            .await
        {
            Ok(plan) => break plan,
            // Name taken (1 in 14 million): draw another.
            Err(err) if is_conflict(&err) && attempts < 5 => attempts += 1,
            Err(e) => return Err(e),
        }
    };
    let mut plan = created;
    plan.status = Some(draft.initial_status_named(&plan.name_any()));
    let plan = api
        .replace_status(&plan.name_any(), &crate::k8s::post_params(), &plan)
        .await?;
    Ok((plan, true))
}

fn gc_view(plans: &[InstallPlan], referenced: &[String]) -> Vec<PlanForGc> {
    plans
        .iter()
        .map(|p| {
            let name = p.name_any();
            PlanForGc {
                referenced: referenced.contains(&name),
                installing: p
                    .status
                    .as_ref()
                    .is_some_and(|s| s.phase == crate::api::InstallPlanPhase::Installing),
                generation: p.spec.generation.unwrap_or(0),
                created: p.metadata.creation_timestamp.as_ref().map(|t| t.0),
                name,
            }
        })
        .collect()
}

/// The event reason OLM uses for a failed resolution, on the Namespace and here also on the
/// Subscription.
const RESOLUTION_FAILED_EVENT: &str = "ResolutionFailed";

/// The Namespace as an event's subject. Its uid is looked up because `kubectl describe ns`
/// selects events by uid; like any cluster-scoped subject, the event itself lands in `default`
/// (as OLM's do).
async fn namespace_reference(ctx: &Context, namespace: &str) -> ObjectReference {
    let uid = Api::<Namespace>::all(ctx.client.clone())
        .get_opt(namespace)
        .await
        .ok()
        .flatten()
        .and_then(|ns| ns.metadata.uid);
    ObjectReference {
        api_version: Some("v1".to_owned()),
        kind: Some("Namespace".to_owned()),
        name: Some(namespace.to_owned()),
        uid,
        ..ObjectReference::default()
    }
}

fn object_reference(sub: &Subscription) -> ObjectReference {
    ObjectReference {
        api_version: Some(Subscription::api_version(&()).into_owned()),
        kind: Some(Subscription::kind(&()).into_owned()),
        name: sub.metadata.name.clone(),
        namespace: sub.metadata.namespace.clone(),
        uid: sub.metadata.uid.clone(),
        ..ObjectReference::default()
    }
}

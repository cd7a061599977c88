//! A namespace's Subscription sync as a value (docs/subscription-plans.md, "One sync"): from what
//! the stores hold, the writes, events and requeue that bring the cluster to the decided
//! statuses. Pure: the shell executes it, once per sync.
//!
//! Each Subscription gets its own [`Effects`], executed on its own: one Subscription whose
//! copy was stale (409) never holds up another's plan or events. Its writes come in this order:
//! 1. the superseded plan's delete, only at the version that was judged;
//! 2. an adopted plan's lost status (its steps);
//! 3. the Subscription's status, guarded by the resourceVersion it was decided from — and
//!    written whenever a plan is to be created, changed or not, so that a plan is only ever
//!    created by a decision made on the Subscription as it is now;
//! 4. the new plan, under a name derived from its resolution key: a create that finds the name
//!    taken is a plan this namespace already has, not yet in the store (409, decide again);
//! 5. the new plan's first status, at the resourceVersion its create was answered with, and the
//!    Subscription's status that references it, at the resourceVersion of step 3's answer, its
//!    uid and resourceVersion taken from the plan's answers ([`Write::StatusAfter`]): the plan is
//!    created and attached by one decision.
//!
//! A sync cut short between the create and the attachment (a crash, a refused write) leaves a
//! plan that the next decision finds by its resolution and adopts, writing what step 5 did not.
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::health::update_catalog_health;
use super::namespace_plans::{
    adoptable, free_name, garbage, installed_by, referenced_plans, status_lost,
};
use super::{NamespaceState, RollbackWrites, SubscriptionUpdate, attach_plan, decide_namespace};
use crate::api::event::ObjectEvent;
use crate::api::{CatalogRef, ClusterServiceVersion};
use crate::api::{
    ConditionStatus, InstallPlan, Subscription, SubscriptionConditionType, SubscriptionStatus,
};
use crate::k8s::effects::{Answered, Body, Effects, EventOn, Fill, Write};
use crate::k8s::write::{DeleteOptions, ObjectKey};
use crate::resolve::rollback::FAILED_UPGRADE;
use crate::resolve::{ERROR_PREVENTED_RESOLUTION, Why};

/// When to look again at a namespace where an error (an unreadable catalog, …) prevented a
/// resolution, without waiting for an event.
pub const RETRY_SOON: Duration = Duration::from_secs(5);

/// The event reason OLM uses for a failed resolution, on the Namespace (and here also on the
/// Subscription).
pub const RESOLUTION_FAILED_EVENT: &str = "ResolutionFailed";

/// What one sync of a namespace looks at.
#[derive(Debug, Clone, Copy)]
pub struct NamespaceView<'a> {
    pub state: NamespaceState<'a>,
    /// Plans a Subscription references that the API server says no longer exist (the store
    /// missed them and a read confirmed it): a new plan never takes such a name again.
    pub gone_plans: &'a [String],
    /// The Namespace's uid, so that `kubectl describe ns` finds its events.
    pub namespace_uid: Option<&'a str>,
}

/// The plan a Subscription gets in this decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanChoice {
    /// Created now (or by an earlier member of the same co-upgrade) and attached in the same
    /// decision.
    Create(String),
    /// An existing plan made for the same resolution, attached now.
    Adopt(String),
}

/// What the sync does for one Subscription.
#[derive(Debug, Clone, PartialEq)]
pub struct SubscriptionEffects {
    /// The Subscription with the status decided for it (for metrics).
    pub decided: Subscription,
    pub plan: Option<PlanChoice>,
    /// A plan awaiting approval that is deleted because the answer changed.
    pub superseded: Option<String>,
    pub effects: Effects,
}

/// The whole decision for a namespace.
#[derive(Debug, Clone, PartialEq)]
pub struct NamespaceDecision {
    /// One entry per Subscription, in input order.
    pub subscriptions: Vec<SubscriptionEffects>,
    /// Old plans to delete (docs/install-plans.md §11), after the Subscriptions.
    pub garbage: Effects,
    /// Some Subscription has `ResolutionFailed=True` (the resolution metric's outcome).
    pub resolution_failed: bool,
}

impl NamespaceDecision {
    /// The soonest requeue any part asks for.
    pub fn requeue(&self) -> Option<Duration> {
        self.subscriptions
            .iter()
            .map(|s| &s.effects)
            .chain([&self.garbage])
            .filter_map(|e| e.requeue)
            .min()
    }
}

/// Decides the sync of the namespace `view` shows.
pub fn decide_effects(view: &NamespaceView<'_>) -> NamespaceDecision {
    let state = &view.state;
    let now = Time(state.now);
    let updates = decide_namespace(state);
    let resolution_failed = updates.iter().any(|u| failed(&u.status, None).is_some());
    let mut kept: Vec<String> = Vec::new();
    let mut created: Vec<String> = Vec::new();
    let mut namespace_messages: Vec<String> = Vec::new();
    let mut shared = SharedPlans::default();
    let subscriptions: Vec<SubscriptionEffects> = updates
        .into_iter()
        .zip(state.input.subscriptions)
        .map(|(update, sub)| {
            let one = subscription_effects(
                view,
                sub,
                update,
                &now,
                &mut namespace_messages,
                &mut shared,
            );
            kept.extend(referenced_plans(&one.decided));
            kept.extend(one.superseded.clone());
            if let Some(PlanChoice::Create(name) | PlanChoice::Adopt(name)) = &one.plan {
                kept.push(name.clone());
            }
            if let Some(PlanChoice::Create(name)) = &one.plan
                && !created.contains(name)
            {
                created.push(name.clone());
            }
            one
        })
        .collect();
    NamespaceDecision {
        subscriptions,
        garbage: garbage(state.plans, &kept, &created),
        resolution_failed,
    }
}

fn subscription_effects(
    view: &NamespaceView<'_>,
    sub: &Subscription,
    update: SubscriptionUpdate,
    now: &Time,
    namespace_messages: &mut Vec<String>,
    shared: &mut SharedPlans,
) -> SubscriptionEffects {
    let plans = view.state.plans;
    let mut status = update.status;
    let mut write_status = update.changed;
    let mut events = update.notes;
    let mut writes = Vec::new();
    let superseded = update.superseded.as_ref().and_then(|s| {
        plans
            .iter()
            .find(|p| p.metadata.name.as_ref() == Some(&s.name))
    });
    if let Some(plan) = superseded {
        writes.push(Write::delete_observed(plan));
    }
    let superseded_name = update.superseded.as_ref().map(|s| s.name.clone());
    let mut create = None;
    // The status naming a plan created in this decision, written after the plan's create.
    let mut attached: Option<(ObjectKey, SubscriptionStatus)> = None;
    let mut choice = None;
    if let Some(request) = &update.plan {
        let installed = view
            .state
            .input
            .installed_csv(&request.target.bundle)
            .is_some();
        let sibling = shared
            .created
            .iter()
            .find(|(key, _)| *key == request.draft.resolution_key())
            .map(|(_, plan)| plan.clone());
        // A rollback's CSV was installed before, by a plan that is not the restore.
        let rollback = request.target.why == Why::Rollback;
        let found = adoptable(plans, &request.draft, superseded_name.as_deref(), installed)
            .or_else(|| {
                let bundle = &request.target.bundle;
                let installed = view.state.input.installed_csv(bundle).is_some();
                installed_by(view.state.plans, installed, sub, bundle).filter(|_| !rollback)
            });
        match (found, sibling) {
            (Some(plan), _) => {
                let name = plan.metadata.name.clone().unwrap_or_default();
                let mut seen = plan.clone();
                if status_lost(plan) {
                    let initial = request.draft.initial_status_named(&name);
                    // Written once, by the first member of a co-upgrade that adopts it.
                    if !shared.restored.contains(&name) {
                        writes.extend(Write::status(plan, initial.clone()));
                        shared.restored.push(name.clone());
                    }
                    seen.status = Some(initial);
                }
                attach_plan(&mut status, &seen, &request.target.bundle, now);
                status.last_updated = now.clone();
                write_status = true;
                choice = Some(PlanChoice::Adopt(name));
            }
            // The plan of a co-upgrade is created by its first member; the others attach it
            // after that create, as the creator does.
            (None, Some(plan)) => {
                let name = plan.metadata.name.clone().unwrap_or_default();
                attached = Some(attached_to(
                    view,
                    sub,
                    &status,
                    &plan,
                    &request.target.bundle,
                    now,
                ));
                write_status = true;
                choice = Some(PlanChoice::Create(name));
            }
            (None, None) => {
                let key = request.draft.resolution_key();
                let name = free_name(&key, plans, view.gone_plans);
                // The Subscription's main transition: an install or upgrade is planned.
                let what = match &request.target.replaces {
                    Some(old) if rollback => {
                        format!("rollback from {old} to {}", request.target.bundle)
                    }
                    Some(old) => format!("upgrade from {old} to {}", request.target.bundle),
                    None => format!("install of {}", request.target.bundle),
                };
                events.push(ObjectEvent::normal(
                    "InstallPlanCreated",
                    format!("created InstallPlan {name} for the {what}"),
                ));
                // The plan as it will be once its first status is written: what the
                // Subscription's status says of it, but for the uid and resourceVersion the API
                // server gives it (filled in by the executor).
                let initial = request.draft.initial_status_named(&name);
                let mut plan = request.draft.install_plan(&name);
                create = Some((plan.clone(), initial.clone()));
                plan.status = Some(initial);
                attached = Some(attached_to(
                    view,
                    sub,
                    &status,
                    &plan,
                    &request.target.bundle,
                    now,
                ));
                shared.created.push((key, plan));
                write_status = true;
                choice = Some(PlanChoice::Create(name));
            }
        }
    }
    let mut decided = sub.clone();
    decided.status = Some(
        attached
            .as_ref()
            .map_or_else(|| status.clone(), |(_, a)| a.clone()),
    );
    let retry_soon = failed(&status, Some(ERROR_PREVENTED_RESOLUTION)).is_some();
    let mut effects = Effects::default();
    if write_status {
        match Write::status(sub, status) {
            Some(write) => writes.push(write),
            // Never read from a server: nothing it leads to can be written safely.
            None => {
                return SubscriptionEffects {
                    decided,
                    plan: None,
                    superseded: None,
                    effects,
                };
            }
        }
    }
    writes.extend(rollback_writes(
        sub,
        &update.rollback,
        view.state.input.namespace,
    ));
    if let Some((plan, initial)) = create {
        let key = ObjectKey::of(&plan);
        writes.push(Write::create(plan));
        writes.push(Write::StatusAfter {
            key,
            status: Body::new(initial),
            fills: Vec::new(),
        });
    }
    writes.extend(attached.map(|(plan, status)| attach_write(sub, plan, status)));
    effects.writes = writes;
    // OLM reports a failed resolution on the Namespace (docs/resolution.md §9); tools that watch
    // namespace events keep working. Once per message, with the first Subscription that has it.
    let namespace_events: Vec<ObjectEvent> = events
        .iter()
        .filter(|e| e.reason == RESOLUTION_FAILED_EVENT)
        .filter(|e| !namespace_messages.contains(&e.message))
        .cloned()
        .collect();
    for event in events {
        effects.event_on(sub, event);
    }
    for event in namespace_events {
        namespace_messages.push(event.message.clone());
        effects.events.push(EventOn {
            regarding: namespace_reference(view),
            event,
        });
    }
    if retry_soon {
        effects.requeue_after(RETRY_SOON);
    }
    SubscriptionEffects {
        decided,
        plan: choice,
        superseded: superseded.and(superseded_name),
        effects,
    }
}

/// The mark a rollback leaves on the Subscription (after its status, which is guarded by the
/// version it was decided from), and the delete of the failed CSV at the version judged
/// (docs/upgrades.md §3).
fn rollback_writes(sub: &Subscription, rollback: &RollbackWrites, namespace: &str) -> Vec<Write> {
    let mut writes = Vec::new();
    if let Some(mark) = &rollback.mark {
        writes.push(Write::MergePatch {
            key: ObjectKey::of(sub),
            patch: Body::new(
                serde_json::json!({"metadata": {"annotations": {FAILED_UPGRADE: mark}}}),
            ),
            resource_version: None,
        });
    }
    if let Some((name, version)) = &rollback.delete_failed {
        writes.push(Write::Delete {
            key: ObjectKey::new::<ClusterServiceVersion>(Some(namespace), name),
            options: DeleteOptions {
                resource_version: version.clone(),
                ..DeleteOptions::default()
            },
        });
    }
    writes
}

/// `status` with `plan` attached for `csv` (docs/install-plans.md §1 step D), as the next look
/// at it would find it: the catalog health's transition reason (`CatalogSourcesAdded`, …)
/// settles, as it does on a status already written, so the attachment does not call for one
/// more status write, and one more sync, right after it.
fn attached_to(
    view: &NamespaceView<'_>,
    sub: &Subscription,
    status: &SubscriptionStatus,
    plan: &InstallPlan,
    csv: &str,
    now: &Time,
) -> (ObjectKey, SubscriptionStatus) {
    let mut attached = status.clone();
    attach_plan(&mut attached, plan, csv, now);
    let targeted = CatalogRef::new(&sub.spec.source_namespace, &sub.spec.source);
    update_catalog_health(&mut attached, &targeted, view.state.input.catalogs, now);
    attached.last_updated = now.clone();
    (ObjectKey::of(plan), attached)
}

/// The Subscription's status naming a plan created in this decision: written after the plan's
/// create and first status, at the resourceVersion of the Subscription's own status write
/// before the create (the fence), with the plan's uid and resourceVersion as the API server
/// answered them.
fn attach_write(sub: &Subscription, plan: ObjectKey, status: SubscriptionStatus) -> Write {
    let fill = |field, at| Fill {
        from: plan.clone(),
        field,
        at,
    };
    Write::StatusAfter {
        key: ObjectKey::of(sub),
        status: Body::new(status),
        fills: vec![
            fill(Answered::Uid, "/installPlanRef/uid"),
            fill(Answered::ResourceVersion, "/installPlanRef/resourceVersion"),
            fill(Answered::Uid, "/installplan/uuid"),
        ],
    }
}

/// Plans one decision makes or repairs for several Subscriptions (a co-upgrade's members).
#[derive(Default)]
struct SharedPlans {
    /// Created by an earlier member: `(resolution key, the plan with its first status)`.
    created: Vec<(String, InstallPlan)>,
    /// Plans whose lost status an earlier member writes.
    restored: Vec<String>,
}

/// `ResolutionFailed=True` on `status`, with `reason` when given.
fn failed<'a>(
    status: &'a SubscriptionStatus,
    reason: Option<&str>,
) -> Option<&'a crate::api::SubscriptionCondition> {
    status.conditions.iter().flatten().find(|c| {
        c.type_ == SubscriptionConditionType::ResolutionFailed
            && c.status == ConditionStatus::True
            && reason.is_none_or(|r| c.reason.as_deref() == Some(r))
    })
}

/// The Namespace as an event's subject. Like any cluster-scoped subject, the event itself lands
/// in `default` (as OLM's do).
fn namespace_reference(view: &NamespaceView<'_>) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".to_owned()),
        kind: Some("Namespace".to_owned()),
        name: Some(view.state.input.namespace.to_owned()),
        uid: view.namespace_uid.map(str::to_owned),
        ..ObjectReference::default()
    }
}

#[cfg(test)]
#[path = "effects_tests/mod.rs"]
mod tests;

//! The status of every Subscription of a namespace, and the InstallPlans to ensure (pure).
//!
//! One pass, in OLM's order (docs/install-plans.md §1, docs/resolution.md §1):
//! 1. observe: catalog health, the referenced plan (step E), the CSV (step B), deprecations;
//! 2. resolve the Subscriptions not waiting on a plan (step C) with their observed status;
//! 3. turn each decision into status and, for a new target, a plan to ensure (step D).
//!
//! `effects::decide_effects` turns that into the writes and events of one sync.
//!
//! Plans serve one Subscription each: a `Manual` plan only ever installs the operator of the
//! Subscription that asked for manual approval (OLM's namespace-wide approval is a known pain),
//! and one Subscription's broken bundle never holds up another's plan.

mod co_upgrade;
mod dependencies;
mod deprecation;
mod effects;
mod health;
mod namespace_plans;
mod plan_state;
mod planning;
mod rollback;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

pub use dependencies::dependency_subscription_name;
pub use effects::{
    NamespaceDecision, NamespaceView, PlanChoice, RESOLUTION_FAILED_EVENT, RETRY_SOON,
    SubscriptionEffects, decide_effects,
};
pub use plan_state::{PlanObservation, attach_plan, is_gated, plan_message, release_deleted_csv};

use crate::api::event::ObjectEvent;
use crate::api::subscription::reason;
use crate::api::{
    ConditionStatus, InstallPlan, Subscription, SubscriptionCondition, SubscriptionConditionType,
    SubscriptionState, SubscriptionStatus, remove_condition, set_condition,
};
use crate::plan::downgrade_safety::ClusterCrd;
use crate::plan::{PlanDraft, RESOLUTION_LABEL, next_generation};

use super::decide::decide;
use super::explain::Refusal;
use super::input::NamespaceInput;
use super::outcome::{Outcome, Target, Why};
use super::version_request::{Held, reason as held_reason};
use crate::api::CatalogRef;
use co_upgrade::{Groups, Partner, dependencies_met};
pub use planning::UnplannableBundle;
use planning::{downgrade_allowed, plan_for};
pub use rollback::{RollbackInput, RollbackWrites};

/// The namespace as the Subscription sync sees it.
#[derive(Debug, Clone, Copy)]
pub struct NamespaceState<'a> {
    pub input: NamespaceInput<'a>,
    /// Every InstallPlan of the namespace.
    pub plans: &'a [InstallPlan],
    /// The cluster's CRDs, for the downgrade check (docs/upgrades.md).
    pub crds: &'a [ClusterCrd],
    /// What the rollback of a failed upgrade reads (docs/upgrades.md §3).
    pub rollback: &'a RollbackInput,
    pub now: Timestamp,
}

/// What to do for one Subscription.
#[derive(Debug, Clone)]
pub struct SubscriptionUpdate {
    pub name: String,
    /// The status to write (see `changed`); a plan, when requested, is attached to it with
    /// [`attach_plan`] once it exists.
    pub status: SubscriptionStatus,
    /// Whether `status` differs from what the Subscription has.
    pub changed: bool,
    pub plan: Option<PlanRequest>,
    /// A plan awaiting approval that no longer matches what the Subscription resolves to: to
    /// delete (only if still unchanged) before `plan` is ensured, so that nobody approves an
    /// answer that no longer holds and a plan with the same content is not adopted back.
    pub superseded: Option<SupersededPlan>,
    /// Events to publish on the Subscription.
    pub notes: Vec<Note>,
    /// The mark and the delete a rollback adds (docs/upgrades.md §3).
    pub rollback: RollbackWrites,
}

/// A plan to create (or find, if a previous attempt created it) for a Subscription.
#[derive(Debug, Clone)]
pub struct PlanRequest {
    pub draft: PlanDraft,
    pub target: Target,
}

/// A waiting plan replaced by a new answer (see [`SubscriptionUpdate::superseded`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SupersededPlan {
    /// A plan of the namespace's plans; `decide_effects` deletes it only at the version observed
    /// (not once approved meanwhile).
    pub name: String,
}

/// An Event on the Subscription.
pub type Note = ObjectEvent;

/// Computes every Subscription's status and the plans to ensure, in input order.
pub fn decide_namespace(state: &NamespaceState<'_>) -> Vec<SubscriptionUpdate> {
    let now = Time(state.now);
    let input = &state.input;
    let csv_exists = |name: &str| input.installed_csv(name).is_some();

    // 1. Observe.
    let mut observed: Vec<Subscription> = Vec::with_capacity(input.subscriptions.len());
    let mut updates: Vec<SubscriptionUpdate> = Vec::with_capacity(input.subscriptions.len());
    for sub in input.subscriptions {
        let mut status = sub
            .status
            .clone()
            .unwrap_or_else(|| SubscriptionStatus::new(now.clone()));
        let mut notes = Vec::new();
        let targeted = CatalogRef::new(&sub.spec.source_namespace, &sub.spec.source);
        let mut changed = sub.status.is_none();
        changed |= health::update_catalog_health(&mut status, &targeted, input.catalogs, &now);
        let (plan_changed, observation) = plan_state::observe_plan(&mut status, state.plans, &now);
        changed |= plan_changed;
        match observation {
            PlanObservation::PendingPlanDeleted { plan } => notes.push(ObjectEvent::warning("InstallPlanMissing", format!("install plan {plan} was deleted before it completed; resolving again for a new plan"))),
            PlanObservation::UnpackFailed { message } => notes.push(ObjectEvent::warning("BundleUnpackFailed", message)),
            PlanObservation::Missing { .. } | PlanObservation::Nothing => {}
        }
        if let Some(csv) = plan_state::release_deleted_csv(&mut status, state.plans, csv_exists) {
            changed = true;
            notes.push(ObjectEvent::warning("InstalledCSVDeleted", format!(
                "{csv}, installed by this subscription, was deleted; resolving again to install the operator anew"
            )));
        }
        changed |= plan_state::observe_csv(&mut status, csv_exists);
        if let Some(index) = input.catalog(&targeted).and_then(|c| c.index()) {
            changed |= deprecation::update_deprecations(&mut status, sub, index, &now);
        }
        let mut seen = sub.clone();
        seen.status = Some(status.clone());
        observed.push(seen);
        updates.push(SubscriptionUpdate {
            name: sub.metadata.name.clone().unwrap_or_default(),
            status,
            changed,
            plan: None,
            superseded: None,
            notes,
            rollback: RollbackWrites::default(),
        });
    }

    // 2. Resolve with what was just observed.
    let resolved_input = NamespaceInput {
        subscriptions: &observed,
        ..*input
    };
    let decisions = decide(&resolved_input);
    let groups = Groups::new(&observed, &decisions, state.plans, csv_exists);
    // A Subscription taking over an installed CSV changes what the others resolve against
    // (the CSV becomes upgradable with it, a co-upgrade becomes possible): they resolve at the
    // next sync, which its status write starts, as OLM resolves only once no Subscription's
    // status changed (docs/subscription-plans.md, "Co-upgrades").
    let adopting = decisions
        .iter()
        .any(|d| matches!(d.outcome, Outcome::Adopt { .. }));
    let mut group_generations: Vec<(Vec<usize>, i64)> = Vec::new();
    let mut generation = next_generation(
        observed
            .iter()
            .filter_map(|s| s.status.as_ref()?.install_plan_generation),
        state.plans.iter().filter_map(|p| p.spec.generation),
    );

    // 3. Apply decisions.
    for (index, ((update, sub), decision)) in updates
        .iter_mut()
        .zip(&observed)
        .zip(decisions.iter().cloned())
        .enumerate()
    {
        let members = groups.members(index, false);
        if is_gated(&update.status, state.plans)
            && let Some(plan) = superseded_plan(
                input,
                state.plans,
                sub,
                &update.status,
                &decision.outcome,
                &groups.targets(&groups.members(index, true)),
                &now,
            )
        {
            let name = plan.metadata.name.clone().unwrap_or_default();
            let old = update.status.current_csv.clone().unwrap_or_default();
            plan_state::release_plan(&mut update.status, csv_exists);
            update.changed = true;
            update.notes.push(ObjectEvent::normal("InstallPlanSuperseded", format!(
                    "install plan {name} for {old} was awaiting approval when the subscription's answer changed; it is deleted and replaced"
                )));
            update.superseded = Some(SupersededPlan { name });
        }
        if is_gated(&update.status, state.plans) {
            // Waiting on its plan, the Subscription is not resolved again (step C) — except
            // that a namespace without exactly one OperatorGroup is reported on every
            // Subscription there, waiting or not (OLM reports it on none).
            let og_problem = matches!(
                &decision.outcome,
                Outcome::Refused(Refusal::OperatorGroups { .. })
            );
            let mut conditions = update.status.conditions.take().unwrap_or_default();
            let changed = match &decision.outcome {
                Outcome::Refused(refusal) if og_problem => {
                    set_resolution_failed(&mut conditions, refusal, &now, &mut update.notes)
                }
                // Any ResolutionFailed on a waiting Subscription is stale: resolution succeeded
                // when its plan was made, and only the OperatorGroup check runs while it waits.
                _ => remove_condition(
                    &mut conditions,
                    SubscriptionConditionType::ResolutionFailed.as_str(),
                ),
            };
            update.status.conditions = Some(conditions);
            update.changed |= changed;
            continue;
        }
        if rollback::roll_back(state, sub, update, &mut generation, &now) {
            continue;
        }
        if adopting && matches!(decision.outcome, Outcome::Install(_) | Outcome::Refused(_)) {
            continue;
        }
        // A co-upgrade is one plan: while a Subscription it is tied to still waits on the plan
        // of its previous hop, this one waits too instead of planning its half alone
        // (docs/subscription-plans.md, "Co-upgrades").
        if groups.partner(index) == Partner::Waits {
            continue;
        }
        // A dependency left to the Subscription of its package is installed by it: when that
        // one gets something else now (its own CSV not yet seen by the stores, say), this
        // plan waits for the next sync rather than install a bundle without what it needs.
        if let Outcome::Install(target) = &decision.outcome
            && !dependencies_met(target, &observed, &decisions)
        {
            continue;
        }
        let status = &mut update.status;
        let mut conditions = status.conditions.take().unwrap_or_default();
        let mut changed = false;
        match decision.outcome {
            Outcome::Refused(refusal) => {
                changed |= clear_version_held(&mut conditions);
                changed |=
                    set_resolution_failed(&mut conditions, &refusal, &now, &mut update.notes);
            }
            Outcome::UpToDate { held, .. } => {
                changed |= clear_resolution_conditions(&mut conditions);
                changed |= plan_state::plan_not_needed(status, &mut conditions);
                changed |= match &held {
                    Some(held) => set_version_held(
                        &mut conditions,
                        held.reason(),
                        &held.to_string(),
                        matches!(held, Held::InstalledOutsideRange { .. }),
                        &now,
                        &mut update.notes,
                    ),
                    None => clear_version_held(&mut conditions),
                };
            }
            Outcome::Adopt { csv } => {
                clear_resolution_conditions(&mut conditions);
                plan_state::plan_not_needed(status, &mut conditions);
                status.current_csv = Some(csv.clone());
                status.installed_csv = Some(csv.clone());
                status.state = Some(SubscriptionState::AtLatestKnown);
                changed = true;
                update.notes.push(ObjectEvent::normal("AdoptedInstalledCSV", format!(
                        "{csv} was installed in this namespace without a Subscription; this Subscription now manages it"
                    )));
            }
            Outcome::Install(target) => {
                changed |= remove_condition(
                    &mut conditions,
                    SubscriptionConditionType::ResolutionFailed.as_str(),
                );
                if target.why == Why::Downgrade
                    && let Err(refused) = downgrade_allowed(input, &target, state.crds)
                {
                    changed |= set_version_held(
                        &mut conditions,
                        held_reason::DOWNGRADE_REFUSED,
                        &refused.to_string(),
                        true,
                        &now,
                        &mut update.notes,
                    );
                    status.conditions = Some(conditions);
                    update.changed |= changed;
                    continue;
                }
                changed |= clear_version_held(&mut conditions);
                let already = status.current_csv.as_deref() == Some(target.bundle.as_str())
                    && csv_exists(&target.bundle);
                if !already {
                    // One generation per plan: the members of a co-upgrade share theirs.
                    let planned = group_generations.iter().find(|(m, _)| *m == members);
                    let plan_generation = planned.map_or(generation, |(_, g)| *g);
                    let targets = groups.targets(&members);
                    match plan_for(input, &targets, plan_generation, &now) {
                        Ok(draft) => {
                            if planned.is_none() {
                                group_generations.push((members.clone(), generation));
                                generation += 1;
                            }
                            changed |= clear_unpack_conditions(&mut conditions);
                            update.plan = Some(PlanRequest { draft, target });
                        }
                        Err(unplannable) => {
                            let message = unplannable.to_string();
                            let set = set_condition(
                                &mut conditions,
                                SubscriptionCondition::new(
                                    SubscriptionConditionType::BundleUnpackFailed,
                                    ConditionStatus::True,
                                    reason::ERROR_PREVENTED_UNPACKING,
                                    &message,
                                ),
                                &now,
                            );
                            if set {
                                update
                                    .notes
                                    .push(ObjectEvent::warning("BundleUnpackFailed", message));
                            }
                            changed |= set;
                        }
                    }
                }
            }
        }
        status.conditions = Some(conditions);
        update.changed |= changed;
    }
    for update in &mut updates {
        if update.changed {
            update.status.last_updated = now.clone();
        }
    }
    updates
}

/// The referenced plan, when it awaits approval and the Subscription now resolves to something
/// else: another bundle, catalog or upgrade edge (its spec changed — channel, source,
/// startingCSV — or its catalog did), another approval mode, or nothing to install at all.
/// A refusal keeps the plan: the reason is reported and the plan may be right again later.
fn superseded_plan<'a>(
    input: &NamespaceInput<'_>,
    plans: &'a [InstallPlan],
    sub: &Subscription,
    status: &SubscriptionStatus,
    outcome: &Outcome,
    group: &[(&Subscription, &Target)],
    now: &Time,
) -> Option<&'a InstallPlan> {
    let plan = plan_state::waiting_plan(status, plans)?;
    let still_valid = match outcome {
        Outcome::Install(target) => {
            let approval_kept = plan.spec.approval == sub.spec.effective_approval();
            let label = plan
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(RESOLUTION_LABEL));
            let same_target = match (plan_for(input, group, 0, now), label) {
                (Ok(draft), Some(key)) => draft.resolution_key() == *key,
                // A plan made without the label (an older olm-rs), or a bundle that cannot be
                // planned: compare what is installed.
                _ => status.current_csv.as_deref() == Some(target.bundle.as_str()),
            };
            approval_kept && same_target
        }
        Outcome::UpToDate { .. } => false,
        Outcome::Adopt { .. } | Outcome::Refused(_) => true,
    };
    (!still_valid).then_some(plan)
}

/// `ResolutionFailed=True` with the refusal's reason and words; an event when it is new.
fn set_resolution_failed(
    conditions: &mut Vec<SubscriptionCondition>,
    refusal: &Refusal,
    now: &Time,
    notes: &mut Vec<Note>,
) -> bool {
    let message = refusal.to_string();
    let set = set_condition(
        conditions,
        SubscriptionCondition::new(
            SubscriptionConditionType::ResolutionFailed,
            ConditionStatus::True,
            refusal.reason(),
            &message,
        ),
        now,
    );
    if set {
        notes.push(ObjectEvent::warning("ResolutionFailed", message));
    }
    set
}

/// `VersionHeld=True` with `reason` and `message`; an event (a warning when `warn`) when new.
fn set_version_held(
    conditions: &mut Vec<SubscriptionCondition>,
    reason: &str,
    message: &str,
    warn: bool,
    now: &Time,
    notes: &mut Vec<Note>,
) -> bool {
    let set = set_condition(
        conditions,
        SubscriptionCondition::new(
            SubscriptionConditionType::VersionHeld,
            ConditionStatus::True,
            reason,
            message,
        ),
        now,
    );
    if set {
        notes.push(if warn {
            ObjectEvent::warning(reason, message.to_owned())
        } else {
            ObjectEvent::normal(reason, message.to_owned())
        });
    }
    set
}

fn clear_version_held(conditions: &mut Vec<SubscriptionCondition>) -> bool {
    remove_condition(conditions, SubscriptionConditionType::VersionHeld.as_str())
}

fn clear_resolution_conditions(conditions: &mut Vec<SubscriptionCondition>) -> bool {
    remove_condition(
        conditions,
        SubscriptionConditionType::ResolutionFailed.as_str(),
    ) | clear_unpack_conditions(conditions)
}

fn clear_unpack_conditions(conditions: &mut Vec<SubscriptionCondition>) -> bool {
    remove_condition(
        conditions,
        SubscriptionConditionType::BundleUnpackFailed.as_str(),
    ) | remove_condition(
        conditions,
        SubscriptionConditionType::BundleUnpacking.as_str(),
    )
}

#[cfg(test)]
mod tests;

//! What a Subscription's status says about its InstallPlan and CSV
//! (docs/install-plans.md §1 steps B and E, §2 plan conditions, §2.1 plan message).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::keys::BUNDLE_UNPACK_MIN_RETRY_INTERVAL_ANNOTATION;
use crate::api::subscription::reason;
use crate::api::{
    ConditionStatus, InstallPlan, InstallPlanConditionType, InstallPlanPhase, InstallPlanReference,
    SubscriptionCondition, SubscriptionConditionType, SubscriptionState, SubscriptionStatus,
    remove_condition, set_condition,
};
use crate::plan::plan_reference;
use crate::plan::unpack::{DEFAULT_FAILED_RETRY, go_duration, lookup_failure, lookup_pending};

/// What happened to the referenced plan, for an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanObservation {
    /// No plan referenced, or it is there.
    Nothing,
    /// The referenced plan, still pending, is gone: the reference was cleared for a new one.
    PendingPlanDeleted { plan: String },
    /// The referenced plan of an installed Subscription is gone (`InstallPlanMissing`).
    Missing { plan: String },
    /// A bundle image of the referenced plan could not be pulled (newly reported).
    UnpackFailed { message: String },
}

/// Step E and the plan conditions: looks up the referenced plan among `plans`.
pub fn observe_plan(
    status: &mut SubscriptionStatus,
    plans: &[InstallPlan],
    now: &Time,
) -> (bool, PlanObservation) {
    let Some(name) = referenced_plan(status) else {
        // Without a reference only `InstallPlanMissing` of a deleted pending plan can remain:
        // it goes when a plan is attached or resolution needs none (see `plan_not_needed`).
        let mut conditions = status.conditions.take().unwrap_or_default();
        let changed = remove_condition(
            &mut conditions,
            SubscriptionConditionType::InstallPlanPending.as_str(),
        ) | remove_condition(
            &mut conditions,
            SubscriptionConditionType::InstallPlanFailed.as_str(),
        );
        status.conditions = Some(conditions);
        return (changed, PlanObservation::Nothing);
    };
    let plan = plans
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some(name.as_str()));
    let mut conditions = status.conditions.take().unwrap_or_default();
    let mut changed = false;
    let observation = match plan {
        Some(plan) => {
            changed |= remove_condition(
                &mut conditions,
                SubscriptionConditionType::InstallPlanMissing.as_str(),
            );
            changed |= set_plan_conditions(&mut conditions, plan, now);
            let (unpack_changed, failure) = set_unpack_conditions(&mut conditions, plan, now);
            changed |= unpack_changed;
            match failure {
                Some(message) => PlanObservation::UnpackFailed { message },
                None => PlanObservation::Nothing,
            }
        }
        None if status.state() == SubscriptionState::UpgradePending => {
            // OLM clears the reference so resolution runs again; olm-rs does the same and
            // reports it (OLM could keep pointing at a deleted plan awaiting approval forever).
            // The condition stays until a plan is referenced again (or none is needed), so a
            // re-resolution that cannot plan leaves a visible trace, not a silent blank.
            status.install_plan_ref = None;
            status.install_plan = None;
            status.current_csv = None;
            status.state = None;
            changed = true;
            changed |= clear_plan_conditions(&mut conditions);
            set_condition(
                &mut conditions,
                SubscriptionCondition::new(
                    SubscriptionConditionType::InstallPlanMissing,
                    ConditionStatus::True,
                    reason::REFERENCED_INSTALL_PLAN_NOT_FOUND,
                    &format!(
                        "install plan {name} was deleted before it completed; resolving again for a new plan"
                    ),
                ),
                now,
            );
            PlanObservation::PendingPlanDeleted { plan: name }
        }
        None => {
            changed |= clear_plan_conditions(&mut conditions);
            changed |= set_condition(
                &mut conditions,
                SubscriptionCondition::new(
                    SubscriptionConditionType::InstallPlanMissing,
                    ConditionStatus::True,
                    reason::REFERENCED_INSTALL_PLAN_NOT_FOUND,
                    &format!("install plan {name} referenced by the subscription no longer exists"),
                ),
                now,
            );
            PlanObservation::Missing { plan: name }
        }
    };
    status.conditions = Some(conditions);
    (changed, observation)
}

/// Step B: `AtLatestKnown` once the CSV for `currentCSV` exists, else `UpgradePending`.
pub fn observe_csv(status: &mut SubscriptionStatus, csv_exists: impl Fn(&str) -> bool) -> bool {
    let Some(current) = status.current_csv.clone().filter(|c| !c.is_empty()) else {
        return false;
    };
    let state = if csv_exists(&current) {
        SubscriptionState::AtLatestKnown
    } else {
        SubscriptionState::UpgradePending
    };
    if status.state() == state {
        return false;
    }
    if state == SubscriptionState::AtLatestKnown {
        status.installed_csv = Some(current);
    }
    status.state = Some(state);
    true
}

/// The CSV the Subscription installed is gone — deleted by someone, the way OLM's users are
/// told to unwedge an install — and no plan of it is still at work (its plan completed, or is
/// gone, or it was adopted without one). The Subscription lets go of CSV and plan, so it
/// resolves afresh and a new plan installs the operator again, as OLM reinstalls it
/// (docs/install-plans.md §1.1). Without this, the Subscription would wait on its completed
/// plan for good (step C). Returns the deleted CSV's name when it let go.
pub fn release_deleted_csv(
    status: &mut SubscriptionStatus,
    plans: &[InstallPlan],
    csv_exists: impl Fn(&str) -> bool,
) -> Option<String> {
    let installed = status.installed_csv.clone().filter(|c| !c.is_empty())?;
    // An upgrade under way (currentCSV ahead of installedCSV) is its plan's business; and the
    // CSV must be known gone, not merely unseen yet.
    if status.current_csv.as_deref() != Some(installed.as_str()) || csv_exists(&installed) {
        return None;
    }
    let plan_at_work = referenced_plan(status).is_some_and(|name| {
        plans.iter().any(|p| {
            p.metadata.name.as_deref() == Some(name.as_str())
                && p.status
                    .as_ref()
                    .is_none_or(|s| s.phase != InstallPlanPhase::Complete)
        })
    });
    if plan_at_work {
        return None;
    }
    status.install_plan_ref = None;
    status.install_plan = None;
    status.current_csv = None;
    status.installed_csv = None;
    status.state = None;
    let mut conditions = status.conditions.take().unwrap_or_default();
    clear_plan_conditions(&mut conditions);
    status.conditions = Some(conditions);
    Some(installed)
}

/// Whether the Subscription waits on its plan (step C): it does not re-resolve. OLM waits only
/// while the CSV is missing (`UpgradePending`); olm-rs also waits while the referenced plan is
/// still `Installing`, because its CSV appears before the rest of the plan (the other CSVs, the
/// dependency Subscriptions): a resolution then sees a half-installed namespace and plans the
/// dependency afresh next to the one on its way (docs/subscription-plans.md, "Co-upgrades").
pub fn is_gated(status: &SubscriptionStatus, plans: &[InstallPlan]) -> bool {
    let Some(name) = referenced_plan(status) else {
        return false;
    };
    status.state() == SubscriptionState::UpgradePending
        || plans
            .iter()
            .any(|p| p.metadata.name.as_deref() == Some(name.as_str()) && is_executing(p))
}

/// The plan is being executed: approved and not yet `Complete` or `Failed`.
pub fn is_executing(plan: &InstallPlan) -> bool {
    plan.metadata.deletion_timestamp.is_none()
        && plan
            .status
            .as_ref()
            .is_some_and(|s| s.phase == InstallPlanPhase::Installing)
}

/// The referenced plan while it still awaits approval: nothing of it has run, so a new answer
/// may replace it.
pub fn waiting_plan<'a>(
    status: &SubscriptionStatus,
    plans: &'a [InstallPlan],
) -> Option<&'a InstallPlan> {
    let name = referenced_plan(status)?;
    plans.iter().find(|p| {
        p.metadata.name.as_deref() == Some(name.as_str())
            && !p.spec.approved
            && p.status
                .as_ref()
                .is_some_and(|s| s.phase == InstallPlanPhase::RequiresApproval)
    })
}

/// Lets go of a superseded plan: the Subscription points at its installed CSV again (or at
/// nothing before a first install) and resolves anew.
pub fn release_plan(status: &mut SubscriptionStatus, csv_exists: impl Fn(&str) -> bool) {
    status.install_plan_ref = None;
    status.install_plan = None;
    status.current_csv = status.installed_csv.clone();
    status.state = None;
    observe_csv(status, csv_exists);
    let mut conditions = status.conditions.take().unwrap_or_default();
    clear_plan_conditions(&mut conditions);
    status.conditions = Some(conditions);
}

/// Resolution needs no plan: a leftover `InstallPlanMissing` without a reference goes.
pub fn plan_not_needed(
    status: &SubscriptionStatus,
    conditions: &mut Vec<SubscriptionCondition>,
) -> bool {
    referenced_plan(status).is_none()
        && remove_condition(
            conditions,
            SubscriptionConditionType::InstallPlanMissing.as_str(),
        )
}

/// Records a plan just ensured for `csv` (step D).
pub fn attach_plan(status: &mut SubscriptionStatus, plan: &InstallPlan, csv: &str, now: &Time) {
    let reference = plan_reference(plan);
    status.install_plan = Some(InstallPlanReference {
        api_version: crate::api::V1ALPHA1.into(),
        kind: "InstallPlan".into(),
        name: plan.metadata.name.clone().unwrap_or_default(),
        uuid: plan.metadata.uid.clone().unwrap_or_default(),
    });
    status.install_plan_ref = Some(reference);
    status.install_plan_generation = plan.spec.generation;
    status.current_csv = Some(csv.to_owned());
    status.state = Some(SubscriptionState::UpgradePending);
    let mut conditions = status.conditions.take().unwrap_or_default();
    remove_condition(
        &mut conditions,
        SubscriptionConditionType::InstallPlanMissing.as_str(),
    );
    set_plan_conditions(&mut conditions, plan, now);
    set_unpack_conditions(&mut conditions, plan, now);
    status.conditions = Some(conditions);
}

/// The plan's bundle lookups on the Subscription (docs/install-plans.md §9, without Jobs): `BundleUnpacking` while
/// any is pending, `BundleUnpackFailed` (reason `BundleUnpackFailed`) when one failed, neither
/// once every bundle is pulled. `BundleUnpackFailed` with another reason (a bundle that cannot
/// be planned at all) is left to resolution. Returns whether anything changed and, when the
/// failure is newly reported, its message (for an event).
fn set_unpack_conditions(
    conditions: &mut Vec<SubscriptionCondition>,
    plan: &InstallPlan,
    now: &Time,
) -> (bool, Option<String>) {
    let lookups = plan
        .status
        .as_ref()
        .and_then(|s| s.bundle_lookups.as_deref())
        .unwrap_or_default();
    let unpacking = SubscriptionConditionType::BundleUnpacking;
    let failed = SubscriptionConditionType::BundleUnpackFailed;
    let failures: Vec<String> = lookups
        .iter()
        .filter_map(|l| {
            lookup_failure(l).map(|(why, message)| {
                format!(
                    "Bundle unpacking failed - {why}: {message}. The pull is tried again after the OperatorGroup's {BUNDLE_UNPACK_MIN_RETRY_INTERVAL_ANNOTATION} (default {}), or at once if InstallPlan {} is deleted",
                    go_duration(DEFAULT_FAILED_RETRY),
                    plan.metadata.name.as_deref().unwrap_or_default()
                )
            })
        })
        .collect();
    let lookup_failed_before = conditions
        .iter()
        .any(|c| c.type_ == failed && c.reason.as_deref() == Some(reason::BUNDLE_UNPACK_FAILED));
    if !failures.is_empty() {
        let message = failures.join("; ");
        let set = set_condition(
            conditions,
            SubscriptionCondition::new(
                failed,
                ConditionStatus::True,
                reason::BUNDLE_UNPACK_FAILED,
                &message,
            ),
            now,
        );
        let changed = remove_condition(conditions, unpacking.as_str()) | set;
        return (changed, set.then_some(message));
    }
    let mut changed = false;
    if lookup_failed_before {
        changed |= remove_condition(conditions, failed.as_str());
    }
    if lookups.iter().any(lookup_pending) {
        let message = plan_message(plan);
        changed |= set_condition(
            conditions,
            SubscriptionCondition::new(
                unpacking,
                ConditionStatus::True,
                reason::UNPACKING_IN_PROGRESS,
                &message,
            ),
            now,
        );
    } else {
        changed |= remove_condition(conditions, unpacking.as_str());
    }
    (changed, None)
}

pub(super) fn referenced_plan(status: &SubscriptionStatus) -> Option<String> {
    status
        .install_plan_ref
        .as_ref()
        .and_then(|r| r.name.clone())
        .or_else(|| status.install_plan.as_ref().map(|r| r.name.clone()))
        .filter(|n| !n.is_empty())
}

fn clear_plan_conditions(conditions: &mut Vec<SubscriptionCondition>) -> bool {
    let mut changed = false;
    for kind in [
        SubscriptionConditionType::InstallPlanPending,
        SubscriptionConditionType::InstallPlanFailed,
        SubscriptionConditionType::InstallPlanMissing,
    ] {
        changed |= remove_condition(conditions, kind.as_str());
    }
    changed
}

fn set_plan_conditions(
    conditions: &mut Vec<SubscriptionCondition>,
    plan: &InstallPlan,
    now: &Time,
) -> bool {
    let phase = plan
        .status
        .as_ref()
        .map(|s| s.phase.clone())
        .unwrap_or(InstallPlanPhase::None);
    let message = plan_message(plan);
    let pending = SubscriptionConditionType::InstallPlanPending;
    let failed = SubscriptionConditionType::InstallPlanFailed;
    match phase {
        InstallPlanPhase::Complete => {
            remove_condition(conditions, pending.as_str())
                | remove_condition(conditions, failed.as_str())
        }
        InstallPlanPhase::Failed => {
            let why = installed_condition(plan)
                .and_then(|c| c.reason.as_ref().map(|r| r.as_str().to_owned()))
                .filter(|r| !r.is_empty())
                .unwrap_or_else(|| reason::INSTALL_PLAN_FAILED.to_owned());
            remove_condition(conditions, pending.as_str())
                | set_condition(
                    conditions,
                    SubscriptionCondition::new(failed, ConditionStatus::True, &why, &message),
                    now,
                )
        }
        other => {
            let why = match other {
                InstallPlanPhase::None => reason::INSTALL_PLAN_NOT_YET_RECONCILED.to_owned(),
                phase => phase.as_str().to_owned(),
            };
            remove_condition(conditions, failed.as_str())
                | set_condition(
                    conditions,
                    SubscriptionCondition::new(pending, ConditionStatus::True, &why, &message),
                    now,
                )
        }
    }
}

fn installed_condition(plan: &InstallPlan) -> Option<&crate::api::InstallPlanCondition> {
    plan.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == Some(InstallPlanConditionType::Installed))
}

/// docs/install-plans.md §2.1: the `Installed` condition's message when it has a status other than Unknown, else the
/// messages of pending bundle lookups, each followed by `.`.
pub fn plan_message(plan: &InstallPlan) -> String {
    if let Some(c) = installed_condition(plan)
        && c.status
            .as_ref()
            .is_some_and(|s| *s != ConditionStatus::Unknown)
        && let Some(m) = c.message.as_deref().filter(|m| !m.is_empty())
    {
        return m.to_owned();
    }
    let lookups = plan.status.as_ref().and_then(|s| s.bundle_lookups.as_ref());
    lookups
        .into_iter()
        .flatten()
        .flat_map(|l| l.conditions.iter().flatten())
        .filter(|c| c.type_ == crate::api::BundleLookupConditionType::BundleLookupPending)
        .filter_map(|c| c.message.as_deref())
        .map(|m| format!("{m}."))
        .collect::<Vec<_>>()
        .join(" ")
}

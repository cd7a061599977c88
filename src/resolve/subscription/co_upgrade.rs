//! Co-upgrades within one sync (docs/subscription-plans.md, "Co-upgrades"): which Subscriptions
//! one plan serves, and when a Subscription's plan must wait for another Subscription.

use crate::api::{InstallPlan, Subscription};

use super::super::outcome::{Decision, Outcome, Target};
use super::plan_state::{is_gated, referenced_plan};

/// Whether every dependency of `target` whose package a Subscription covers is that
/// Subscription's: installed by it, or its target now.
pub(super) fn dependencies_met(
    target: &Target,
    subscriptions: &[Subscription],
    decisions: &[Decision],
) -> bool {
    target.dependencies.iter().all(|dep| {
        subscriptions
            .iter()
            .zip(decisions)
            .filter(|(s, _)| s.spec.name == dep.package)
            .all(|(s, d)| {
                let has = s.status.as_ref().is_some_and(|st| {
                    st.installed_csv.as_deref() == Some(dep.bundle.as_str())
                        || st.current_csv.as_deref() == Some(dep.bundle.as_str())
                });
                let gets = matches!(&d.outcome, Outcome::Install(t) if t.bundle == dep.bundle);
                has || gets
            })
    })
}

/// The co-upgrade groups of one sync (docs/subscription-plans.md, "Co-upgrades"): each
/// Subscription's plan installs its own target and those of the Subscriptions it is tied to
/// (`Target::together`) that plan now too, with the same approval. A Subscription that waits on
/// its plan, or whose target is already there, plans nothing, so it joins no group — but a
/// partner's waiting decides for the others tied to it ([`Groups::partner`]).
pub(super) struct Groups<'s> {
    subscriptions: &'s [Subscription],
    decisions: &'s [Decision],
    /// Plans now: resolved to a target it does not have yet, and not waiting on a plan.
    plans_now: Vec<bool>,
    /// Resolved to a target, and waiting on a plan: the CSVs of that plan (empty when the
    /// stores do not show it).
    waiting_on: Vec<Option<Vec<String>>>,
}

/// What a Subscription tied to another that waits on a plan does in this sync.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Partner {
    /// No tied partner waits: plan as usual.
    Free,
    /// A partner waits on a plan that already installs this Subscription's target (the
    /// co-upgrade's plan, whose attachment to this Subscription was refused or is not yet
    /// seen): the draft counts the partner, so the plan is found and attached, not made again.
    JoinsItsPlan,
    /// A partner waits on a plan without this target (its previous hop still installing): this
    /// one waits too rather than plan its half of the co-upgrade alone, which the co-upgrade's
    /// plan would install a second time once the partner is free.
    Waits,
}

impl<'s> Groups<'s> {
    pub(super) fn new(
        subscriptions: &'s [Subscription],
        decisions: &'s [Decision],
        plans: &[InstallPlan],
        csv_exists: impl Fn(&str) -> bool,
    ) -> Self {
        let state = |sub: &Subscription, decision: &Decision| {
            let Outcome::Install(target) = &decision.outcome else {
                return (false, None);
            };
            let Some(status) = &sub.status else {
                return (true, None);
            };
            if is_gated(status, plans) {
                let csvs = referenced_plan(status)
                    .and_then(|name| {
                        plans
                            .iter()
                            .find(|p| p.metadata.name.as_deref() == Some(name.as_str()))
                    })
                    .map(|p| p.spec.cluster_service_version_names.clone())
                    .unwrap_or_default();
                return (false, Some(csvs));
            }
            let already = status.current_csv.as_deref() == Some(target.bundle.as_str())
                && csv_exists(&target.bundle);
            (!already, None)
        };
        let (plans_now, waiting_on) = subscriptions
            .iter()
            .zip(decisions)
            .map(|(sub, decision)| state(sub, decision))
            .unzip();
        Groups {
            subscriptions,
            decisions,
            plans_now,
            waiting_on,
        }
    }

    /// Whether `j` is tied to `i`'s target and would share its plan (same approval).
    fn tied(&self, i: usize, j: usize) -> bool {
        let Outcome::Install(target) = &self.decisions[i].outcome else {
            return false;
        };
        j != i
            && matches!(self.decisions[j].outcome, Outcome::Install(_))
            && target.together.contains(&self.decisions[j].subscription)
            && self.subscriptions[j].spec.effective_approval()
                == self.subscriptions[i].spec.effective_approval()
    }

    /// What Subscription `i` does about tied partners that wait on a plan.
    pub(super) fn partner(&self, i: usize) -> Partner {
        let Outcome::Install(target) = &self.decisions[i].outcome else {
            return Partner::Free;
        };
        let mut answer = Partner::Free;
        for j in (0..self.subscriptions.len()).filter(|j| self.tied(i, *j)) {
            match &self.waiting_on[j] {
                Some(csvs) if csvs.contains(&target.bundle) => answer = Partner::JoinsItsPlan,
                Some(_) => return Partner::Waits,
                None => {}
            }
        }
        answer
    }

    /// The Subscriptions (by index, in input order) one plan serves together with Subscription
    /// `i`, `i` included. `waiting_too`: count those waiting on a plan (to recognise the plan
    /// they wait on). A partner waiting on a plan with `i`'s target counts when `i` plans now:
    /// `i`'s draft is then that plan's ([`Partner::JoinsItsPlan`]).
    pub(super) fn members(&self, i: usize, waiting_too: bool) -> Vec<usize> {
        let Outcome::Install(target) = &self.decisions[i].outcome else {
            return vec![i];
        };
        let in_its_plan = |j: usize| {
            self.waiting_on[j]
                .as_ref()
                .is_some_and(|csvs| csvs.contains(&target.bundle))
        };
        let joins = |j: usize| {
            self.tied(i, j)
                && (waiting_too || (self.plans_now[i] && (self.plans_now[j] || in_its_plan(j))))
        };
        (0..self.subscriptions.len())
            .filter(|j| *j == i || joins(*j))
            .collect()
    }

    /// Each member with its target.
    pub(super) fn targets(&self, members: &[usize]) -> Vec<(&'s Subscription, &'s Target)> {
        members
            .iter()
            .filter_map(|i| match &self.decisions[*i].outcome {
                Outcome::Install(target) => Some((&self.subscriptions[*i], target)),
                _ => None,
            })
            .collect()
    }
}

#[cfg(test)]
#[path = "co_upgrade_tests.rs"]
mod tests;

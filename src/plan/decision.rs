//! What one sync of an InstallPlan decides (pure; docs/install-plans.md §6, §9, §10): the
//! unpack policy of its bundle lookups, the approval gate, the OperatorGroup check and the
//! identity steps run as, the phase after a pass, the events, when to look again, and the
//! status write guarded by the resourceVersion the plan was read at.
//!
//! A sync interleaves deciding with two kinds of work only the shell can do (pulling bundle
//! images, running an execution pass). [`PlanSync`] holds the decision in progress: the shell
//! asks it what to do, does it, reports back, and finally takes the [`Effects`] to execute.
//! Nothing here reads the clock, a store or the network; `now` and the observed objects are
//! arguments, so every step is tested as a table.

use std::borrow::Borrow;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::ObjectReference;

use super::execution::PassReport;
use super::lookups::LookupsWorked;
use super::phase::{self, Gate, PassOutcome};
use super::scope::{ExecuteAs, execution_identity};
use super::superseded::Superseded;
use super::unpack::{UnpackAnnotationError, UnpackPolicy, unpack_policy};
use crate::api::event::ObjectEvent;
use crate::api::{
    BundleLookup, InstallPlan, InstallPlanPhase, InstallPlanStatus, OperatorGroup, Step,
};
use crate::go_duration::DurationError;
use crate::k8s::effects::{Effects, EventOn, Write, reference_of};

/// How often an installing plan is looked at again (OLM: 5 s).
pub const INSTALLING_RESYNC: Duration = Duration::from_secs(5);

/// Event reasons of a plan (OLM's).
pub mod reason {
    pub const INSTALL_SUCCEEDED: &str = "InstallSucceeded";
    pub const INSTALL_COMPONENT_FAILED: &str = "InstallComponentFailed";
    pub const BUNDLE_UNPACKED: &str = "BundleUnpacked";
    pub const BUNDLE_UNPACK_FAILED: &str = "BundleUnpackFailed";
    /// olm-rs's: a bundle image the controller could not pull goes to an unpack pod.
    pub const BUNDLE_UNPACKING_IN_POD: &str = "BundleUnpackingInPod";
    /// olm-rs's: the plan's Subscriptions moved past it before it finished.
    pub const SUPERSEDED: &str = "Superseded";
}

/// One sync of one plan, decided step by step.
#[derive(Debug)]
pub struct PlanSync<'a> {
    plan: &'a InstallPlan,
    before: InstallPlanStatus,
    status: InstallPlanStatus,
    now: Timestamp,
    effects: Effects,
}

impl<'a> PlanSync<'a> {
    /// Starts a sync of `plan`, or `None` when there is nothing to do: a plan with neither
    /// steps nor bundle lookups is still being written by the Subscription controller (which
    /// also repairs one whose status write was lost), and a plan never read from a server has
    /// no resourceVersion to guard a status write with.
    pub fn begin(plan: &'a InstallPlan, now: Timestamp) -> Option<Self> {
        plan.metadata.resource_version.as_ref()?;
        let status = plan.status.clone()?;
        if status.plan.is_none() && status.bundle_lookups.is_none() {
            return None;
        }
        Some(Self {
            plan,
            before: status.clone(),
            status,
            now,
            effects: Effects::default(),
        })
    }

    /// The bundle lookups to work now and their unpack policy (the OperatorGroup's annotations
    /// when the namespace has exactly one, over `default_timeout`; `parse` reads a Go
    /// duration), or `None` when the plan has none.
    pub fn lookups<G: Borrow<OperatorGroup>>(
        &self,
        groups: &[G],
        default_timeout: Duration,
        parse: impl Fn(&str) -> Result<Duration, DurationError>,
    ) -> Option<(&[BundleLookup], Result<UnpackPolicy, UnpackAnnotationError>)> {
        let lookups = self
            .status
            .bundle_lookups
            .as_deref()
            .filter(|l| !l.is_empty())?;
        let annotations = match groups {
            [one] => one.borrow().metadata.annotations.as_ref(),
            _ => None,
        };
        Some((lookups, unpack_policy(annotations, default_timeout, parse)))
    }

    /// Records what working the lookups did: pulled bundles' steps join the plan, the rest
    /// stay; an event per new failure and per pulled bundle.
    pub fn lookups_worked(&mut self, worked: LookupsWorked) {
        self.status.bundle_lookups = Some(worked.remaining).filter(|l| !l.is_empty());
        if !worked.steps.is_empty() {
            self.status
                .plan
                .get_or_insert_with(Vec::new)
                .extend(worked.steps);
        }
        for catalog in worked.catalog_sources {
            if !self.status.catalog_sources.contains(&catalog) {
                self.status.catalog_sources.push(catalog);
            }
        }
        for failure in worked.failures {
            self.effects.event_on(
                self.plan,
                ObjectEvent::warning(
                    reason::BUNDLE_UNPACK_FAILED,
                    format!(
                        "bundle {}: {}: {}",
                        failure.bundle, failure.reason, failure.message
                    ),
                ),
            );
        }
        for (bundle, why) in worked.to_pod {
            self.effects.event_on(
                self.plan,
                ObjectEvent::warning(
                    reason::BUNDLE_UNPACKING_IN_POD,
                    format!("bundle {bundle}: {why}"),
                ),
            );
        }
        for bundle in worked.pulled {
            let how = worked
                .unpacked_by_pod
                .iter()
                .find(|(b, _)| *b == bundle)
                .map(|(_, how)| how.as_str());
            let message = match how {
                Some(how) => format!("{how}; added the steps of {bundle} to the plan"),
                None => {
                    format!("pulled the bundle image of {bundle} and added its steps to the plan")
                }
            };
            self.effects.event_on(
                self.plan,
                ObjectEvent::normal(reason::BUNDLE_UNPACKED, message),
            );
        }
        if let Some(after) = worked.requeue {
            self.effects.requeue_after(after);
        }
    }

    /// The approval gate and the OperatorGroup check. `Some(identity)` when a pass is to run
    /// now, as that identity; `None` when nothing runs: a bundle is still to be pulled (nothing
    /// runs until every bundle is here), approval is awaited, the plan is final, its
    /// Subscriptions moved past it (`superseded`: it completes without a pass,
    /// docs/install-plans.md §7.6), or the namespace's OperatorGroups do not allow it
    /// (`Installed=False/InstallCheckFailed`, retried).
    pub fn gate<G: Borrow<OperatorGroup>>(
        &mut self,
        groups: &[G],
        superseded: Option<&Superseded>,
    ) -> Option<ExecuteAs> {
        if self.status.bundle_lookups.is_some() {
            return None;
        }
        if let Some(by) = superseded
            && phase::would_execute(&self.status, self.plan.spec.approved)
        {
            let message = by.message();
            phase::superseded(&mut self.status, &message, self.now);
            self.effects
                .event_on(self.plan, ObjectEvent::normal(reason::SUPERSEDED, message));
            return None;
        }
        // Waiting out a transient failure: no pass before its back-off is over, whatever woke
        // the plan (docs/install-plans.md §6.2).
        if let Some(wait) = phase::next_pass_wait(&self.status, self.now) {
            self.effects.requeue_after(wait);
            return None;
        }
        if phase::gate(&mut self.status, self.plan.spec.approved) != Gate::Execute {
            return None;
        }
        phase::start(&mut self.status, self.now);
        let namespace = self.plan.metadata.namespace.as_deref().unwrap_or_default();
        match execution_identity(namespace, groups) {
            Err(why) => {
                phase::check_failed(&mut self.status, &why.to_string(), self.now);
                self.effects.requeue_after(INSTALLING_RESYNC);
                None
            }
            Ok(identity) => {
                phase::check_passed(&mut self.status, self.now);
                if let ExecuteAs::ServiceAccount { namespace, name } = &identity {
                    self.status.attenuated_service_account_ref = Some(ObjectReference {
                        api_version: Some("v1".into()),
                        kind: Some("ServiceAccount".into()),
                        name: Some(name.clone()),
                        namespace: Some(namespace.clone()),
                        ..ObjectReference::default()
                    });
                }
                Some(identity)
            }
        }
    }

    /// The steps a pass runs over, handed to it (not copied: a plan's manifests can be
    /// megabytes); [`Self::pass_ran`] puts them back with their new statuses.
    pub fn take_steps(&mut self) -> Vec<Step> {
        self.status.plan.take().unwrap_or_default()
    }

    /// Records a pass: the steps' statuses, the phase it leads to, its warnings as events (on
    /// the step they concern), `InstallComponentFailed` when the plan failed.
    pub fn pass_ran(&mut self, report: PassReport) {
        let before = self.before.plan.as_deref().unwrap_or_default();
        if phase::advanced(before, &report.steps) {
            phase::progress_made(&mut self.status);
        }
        self.status.plan = Some(report.steps);
        phase::after_pass(&mut self.status, &report.outcome, self.now);
        if self.status.phase == InstallPlanPhase::Installing {
            let wait = phase::transient_retry(&self.status, self.now);
            self.effects
                .requeue_after(wait.unwrap_or(INSTALLING_RESYNC));
        }
        let reference = reference_of(self.plan);
        for warning in report.warnings {
            self.effects.events.push(EventOn {
                regarding: ObjectReference {
                    field_path: warning.step.map(|i| format!("status.plan[{i}]")),
                    ..reference.clone()
                },
                event: ObjectEvent::warning(warning.reason, warning.message),
            });
        }
        if let PassOutcome::StepFailed { message, .. } = report.outcome
            && self.status.phase == InstallPlanPhase::Failed
        {
            self.effects.event_on(
                self.plan,
                ObjectEvent::warning(reason::INSTALL_COMPONENT_FAILED, message),
            );
        }
    }

    /// The effects of the sync: `InstallSucceeded` when the plan just completed, and the
    /// status write when the status changed, guarded by the plan's resourceVersion.
    pub fn finish(mut self) -> Effects {
        if self.status.phase == InstallPlanPhase::Complete
            && self.before.phase != InstallPlanPhase::Complete
            // A superseded plan completes with its own message and event.
            && self.status.message.is_none()
        {
            self.effects.event_on(
                self.plan,
                ObjectEvent::normal(
                    reason::INSTALL_SUCCEEDED,
                    "every step of the plan is applied",
                ),
            );
        }
        if self.status != self.before
            && let Some(write) = Write::status(self.plan, self.status)
        {
            self.effects.write(write);
        }
        self.effects
    }
}

#[cfg(test)]
#[path = "decision_tests.rs"]
mod tests;

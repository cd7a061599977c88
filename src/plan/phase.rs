//! The InstallPlan phase machine (docs/install-plans.md §6, §10): what the status becomes
//! after approval, after an execution pass, or after the pre-execution check.

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::{
    ConditionStatus, InstallPlanCondition, InstallPlanConditionReason, InstallPlanConditionType,
    InstallPlanPhase, InstallPlanStatus, set_condition,
};

/// How long step errors are retried before the plan fails (OLM's `--install-plan-retry-timeout`
/// default).
pub const RETRY_WINDOW: SignedDuration = SignedDuration::from_secs(60);

/// How a pass over the steps ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PassOutcome {
    /// Every step is applied.
    Done,
    /// Some CRD is not Established yet (`WaitingForApi`); later steps wait.
    WaitingForApi,
    /// A step failed. `permanent` errors (the plan's own content is unusable) fail the plan at
    /// once; others are retried within [`RETRY_WINDOW`] of `startTime`.
    StepFailed { message: String, permanent: bool },
    /// The API server refused a request for lack of permission (the scoped ServiceAccount's,
    /// or olm-rs's own). Never terminal: a user may grant the permission at any time
    /// (docs/install-plans.md §10). Nothing of the plan was written.
    Forbidden { message: String },
}

/// What to do with a plan's status now, before executing anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    /// Awaiting approval: nothing to do.
    AwaitApproval,
    /// Execute the steps (the status may have been moved to `Installing` first).
    Execute,
    /// Terminal (`Complete`/`Failed`) or not yet written: nothing to do.
    Idle,
}

/// Approval handling: a `RequiresApproval` plan that has been approved starts installing.
pub fn gate(status: &mut InstallPlanStatus, approved: bool) -> Gate {
    match status.phase {
        InstallPlanPhase::RequiresApproval if approved => {
            status.phase = InstallPlanPhase::Installing;
            status.message = None;
            Gate::Execute
        }
        InstallPlanPhase::RequiresApproval => Gate::AwaitApproval,
        InstallPlanPhase::Installing => Gate::Execute,
        _ => Gate::Idle,
    }
}

/// Marks the first execution (`startTime`).
pub fn start(status: &mut InstallPlanStatus, now: Timestamp) {
    if status.start_time.is_none() {
        status.start_time = Some(Time(now));
    }
}

/// The pre-execution check (OperatorGroup, docs/install-plans.md §10) failed: `Installed=False/InstallCheckFailed`,
/// phase unchanged, retried.
pub fn check_failed(status: &mut InstallPlanStatus, message: &str, now: Timestamp) {
    let mut conditions = status.conditions.take().unwrap_or_default();
    set_condition(
        &mut conditions,
        installed(
            ConditionStatus::False,
            Some(InstallPlanConditionReason::InstallCheckFailed),
            message,
        ),
        &Time(now),
    );
    status.conditions = Some(conditions);
}

/// The check passed: a previous `InstallCheckFailed` is reset (reason `Unknown`, no message, as
/// OLM writes it).
pub fn check_passed(status: &mut InstallPlanStatus, now: Timestamp) {
    let failed = status.conditions.iter().flatten().any(|c| {
        c.type_ == Some(InstallPlanConditionType::Installed)
            && c.reason == Some(InstallPlanConditionReason::InstallCheckFailed)
    });
    if failed {
        let mut conditions = status.conditions.take().unwrap_or_default();
        set_condition(
            &mut conditions,
            installed(
                ConditionStatus::Unknown,
                Some(InstallPlanConditionReason::from("Unknown")),
                "",
            ),
            &Time(now),
        );
        status.conditions = Some(conditions);
    }
}

/// The status after a pass.
pub fn after_pass(status: &mut InstallPlanStatus, outcome: &PassOutcome, now: Timestamp) {
    let mut conditions = status.conditions.take().unwrap_or_default();
    match outcome {
        PassOutcome::Done => {
            status.phase = InstallPlanPhase::Complete;
            status.message = None;
            set_condition(
                &mut conditions,
                installed(ConditionStatus::True, None, ""),
                &Time(now),
            );
        }
        PassOutcome::WaitingForApi => {
            status.phase = InstallPlanPhase::Installing;
            status.message = None;
        }
        PassOutcome::StepFailed { message, permanent } => {
            let started = status.start_time.as_ref().map_or(now, |t| t.0);
            let expired = now.duration_since(started) > RETRY_WINDOW;
            if *permanent || expired {
                status.phase = InstallPlanPhase::Failed;
                status.message = Some(message.clone());
                set_condition(
                    &mut conditions,
                    installed(
                        ConditionStatus::False,
                        Some(InstallPlanConditionReason::InstallComponentFailed),
                        message,
                    ),
                    &Time(now),
                );
            } else {
                status.phase = InstallPlanPhase::Installing;
                status.message = Some(format!("retrying execution due to error: {message}"));
            }
        }
        PassOutcome::Forbidden { message } => {
            status.phase = InstallPlanPhase::Installing;
            status.message = Some(format!("retrying execution due to error: {message}"));
            // OLM says this in `message` only; a condition makes it visible to `kubectl wait`
            // and to tools that read conditions (docs/install-plans.md §10).
            set_condition(
                &mut conditions,
                installed(
                    ConditionStatus::False,
                    Some(InstallPlanConditionReason::InstallCheckFailed),
                    message,
                ),
                &Time(now),
            );
        }
    }
    status.conditions = Some(conditions);
}

fn installed(
    state: ConditionStatus,
    reason: Option<InstallPlanConditionReason>,
    message: &str,
) -> InstallPlanCondition {
    InstallPlanCondition {
        type_: Some(InstallPlanConditionType::Installed),
        status: Some(state),
        reason,
        message: (!message.is_empty()).then(|| message.to_owned()),
        ..InstallPlanCondition::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).unwrap()
    }

    #[test]
    fn a_forbidden_pass_is_retried_forever_with_a_condition() {
        let mut s = InstallPlanStatus {
            phase: InstallPlanPhase::Installing,
            start_time: Some(Time(at(0))),
            ..Default::default()
        };
        let outcome = PassOutcome::Forbidden {
            message: "service account ops/installer may not create deployments.apps".into(),
        };
        after_pass(&mut s, &outcome, at(3600));
        assert_eq!(s.phase, InstallPlanPhase::Installing);
        assert_eq!(
            s.message.as_deref(),
            Some(
                "retrying execution due to error: service account ops/installer may not create \
                 deployments.apps"
            )
        );
        let condition = &s.conditions.as_ref().unwrap()[0];
        assert_eq!(condition.status, Some(ConditionStatus::False));
        assert_eq!(
            condition.reason,
            Some(InstallPlanConditionReason::InstallCheckFailed)
        );
        // Granted later: the next pass completes and the condition turns True.
        after_pass(&mut s, &PassOutcome::Done, at(3601));
        assert_eq!(s.phase, InstallPlanPhase::Complete);
        assert_eq!(
            s.conditions.as_ref().unwrap()[0].status,
            Some(ConditionStatus::True)
        );
    }

    #[test]
    fn approval_moves_a_waiting_plan_to_installing() {
        let mut s = InstallPlanStatus {
            phase: InstallPlanPhase::RequiresApproval,
            ..Default::default()
        };
        assert_eq!(gate(&mut s, false), Gate::AwaitApproval);
        assert_eq!(gate(&mut s, true), Gate::Execute);
        assert_eq!(s.phase, InstallPlanPhase::Installing);
        s.phase = InstallPlanPhase::Complete;
        assert_eq!(gate(&mut s, true), Gate::Idle);
        s.phase = InstallPlanPhase::None;
        assert_eq!(
            gate(&mut s, true),
            Gate::Idle,
            "a plan whose status is not written yet is left alone"
        );
    }

    #[test]
    fn errors_retry_for_a_minute_then_fail() {
        let mut s = InstallPlanStatus {
            phase: InstallPlanPhase::Installing,
            ..Default::default()
        };
        start(&mut s, at(100));
        let err = PassOutcome::StepFailed {
            message: "boom".into(),
            permanent: false,
        };
        after_pass(&mut s, &err, at(130));
        assert_eq!(s.phase, InstallPlanPhase::Installing);
        assert_eq!(
            s.message.as_deref(),
            Some("retrying execution due to error: boom")
        );
        after_pass(&mut s, &err, at(161));
        assert_eq!(s.phase, InstallPlanPhase::Failed);
        let c = &s.conditions.as_ref().unwrap()[0];
        assert_eq!(
            c.reason,
            Some(InstallPlanConditionReason::InstallComponentFailed)
        );
        assert_eq!(c.status, Some(ConditionStatus::False));
        assert_eq!(c.message.as_deref(), Some("boom"));
    }

    #[test]
    fn permanent_errors_fail_at_once_and_success_completes() {
        let mut s = InstallPlanStatus {
            phase: InstallPlanPhase::Installing,
            ..Default::default()
        };
        start(&mut s, at(100));
        after_pass(
            &mut s,
            &PassOutcome::StepFailed {
                message: "bad kind".into(),
                permanent: true,
            },
            at(101),
        );
        assert_eq!(s.phase, InstallPlanPhase::Failed);
        let mut s = InstallPlanStatus {
            phase: InstallPlanPhase::Installing,
            ..Default::default()
        };
        after_pass(&mut s, &PassOutcome::Done, at(1));
        assert_eq!(s.phase, InstallPlanPhase::Complete);
        assert_eq!(
            s.conditions.as_ref().unwrap()[0].status,
            Some(ConditionStatus::True)
        );
    }

    #[test]
    fn a_failed_check_is_reported_then_reset() {
        let mut s = InstallPlanStatus {
            phase: InstallPlanPhase::Installing,
            ..Default::default()
        };
        check_failed(
            &mut s,
            "no operator group found that is managing this namespace",
            at(1),
        );
        assert_eq!(
            s.conditions.as_ref().unwrap()[0].reason,
            Some(InstallPlanConditionReason::InstallCheckFailed)
        );
        assert_eq!(s.phase, InstallPlanPhase::Installing);
        check_passed(&mut s, at(2));
        let c = &s.conditions.as_ref().unwrap()[0];
        assert_eq!(c.reason.as_ref().map(|r| r.as_str()), Some("Unknown"));
        assert_eq!(c.message, None);
    }
}

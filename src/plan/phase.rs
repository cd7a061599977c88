//! The InstallPlan phase machine (docs/install-plans.md §6, §10): what the status becomes
//! after approval, after an execution pass, or after the pre-execution check.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::{
    ConditionStatus, InstallPlanCondition, InstallPlanConditionReason, InstallPlanConditionType,
    InstallPlanPhase, InstallPlanStatus, Step, set_condition,
};

/// How long step errors are retried before the plan fails (OLM's `--install-plan-retry-timeout`
/// default).
pub const RETRY_WINDOW: SignedDuration = SignedDuration::from_secs(60);

/// The reason of `Installed=Unknown` while a transient failure is waited out (olm-rs's own; OLM
/// has no such state, it fails the plan after [`RETRY_WINDOW`]).
pub const WAITING_FOR_API_SERVER: &str = "WaitingForAPIServer";

/// The reason of `Installed=True` on a plan its Subscriptions moved past (olm-rs's own).
pub const SUPERSEDED: &str = "Superseded";

/// The first and the longest wait between passes of a plan waiting out a transient failure.
pub const TRANSIENT_RETRY_MIN: Duration = Duration::from_secs(1);
/// The longest is short on purpose: a transient failure (a 429 above all) is answered in
/// milliseconds, so a plan stuck behind one costs a request or two per wait; a longer wait only
/// delays it after the API server recovers. Under API Priority and Fairness with one seat
/// (docs/reliability.md F4), a minute's cap left a chain unfinished after 240 s.
pub const TRANSIENT_RETRY_MAX: Duration = Duration::from_secs(10);

/// What a step failure says about the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepFailure {
    /// The plan's own content is unusable (a refused check, an unsupported kind): it fails at
    /// once.
    Permanent,
    /// The API server was busy, timed out or could not be reached, or an object changed under
    /// the pass (`k8s::errors::ApiFailure::is_transient`): the plan never fails for it; it waits
    /// with back-off and says so (docs/install-plans.md §6.2).
    Transient,
    /// Anything else: retried within [`RETRY_WINDOW`] of `startTime`, then the plan fails
    /// (OLM's rule).
    Retryable,
}

/// How a pass over the steps ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PassOutcome {
    /// Every step is applied.
    Done,
    /// Some CRD is not Established yet (`WaitingForApi`); later steps wait.
    WaitingForApi,
    /// A step failed; `failure` says whether that can end the plan.
    StepFailed {
        message: String,
        failure: StepFailure,
    },
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

/// Whether [`gate`] would let a pass run: the plan is installing, or approved and waiting.
pub fn would_execute(status: &InstallPlanStatus, approved: bool) -> bool {
    match status.phase {
        InstallPlanPhase::Installing => true,
        InstallPlanPhase::RequiresApproval => approved,
        _ => false,
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
            clear_transient(&mut conditions);
        }
        PassOutcome::StepFailed {
            message,
            failure: StepFailure::Transient,
        } => {
            status.phase = InstallPlanPhase::Installing;
            let since = transient_since(&conditions).unwrap_or(now);
            let wait = backoff(now.duration_since(since));
            let text = format!(
                "waiting for the API server, which did not complete a request (tried again in {}s): {message}",
                wait.as_secs()
            );
            status.message = Some(format!("retrying execution due to error: {message}"));
            clear_transient_other(&mut conditions);
            set_condition(
                &mut conditions,
                installed(
                    ConditionStatus::Unknown,
                    Some(InstallPlanConditionReason::from(WAITING_FOR_API_SERVER)),
                    &text,
                ),
                &Time(now),
            );
            // The time of this failed pass, also when the condition reads as before: the next
            // pass is due from it (`next_pass_wait`).
            if let Some(c) = conditions.iter_mut().find(|c| is_transient_condition(c)) {
                c.last_update_time = Some(Time(now));
            }
        }
        PassOutcome::StepFailed { message, failure } => {
            clear_transient(&mut conditions);
            let started = status.start_time.as_ref().map_or(now, |t| t.0);
            let expired = now.duration_since(started) > RETRY_WINDOW;
            if *failure == StepFailure::Permanent || expired {
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

/// The plan's Subscriptions moved past it (`plan::superseded`): it ends `Complete` without a
/// pass, its message and `Installed` condition (reason `Superseded`, olm-rs's own) naming the
/// plan that took over.
pub fn superseded(status: &mut InstallPlanStatus, message: &str, now: Timestamp) {
    let mut conditions = status.conditions.take().unwrap_or_default();
    clear_transient(&mut conditions);
    set_condition(
        &mut conditions,
        installed(
            ConditionStatus::True,
            Some(InstallPlanConditionReason::from(SUPERSEDED)),
            message,
        ),
        &Time(now),
    );
    status.conditions = Some(conditions);
    status.phase = InstallPlanPhase::Complete;
    status.message = Some(message.to_owned());
}

/// Whether a pass moved some step on (its status changed): the plan is not stuck, whatever
/// failed after that step. Steps done stay recorded, so the next pass starts where this one
/// stopped (docs/install-plans.md §6.2).
pub fn advanced(before: &[Step], after: &[Step]) -> bool {
    before.len() != after.len() || before.iter().zip(after).any(|(b, a)| b.status != a.status)
}

/// A pass that moved a step on ends the streak of transient failures: if it failed too, the
/// next pass comes after the first wait again, not after a wait grown with a streak in which
/// the plan kept advancing. Under a steady share of faults a plan thus advances a step or more
/// a second instead of waiting up to a minute between passes that each nearly finished.
pub fn progress_made(status: &mut InstallPlanStatus) {
    if let Some(conditions) = status.conditions.as_mut() {
        clear_transient(conditions);
    }
}

/// When the plan's present streak of transient failures began: its `Installed=Unknown /
/// WaitingForAPIServer` condition's transition.
fn transient_since(conditions: &[InstallPlanCondition]) -> Option<Timestamp> {
    conditions
        .iter()
        .find(|c| is_transient_condition(c))
        .and_then(|c| c.last_transition_time.as_ref())
        .map(|t| t.0)
}

fn is_transient_condition(c: &InstallPlanCondition) -> bool {
    c.type_ == Some(InstallPlanConditionType::Installed)
        && c.reason.as_ref().map(InstallPlanConditionReason::as_str) == Some(WAITING_FOR_API_SERVER)
}

/// Removes the condition of a transient streak that ended.
fn clear_transient(conditions: &mut Vec<InstallPlanCondition>) {
    conditions.retain(|c| !is_transient_condition(c));
}

/// Removes an `Installed` condition of another kind before a transient streak begins, so the
/// streak's start is its own.
fn clear_transient_other(conditions: &mut Vec<InstallPlanCondition>) {
    conditions.retain(|c| {
        c.type_ != Some(InstallPlanConditionType::Installed) || is_transient_condition(c)
    });
}

/// The wait before the next pass after a transient failure that has lasted `lasted`: about as
/// long again (so the waits double), from [`TRANSIENT_RETRY_MIN`] up to [`TRANSIENT_RETRY_MAX`].
/// Derived from the condition's transition time, so no counter needs storing.
pub fn backoff(lasted: SignedDuration) -> Duration {
    let lasted = Duration::try_from(lasted).unwrap_or_default();
    lasted.clamp(TRANSIENT_RETRY_MIN, TRANSIENT_RETRY_MAX)
}

/// When to pass over a plan again: after [`backoff`] while it waits out a transient failure,
/// else `None` (the caller's usual resync).
pub fn transient_retry(status: &InstallPlanStatus, now: Timestamp) -> Option<Duration> {
    if status.phase != InstallPlanPhase::Installing {
        return None;
    }
    let since = transient_since(status.conditions.as_deref().unwrap_or_default())?;
    Some(backoff(now.duration_since(since)))
}

/// How long a plan waiting out a transient failure must still wait before its next pass, or
/// `None` when a pass may run now. Due at its last failed pass (the condition's
/// `lastUpdateTime`) plus the [`backoff`] of the streak then — so any earlier wake-up (its own
/// status write, whose message changes with each fault, above all) does not start a pass.
/// Never longer than [`TRANSIENT_RETRY_MAX`], also when the clock went back.
pub fn next_pass_wait(status: &InstallPlanStatus, now: Timestamp) -> Option<Duration> {
    if status.phase != InstallPlanPhase::Installing {
        return None;
    }
    let condition = status
        .conditions
        .iter()
        .flatten()
        .find(|c| is_transient_condition(c))?;
    let since = condition.last_transition_time.as_ref()?.0;
    let last_pass = condition.last_update_time.as_ref().map_or(since, |t| t.0);
    let due = last_pass + backoff(last_pass.duration_since(since));
    let wait = Duration::try_from(due.duration_since(now)).ok()?;
    (!wait.is_zero()).then(|| wait.min(TRANSIENT_RETRY_MAX))
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
    use crate::api::StepStatus;

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
    fn a_transient_streak_backs_off_and_ends_with_the_next_good_pass() {
        let mut s = InstallPlanStatus {
            phase: InstallPlanPhase::Installing,
            start_time: Some(Time(at(0))),
            ..Default::default()
        };
        let busy = PassOutcome::StepFailed {
            message: "the server is currently unable to handle the request".into(),
            failure: StepFailure::Transient,
        };
        let waits: Vec<(i64, u64)> = [100, 101, 103, 107, 115, 10_000]
            .into_iter()
            .map(|t| {
                after_pass(&mut s, &busy, at(t));
                assert_eq!(s.phase, InstallPlanPhase::Installing, "at {t}");
                (t, transient_retry(&s, at(t)).unwrap().as_secs())
            })
            .collect();
        assert_eq!(
            waits,
            [
                (100, 1),
                (101, 1),
                (103, 3),
                (107, 7),
                (115, 10),
                (10_000, 10)
            ],
            "each wait about as long as the streak so far, at most 10 s"
        );
        after_pass(&mut s, &PassOutcome::WaitingForApi, at(10_001));
        assert_eq!(transient_retry(&s, at(10_001)), None);
        assert!(s.conditions.iter().flatten().next().is_none());
        // A failure of another kind after the streak is judged by the retry window from
        // startTime, as OLM does.
        after_pass(
            &mut s,
            &PassOutcome::StepFailed {
                message: "boom".into(),
                failure: StepFailure::Retryable,
            },
            at(10_002),
        );
        assert_eq!(s.phase, InstallPlanPhase::Failed);
    }

    #[test]
    fn no_pass_runs_before_the_back_off_of_the_last_failed_one_is_over() {
        // The defect: a plan waiting out faults ran again as soon as anything woke it — its
        // own status write first — about 280 passes a second (tests/integration/
        // subscription_faults.rs). The wait is now judged from the status alone.
        let mut s = InstallPlanStatus {
            phase: InstallPlanPhase::Installing,
            start_time: Some(Time(at(0))),
            ..Default::default()
        };
        assert_eq!(next_pass_wait(&s, at(100)), None, "no streak: pass now");
        let fault = |m: &str| PassOutcome::StepFailed {
            message: m.into(),
            failure: StepFailure::Transient,
        };
        after_pass(&mut s, &fault("429"), at(100));
        let ms = |ms: u64| Some(Duration::from_millis(ms));
        let wait_at = |s: &InstallPlanStatus, t: i64| next_pass_wait(s, at(t));
        assert_eq!(wait_at(&s, 100), ms(1000), "woken by its own status write");
        assert_eq!(wait_at(&s, 101), None, "due");
        // The same fault again: the condition reads as before, the pass still counts.
        after_pass(&mut s, &fault("429"), at(101));
        assert_eq!(wait_at(&s, 101), ms(1000));
        after_pass(&mut s, &fault("504"), at(102));
        assert_eq!(wait_at(&s, 102), ms(2000));
        assert_eq!(wait_at(&s, 103), ms(1000));
        after_pass(&mut s, &fault("500"), at(104));
        assert_eq!(wait_at(&s, 104), ms(4000));
        assert_eq!(
            wait_at(&s, 0),
            ms(10_000),
            "a clock gone back waits 10 s at most"
        );
        after_pass(&mut s, &fault("500"), at(5_000));
        assert_eq!(wait_at(&s, 5_000), ms(10_000), "at most 10 s");
        // The streak ends with the next good pass; other phases never wait here.
        after_pass(&mut s, &PassOutcome::WaitingForApi, at(5_060));
        assert_eq!(wait_at(&s, 5_060), None);
        after_pass(&mut s, &fault("429"), at(5_061));
        s.phase = InstallPlanPhase::Complete;
        assert_eq!(wait_at(&s, 5_061), None);
    }

    #[test]
    fn a_failed_pass_that_moved_a_step_on_starts_the_back_off_again() {
        // The defect: under a steady share of faults nearly every pass failed somewhere, so
        // the streak — and the wait — only grew, to a minute between passes, though each pass
        // advanced the plan. A pass that moved a step on now starts a new streak.
        let step = |status: StepStatus| Step {
            resolving: "op.v1".into(),
            resource: crate::api::StepResource::default(),
            optional: None,
            status,
        };
        let before = [step(StepStatus::Created), step(StepStatus::Unknown)];
        let same = before.clone();
        let moved = [step(StepStatus::Created), step(StepStatus::Created)];
        assert!(!advanced(&before, &same));
        assert!(advanced(&before, &moved));

        let mut s = InstallPlanStatus {
            phase: InstallPlanPhase::Installing,
            start_time: Some(Time(at(0))),
            ..Default::default()
        };
        let fault = PassOutcome::StepFailed {
            message: "429".into(),
            failure: StepFailure::Transient,
        };
        for t in [100, 101, 102, 104, 108, 116] {
            after_pass(&mut s, &fault, at(t));
        }
        assert_eq!(next_pass_wait(&s, at(116)), Some(Duration::from_secs(10)));
        progress_made(&mut s);
        after_pass(&mut s, &fault, at(117));
        assert_eq!(next_pass_wait(&s, at(117)), Some(Duration::from_secs(1)));
        assert_eq!(s.phase, InstallPlanPhase::Installing);
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
            failure: StepFailure::Retryable,
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
                failure: StepFailure::Permanent,
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

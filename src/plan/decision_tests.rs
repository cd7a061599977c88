//! Table tests of one plan sync, decided without a cluster.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::json;

use super::*;
use crate::api::{
    ConditionStatus, InstallPlanCondition, InstallPlanConditionReason, InstallPlanConditionType,
    StepResource, StepStatus,
};
use crate::go_duration::DurationError;
use crate::plan::execution::{APPLIED_WITH_WARNINGS, PlanWarning};
use crate::plan::lookups::LookupFailure;
use crate::plan::phase::{StepFailure, TRANSIENT_RETRY_MIN, WAITING_FOR_API_SERVER};
use crate::plan::unpack::DEFAULT_FAILED_RETRY;

const NOW: i64 = 1_800_000_000;

fn at(second: i64) -> Timestamp {
    Timestamp::from_second(second).unwrap()
}

fn step(name: &str) -> Step {
    Step {
        resolving: "op.v1".into(),
        resource: StepResource {
            kind: "ConfigMap".into(),
            version: "v1".into(),
            name: name.into(),
            ..StepResource::default()
        },
        optional: None,
        status: StepStatus::Unknown,
    }
}

fn plan(phase: InstallPlanPhase, approved: bool) -> InstallPlan {
    let mut plan: InstallPlan = serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
        "metadata": {"name": "install-abcde", "namespace": "ns", "uid": "u1", "resourceVersion": "7"},
        "spec": {"approval": "Automatic", "approved": approved, "clusterServiceVersionNames": ["op.v1"]},
    }))
    .unwrap();
    plan.status = Some(InstallPlanStatus {
        phase,
        plan: Some(vec![step("a")]),
        ..InstallPlanStatus::default()
    });
    plan
}

fn group(annotations: &[(&str, &str)], service_account: Option<&str>) -> OperatorGroup {
    let mut og: OperatorGroup = serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
        "metadata": {"name": "og", "namespace": "ns"},
        "spec": {"serviceAccountName": service_account},
        "status": {"namespaces": ["ns"], "lastUpdated": "2027-01-01T00:00:00Z",
                   "serviceAccountRef": service_account.map(|n| json!({"name": n}))},
    }))
    .unwrap();
    og.metadata.annotations = Some(
        annotations
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
    );
    og
}

fn installed(
    status: ConditionStatus,
    reason: Option<&str>,
    message: Option<&str>,
    now: i64,
) -> InstallPlanCondition {
    InstallPlanCondition {
        type_: Some(InstallPlanConditionType::Installed),
        status: Some(status),
        reason: reason.map(InstallPlanConditionReason::from),
        message: message.map(str::to_owned),
        last_transition_time: Some(Time(at(now))),
        last_update_time: Some(Time(at(now))),
    }
}

fn effects(
    plan: &InstallPlan,
    status: Option<InstallPlanStatus>,
    events: Vec<EventOn>,
    requeue: Option<Duration>,
) -> Effects {
    Effects {
        writes: status
            .into_iter()
            .filter_map(|s| Write::status(plan, s))
            .collect(),
        events,
        requeue,
    }
}

fn on(plan: &InstallPlan, event: ObjectEvent) -> EventOn {
    EventOn {
        regarding: reference_of(plan),
        event,
    }
}

/// Gate and OperatorGroup check: (case, plan, groups, runs a pass as, expected effects).
#[test]
fn the_gate_and_the_operator_group_check() {
    let og_ok = vec![group(&[], None)];
    let og_sa = vec![group(&[], Some("installer"))];
    let installing = |mut s: InstallPlanStatus| {
        s.phase = InstallPlanPhase::Installing;
        s.start_time = Some(Time(at(NOW)));
        s
    };
    let waiting = plan(InstallPlanPhase::RequiresApproval, false);
    let approved = plan(InstallPlanPhase::RequiresApproval, true);
    let running = plan(InstallPlanPhase::Installing, true);
    let complete = plan(InstallPlanPhase::Complete, true);
    let base = running.status.clone().unwrap();
    let with_sa = InstallPlanStatus {
        attenuated_service_account_ref: Some(ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("ServiceAccount".into()),
            name: Some("installer".into()),
            namespace: Some("ns".into()),
            ..ObjectReference::default()
        }),
        ..installing(base.clone())
    };
    let no_group = InstallPlanStatus {
        conditions: Some(vec![installed(
            ConditionStatus::False,
            Some("InstallCheckFailed"),
            Some("no operator group found that is managing this namespace"),
            NOW,
        )]),
        ..installing(base.clone())
    };
    let sa_missing = InstallPlanStatus {
        conditions: Some(vec![installed(
            ConditionStatus::False,
            Some("InstallCheckFailed"),
            Some("please make sure the service account exists. sa=installer operatorgroup=ns/og"),
            NOW,
        )]),
        ..installing(base.clone())
    };
    let mut og_sa_unresolved = og_sa.clone();
    if let Some(s) = og_sa_unresolved[0].status.as_mut() {
        s.service_account_ref = None;
    }
    let resync = Some(INSTALLING_RESYNC);
    type Case<'a> = (
        &'a str,
        &'a InstallPlan,
        &'a [OperatorGroup],
        Option<ExecuteAs>,
        Effects,
    );
    let cases: Vec<Case> = vec![
        (
            "unapproved: nothing",
            &waiting,
            &og_ok,
            None,
            Effects::default(),
        ),
        (
            "approved: installing, runs as olm-rs",
            &approved,
            &og_ok,
            Some(ExecuteAs::Controller),
            effects(&approved, Some(installing(base.clone())), vec![], None),
        ),
        (
            "final: nothing",
            &complete,
            &og_ok,
            None,
            Effects::default(),
        ),
        (
            "no OperatorGroup: InstallCheckFailed, retried",
            &running,
            &[],
            None,
            effects(&running, Some(no_group), vec![], resync),
        ),
        (
            "service account not there yet: InstallCheckFailed, retried",
            &running,
            &og_sa_unresolved,
            None,
            effects(&running, Some(sa_missing), vec![], resync),
        ),
        (
            "service account: recorded, runs as it",
            &running,
            &og_sa,
            Some(ExecuteAs::ServiceAccount {
                namespace: "ns".into(),
                name: "installer".into(),
            }),
            effects(&running, Some(with_sa), vec![], None),
        ),
    ];
    for (case, plan, groups, runs_as, expected) in cases {
        let mut sync = PlanSync::begin(plan, at(NOW)).expect(case);
        assert_eq!(sync.gate(groups, None), runs_as, "{case}");
        assert_eq!(sync.finish(), expected, "{case}");
    }
}

#[test]
fn plans_not_written_yet_or_never_read_are_left_alone() {
    let mut bare = plan(InstallPlanPhase::Installing, true);
    bare.status = Some(InstallPlanStatus {
        phase: InstallPlanPhase::Installing,
        ..InstallPlanStatus::default()
    });
    assert!(
        PlanSync::begin(&bare, at(NOW)).is_none(),
        "no steps, no lookups"
    );
    bare.status = None;
    assert!(PlanSync::begin(&bare, at(NOW)).is_none(), "no status");
    let mut unread = plan(InstallPlanPhase::Installing, true);
    unread.metadata.resource_version = None;
    assert!(
        PlanSync::begin(&unread, at(NOW)).is_none(),
        "no resourceVersion to guard the status write"
    );
}

/// After a pass: (case, seconds since start, outcome, phase, message, condition, events,
/// requeue).
#[test]
fn the_phase_and_events_after_a_pass() {
    let running = plan(InstallPlanPhase::Installing, true);
    let failed = |message: &str, failure| PassOutcome::StepFailed {
        message: message.into(),
        failure,
    };
    let warning = PlanWarning {
        reason: APPLIED_WITH_WARNINGS,
        message: "1 warning(s) …".into(),
        step: Some(0),
    };
    let step_event = EventOn {
        regarding: ObjectReference {
            field_path: Some("status.plan[0]".into()),
            ..reference_of(&running)
        },
        event: ObjectEvent::warning(APPLIED_WITH_WARNINGS, "1 warning(s) …"),
    };
    let succeeded = on(
        &running,
        ObjectEvent::normal(
            reason::INSTALL_SUCCEEDED,
            "every step of the plan is applied",
        ),
    );
    let component_failed = on(
        &running,
        ObjectEvent::warning(reason::INSTALL_COMPONENT_FAILED, "bad kind"),
    );
    let resync = Some(INSTALLING_RESYNC);
    type Case<'a> = (
        &'a str,
        i64,
        PassOutcome,
        Vec<PlanWarning>,
        InstallPlanPhase,
        Option<&'a str>,
        Option<InstallPlanCondition>,
        Vec<EventOn>,
        Option<Duration>,
    );
    let cases: Vec<Case> = vec![
        (
            "complete",
            0,
            PassOutcome::Done,
            vec![warning.clone()],
            InstallPlanPhase::Complete,
            None,
            Some(installed(ConditionStatus::True, None, None, NOW)),
            vec![step_event, succeeded],
            None,
        ),
        (
            "waiting for a CRD",
            0,
            PassOutcome::WaitingForApi,
            vec![],
            InstallPlanPhase::Installing,
            None,
            None,
            vec![],
            resync,
        ),
        (
            "failure within the retry window",
            30,
            failed("boom", StepFailure::Retryable),
            vec![],
            InstallPlanPhase::Installing,
            Some("retrying execution due to error: boom"),
            None,
            vec![],
            resync,
        ),
        (
            "failure past the retry window",
            61,
            failed("boom", StepFailure::Retryable),
            vec![],
            InstallPlanPhase::Failed,
            Some("boom"),
            Some(installed(
                ConditionStatus::False,
                Some("InstallComponentFailed"),
                Some("boom"),
                NOW,
            )),
            vec![on(
                &running,
                ObjectEvent::warning(reason::INSTALL_COMPONENT_FAILED, "boom"),
            )],
            None,
        ),
        (
            "permanent failure",
            0,
            failed("bad kind", StepFailure::Permanent),
            vec![],
            InstallPlanPhase::Failed,
            Some("bad kind"),
            Some(installed(
                ConditionStatus::False,
                Some("InstallComponentFailed"),
                Some("bad kind"),
                NOW,
            )),
            vec![component_failed],
            None,
        ),
        (
            // Issue 36 / OLM #1565: an API server that timed out never fails the plan, even an
            // hour after its first pass; it waits, says so, and comes back after 1 s.
            "transient failure long past the retry window",
            3600,
            failed("etcdserver: request timed out", StepFailure::Transient),
            vec![],
            InstallPlanPhase::Installing,
            Some("retrying execution due to error: etcdserver: request timed out"),
            Some(installed(
                ConditionStatus::Unknown,
                Some(WAITING_FOR_API_SERVER),
                Some(
                    "waiting for the API server, which did not complete a request (tried again in 1s): etcdserver: request timed out",
                ),
                NOW,
            )),
            vec![],
            Some(TRANSIENT_RETRY_MIN),
        ),
    ];
    for (case, since_start, outcome, warnings, phase, message, condition, events, requeue) in cases
    {
        let mut observed = running.clone();
        if let Some(s) = observed.status.as_mut() {
            s.start_time = Some(Time(at(NOW - since_start)));
        }
        let mut sync = PlanSync::begin(&observed, at(NOW)).expect(case);
        assert_eq!(
            sync.gate(&[group(&[], None)], None),
            Some(ExecuteAs::Controller)
        );
        let mut steps = sync.take_steps();
        steps[0].status = StepStatus::Created;
        sync.pass_ran(PassReport {
            steps: steps.clone(),
            outcome,
            warnings,
        });
        let mut status = observed.status.clone().unwrap();
        status.phase = phase;
        status.message = message.map(str::to_owned);
        status.conditions = Some(condition.into_iter().collect());
        status.plan = Some(steps);
        assert_eq!(
            sync.finish(),
            effects(&observed, Some(status), events, requeue),
            "{case}"
        );
    }
}

#[test]
fn a_plan_completed_earlier_says_so_only_once() {
    // A sync that finds a plan already Complete decides nothing at all.
    let complete = plan(InstallPlanPhase::Complete, true);
    let mut sync = PlanSync::begin(&complete, at(NOW)).unwrap();
    assert_eq!(sync.gate(&[group(&[], None)], None), None);
    assert!(sync.finish().is_empty());
}

#[test]
fn a_superseded_plan_writes_nothing_and_completes() {
    // docs/install-plans.md §7.6: the plan created its CSV, but its status lags behind (a
    // write lost or not yet seen); its Subscription moves on to the next plan, which replaces
    // and deletes the CSV. Another pass would create the CSV again.
    let by = Superseded {
        subscription: "demo".into(),
        by: "install-next".into(),
    };
    let message = "superseded by InstallPlan install-next of Subscription demo: its remaining steps are not written";
    let waiting = InstallPlanCondition {
        type_: Some(InstallPlanConditionType::Installed),
        status: Some(ConditionStatus::Unknown),
        reason: Some(InstallPlanConditionReason::from(WAITING_FOR_API_SERVER)),
        message: Some("waiting for the API server".into()),
        ..InstallPlanCondition::default()
    };
    // (case, the plan as observed, whether it is superseded now)
    let mut installing = plan(InstallPlanPhase::Installing, true);
    installing.status.as_mut().unwrap().conditions = Some(vec![waiting]);
    let cases = [
        (
            "installing, waiting out a failure",
            installing.clone(),
            true,
        ),
        (
            "approved, its status write since lost",
            plan(InstallPlanPhase::RequiresApproval, true),
            true,
        ),
        (
            "awaiting approval: left as it is",
            plan(InstallPlanPhase::RequiresApproval, false),
            false,
        ),
        (
            "complete already",
            plan(InstallPlanPhase::Complete, true),
            false,
        ),
    ];
    for (case, observed, completes) in cases {
        let mut sync = PlanSync::begin(&observed, at(NOW)).unwrap();
        assert_eq!(sync.gate(&[group(&[], None)], Some(&by)), None, "{case}");
        let mut status = observed.status.clone().unwrap();
        let want = if completes {
            status.phase = InstallPlanPhase::Complete;
            status.message = Some(message.into());
            status.conditions = Some(vec![InstallPlanCondition {
                type_: Some(InstallPlanConditionType::Installed),
                status: Some(ConditionStatus::True),
                reason: Some(InstallPlanConditionReason::from(phase::SUPERSEDED)),
                message: Some(message.into()),
                last_transition_time: Some(Time(at(NOW))),
                last_update_time: Some(Time(at(NOW))),
            }]);
            effects(
                &observed,
                Some(status),
                vec![on(
                    &observed,
                    ObjectEvent::normal(reason::SUPERSEDED, message),
                )],
                None,
            )
        } else {
            Effects::default()
        };
        assert_eq!(sync.finish(), want, "{case}");
    }
}

fn lookup(name: &str) -> BundleLookup {
    serde_json::from_value(json!({
        "path": format!("quay.io/example/{name}:bundle"),
        "identifier": name,
        "catalogSourceRef": {"name": "cat", "namespace": "olm"},
    }))
    .unwrap()
}

#[test]
fn bundle_lookups_hold_the_plan_until_every_bundle_is_pulled() {
    let mut observed = plan(InstallPlanPhase::Installing, true);
    if let Some(s) = observed.status.as_mut() {
        s.plan = None;
        s.bundle_lookups = Some(vec![lookup("a.v1"), lookup("b.v1")]);
    }
    let groups = [group(
        &[("operatorframework.io/bundle-unpack-timeout", "1m")],
        None,
    )];
    let parse = |t: &str| match t {
        "1m" => Ok(Duration::from_secs(60)),
        other => Err(DurationError::Invalid {
            text: other.to_owned(),
        }),
    };

    // One bundle pulled, one failed: the plan waits, the pulled steps are kept.
    let mut sync = PlanSync::begin(&observed, at(NOW)).unwrap();
    let (lookups, policy) = sync
        .lookups(&groups, Duration::from_secs(600), parse)
        .unwrap();
    assert_eq!(lookups.len(), 2);
    assert_eq!(
        policy,
        Ok(UnpackPolicy {
            timeout: Some(Duration::from_secs(60)),
            failed_retry: DEFAULT_FAILED_RETRY,
        }),
        "the namespace's OperatorGroup overrides the timeout"
    );
    sync.lookups_worked(LookupsWorked {
        remaining: vec![lookup("b.v1")],
        steps: vec![step("from-a")],
        catalog_sources: vec!["cat".into()],
        failures: vec![LookupFailure {
            bundle: "b.v1".into(),
            reason: "ImagePullFailed",
            message: "manifest unknown".into(),
        }],
        pulled: vec!["a.v1".into()],
        requeue: Some(Duration::from_secs(30)),
        ..LookupsWorked::default()
    });
    assert_eq!(
        sync.gate(&groups, None),
        None,
        "nothing runs while a bundle is missing"
    );
    let mut status = observed.status.clone().unwrap();
    status.bundle_lookups = Some(vec![lookup("b.v1")]);
    status.plan = Some(vec![step("from-a")]);
    status.catalog_sources = vec!["cat".into()];
    let expected = effects(
        &observed,
        Some(status),
        vec![
            on(
                &observed,
                ObjectEvent::warning(
                    reason::BUNDLE_UNPACK_FAILED,
                    "bundle b.v1: ImagePullFailed: manifest unknown",
                ),
            ),
            on(
                &observed,
                ObjectEvent::normal(
                    reason::BUNDLE_UNPACKED,
                    "pulled the bundle image of a.v1 and added its steps to the plan",
                ),
            ),
        ],
        Some(Duration::from_secs(30)),
    );
    assert_eq!(sync.finish(), expected);

    // The last bundle pulled: the same sync goes on to execute.
    let mut sync = PlanSync::begin(&observed, at(NOW)).unwrap();
    sync.lookups_worked(LookupsWorked {
        steps: vec![step("from-a"), step("from-b")],
        pulled: vec!["a.v1".into(), "b.v1".into()],
        ..LookupsWorked::default()
    });
    assert_eq!(sync.gate(&groups, None), Some(ExecuteAs::Controller));
    assert_eq!(sync.take_steps().len(), 2);

    // An annotation that does not parse fails every lookup in OLM's words.
    let bad = [group(
        &[("operatorframework.io/bundle-unpack-timeout", "soon")],
        None,
    )];
    let sync = PlanSync::begin(&observed, at(NOW)).unwrap();
    let (_, policy) = sync.lookups(&bad, Duration::from_secs(600), parse).unwrap();
    assert_eq!(
        policy.unwrap_err().to_string(),
        "failed to parse unpack timeout annotation(operatorframework.io/bundle-unpack-timeout: soon): time: invalid duration \"soon\""
    );
    // Two OperatorGroups: neither's annotations apply.
    let two = [bad[0].clone(), groups[0].clone()];
    let (_, policy) = sync.lookups(&two, Duration::from_secs(600), parse).unwrap();
    assert_eq!(
        policy.map(|p| p.timeout),
        Ok(Some(Duration::from_secs(600)))
    );
    // A plan without lookups has nothing to pull.
    let running = plan(InstallPlanPhase::Installing, true);
    let sync = PlanSync::begin(&running, at(NOW)).unwrap();
    assert!(sync.lookups(&groups, Duration::ZERO, parse).is_none());
}

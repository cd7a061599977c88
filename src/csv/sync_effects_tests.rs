use std::sync::Arc;

use super::*;
use crate::api::keys::PROVIDED_APIS_ANNOTATION;
use crate::api::{CsvPhase as P, CsvReason as R, OperatorCondition};
use crate::csv::fixtures::*;
use crate::csv::phase::POLL_INTERVAL;

/// A cluster in which the fixture CSVs can install (their group provides their API).
fn ready(csvs: &[&ClusterServiceVersion]) -> Observed {
    let mut seen = observed(csvs);
    let mut group = og("og", NS, &[NS]);
    group.metadata.annotations = Some(labels(&[(PROVIDED_APIS_ANNOTATION, "Demo.v1.example.com")]));
    seen.operator_groups = vec![Arc::new(group.clone())];
    seen.all_operator_groups = vec![Arc::new(group)];
    seen
}

fn assert_ending(ending: &Ending, phase: P, reason: R, message: &str) {
    let status = ending.status.as_ref().expect("a status is written");
    assert_eq!(status.phase(), phase);
    assert_eq!(status.reason.as_ref(), Some(&reason));
    assert_eq!(status.message.as_deref(), Some(message));
}

#[test]
fn an_install_is_decided_with_its_ending_for_success_forbidden_and_other_failures() {
    let c = in_phase(csv("a.v1"), P::InstallReady, R::AllRequirementsMet, t(0));
    let e = decide(&c, &ready(&[&c]), t(10));
    assert!(
        e.install
            .iter()
            .any(|w| w.write.key().to_string() == "Deployment demo/op"),
        "the Deployment is an install write: {:?}",
        e.install
    );

    assert_ending(
        &e.done,
        P::Installing,
        R::InstallSucceeded,
        "waiting for install components to report healthy",
    );
    assert_eq!(e.done.requeue, Requeue::After(POLL_INTERVAL));

    let failed = e.install_failed.as_ref().expect("an install can fail");
    // A 403 to olm-rs's own write of the Deployment, as a restarted API server answers while
    // its authorizer's caches fill (docs/reliability.md §3.4). This was
    // `InstallComponentFailedNoRetry`, frozen until an RBAC change in the namespace that
    // never came: the CSV stayed Failed.
    let forbidden = failed.ending(InstallFailure(
        "apply Deployment demo/op: deployments.apps \"op\" is forbidden: User \
         \"system:serviceaccount:olm:olm-rs-controller\" cannot patch resource \"deployments\": \
         RBAC: [clusterrole.rbac.authorization.k8s.io \"olm-rs-controller\" not found]"
            .into(),
    ));
    assert_eq!(
        forbidden.status.as_ref().map(|s| s.phase()),
        Some(P::Failed)
    );
    assert_eq!(
        forbidden.status.as_ref().and_then(|s| s.reason.clone()),
        Some(R::InstallComponentFailed),
        "a Forbidden answer to olm-rs's own write is retried, not NoRetry"
    );
    assert!(matches!(forbidden.requeue, Requeue::Backoff(_)), "retried");
    let other = failed.ending(InstallFailure("boom".into()));
    assert_ending(
        &other,
        P::Failed,
        R::InstallComponentFailed,
        "install strategy failed: boom",
    );
    assert_eq!(other.requeue, Requeue::Backoff("boom".into()), "retried");
    assert!(other.events.iter().all(|e| e.is_warning()));
}

#[test]
fn a_sync_without_an_install_has_one_ending() {
    let c = in_phase(csv("a.v1"), P::Pending, R::RequirementsUnknown, t(0));
    let e = decide(&c, &ready(&[&c]), t(10));
    assert!(e.install.is_empty() && e.install_failed.is_none());
    assert_eq!(e.done.phase(), Some(P::InstallReady));
}

#[test]
fn upgrade_hand_offs_name_the_other_csv() {
    let old = in_phase(csv("a.v1"), P::Replacing, R::BeingReplaced, t(10));
    let new = in_phase(
        replacing(csv("a.v2"), "a.v1"),
        P::Pending,
        R::RequirementsUnknown,
        t(0),
    );
    let seen = ready(&[&old, &new]);
    let e = decide(&old, &seen, t(20));
    assert_eq!(e.resync, ["a.v2"], "requeued by name, not by a made-up CSV");
    assert_eq!(e.on_status, ["a.v2"], "its successor hears of its status");
    let e = decide(&new, &seen, t(20));
    assert_eq!(
        e.on_status,
        ["a.v1"],
        "and the replaced CSV of its successor's"
    );
}

#[test]
fn the_operator_condition_is_applied_then_its_status_copied_at_the_version_seen() {
    let c = in_phase(csv("a.v1"), P::Pending, R::RequirementsUnknown, t(0));
    let seen = ready(&[&c]);
    let e = decide(&c, &seen, t(10));
    let keys: Vec<String> = e
        .operator_condition
        .iter()
        .map(|w| w.key().to_string())
        .collect();
    assert_eq!(keys, ["OperatorCondition demo/a.v1"]);

    // Observed, with a uid and a condition the operator reported: the status is copied first,
    // only at the version seen; the Role and RoleBinding follow.
    let mut live: OperatorCondition = crate::csv::operator_condition::desired_condition(&c);
    live.metadata.namespace = Some(NS.to_owned());
    live.metadata.uid = Some("oc-uid".to_owned());
    live.metadata.resource_version = Some("5".to_owned());
    live.spec.conditions = Some(vec![
        serde_json::from_value(serde_json::json!({
            "type": "Upgradeable", "status": "False", "reason": "Busy", "message": "busy",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }))
        .unwrap(),
    ]);
    let mut seen = ready(&[&c]);
    seen.operator_conditions = vec![Arc::new(live)];
    let e = decide(&c, &seen, t(10));
    let shown: Vec<String> = e
        .operator_condition
        .iter()
        .map(|w| match w {
            Write::Status {
                resource_version, ..
            } => format!("status at {resource_version}"),
            other => format!("apply {}", other.key()),
        })
        .collect();
    assert_eq!(
        shown,
        [
            "status at 5",
            "apply Role demo/a.v1",
            "apply RoleBinding demo/a.v1",
        ]
    );
}

//! The rollback of a failed upgrade in a Subscription's sync (docs/upgrades.md §3).

use super::*;
use crate::resolve::rollback::{CsvFacts, FAILED_UPGRADE, ON_FAILED_UPGRADE};

/// etcd.v2 failed (`reason`) over etcd.v1, which had succeeded and waits in `Replacing`.
fn failed_world(reason: &str) -> World {
    let mut w = World::new(true);
    w.install("etcd.v1", "1.0.0");
    w.install("etcd.v2", "2.0.0");
    let facts = |name: &str, version: &str, replaces: Option<&str>, phases: &[(&str, &str)]| {
        let history: Vec<Value> = phases
            .iter()
            .map(|(p, r)| json!({"phase": p, "reason": r}))
            .collect();
        let (phase, why) = phases.last().copied().unwrap_or_default();
        CsvFacts::of(
            &serde_json::from_value(json!({
                "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
                "metadata": {"name": name, "namespace": "ns", "resourceVersion": "41"},
                "spec": {"version": version, "replaces": replaces, "displayName": name,
                         "install": {"strategy": "deployment", "spec": {"deployments": []}}},
                "status": {"phase": phase, "reason": why, "message": "install timeout", "conditions": history}
            }))
            .expect("a CSV"),
        )
    };
    w.rollback.csvs = vec![
        facts(
            "etcd.v1",
            "1.0.0",
            None,
            &[
                ("Succeeded", "InstallSucceeded"),
                ("Replacing", "BeingReplaced"),
            ],
        ),
        facts(
            "etcd.v2",
            "2.0.0",
            Some("etcd.v1"),
            &[("Installing", "InstallWaiting"), ("Failed", reason)],
        ),
    ];
    w
}

fn upgraded(approval: Option<Approval>, annotations: &[(&str, &str)]) -> Subscription {
    let mut s = installed_sub("etcd.v2", annotations);
    s.spec.install_plan_approval = approval;
    s
}

#[test]
fn without_the_annotation_a_failed_upgrade_stays_as_olm_leaves_it() {
    let w = failed_world("InstallCheckFailed");
    let u = w.sync(&[upgraded(None, &[])]).remove(0);
    // OLM's answer: the next hop over the failed CSV (etcd.v3), no rollback.
    assert_eq!(
        u.plan.expect("the next hop").target.why,
        Why::Upgrade(crate::catalog::upgrade_graph::EdgeKind::Replaces)
    );
    assert_eq!(u.rollback, RollbackWrites::default());
    assert!(condition(&u.status, SubscriptionConditionType::RolledBack).is_none());
}

#[test]
fn a_failed_upgrade_is_rolled_back_by_an_automatic_plan_even_under_manual_approval() {
    // (the Subscription's annotations, the OperatorGroup's policy)
    type Case<'a> = (&'a [(&'a str, &'a str)], Option<&'a str>);
    let table: &[Case] = &[
        (&[(ON_FAILED_UPGRADE, "rollback")], None),
        (&[], Some("rollback")),
        // The Subscription's own value wins over a bad one on the group.
        (&[(ON_FAILED_UPGRADE, "rollback")], Some("nonsense")),
    ];
    for (annotations, group) in table {
        let mut w = failed_world("InstallCheckFailed");
        w.rollback.group_policy = group.map(|v| ("og".to_owned(), v.to_owned()));
        let s = upgraded(Some(Approval::Manual), annotations);
        let u = w.sync(std::slice::from_ref(&s)).remove(0);
        let request = u.plan.as_ref().expect("a rollback plan");
        assert_eq!(request.target.bundle, "etcd.v1");
        assert_eq!(request.target.replaces.as_deref(), Some("etcd.v2"));
        assert_eq!(request.target.why, Why::Rollback);
        assert_eq!(request.draft.approval, Approval::Automatic, "no approval");
        let csv = &request.draft.steps[0].object;
        assert_eq!(csv.name, "etcd.v1");
        assert_eq!(
            csv.manifest["metadata"]["annotations"]["olm-rs.io/downgraded-from"],
            "etcd.v2"
        );
        assert_eq!(u.rollback.mark.as_deref(), Some("2.0.0"));
        assert_eq!(u.rollback.delete_failed, None, "not before the restore ran");
        let rolled =
            condition(&u.status, SubscriptionConditionType::RolledBack).expect("RolledBack");
        assert_eq!(
            (rolled.status.as_str(), rolled.reason.as_deref()),
            ("True", Some("InstallCheckFailed"))
        );
        let message = rolled.message.as_deref().unwrap_or_default();
        assert!(
            message.starts_with("upgrade to etcd.v2 (version 2.0.0) failed (InstallCheckFailed: install timeout); rolled back to etcd.v1 (version 1.0.0)"),
            "{message}"
        );
        let reasons: Vec<&str> = u.notes.iter().map(|n| n.reason.as_str()).collect();
        assert_eq!(
            reasons,
            ["RolledBack", "RollingBack"],
            "{annotations:?} {group:?}"
        );
    }
}

#[test]
fn a_bad_policy_is_a_condition_naming_the_annotation_and_value() {
    let mut w = failed_world("InstallCheckFailed");
    w.rollback.group_policy = Some(("og".into(), "yes".into()));
    let u = w.sync(&[upgraded(None, &[])]).remove(0);
    assert!(u.plan.is_none_or(|p| p.target.why != Why::Rollback));
    let c = condition(&u.status, SubscriptionConditionType::RolledBack).expect("condition");
    assert_eq!(
        (c.status.as_str(), c.reason.as_deref()),
        ("False", Some("InvalidOnFailedUpgrade"))
    );
    assert!(
        c.message
            .as_deref()
            .unwrap_or_default()
            .starts_with("annotation olm-rs.io/on-failed-upgrade \"yes\" on OperatorGroup og")
    );
}

#[test]
fn a_rollback_the_crd_rule_forbids_changes_nothing_and_says_why() {
    let mut w = failed_world("ComponentUnhealthy");
    w.catalogs[0].content = CatalogContent::Ready(Arc::new(catalog_with_old_crd()));
    // The failed upgrade's CRD retired v1alpha1, which etcd.v1 owns.
    w.crds = vec![ClusterCrd {
        name: "gears.example.com".into(),
        group: "example.com".into(),
        kind: "Gear".into(),
        served: vec!["v1".into()],
        stored: vec!["v1".into()],
    }];
    let s = upgraded(None, &[(ON_FAILED_UPGRADE, "rollback")]);
    let u = w.sync(std::slice::from_ref(&s)).remove(0);
    // No rollback; the resolver goes on as OLM's would (here: the next hop over the failed CSV).
    let next = u.plan.as_ref().expect("OLM's next hop");
    assert_eq!(
        (
            next.target.bundle.as_str(),
            next.target.why == Why::Rollback
        ),
        ("etcd.v3", false)
    );
    assert_eq!(
        u.rollback,
        RollbackWrites::default(),
        "nothing of a rollback"
    );
    let c = condition(&u.status, SubscriptionConditionType::RolledBack).expect("condition");
    assert_eq!(
        (c.status.as_str(), c.reason.as_deref()),
        ("False", Some("RollbackRefused"))
    );
    let message = c.message.as_deref().unwrap_or_default();
    assert!(
        message.contains("rollback to etcd.v1 (version 1.0.0) refused: downgrade to etcd.v1 refused: it owns CRD gears.example.com at version v1alpha1"),
        "{message}"
    );
    assert!(u.notes.iter().any(|n| n.reason == "RollbackRefused"));
}

#[test]
fn after_the_restore_the_failed_csv_is_deleted_and_the_mark_bars_it() {
    let w = failed_world("InstallCheckFailed");
    // The restore plan ran: the Subscription is at etcd.v1 again, with the mark.
    let marked = [(ON_FAILED_UPGRADE, "rollback"), (FAILED_UPGRADE, "2.0.0")];
    let s = installed_sub("etcd.v1", &marked);
    let u = w.sync(std::slice::from_ref(&s)).remove(0);
    assert_eq!(
        u.rollback.delete_failed,
        Some(("etcd.v2".to_owned(), Some("41".to_owned())))
    );
    assert!(u.plan.is_none(), "etcd.v2 is not tried again");
    let held = condition(&u.status, SubscriptionConditionType::VersionHeld).expect("held");
    assert_eq!(held.reason.as_deref(), Some("FailedVersionSkipped"));
    assert!(
        held.message
            .as_deref()
            .unwrap_or_default()
            .starts_with("etcd.v2 (version 2.0.0) is not installed: an upgrade to version 2.0.0 failed and was rolled back"),
        "{held:?}"
    );

    // A person removes the mark: the upgrade is tried again, as OLM would.
    let cleared = installed_sub("etcd.v1", &[(ON_FAILED_UPGRADE, "rollback")]);
    let mut w = World::new(true);
    w.install("etcd.v1", "1.0.0");
    let u = w.sync(std::slice::from_ref(&cleared)).remove(0);
    assert_eq!(u.plan.expect("an upgrade").target.bundle, "etcd.v2");
}

#[test]
fn a_version_newer_than_the_failed_one_moves_the_subscription_on() {
    let mut w = World::new(true);
    w.install("etcd.v1", "1.0.0");
    let mut config = catalog_config(true);
    // etcd.v3 skips the failed etcd.v2 and replaces etcd.v1.
    config.channels[0].entries[2].replaces = Some("etcd.v1".into());
    config.channels[0].entries[2].skips = vec!["etcd.v2".into()];
    w.catalogs[0].content = CatalogContent::Ready(Arc::new(CatalogIndex::new(config)));
    let s = installed_sub("etcd.v1", &[(FAILED_UPGRADE, "2.0.0")]);
    let u = w.sync(std::slice::from_ref(&s)).remove(0);
    assert_eq!(u.plan.expect("an upgrade").target.bundle, "etcd.v3");
}

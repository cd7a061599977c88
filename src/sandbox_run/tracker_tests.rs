use serde_json::json;

use super::*;

fn csv_in(name: &str, phase: &str, reason: &str, message: &str) -> ClusterServiceVersion {
    serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": name, "namespace": "operators"},
        "spec": {"displayName": "x", "install": {"strategy": "deployment"}},
        "status": {"phase": phase, "reason": reason, "message": message}
    }))
    .unwrap()
}

fn sub_in(state: &str, installed: Option<&str>, current: &str) -> Subscription {
    let mut status = json!({"state": state, "currentCSV": current,
                            "lastUpdated": "2027-01-01T00:00:00Z"});
    if let Some(i) = installed {
        status["installedCSV"] = json!(i);
    }
    serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": "greeter", "namespace": "operators"},
        "spec": {"name": "greeter", "source": "examples", "sourceNamespace": "olm"},
        "status": status
    }))
    .unwrap()
}

fn see_csv(t: &mut Tracker, c: &ClusterServiceVersion) -> Option<Transition> {
    let (o, r) = csv(c);
    t.observe(o, r)
}

fn see_sub(t: &mut Tracker, s: &Subscription) -> Option<Transition> {
    let (o, r) = subscription(s);
    t.observe(o, r)
}

#[test]
fn a_line_per_phase_or_reason_change_not_per_message() {
    let mut t = Tracker::new();
    let line = see_csv(
        &mut t,
        &csv_in("a.v1", "Pending", "RequirementsUnknown", "m1"),
    )
    .unwrap();
    assert_eq!((line.kind, line.state.as_str()), (Kind::Csv, "Pending"));
    assert_eq!(line.detail, "RequirementsUnknown, m1");
    assert!(
        see_csv(
            &mut t,
            &csv_in("a.v1", "Pending", "RequirementsUnknown", "m2")
        )
        .is_none()
    );
    let line = see_csv(&mut t, &csv_in("a.v1", "Pending", "AllRequirementsMet", "")).unwrap();
    assert_eq!(line.detail, "AllRequirementsMet");
    let line = see_csv(&mut t, &csv_in("a.v1", "Succeeded", "InstallSucceeded", "")).unwrap();
    assert_eq!(line.state, "Succeeded");
    assert!(
        line.to_string().starts_with("CSV           a.v1 "),
        "{line}"
    );
    let gone = t.deleted(Kind::Csv, "a.v1").unwrap();
    assert_eq!(gone.state, "deleted");
    assert!(
        t.deleted(Kind::Csv, "a.v1").is_none(),
        "one line per deletion"
    );
}

#[test]
fn settled_needs_the_head_succeeded_and_the_replaced_csvs_gone() {
    let mut t = Tracker::new();
    see_sub(&mut t, &sub_in("AtLatestKnown", Some("a.v2"), "a.v2"));
    assert!(t.settled().is_none(), "CSV not seen yet");
    see_csv(&mut t, &csv_in("a.v1", "Deleting", "Replaced", ""));
    see_csv(&mut t, &csv_in("a.v2", "Succeeded", "InstallSucceeded", ""));
    assert!(t.settled().is_none(), "a.v1 still exists");
    t.deleted(Kind::Csv, "a.v1");
    assert_eq!(
        t.settled(),
        Some(Settled {
            installed_csv: "a.v2".into()
        })
    );
    // A newer head appears: not settled until it is installed.
    see_sub(&mut t, &sub_in("UpgradePending", Some("a.v2"), "a.v3"));
    assert!(t.settled().is_none());
}

#[test]
fn a_plan_still_being_made_or_executed_keeps_the_namespace_unsettled() {
    let plan = |phase: Option<&str>| -> InstallPlan {
        let mut value = json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
            "metadata": {"name": "install-next", "namespace": "operators"},
            "spec": {"clusterServiceVersionNames": ["a.v2"], "approval": "Automatic", "approved": true},
        });
        if let Some(phase) = phase {
            value["status"] = json!({"phase": phase, "catalogSources": []});
        }
        serde_json::from_value(value).unwrap()
    };
    let mut t = Tracker::new();
    see_sub(&mut t, &sub_in("AtLatestKnown", Some("a.v1"), "a.v1"));
    see_csv(&mut t, &csv_in("a.v1", "Succeeded", "InstallSucceeded", ""));
    assert!(t.settled().is_some());
    // The next hop's plan, made once the last one finished: not settled while it is created
    // or installing.
    for phase in [None, Some("Installing")] {
        let (o, raw) = install_plan(&plan(phase), "operators");
        t.observe(o, raw);
        assert!(t.settled().is_none(), "{phase:?}");
    }
    let (o, raw) = install_plan(&plan(Some("Complete")), "operators");
    t.observe(o, raw);
    assert!(t.settled().is_some());
}

#[test]
fn subscription_lines_follow_each_hop_even_when_the_state_word_repeats() {
    let mut t = Tracker::new();
    let first = see_sub(&mut t, &sub_in("UpgradePending", None, "a.v1")).unwrap();
    assert_eq!(first.state, "UpgradePending");
    assert_eq!(first.detail, "current a.v1");
    assert!(see_sub(&mut t, &sub_in("UpgradePending", None, "a.v1")).is_none());
    let next = see_sub(&mut t, &sub_in("UpgradePending", Some("a.v1"), "a.v2")).unwrap();
    assert_eq!(next.detail, "installed a.v1, current a.v2");
}

#[test]
fn a_plan_waiting_for_approval_says_how_to_approve_it() {
    let plan: InstallPlan = serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
        "metadata": {"name": "install-abcde", "namespace": "operators"},
        "spec": {"clusterServiceVersionNames": ["a.v1"], "approval": "Manual", "approved": false},
        "status": {"phase": "RequiresApproval", "catalogSources": []}
    }))
    .unwrap();
    let (o, _) = install_plan(&plan, "operators");
    assert_eq!(o.state, "RequiresApproval");
    assert!(
        o.detail.starts_with(
            "a.v1 — approve with: kubectl -n operators patch installplan install-abcde"
        ),
        "{}",
        o.detail
    );
}

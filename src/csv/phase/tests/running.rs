use super::*;

// ---- Succeeded and Failed -------------------------------------------------------------------

#[test]
fn succeeded_watches_requirements_and_components() {
    let c = succeeded_csv(csv("a.v1"), t(0));
    let mut seen = ready(&[&c]);
    installed(&c, &mut seen, true);
    let s = sync(&c, &seen, t(10));
    assert!(
        s.events.is_empty(),
        "a healthy operator produces no churn: {:?}",
        s.events
    );

    let mut lost = seen.clone();
    lost.crds.clear();
    assert_outcome(
        &sync(&c, &lost, t(10)),
        P::Failed,
        R::RequirementsNotMet,
        "requirements no longer met: CRD demos.example.com is not present",
    );

    let mut gone = seen.clone();
    gone.deployments.clear();
    assert_outcome(
        &sync(&c, &gone, t(10)),
        P::Failed,
        R::ComponentUnhealthy,
        "installing: missing deployment with name=op",
    );

    let mut edited = c.clone();
    edited
        .metadata
        .annotations
        .as_mut()
        .unwrap()
        .insert("note".into(), "new".into());
    assert_outcome(
        &sync(&edited, &seen, t(10)),
        P::InstallReady,
        R::ComponentUnhealthy,
        "installing: annotations on deployment don't match. couldn't find note: new",
    );
}

#[test]
fn a_transient_discovery_error_does_not_fail_a_running_operator() {
    let mut c = in_phase(csv("a.v1"), P::Succeeded, R::InstallSucceeded, t(0));
    c.spec.native_apis = Some(vec![crate::api::GroupVersionKind {
        group: "apps".into(),
        version: "v1".into(),
        kind: "Deployment".into(),
    }]);
    let mut seen = ready(&[&c]);
    installed(&c, &mut seen, true);
    seen.discovery.group_versions.insert(
        "apps/v1".into(),
        Err(crate::csv::DiscoveryFailed::new("connection reset")),
    );
    let s = sync(&c, &seen, t(10));
    assert!(s.status.is_none(), "{:?}", s.status);
    assert!(matches!(s.requeue, Requeue::Backoff(_)));
}

#[test]
fn a_scaled_down_deployment_is_put_back() {
    let c = succeeded_csv(csv("a.v1"), t(0));
    let mut seen = ready(&[&c]);
    installed(&c, &mut seen, true);
    let mut dep = (*seen.deployments[0]).clone();
    dep.spec.as_mut().unwrap().replicas = Some(0);
    seen.deployments = vec![Arc::new(dep)];
    let s = sync(&c, &seen, t(10));
    assert!(
        s.status
            .as_ref()
            .is_none_or(|st| st.phase() == P::Succeeded)
    );
    assert!(matches!(s.actions.first(), Some(Action::ReapplyDeployments(d)) if d[0].name == "op"));
    assert!(s.events[0].message.contains("op (spec.replicas)"));
}

#[test]
fn a_deleted_rolebinding_is_recreated_without_failing_the_csv() {
    let c = in_phase(csv("a.v1"), P::Succeeded, R::InstallSucceeded, t(0));
    let mut seen = ready(&[&c]);
    installed(&c, &mut seen, true);
    seen.role_bindings.clear();
    // Not from an InstallPlan's Subscription: nothing is re-created, the CSV fails.
    assert_outcome(
        &sync(&c, &seen, t(10)),
        P::Failed,
        R::RequirementsNotMet,
        "requirements no longer met: ServiceAccount op-sa cannot get",
    );

    seen.subscriptions = vec![Arc::new(subscription_for("a.v1"))];
    let s = sync(&c, &seen, t(10));
    assert!(s.status.is_none(), "stays Succeeded while repairing");
    let Some(Action::EnsurePermissions(objects)) = s.actions.first() else {
        panic!("expected a repair: {:?}", s.actions);
    };
    assert_eq!(objects.role_bindings.len(), 1);
    assert!(
        objects.service_accounts.is_empty(),
        "the account still exists"
    );
}

#[test]
fn failed_recovers_through_pending_or_straight_to_succeeded() {
    let mut seen = ready(&[]);
    for reason in [
        R::NoOperatorGroup,
        R::TooManyOperatorGroups,
        R::UnsupportedOperatorGroup,
        R::NoTargetNamespaces,
    ] {
        let c = in_phase(csv("a.v1"), P::Failed, reason, t(0));
        assert_outcome(
            &sync(&c, &seen, t(10)),
            P::Pending,
            R::RequirementsUnknown,
            "InstallModes now support target namespaces",
        );
    }
    let c = in_phase(
        csv("a.v1"),
        P::Failed,
        R::InterOperatorGroupOwnerConflict,
        t(0),
    );
    assert_outcome(
        &sync(&c, &seen, t(10)),
        P::Pending,
        R::RequirementsUnknown,
        "OperatorGroup no longer intersecting with conflicting owner",
    );

    let c = in_phase(csv("a.v1"), P::Failed, R::ComponentUnhealthy, t(0));
    assert_outcome(
        &sync(&c, &seen, t(10)),
        P::Pending,
        R::NeedsReinstall,
        "installing: missing deployment with name=op",
    );
    installed(&c, &mut seen, true);
    assert_outcome(
        &sync(&c, &seen, t(10)),
        P::Succeeded,
        R::InstallSucceeded,
        "install strategy completed with no errors",
    );
    let mut lost = seen.clone();
    lost.service_accounts.clear();
    assert_outcome(
        &sync(&c, &lost, t(10)),
        P::Pending,
        R::RequirementsNotMet,
        "requirements not met: ServiceAccount op-sa",
    );
}

use super::*;

// ---- InstallReady and Installing ----------------------------------------------------------

#[test]
fn install_ready_installs_and_reports_the_outcome() {
    let c = in_phase(csv("a.v1"), P::InstallReady, R::AllRequirementsMet, t(0));
    let s = sync(&c, &ready(&[&c]), t(10));
    assert!(s.status.is_none());
    let Some(Action::Install(plan)) = s.actions.first() else {
        panic!("expected an install: {:?}", s.actions);
    };
    assert_eq!(plan.deployments.len(), 1);
    assert!(plan.delete_orphans.is_empty());

    assert_outcome(
        &after_install(&c, Ok(()), t(11)),
        P::Installing,
        R::InstallSucceeded,
        "waiting for install components to report healthy",
    );
    let failed = after_install(&c, Err(InstallFailure("boom".into())), t(11));
    assert_outcome(
        &failed,
        P::Failed,
        R::InstallComponentFailed,
        "install strategy failed: boom",
    );
    assert!(
        failed.events[0].is_warning(),
        "Failed phases emit Warning events"
    );
}

#[test]
fn a_renamed_deployment_is_an_orphan_of_the_install() {
    let c = in_phase(csv("a.v1"), P::InstallReady, R::AllRequirementsMet, t(0));
    let mut seen = ready(&[&c]);
    let mut old = csv("a.v1");
    old.spec.install.spec.as_mut().unwrap().deployments[0].name = "op-old".into();
    seen.deployments = live_deployments(&old, &seen, true);
    let s = sync(&c, &seen, t(10));
    let Some(Action::Install(plan)) = s.actions.first() else {
        panic!("expected an install");
    };
    assert_eq!(plan.delete_orphans, vec!["op-old".to_string()]);
}

#[test]
fn a_scoped_group_without_deployment_rights_fails_without_retry() {
    let c = in_phase(csv("a.v1"), P::InstallReady, R::AllRequirementsMet, t(0));
    let mut seen = ready(&[&c]);
    let mut group = (*seen.operator_groups[0]).clone();
    group.spec.service_account_name = Some("scoped".into());
    group.status.as_mut().unwrap().service_account_ref = Some(Default::default());
    seen.operator_groups = vec![Arc::new(group.clone())];
    seen.all_operator_groups = vec![Arc::new(group)];
    assert_outcome(
        &sync(&c, &seen, t(10)),
        P::Failed,
        R::InstallComponentFailedNoRetry,
        "install strategy failed: deployments.apps \"op\" is forbidden: User \"system:serviceaccount:demo:scoped\" cannot create resource \"deployments\"",
    );
}

#[test]
fn installing_follows_deployment_health() {
    let c = in_phase(csv("a.v1"), P::Installing, R::InstallSucceeded, t(0));
    let mut seen = ready(&[&c]);

    assert_outcome(
        &sync(&c, &seen, t(10)),
        P::Installing,
        R::InstallWaiting,
        "installing: missing deployment with name=op",
    );
    installed(&c, &mut seen, false);
    assert_outcome(
        &sync(&c, &seen, t(10)),
        P::Installing,
        R::InstallWaiting,
        "installing: waiting for deployment op to become ready: deployment \"op\" not available: Deployment does not have minimum availability.",
    );
    installed(&c, &mut seen, true);
    assert_outcome(
        &sync(&c, &seen, t(10)),
        P::Succeeded,
        R::InstallSucceeded,
        "install strategy completed with no errors",
    );

    // A changed spec hash sends the CSV back to InstallReady.
    let mut dep = (*seen.deployments[0]).clone();
    dep.metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("olm.deployment-spec-hash".into(), "stale".into());
    seen.deployments = vec![Arc::new(dep)];
    assert_outcome(
        &sync(&c, &seen, t(10)),
        P::InstallReady,
        R::InstallWaiting,
        "installing: deployment changed old hash=stale",
    );
}

#[test]
fn installing_fails_on_progress_deadline_and_after_five_minutes() {
    let c = in_phase(csv("a.v1"), P::Installing, R::InstallSucceeded, t(0));
    let mut seen = ready(&[&c]);
    installed(&c, &mut seen, false);
    let s = sync(&c, &seen, t(299));
    assert_eq!(s.phase(), Some(P::Installing));
    assert_eq!(
        s.requeue,
        Requeue::After(Duration::from_secs(1)),
        "requeued for the deadline"
    );
    assert_outcome(
        &sync(&c, &seen, t(300)),
        P::Failed,
        R::InstallCheckFailed,
        "install timeout",
    );

    let mut dep = (*seen.deployments[0]).clone();
    dep.status
        .as_mut()
        .unwrap()
        .conditions
        .as_mut()
        .unwrap()
        .push(DeploymentCondition {
            type_: "Progressing".into(),
            status: "False".into(),
            reason: Some("ProgressDeadlineExceeded".into()),
            ..Default::default()
        });
    seen.deployments = vec![Arc::new(dep)];
    assert_outcome(
        &sync(&c, &seen, t(10)),
        P::Failed,
        R::InstallCheckFailed,
        "install failed: deployment op not ready before timeout: deployment \"op\" exceeded its progress deadline",
    );
}

use super::*;

// ---- None and Pending -------------------------------------------------------------------------

#[test]
fn a_new_csv_goes_pending() {
    let c = csv("a.v1");
    let s = sync(&c, &ready(&[&c]), t(10));
    assert_outcome(
        &s,
        P::Pending,
        R::RequirementsUnknown,
        "requirements not yet checked",
    );
    assert!(s.actions.is_empty());
    let status = s.status.unwrap();
    assert_eq!(status.last_transition_time, Some(Time(t(10))));
    assert_eq!(s.events.len(), 1);
    assert!(!s.events[0].is_warning());
    assert_eq!(s.events[0].reason, "RequirementsUnknown");
}

#[test]
fn pending_with_everything_present_is_install_ready() {
    let c = in_phase(csv("a.v1"), P::Pending, R::RequirementsUnknown, t(0));
    let s = sync(&c, &ready(&[&c]), t(10));
    assert_outcome(
        &s,
        P::InstallReady,
        R::AllRequirementsMet,
        "all requirements found, attempting install",
    );
    let status = s.status.unwrap();
    let reqs = status.requirement_status.unwrap();
    let kinds: Vec<&str> = reqs.iter().map(|r| r.kind.as_str()).collect();
    assert_eq!(kinds, vec!["CustomResourceDefinition", "ServiceAccount"]);
    assert_eq!(
        status.conditions.unwrap().len(),
        2,
        "history keeps both phases"
    );
}

#[test]
fn each_missing_requirement_keeps_the_csv_pending_and_says_what_is_missing() {
    let c = in_phase(csv("a.v1"), P::Pending, R::RequirementsUnknown, t(0));
    type Breakage = Box<dyn Fn(&mut Observed)>;
    let cases: Vec<(&str, Breakage, &str)> = vec![
        (
            "crd",
            Box::new(|s: &mut Observed| s.crds.clear()),
            "CRD demos.example.com is not present",
        ),
        (
            "crd version",
            Box::new(|s: &mut Observed| s.crds = vec![Arc::new(crd("demos.example.com", "v2"))]),
            "CRD demos.example.com does not serve version v1",
        ),
        (
            "service account",
            Box::new(|s: &mut Observed| s.service_accounts.clear()),
            "ServiceAccount op-sa: Service account does not exist",
        ),
        (
            "rolebinding",
            Box::new(|s: &mut Observed| s.role_bindings.clear()),
            "ServiceAccount op-sa cannot get resource \"configmaps\" in API group \"\" in namespace \"demo\"",
        ),
    ];
    for (what, break_it, missing) in cases {
        let mut seen = ready(&[&c]);
        break_it(&mut seen);
        let s = sync(&c, &seen, t(10));
        assert_outcome(
            &s,
            P::Pending,
            R::RequirementsNotMet,
            &format!("one or more requirements couldn't be found: {missing}"),
        );
        assert!(matches!(s.requeue, Requeue::Backoff(_)), "{what}");
        // Recovery: the same sync with the requirement back goes InstallReady.
        assert_outcome(
            &sync(&c, &ready(&[&c]), t(20)),
            P::InstallReady,
            R::AllRequirementsMet,
            "",
        );
    }
}

#[test]
fn min_kube_version_and_native_apis_are_requirements() {
    let mut c = in_phase(csv("a.v1"), P::Pending, R::RequirementsUnknown, t(0));
    c.spec.min_kube_version = Some("1.40.0".into());
    c.spec.native_apis = Some(vec![crate::api::GroupVersionKind {
        group: "apps".into(),
        version: "v1".into(),
        kind: "Deployment".into(),
    }]);
    let mut seen = ready(&[&c]);
    seen.discovery = Discovery {
        group_versions: [("apps/v1".to_string(), Ok(["Deployment".to_string()].into()))].into(),
    };
    let s = sync(&c, &seen, t(10));
    assert_outcome(
        &s,
        P::Pending,
        R::RequirementsNotMet,
        "one or more requirements couldn't be found: CSV version requirement not met: minKubeVersion (1.40.0) > server version (v1.33.1)",
    );
    seen.server_version = ServerVersion::Known("v1.40.2+k3s1".into());
    let s = sync(&c, &seen, t(10));
    assert_outcome(&s, P::InstallReady, R::AllRequirementsMet, "");
    let reqs = s.status.unwrap().requirement_status.unwrap();
    assert_eq!(
        reqs[0].message,
        "CSV minKubeVersion (1.40.0) less than server version (v1.40.2+k3s1)"
    );
    assert_eq!(reqs[2].message, "Native API exists");
}

#[test]
fn pending_validations_fail_the_csv() {
    let base = in_phase(csv("a.v1"), P::Pending, R::RequirementsUnknown, t(0));

    let mut c = base.clone();
    c.spec.install.strategy = "helm".into();
    assert_outcome(
        &sync(&c, &ready(&[&c]), t(10)),
        P::Failed,
        R::InvalidInstallStrategy,
        "install strategy invalid: unrecognized install strategy",
    );

    let mut c = base.clone();
    let hook: crate::api::WebhookDescription = serde_json::from_value(serde_json::json!({
        "generateName": "v.example.com", "type": "ValidatingAdmissionWebhook",
        "sideEffects": "None", "admissionReviewVersions": ["v1"]
    }))
    .unwrap();
    c.spec.webhook_definitions = Some(vec![hook.clone(), hook]);
    assert_outcome(
        &sync(&c, &ready(&[&c]), t(10)),
        P::Failed,
        R::InvalidWebhookDescription,
        "CSV contains repeated WebhookDescription name",
    );

    // Another CSV (not in the chain) owns the same CRD.
    let other = csv("other.v1");
    let s = sync(&base, &ready(&[&base, &other]), t(10));
    assert_outcome(
        &s,
        P::Failed,
        R::OwnerConflict,
        "conflicting CRD owner in namespace: CRD demos.example.com is owned by ClusterServiceVersion other.v1",
    );
}

#[test]
fn an_upgrade_waits_for_the_old_csv_and_its_operator_condition() {
    let old = in_phase(csv("a.v1"), P::Succeeded, R::InstallSucceeded, t(0));
    let new = in_phase(
        replacing(csv("a.v2"), "a.v1"),
        P::Pending,
        R::RequirementsUnknown,
        t(0),
    );
    let mut seen = ready(&[&old, &new]);
    let s = sync(&new, &seen, t(10));
    assert!(
        s.actions.contains(&Action::RequeueCsv("a.v1".into())),
        "{:?}",
        s.actions
    );
    assert_eq!(
        s.phase(),
        Some(P::Pending),
        "waits while the old CSV is Succeeded"
    );

    let mut oc: crate::api::OperatorCondition = serde_json::from_value(serde_json::json!({
        "apiVersion": "operators.coreos.com/v2", "kind": "OperatorCondition",
        "metadata": {"name": "a.v1", "namespace": NS, "generation": 1},
        "status": {"conditions": [{"type": "Upgradeable", "status": "False", "reason": "Busy",
            "message": "busy", "observedGeneration": 1, "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    }))
    .unwrap();
    seen.operator_conditions = vec![Arc::new(oc.clone())];
    assert_outcome(
        &sync(&new, &seen, t(10)),
        P::Pending,
        R::OperatorConditionNotUpgradeable,
        "operator is not upgradeable: The operator is not upgradeable: busy",
    );
    // Only the replaced CSV's OperatorCondition counts.
    oc.metadata.name = Some("unrelated.v1".into());
    seen.operator_conditions = vec![Arc::new(oc)];
    assert_ne!(
        sync(&new, &seen, t(10)).status.map(|s| s.reason),
        Some(Some(R::OperatorConditionNotUpgradeable))
    );
}

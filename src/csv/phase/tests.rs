//! Table tests of the transitions in csv.md §5, each from a hand-built snapshot.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::DeploymentCondition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, Time};

use super::*;
use crate::api::keys::{PROVIDED_APIS_ANNOTATION, TARGET_NAMESPACES_ANNOTATION};
use crate::api::{ClusterServiceVersion, CsvPhase as P, CsvReason as R, UpgradeStrategy};
use crate::csv::fixtures::*;
use crate::csv::observed::{
    CertificateSupport, Discovery, Observed, OperatorConditionView, ServerVersion,
};
use crate::csv::sync::{Action, Requeue, Sync};

fn outcome(sync: &Sync) -> (P, R, String) {
    let status = sync.status.as_ref().expect("the sync changed the status");
    (
        status.phase(),
        status.reason.clone().expect("a reason is set"),
        status.message.clone().unwrap_or_default(),
    )
}

fn assert_outcome(sync: &Sync, phase: P, reason: R, message_prefix: &str) {
    let (p, r, m) = outcome(sync);
    assert_eq!((p, r), (phase, reason), "message: {m}");
    assert!(
        m.starts_with(message_prefix),
        "message {m:?} does not start with {message_prefix:?}"
    );
}

/// A CSV that succeeded at `since`, with OLM's message.
fn succeeded_csv(c: ClusterServiceVersion, since: jiff::Timestamp) -> ClusterServiceVersion {
    let mut c = in_phase(c, P::Succeeded, R::InstallSucceeded, since);
    let status = c.status.as_mut().unwrap();
    status.message = Some("install strategy completed with no errors".into());
    status.conditions.as_mut().unwrap()[0].message = status.message.clone();
    c
}

fn installed(csv: &ClusterServiceVersion, seen: &mut Observed, available: bool) {
    seen.deployments = live_deployments(csv, seen, available);
}

// ---- the gate (csv.md §2) -------------------------------------------------------------------

#[test]
fn no_operator_group_fails_and_too_many_names_them() {
    let c = csv("a.v1");
    let mut seen = observed(&[&c]);
    seen.operator_groups.clear();
    assert_outcome(
        &sync(&c, &seen, t(10)),
        P::Failed,
        R::NoOperatorGroup,
        "csv in namespace with no operatorgroups",
    );
    seen.operator_groups = vec![
        Arc::new(og("og-b", NS, &[NS])),
        Arc::new(og("og-a", NS, &[NS])),
    ];
    assert_outcome(
        &sync(&c, &seen, t(10)),
        P::Failed,
        R::TooManyOperatorGroups,
        "csv created in namespace with multiple operatorgroups, can't pick one automatically: og-a, og-b",
    );
}

#[test]
fn membership_annotations_are_written_and_an_empty_group_fails() {
    let mut c = csv("a.v1");
    c.metadata.annotations = None;
    let mut seen = observed(&[&c]);
    let s = sync(&c, &seen, t(10));
    assert!(
        s.status.is_none(),
        "annotating alone does not touch the status"
    );
    let Some(Action::SetAnnotations(wanted)) = s
        .actions
        .iter()
        .find(|a| matches!(a, Action::SetAnnotations(_)))
    else {
        panic!("expected SetAnnotations in {:?}", s.actions);
    };
    assert_eq!(
        wanted.get(TARGET_NAMESPACES_ANNOTATION),
        Some(&Some(NS.to_owned()))
    );

    seen.operator_groups = vec![Arc::new(og("og", NS, &[]))];
    assert_outcome(
        &sync(&c, &seen, t(10)),
        P::Failed,
        R::NoTargetNamespaces,
        "no targetNamespaces are matched operatorgroups namespace selection",
    );
}

#[test]
fn install_modes_are_checked_against_targets() {
    let mut c = csv("a.v1");
    c.spec.install_modes.as_mut().unwrap()[1].type_ = crate::api::InstallModeType::OwnNamespace;
    let seen = observed(&[&c]);
    assert_outcome(
        &sync(&c, &seen, t(10)),
        P::Failed,
        R::InvalidInstallModes,
        "InstallMode list contains duplicates, cannot make set: [{OwnNamespace true} {OwnNamespace true}",
    );

    let mut c = csv("a.v1");
    c.metadata
        .annotations
        .as_mut()
        .unwrap()
        .insert(TARGET_NAMESPACES_ANNOTATION.into(), "x,y".into());
    let mut seen = observed(&[&c]);
    seen.operator_groups = vec![Arc::new(og("og", NS, &["y", "x"]))];
    assert_outcome(
        &sync(&c, &seen, t(10)),
        P::Failed,
        R::UnsupportedOperatorGroup,
        "MultiNamespace InstallModeType not supported, cannot configure to watch 2 namespaces",
    );
}

#[test]
fn provided_apis_are_added_to_the_group_then_conflicts_fail_the_csv() {
    let c = csv("a.v1");
    let seen = observed(&[&c]);
    let s = sync(&c, &seen, t(10));
    assert!(s.actions.contains(&Action::SetProvidedApis {
        group: "og".into(),
        annotation: "Demo.v1.example.com".into()
    }));

    // Another group covering `demo` (all namespaces) already provides the API.
    let mut seen = observed(&[&c]);
    let mut mine = og("og", NS, &[NS]);
    mine.metadata.annotations = Some(labels(&[(PROVIDED_APIS_ANNOTATION, "Demo.v1.example.com")]));
    let mut global = og("global", "operators", &[""]);
    global.metadata.annotations =
        Some(labels(&[(PROVIDED_APIS_ANNOTATION, "Demo.v1.example.com")]));
    seen.operator_groups = vec![Arc::new(mine.clone())];
    seen.all_operator_groups = vec![Arc::new(mine), Arc::new(global.clone())];
    let s = sync(&c, &seen, t(10));
    assert!(
        s.actions.contains(&Action::SetProvidedApis {
            group: "og".into(),
            annotation: String::new()
        }),
        "the API is first removed from the group: {:?}",
        s.actions
    );

    seen.operator_groups = vec![Arc::new(og("og", NS, &[NS]))];
    seen.all_operator_groups = vec![seen.operator_groups[0].clone(), Arc::new(global)];
    let s = sync(&c, &seen, t(10));
    assert_outcome(
        &s,
        P::Failed,
        R::InterOperatorGroupOwnerConflict,
        "intersecting operatorgroups provide the same apis: Demo.v1.example.com (provided by operatorgroup operators/global)",
    );
    assert!(
        s.actions
            .contains(&Action::DeleteDeployments(vec!["op".into()]))
    );
}

#[test]
fn a_static_group_refuses_new_apis() {
    let c = csv("a.v1");
    let mut seen = observed(&[&c]);
    let mut group = og("og", NS, &[NS]);
    group.spec.static_provided_apis = Some(true);
    seen.operator_groups = vec![Arc::new(group.clone())];
    seen.all_operator_groups = vec![Arc::new(group)];
    let s = sync(&c, &seen, t(10));
    assert_outcome(
        &s,
        P::Failed,
        R::CannotModifyStaticOperatorGroupProvidedApis,
        "static provided api operatorgroup cannot be modified by these apis",
    );
}

/// Everything present and the group already lists the API.
fn ready(csvs: &[&ClusterServiceVersion]) -> Observed {
    let mut seen = observed(csvs);
    let mut group = og("og", NS, &[NS]);
    group.metadata.annotations = Some(labels(&[(PROVIDED_APIS_ANNOTATION, "Demo.v1.example.com")]));
    seen.operator_groups = vec![Arc::new(group.clone())];
    seen.all_operator_groups = vec![Arc::new(group)];
    seen
}

#[test]
fn no_retry_is_frozen_until_rbac_changes() {
    let c = in_phase(
        csv("a.v1"),
        P::Failed,
        R::InstallComponentFailedNoRetry,
        t(100),
    );
    let mut seen = ready(&[&c]);
    let s = sync(&c, &seen, t(200));
    assert!(s.status.is_none() && s.actions.is_empty());

    let mut rb = binding("late", "op-role", "op-sa");
    rb.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
        time: Some(Time(t(150))),
        ..Default::default()
    }]);
    seen.role_bindings.push(Arc::new(rb));
    assert_outcome(
        &sync(&c, &seen, t(200)),
        P::Pending,
        R::DetectedClusterChange,
        "Cluster resources changed state",
    );
}

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
    assert!(!s.events[0].warning);
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

    seen.replaced_operator_condition = Some(OperatorConditionView {
        generation: 1,
        upgradeable_override: None,
        upgradeable_condition: Some(("False".into(), "busy".into(), 1)),
    });
    assert_outcome(
        &sync(&new, &seen, t(10)),
        P::Pending,
        R::OperatorConditionNotUpgradeable,
        "operator is not upgradeable: The operator is not upgradeable: busy",
    );
}

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
    assert_outcome(
        &after_install(&c, Err(InstallFailure::Forbidden("nope".into())), t(11)),
        P::Failed,
        R::InstallComponentFailedNoRetry,
        "install strategy failed: nope",
    );
    let failed = after_install(&c, Err(InstallFailure::Other("boom".into())), t(11));
    assert_outcome(
        &failed,
        P::Failed,
        R::InstallComponentFailed,
        "install strategy failed: boom",
    );
    assert!(
        failed.events[0].warning,
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
fn owned_apiservices_stop_at_the_certificate_seam() {
    let mut c = in_phase(csv("a.v1"), P::InstallReady, R::AllRequirementsMet, t(0));
    c.spec.api_service_definitions = Some(serde_json::from_value(serde_json::json!({
        "owned": [{"name": "things", "group": "x.example.com", "version": "v1", "kind": "Thing", "deploymentName": "op"}]
    })).unwrap());
    let mut seen = ready(&[&c]);
    let mut group = og("og", NS, &[NS]);
    group.metadata.annotations = Some(labels(&[(
        PROVIDED_APIS_ANNOTATION,
        "Demo.v1.example.com,Thing.v1.x.example.com",
    )]));
    seen.operator_groups = vec![Arc::new(group.clone())];
    seen.all_operator_groups = vec![Arc::new(group)];
    assert_outcome(
        &sync(&c, &seen, t(10)),
        P::Failed,
        R::InstallComponentFailed,
        "install strategy failed: serving certificates for owned APIServices and webhooks cannot be provisioned yet (deployments: op)",
    );
    seen.certificates = CertificateSupport::Available;
    assert!(matches!(
        sync(&c, &seen, t(10)).actions.first(),
        Some(Action::Install(_))
    ));
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
    seen.discovery
        .group_versions
        .insert("apps/v1".into(), Err("connection reset".into()));
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

// ---- Replacement ------------------------------------------------------------------------------

#[test]
fn the_upgrade_sequence_hands_over_and_deletes_the_old_csv() {
    let old = in_phase(csv("a.v1"), P::Succeeded, R::InstallSucceeded, t(0));
    let new = in_phase(
        replacing(csv("a.v2"), "a.v1"),
        P::Pending,
        R::RequirementsUnknown,
        t(0),
    );
    let seen = ready(&[&old, &new]);
    assert_outcome(
        &sync(&old, &seen, t(10)),
        P::Replacing,
        R::BeingReplaced,
        "being replaced by csv: a.v2",
    );

    let old = in_phase(csv("a.v1"), P::Replacing, R::BeingReplaced, t(10));
    let seen = ready(&[&old, &new]);
    assert_outcome(
        &sync(&new, &seen, t(20)),
        P::InstallReady,
        R::AllRequirementsMet,
        "",
    );
    let s = sync(&old, &seen, t(20));
    assert!(s.status.is_none() && s.actions.contains(&Action::RequeueCsv("a.v2".into())));

    let new = in_phase(
        replacing(csv("a.v2"), "a.v1"),
        P::Succeeded,
        R::InstallSucceeded,
        t(30),
    );
    let seen = ready(&[&old, &new]);
    assert_outcome(
        &sync(&old, &seen, t(40)),
        P::Deleting,
        R::Replaced,
        "has been replaced by a newer ClusterServiceVersion that has successfully installed.",
    );
    let deleting = in_phase(csv("a.v1"), P::Deleting, R::Replaced, t(40));
    assert_eq!(
        sync(&deleting, &seen, t(41)).actions,
        vec![Action::DeleteCsv]
    );
}

#[test]
fn a_chain_collapses_to_its_head() {
    let a = in_phase(csv("a.v1"), P::Replacing, R::BeingReplaced, t(0));
    let b = in_phase(
        replacing(csv("a.v2"), "a.v1"),
        P::Replacing,
        R::BeingReplaced,
        t(0),
    );
    let c = in_phase(
        replacing(csv("a.v3"), "a.v2"),
        P::Installing,
        R::InstallSucceeded,
        t(0),
    );
    let seen = ready(&[&a, &b, &c]);
    // B is not the oldest link: it waits.
    let s = sync(&b, &seen, t(10));
    assert!(s.status.is_none() && s.actions.is_empty());
    // A's successor B already succeeded once (it is Replacing), so A goes.
    assert_outcome(&sync(&a, &seen, t(10)), P::Deleting, R::Replaced, "");
}

#[test]
fn fail_forward_replaces_a_failed_csv_and_waits_for_the_newest() {
    let old = in_phase(csv("a.v1"), P::Failed, R::ComponentUnhealthy, t(0));
    let new = in_phase(
        replacing(csv("a.v2"), "a.v1"),
        P::Pending,
        R::RequirementsUnknown,
        t(0),
    );
    let mut seen = ready(&[&old, &new]);
    assert_ne!(
        sync(&old, &seen, t(10)).phase(),
        Some(P::Replacing),
        "Default strategy does not"
    );
    let mut group = (*seen.operator_groups[0]).clone();
    group.spec.upgrade_strategy = Some(UpgradeStrategy::TechPreviewUnsafeFailForward);
    seen.operator_groups = vec![Arc::new(group.clone())];
    seen.all_operator_groups = vec![Arc::new(group)];
    assert_outcome(
        &sync(&old, &seen, t(10)),
        P::Replacing,
        R::BeingReplaced,
        "Fail Forward is enabled, allowing Failed csv to be replaced by csv: a.v2",
    );
}

#[test]
fn a_replacing_csv_whose_replacement_vanished_rechecks_itself() {
    let old = in_phase(csv("a.v1"), P::Replacing, R::BeingReplaced, t(0));
    assert_outcome(
        &sync(&old, &ready(&[&old]), t(10)),
        P::Pending,
        R::RequirementsUnknown,
        "marked as replacement, but no replacement CSV found in cluster",
    );
}

// ---- Status bookkeeping (csv.md §4) -----------------------------------------------------------

#[test]
fn unchanged_outcomes_write_nothing_and_emit_nothing() {
    let c = in_phase(csv("a.v1"), P::Pending, R::RequirementsUnknown, t(0));
    let mut seen = ready(&[&c]);
    seen.crds.clear();
    let first = sync(&c, &seen, t(10));
    let mut again = c.clone();
    again.status = first.status.clone();
    let second = sync(&again, &seen, t(20));
    assert!(
        second.status.is_none(),
        "set-if-changed: {:?}",
        second.status
    );
    assert!(second.events.is_empty());
    // A fresh requirementStatus is still written when it changes (Known pain #2).
    seen.service_accounts.clear();
    let third = sync(&again, &seen, t(30));
    let status = third.status.expect("message and requirementStatus changed");
    assert_eq!(
        status.last_transition_time,
        Some(Time(t(0))),
        "same phase: transition kept"
    );
    assert_eq!(status.last_update_time, Some(Time(t(30))));
}

//! A CSV owning an APIService or webhooks: the install plans its cert objects and CA
//! consumers; a running CSV is checked for broken resources and due rotation (docs/certificates.md).

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::{
    APIService, APIServiceCondition, APIServiceStatus,
};

use super::*;
use crate::certs::SeenSecret;
use crate::certs::{OLM_CA_HASH_ANNOTATION, olm_ca_hash};
use crate::csv::certs::{CertInstall, WebhookConfiguration};
use crate::csv::install_strategy::desired_deployments_with_certs;

const DAY: i64 = 86_400;

fn with_api_service(mut c: ClusterServiceVersion) -> ClusterServiceVersion {
    c.spec.api_service_definitions = Some(
        serde_json::from_value(serde_json::json!({
            "owned": [{"name": "things", "group": "x.example.com", "version": "v1", "kind": "Thing",
                       "deploymentName": "op", "containerPort": 5443}]
        }))
        .unwrap(),
    );
    c
}

fn with_webhook(mut c: ClusterServiceVersion, deployment: &str) -> ClusterServiceVersion {
    c.spec.webhook_definitions = Some(
        serde_json::from_value(serde_json::json!([{
            "generateName": "vdemo.example.com", "type": "ValidatingAdmissionWebhook",
            "deploymentName": deployment, "containerPort": 443, "targetPort": 9443,
            "sideEffects": "None", "admissionReviewVersions": ["v1"], "webhookPath": "/validate",
            "rules": [{"apiGroups": ["example.com"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["demos"]}]
        }]))
        .unwrap(),
    );
    c
}

fn api_ready(c: &ClusterServiceVersion) -> Observed {
    let mut seen = ready(&[c]);
    let mut group = og("og", NS, &[NS]);
    group.metadata.uid = Some("og-uid".into());
    group.metadata.annotations = Some(labels(&[(
        PROVIDED_APIS_ANNOTATION,
        "Demo.v1.example.com,Thing.v1.x.example.com",
    )]));
    seen.operator_groups = vec![Arc::new(group.clone())];
    seen.all_operator_groups = vec![Arc::new(group)];
    seen
}

fn install_plan(sync: &CsvSyncOutcome) -> &crate::csv::DeploymentInstall {
    match sync
        .actions
        .iter()
        .find(|a| matches!(a, Action::Install(_)))
    {
        Some(Action::Install(plan)) => plan,
        _ => panic!("expected an install, got {:?}", sync.actions),
    }
}

/// Puts everything `certs` writes into `seen`, as the API server would hold it after the
/// install, with the Deployments rolled out and the APIServices Available.
fn installed_with(c: &ClusterServiceVersion, seen: &mut Observed, certs: &CertInstall) {
    for d in &certs.deployments {
        seen.certs.services.push(Arc::new(d.service.clone()));
        seen.certs.secrets.push(SeenSecret {
            name: d.secret.metadata.name.clone().unwrap(),
            ca_hash_annotation: Some(d.certs.ca_hash.clone()),
            data: d.certs.secret_data.clone(),
        });
        seen.roles.push(Arc::new(d.role.clone()));
        seen.role_bindings.push(Arc::new(d.role_binding.clone()));
        seen.cluster_role_bindings
            .push(Arc::new(d.cluster_role_binding.clone()));
        seen.certs
            .auth_reader_bindings
            .push(Arc::new(d.auth_reader_binding.clone()));
    }
    seen.service_accounts
        .push(Arc::new(service_account("op-sa")));
    for api in &certs.api_services {
        let mut api = api.clone();
        api.status = Some(APIServiceStatus {
            conditions: Some(vec![APIServiceCondition {
                type_: "Available".into(),
                status: "True".into(),
                ..Default::default()
            }]),
        });
        seen.api_services.push(Arc::new(api));
    }
    for (i, config) in certs.webhooks.iter().enumerate() {
        if let WebhookConfiguration::Validating(v) = config {
            let mut v: ValidatingWebhookConfiguration = v.clone();
            v.metadata.name = Some(format!("vdemo.example.com-{i}"));
            seen.certs.validating_webhooks.push(Arc::new(v));
        }
    }
    let config = seen.subscription_config("a.v1").cloned();
    seen.deployments = desired_deployments_with_certs(c, config.as_ref(), &certs.ca_hashes())
        .unwrap()
        .into_iter()
        .map(|d| Arc::new(rolled_out(d, true)))
        .collect();
}

/// Installs `c` at `t(10)` and returns it Succeeded, with the snapshot after the install.
fn succeeded_install(c: ClusterServiceVersion) -> (ClusterServiceVersion, Observed, CertInstall) {
    let ready_csv = in_phase(c.clone(), P::InstallReady, R::AllRequirementsMet, t(0));
    let mut seen = api_ready(&ready_csv);
    let sync = sync(&ready_csv, &seen, t(10));
    let certs = install_plan(&sync).certs.clone().expect("certs planned");
    let done = succeeded_csv(c, t(20));
    seen.csvs = vec![Arc::new(done.clone())];
    installed_with(&done, &mut seen, &certs);
    (done, seen, certs)
}

/// No phase change (requirementStatus may still be filled in).
fn stays_succeeded(sync: &CsvSyncOutcome) -> bool {
    sync.status.as_ref().is_none_or(|s| {
        s.phase() == P::Succeeded && s.reason.as_ref() == Some(&R::InstallSucceeded)
    })
}

#[test]
fn installing_an_api_service_plans_service_secret_rbac_and_ca_bundle() {
    let c = in_phase(
        with_api_service(csv("a.v1")),
        P::InstallReady,
        R::AllRequirementsMet,
        t(0),
    );
    let seen = api_ready(&c);
    let sync = sync(&c, &seen, t(10));
    let plan = install_plan(&sync);
    let certs = plan.certs.as_ref().expect("certs planned");
    assert_eq!(certs.deployments.len(), 1);
    let op = &certs.deployments[0];
    assert_eq!(op.deployment, "op");
    assert_eq!(op.service_account, "op-sa");
    assert!(!op.certs.reused);
    let svc: &Service = &op.service;
    assert_eq!(svc.metadata.name.as_deref(), Some("op-service"));
    let port = &svc.spec.as_ref().unwrap().ports.as_ref().unwrap()[0];
    assert_eq!((port.name.as_deref(), port.port), (Some("5443"), 5443));
    assert_eq!(op.secret.type_.as_deref(), Some("kubernetes.io/tls"));
    let data = op.secret.data.as_ref().unwrap();
    assert_eq!(
        data.keys().map(String::as_str).collect::<Vec<_>>(),
        ["olmCAKey", "tls.crt", "tls.key"]
    );
    assert_eq!(
        op.secret.metadata.annotations.as_ref().unwrap()[OLM_CA_HASH_ANNOTATION],
        olm_ca_hash(&data["olmCAKey"].0)
    );
    assert_eq!(
        op.cluster_role_binding.metadata.name.as_deref(),
        Some("op-service-system:auth-delegator")
    );
    assert_eq!(
        op.auth_reader_binding.metadata.namespace.as_deref(),
        Some("kube-system")
    );
    assert_eq!(
        op.auth_reader_binding.metadata.name.as_deref(),
        Some("op-service-auth-reader")
    );

    let api = &certs.api_services[0];
    assert_eq!(api.metadata.name.as_deref(), Some("v1.x.example.com"));
    let spec = api.spec.as_ref().unwrap();
    assert_eq!(
        (spec.group_priority_minimum, spec.version_priority),
        (2000, 15)
    );
    assert_eq!(spec.ca_bundle.as_ref().unwrap().0, op.certs.ca_pem);
    let target = spec.service.as_ref().unwrap();
    assert_eq!(
        (
            target.name.as_deref(),
            target.namespace.as_deref(),
            target.port
        ),
        (Some("op-service"), Some(NS), Some(5443))
    );

    let dep = &plan.deployments[0];
    let template = &dep.deployment.spec.as_ref().unwrap().template;
    assert_eq!(
        template
            .metadata
            .as_ref()
            .unwrap()
            .annotations
            .as_ref()
            .unwrap()[OLM_CA_HASH_ANNOTATION],
        op.certs.ca_hash
    );
    let volumes = template.spec.as_ref().unwrap().volumes.as_ref().unwrap();
    assert!(volumes.iter().any(|v| v.name == "apiservice-cert"));
    assert!(volumes.iter().any(|v| v.name == "webhook-cert"));
    assert!(
        sync.events.iter().any(|e| e.reason == "CertificatesIssued"),
        "{:?}",
        sync.events
    );

    let after = crate::csv::after_install_with_certs(&c, Ok(()), Some(certs), t(11));
    let status = after.status.unwrap();
    assert_eq!(status.certs_last_updated.unwrap().0, t(10));
    assert_eq!(status.certs_rotate_at.unwrap().0, t(10 + 729 * DAY));
}

#[test]
fn a_healthy_api_service_install_succeeds_and_rotates_a_day_before_expiry() {
    let (done, seen, certs) = succeeded_install(with_api_service(csv("a.v1")));
    let again = sync(&done, &seen, t(30));
    assert!(stays_succeeded(&again), "{:?}", again.status);
    assert!(
        !again
            .actions
            .iter()
            .any(|a| matches!(a, Action::ReapplyDeployments(_)))
    );

    // A reinstall inside the validity window reuses the Secret byte for byte.
    let ready_csv = in_phase(done.clone(), P::InstallReady, R::AllRequirementsMet, t(40));
    let replan = sync(&ready_csv, &seen, t(50));
    let reused = install_plan(&replan).certs.clone().unwrap();
    assert!(reused.deployments[0].certs.reused);
    assert_eq!(reused.ca_hashes(), certs.ca_hashes());

    let rotate_at = certs.status_times().unwrap().1;
    let before = sync(&done, &seen, rotate_at - jiff::SignedDuration::from_secs(1));
    assert!(stays_succeeded(&before), "{:?}", before.status);
    assert_outcome(
        &sync(&done, &seen, rotate_at + jiff::SignedDuration::from_secs(1)),
        P::Pending,
        R::NeedsCertRotation,
        "CSV owns resources that require a cert refresh",
    );
}

#[test]
fn broken_api_service_resources_fail_then_ask_for_a_reinstall() {
    let (done, mut seen, _) = succeeded_install(with_api_service(csv("a.v1")));
    seen.certs.secrets[0].ca_hash_annotation = Some("tampered".into());
    let failed = sync(&done, &seen, t(30));
    assert_outcome(
        &failed,
        P::Failed,
        R::ApiServiceResourceIssue,
        "Secret demo/op-service-cert: olmcahash does not match",
    );
    let failed_csv = in_phase(done.clone(), P::Failed, R::ApiServiceResourceIssue, t(30));
    assert_outcome(
        &sync(&failed_csv, &seen, t(40)),
        P::Pending,
        R::ApiServiceResourcesNeedReinstall,
        "Secret demo/op-service-cert",
    );

    // A missing Service is also caught.
    let (done, mut seen, _) = succeeded_install(with_api_service(csv("a.v1")));
    seen.certs.services.clear();
    assert_outcome(
        &sync(&done, &seen, t(30)),
        P::Failed,
        R::ApiServiceResourceIssue,
        "Service demo/op-service not found",
    );
}

#[test]
fn an_unavailable_api_service_keeps_the_install_waiting() {
    let (done, mut seen, _) = succeeded_install(with_api_service(csv("a.v1")));
    let mut api = (*seen.api_services[0]).clone();
    api.status = None;
    seen.api_services = vec![Arc::new(api)];
    let installing = in_phase(done, P::Installing, R::InstallSucceeded, t(20));
    assert_outcome(
        &sync(&installing, &seen, t(30)),
        P::Installing,
        R::InstallWaiting,
        "apiServices not installed",
    );
}

#[test]
fn a_webhook_gets_its_configuration_with_the_groups_namespace_selector() {
    let c = in_phase(
        with_webhook(csv("a.v1"), "op"),
        P::InstallReady,
        R::AllRequirementsMet,
        t(0),
    );
    let mut seen = api_ready(&c);
    let mut group = (*seen.operator_groups[0]).clone();
    group.spec.target_namespaces = Some(vec![NS.into()]);
    seen.operator_groups = vec![Arc::new(group)];
    let sync = sync(&c, &seen, t(10));
    let certs = install_plan(&sync).certs.clone().unwrap();
    let [WebhookConfiguration::Validating(config)] = certs.webhooks.as_slice() else {
        panic!("one validating configuration: {:?}", certs.webhooks);
    };
    assert_eq!(config.metadata.name, None);
    assert_eq!(
        config.metadata.generate_name.as_deref(),
        Some("vdemo.example.com-")
    );
    let labels = config.metadata.labels.as_ref().unwrap();
    assert_eq!(
        labels["olm.webhook-description-generate-name"],
        "vdemo.example.com"
    );
    assert_eq!(labels["olm.owner"], "a.v1");
    assert!(labels.contains_key("olm.webhook-description-hash"));
    let hook = &config.webhooks.as_ref().unwrap()[0];
    assert_eq!(hook.name, "vdemo.example.com");
    let service = hook.client_config.service.as_ref().unwrap();
    assert_eq!(
        (service.name.as_str(), service.path.as_deref(), service.port),
        ("op-service", Some("/validate"), Some(443))
    );
    assert_eq!(
        hook.client_config.ca_bundle.as_ref().unwrap().0,
        certs.deployments[0].certs.ca_pem
    );
    assert_eq!(
        hook.namespace_selector
            .as_ref()
            .unwrap()
            .match_labels
            .as_ref()
            .unwrap(),
        &labels_map(&[("olm.operatorgroup.uid/og-uid", "")])
    );
    let port = &certs.deployments[0]
        .service
        .spec
        .as_ref()
        .unwrap()
        .ports
        .as_ref()
        .unwrap()[0];
    assert_eq!(
        port.target_port,
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(9443))
    );
    assert!(certs.api_services.is_empty());
}

fn labels_map(pairs: &[(&str, &str)]) -> std::collections::BTreeMap<String, String> {
    labels(pairs)
}

#[test]
fn a_webhook_install_succeeds_and_a_deleted_secret_triggers_rotation() {
    let (done, mut seen, _) = succeeded_install(with_webhook(csv("a.v1"), "op"));
    assert!(stays_succeeded(&sync(&done, &seen, t(30))));
    seen.certs.secrets.clear();
    assert_outcome(
        &sync(&done, &seen, t(30)),
        P::Pending,
        R::NeedsCertRotation,
        "CSV owns resources that require a cert refresh",
    );
    // Configuration missing: the webhook is not installed.
    let (done, mut seen, _) = succeeded_install(with_webhook(csv("a.v1"), "op"));
    seen.certs.validating_webhooks.clear();
    assert_outcome(
        &sync(&done, &seen, t(30)),
        P::Failed,
        R::ComponentUnhealthy,
        "webhooks not installed",
    );
}

#[test]
fn a_dotted_webhook_deployment_is_reported_instead_of_silently_miswired() {
    let mut c = with_webhook(csv("a.v1"), "op.v1");
    c.spec.install.spec.as_mut().unwrap().deployments[0].name = "op.v1".into();
    let c = in_phase(c, P::InstallReady, R::AllRequirementsMet, t(0));
    let seen = api_ready(&c);
    assert_outcome(
        &sync(&c, &seen, t(10)),
        P::Failed,
        R::InstallComponentFailed,
        "install strategy failed: webhook vdemo.example.com: deploymentName \"op.v1\" contains '.'",
    );
}

#[test]
fn an_api_service_of_another_operator_is_not_adopted() {
    let c = in_phase(
        with_api_service(csv("a.v1")),
        P::InstallReady,
        R::AllRequirementsMet,
        t(0),
    );
    let mut seen = api_ready(&c);
    let mut theirs = APIService::default();
    theirs.metadata.name = Some("v1.x.example.com".into());
    theirs.metadata.labels = Some(labels(&[
        ("olm.owner", "a.v1"),
        ("olm.owner.namespace", "elsewhere"),
        ("olm.owner.kind", "ClusterServiceVersion"),
    ]));
    seen.api_services = vec![Arc::new(theirs)];
    assert_outcome(
        &sync(&c, &seen, t(10)),
        P::Failed,
        R::InstallComponentFailed,
        "install strategy failed: pre-existing APIService v1.x.example.com is not adoptable",
    );
}

fn with_conversion(mut c: ClusterServiceVersion) -> ClusterServiceVersion {
    c.spec.webhook_definitions = Some(
        serde_json::from_value(serde_json::json!([{
            "generateName": "cdemo.example.com", "type": "ConversionWebhook",
            "deploymentName": "op", "containerPort": 443, "sideEffects": "None",
            "admissionReviewVersions": ["v1", "v1beta1"], "conversionCRDs": ["demos.example.com"]
        }]))
        .unwrap(),
    );
    c
}

fn all_namespaces_only(mut c: ClusterServiceVersion) -> ClusterServiceVersion {
    for mode in c.spec.install_modes.iter_mut().flatten() {
        mode.supported = mode.type_ == crate::api::InstallModeType::AllNamespaces;
    }
    c
}

#[test]
fn conversion_webhooks_wire_owned_crds_and_check_olms_preconditions() {
    use crate::csv::certs::plan_cert_install;
    let group = og("og", NS, &[""]);

    let c = with_conversion(csv("a.v1"));
    let seen = api_ready(&c);
    let err = plan_cert_install(&c, &seen, &group, t(0)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "unable to manage conversion webhook: CSVs with conversion webhooks must support only AllNamespaces"
    );

    let c = all_namespaces_only(with_conversion(csv("a.v1")));
    let certs = plan_cert_install(&c, &seen, &group, t(0)).unwrap().unwrap();
    let [conversion] = certs.conversions.as_slice() else {
        panic!("one conversion: {:?}", certs.conversions);
    };
    assert_eq!(conversion.crd, "demos.example.com");
    let value = serde_json::to_value(&conversion.conversion).unwrap();
    assert_eq!(value["strategy"], "Webhook");
    assert_eq!(
        value["webhook"]["clientConfig"]["service"],
        serde_json::json!({"namespace": NS, "name": "op-service", "path": "/", "port": 443})
    );
    assert_eq!(
        value["webhook"]["conversionReviewVersions"],
        serde_json::json!(["v1", "v1beta1"])
    );
    assert!(
        certs.webhooks.is_empty(),
        "conversion is no admission webhook"
    );

    let mut not_owned = c.clone();
    not_owned.spec.custom_resource_definitions = None;
    assert_eq!(
        plan_cert_install(&not_owned, &seen, &group, t(0))
            .unwrap_err()
            .to_string(),
        "unable to manage conversion webhook: csv a.v1 does not own CRD demos.example.com"
    );
    let mut preserving = seen.clone();
    let mut crd = (*preserving.crds[0]).clone();
    crd.spec.preserve_unknown_fields = Some(true);
    preserving.crds = vec![Arc::new(crd)];
    assert!(
        plan_cert_install(&c, &preserving, &group, t(0))
            .unwrap_err()
            .to_string()
            .contains("preserveUnknownFields")
    );
}

#[test]
fn uninstall_resets_conversion_unless_a_replacement_takes_over() {
    use crate::csv::certs::check::conversion_resets;
    let c = all_namespaces_only(with_conversion(csv("a.v1")));
    let mut seen = api_ready(&c);
    assert!(conversion_resets(&c, &seen).is_empty(), "nothing wired yet");
    let mut crd = (*seen.crds[0]).clone();
    crd.spec.conversion = Some(k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceConversion {
        strategy: "Webhook".into(),
        webhook: None,
    });
    seen.crds = vec![Arc::new(crd)];
    assert_eq!(conversion_resets(&c, &seen), ["demos.example.com"]);
    let next = replacing(csv("a.v2"), "a.v1");
    seen.csvs.push(Arc::new(next));
    assert!(conversion_resets(&c, &seen).is_empty());
}

#[test]
fn webhook_configurations_of_dropped_definitions_are_deleted() {
    let (done, mut seen, _) = succeeded_install(with_webhook(csv("a.v1"), "op"));
    let mut old = (*seen.certs.validating_webhooks[0]).clone();
    old.metadata.name = Some("vold.example.com-abcde".into());
    old.metadata.labels.as_mut().unwrap().insert(
        "olm.webhook-description-generate-name".into(),
        "vold.example.com".into(),
    );
    seen.certs.validating_webhooks.push(Arc::new(old));
    let sync = sync(&done, &seen, t(30));
    assert!(
        sync.actions
            .contains(&Action::DeleteWebhookConfigurations(vec![(
                crate::csv::certs::check::WebhookKind::Validating,
                "vold.example.com-abcde".into()
            )])),
        "{:?}",
        sync.actions
    );
}

/// issue #18 item 5: OLM v0.31 flaps such a CSV `Failed → Pending/NeedsCertRotation → Failed`
/// (its Failed handler checks the certificates of webhooks that can never be installed).
#[test]
fn invalid_webhooks_stay_failed_until_the_csv_changes() {
    let mut c = with_webhook(csv("a.v1"), "op");
    let hooks = c.spec.webhook_definitions.as_mut().unwrap();
    hooks[0].rules.as_mut().unwrap()[0].api_groups = Some(vec!["operators.coreos.com".into()]);
    let pending = in_phase(c.clone(), P::Pending, R::RequirementsUnknown, t(0));
    let seen = api_ready(&pending);
    let s = sync(&pending, &seen, t(10));
    assert_outcome(
        &s,
        P::Failed,
        R::InvalidWebhookDescription,
        "webhook rules cannot include the OLM group",
    );
    assert_eq!(s.events.len(), 1);

    // Every later sync, an hour of them, changes nothing and says nothing: no cert checks, no
    // health evaluation, no install.
    let mut failed = pending.clone();
    failed.status = s.status.clone();
    for minute in 1..=60 {
        let again = sync(&failed, &seen, t(10 + 60 * minute));
        assert_eq!(again.status, None, "minute {minute}: {:?}", again.status);
        assert!(again.events.is_empty() && again.actions.is_empty());
    }

    // Reached from other phases (the definitions edited while it ran), it fails the same way
    // instead of installing or rotating certificates.
    for (phase, reason) in [
        (P::Succeeded, R::InstallSucceeded),
        (P::InstallReady, R::AllRequirementsMet),
        (P::Failed, R::ComponentUnhealthy),
    ] {
        let running = in_phase(c.clone(), phase.clone(), reason, t(0));
        let s = sync(&running, &api_ready(&running), t(10));
        assert_outcome(
            &s,
            P::Failed,
            R::InvalidWebhookDescription,
            "webhook rules cannot include the OLM group",
        );
        assert!(s.actions.is_empty(), "{phase:?}: {:?}", s.actions);
    }

    // Fixed: the Failed handler moves on (the certificates are due, so through Pending).
    let mut fixed = with_webhook(csv("a.v1"), "op");
    fixed.status = failed.status.clone();
    assert_outcome(
        &sync(&fixed, &api_ready(&fixed), t(4000)),
        P::Pending,
        R::NeedsCertRotation,
        "owned APIServices need cert refresh",
    );
}

/// The same loop for an ownership conflict: Failed → Pending/NeedsReinstall (nothing is
/// installed) → Failed/OwnerConflict, on every sync. It now stays Failed while the conflict
/// lasts and recovers once the other CSV is gone.
#[test]
fn an_owner_conflict_stays_failed_while_the_other_owner_exists() {
    let base = in_phase(csv("a.v1"), P::Pending, R::RequirementsUnknown, t(0));
    let other = csv("other.v1");
    let seen = ready(&[&base, &other]);
    let s = sync(&base, &seen, t(10));
    assert_outcome(&s, P::Failed, R::OwnerConflict, "conflicting CRD owner");
    let mut failed = base.clone();
    failed.status = s.status.clone();
    let again = sync(&failed, &seen, t(70));
    assert_eq!(again.status, None, "{:?}", again.status);
    let alone = sync(&failed, &ready(&[&failed]), t(130));
    assert_outcome(&alone, P::Pending, R::NeedsReinstall, "installing:");
}

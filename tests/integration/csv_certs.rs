//! CSVs owning an APIService or a webhook install on the embedded API server with every cert
//! object OLM makes (docs/certificates.md §3–§5), a tampered Secret is repaired, certificates rotate a day
//! before they expire (fake clock), and uninstall removes the cluster-scoped leftovers.

use crate::csv_support;

use std::collections::BTreeMap;

use csv_support::*;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{Namespace, Secret, Service};
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use olm_rs::api::{ClusterServiceVersion, CsvPhase as P, CsvReason as R};
use olm_rs::certs::olm_ca_hash;
use olm_rs::k8s::clock::Clock;
use serde_json::{Value, json};
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::GeneralName;

const API: &str = "v1alpha1.things.example.com";

async fn start() -> Harness {
    let h = Harness::start().await;
    // The sandbox starts with kube-system, as a cluster does.
    let namespaces: Api<Namespace> = Api::all(h.client.clone());
    namespaces
        .get("kube-system")
        .await
        .expect("kube-system exists");
    h.service_account_with_rbac().await;
    h
}

fn api_csv(name: &str) -> Value {
    let mut c = csv(name, "op");
    c["spec"]["apiservicedefinitions"] = json!({"owned": [{
        "name": "things", "group": "things.example.com", "version": "v1alpha1", "kind": "Thing",
        "deploymentName": "op", "containerPort": 5443, "displayName": "Thing"
    }]});
    c
}

fn webhook_csv(name: &str) -> Value {
    let mut c = csv(name, "op");
    c["spec"]["webhookdefinitions"] = json!([{
        "generateName": "vdemo.example.com", "type": "ValidatingAdmissionWebhook",
        "deploymentName": "op", "containerPort": 443, "targetPort": 9443,
        "sideEffects": "None", "admissionReviewVersions": ["v1"], "webhookPath": "/validate-demo",
        "failurePolicy": "Fail",
        "rules": [{"apiGroups": ["example.com"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["demos"]}]
    }]);
    c
}

fn der(pem_bytes: &[u8]) -> Vec<u8> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(pem_bytes).expect("PEM");
    assert_eq!(pem.label, "CERTIFICATE");
    pem.contents
}

fn parse(der: &[u8]) -> X509Certificate<'_> {
    x509_parser::parse_x509_certificate(der).expect("X.509").1
}

/// The Secret holds a serving cert signed by the CA in `olmCAKey`, for the Service's names,
/// valid from `issued` for 730 days, for TLS servers; returns the CA PEM.
fn assert_valid_secret(secret: &Secret, issued: Timestamp) -> Vec<u8> {
    assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
    let data = secret.data.as_ref().expect("data");
    let ca_pem = data["olmCAKey"].0.clone();
    assert!(String::from_utf8_lossy(&data["tls.key"].0).contains("BEGIN EC PRIVATE KEY"));
    assert_eq!(
        secret.metadata.annotations.as_ref().unwrap()["olmcahash"],
        olm_ca_hash(&ca_pem)
    );
    let ca_der = der(&ca_pem);
    let crt_der = der(&data["tls.crt"].0);
    let (ca, crt) = (parse(&ca_der), parse(&crt_der));
    assert!(ca.is_ca());
    crt.verify_signature(Some(ca.public_key()))
        .expect("serving certificate signed by the CA in olmCAKey");
    let san = crt.subject_alternative_name().unwrap().unwrap();
    let names: Vec<&str> = san
        .value
        .general_names
        .iter()
        .filter_map(|n| match n {
            GeneralName::DNSName(d) => Some(*d),
            _ => None,
        })
        .collect();
    for want in [
        "op-service",
        "op-service.demo",
        "op-service.demo.svc",
        "op-service.demo.svc.cluster.local",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    let not_before = crt.validity().not_before.timestamp();
    let not_after = crt.validity().not_after.timestamp();
    assert!(
        (not_before - issued.as_second()).abs() <= 1,
        "issued at {issued}"
    );
    assert_eq!(not_after - not_before, 730 * 86_400);
    let eku = crt.extended_key_usage().unwrap().unwrap();
    assert!(eku.value.server_auth);
    ca_pem
}

async fn template_ca_hash(h: &Harness) -> String {
    let dep = h.deployments().get("op").await.unwrap();
    let template = dep.spec.unwrap().template;
    template.metadata.unwrap().annotations.unwrap()["olmcahash"].clone()
}

#[tokio::test]
async fn a_csv_owning_an_api_service_gets_every_cert_object_and_succeeds() {
    let h = start().await;
    h.operator_group(NS, "og", &[NS]).await;
    let started = h.clock.now();
    h.create_csv(api_csv("demo.v0.1.0")).await;
    let done = h
        .wait_for("demo.v0.1.0", P::Succeeded, R::InstallSucceeded)
        .await;
    let status = done.status.unwrap();
    let last = status.certs_last_updated.expect("certsLastUpdated").0;
    let rotate = status.certs_rotate_at.expect("certsRotateAt").0;
    assert!((last.as_second() - started.as_second()).abs() <= 1);
    assert_eq!(rotate.as_second() - last.as_second(), 729 * 86_400);

    let secrets: Api<Secret> = Api::namespaced(h.client.clone(), NS);
    let secret = secrets.get("op-service-cert").await.expect("Secret");
    let ca_pem = assert_valid_secret(&secret, last);
    assert_eq!(
        secret.metadata.owner_references.unwrap()[0].name,
        "demo.v0.1.0"
    );

    let services: Api<Service> = Api::namespaced(h.client.clone(), NS);
    let svc = services.get("op-service").await.expect("Service");
    let spec = svc.spec.unwrap();
    assert_eq!(spec.selector.unwrap()["app"], "op");
    let port = &spec.ports.unwrap()[0];
    assert_eq!((port.name.as_deref(), port.port), (Some("5443"), 5443));

    let roles: Api<Role> = Api::namespaced(h.client.clone(), NS);
    let role = roles.get("op-service-cert").await.expect("Role");
    let rule = &role.rules.unwrap()[0];
    assert_eq!(rule.verbs, ["get"]);
    assert_eq!(
        rule.resource_names.as_deref(),
        Some(&["op-service-cert".to_string()][..])
    );
    let bindings: Api<RoleBinding> = Api::namespaced(h.client.clone(), NS);
    let rb = bindings.get("op-service-cert").await.expect("RoleBinding");
    assert_eq!(rb.subjects.unwrap()[0].name, "op-sa");
    let crbs: Api<ClusterRoleBinding> = Api::all(h.client.clone());
    let crb = crbs
        .get("op-service-system:auth-delegator")
        .await
        .expect("ClusterRoleBinding");
    assert_eq!(crb.role_ref.name, "system:auth-delegator");
    let kube_system: Api<RoleBinding> = Api::namespaced(h.client.clone(), "kube-system");
    let reader = kube_system
        .get("op-service-auth-reader")
        .await
        .expect("kube-system RoleBinding");
    assert_eq!(
        reader.role_ref.name,
        "extension-apiserver-authentication-reader"
    );

    let apis: Api<APIService> = Api::all(h.client.clone());
    let api = apis.get(API).await.expect("APIService");
    let labels = api.metadata.labels.unwrap();
    assert_eq!(labels["olm.owner"], "demo.v0.1.0");
    assert_eq!(labels["olm.owner.namespace"], NS);
    let api_spec = api.spec.unwrap();
    assert_eq!(api_spec.ca_bundle.unwrap().0, ca_pem);
    assert_eq!(api_spec.service.unwrap().port, Some(5443));
    assert_eq!(
        (api_spec.group_priority_minimum, api_spec.version_priority),
        (2000, 15)
    );

    let dep = h.deployments().get("op").await.unwrap();
    let pod = dep.spec.unwrap().template;
    assert_eq!(
        pod.metadata.unwrap().annotations.unwrap()["olmcahash"],
        olm_ca_hash(&ca_pem)
    );
    let pod_spec = pod.spec.unwrap();
    let volumes: Vec<&str> = pod_spec
        .volumes
        .iter()
        .flatten()
        .map(|v| v.name.as_str())
        .collect();
    assert!(volumes.contains(&"apiservice-cert") && volumes.contains(&"webhook-cert"));
    let mounts: BTreeMap<String, String> = pod_spec.containers[0]
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| (m.name.clone(), m.mount_path.clone()))
        .collect();
    assert_eq!(
        mounts["apiservice-cert"],
        "/apiserver.local.config/certificates"
    );
    assert_eq!(
        mounts["webhook-cert"],
        "/tmp/k8s-webhook-server/serving-certs"
    );

    // Uninstall removes the cluster-scoped objects and the kube-system binding too.
    h.csvs()
        .delete("demo.v0.1.0", &DeleteParams::default())
        .await
        .unwrap();
    h.wait_gone("demo.v0.1.0").await;
    eventually("APIService and auth bindings removed", || {
        let (apis, crbs, kube_system) = (apis.clone(), crbs.clone(), kube_system.clone());
        async move {
            let api_gone = apis.get_opt(API).await.ok()?.is_none();
            let crb_gone = crbs
                .get_opt("op-service-system:auth-delegator")
                .await
                .ok()?
                .is_none();
            let rb_gone = kube_system
                .get_opt("op-service-auth-reader")
                .await
                .ok()?
                .is_none();
            (api_gone && crb_gone && rb_gone).then_some(())
        }
    })
    .await;
}

#[tokio::test]
async fn a_csv_with_a_webhook_gets_its_configuration_and_succeeds() {
    let h = start().await;
    h.operator_group(NS, "og", &[NS]).await;
    h.create_csv(webhook_csv("demo.v0.1.0")).await;
    h.wait_for("demo.v0.1.0", P::Succeeded, R::InstallSucceeded)
        .await;
    let secrets: Api<Secret> = Api::namespaced(h.client.clone(), NS);
    let secret = secrets.get("op-service-cert").await.expect("Secret");
    let ca_pem = assert_valid_secret(&secret, h.clock.now());

    let configs: Api<ValidatingWebhookConfiguration> = Api::all(h.client.clone());
    let list = configs
        .list(
            &ListParams::default()
                .labels("olm.webhook-description-generate-name=vdemo.example.com"),
        )
        .await
        .unwrap();
    assert_eq!(list.items.len(), 1);
    let config = &list.items[0];
    assert!(
        config
            .metadata
            .name
            .as_deref()
            .unwrap()
            .starts_with("vdemo.example.com-")
    );
    let labels = config.metadata.labels.as_ref().unwrap();
    assert_eq!(labels["olm.owner"], "demo.v0.1.0");
    assert!(labels.contains_key("olm.webhook-description-hash"));
    let hook = &config.webhooks.as_ref().unwrap()[0];
    assert_eq!(hook.client_config.ca_bundle.as_ref().unwrap().0, ca_pem);
    let target = hook.client_config.service.as_ref().unwrap();
    assert_eq!(
        (target.name.as_str(), target.path.as_deref(), target.port),
        ("op-service", Some("/validate-demo"), Some(443))
    );
    let services: Api<Service> = Api::namespaced(h.client.clone(), NS);
    let port = &services
        .get("op-service")
        .await
        .unwrap()
        .spec
        .unwrap()
        .ports
        .unwrap()[0];
    assert_eq!(
        port.target_port,
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(9443))
    );

    // Uninstall: the finalizer deletes the configuration.
    h.csvs()
        .delete("demo.v0.1.0", &DeleteParams::default())
        .await
        .unwrap();
    h.wait_gone("demo.v0.1.0").await;
    let left = configs.list(&ListParams::default()).await.unwrap();
    assert!(left.items.is_empty(), "{:?}", left.items);
}

#[tokio::test]
async fn a_tampered_secret_is_repaired_and_the_pods_roll() {
    let h = start().await;
    h.operator_group(NS, "og", &[NS]).await;
    h.create_csv(api_csv("demo.v0.1.0")).await;
    h.wait_for("demo.v0.1.0", P::Succeeded, R::InstallSucceeded)
        .await;
    let before = template_ca_hash(&h).await;

    let secrets: Api<Secret> = Api::namespaced(h.client.clone(), NS);
    let mut data = secrets.get("op-service-cert").await.unwrap().data.unwrap();
    data.insert("tls.crt".into(), ByteString(b"not a certificate".to_vec()));
    secrets
        .patch(
            "op-service-cert",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": data})),
        )
        .await
        .unwrap();

    h.wait_for_history("demo.v0.1.0", P::Failed, R::ApiServiceResourceIssue)
        .await;
    let repaired: ClusterServiceVersion = eventually("CSV back to Succeeded with a new CA", || {
        let h = &h;
        let before = before.clone();
        async move {
            let csv = h.csvs().get("demo.v0.1.0").await.ok()?;
            let succeeded = csv.status.as_ref()?.phase() == P::Succeeded;
            (succeeded && template_ca_hash(h).await != before).then_some(csv)
        }
    })
    .await;
    assert!(repaired.status.unwrap().certs_last_updated.is_some());
    let secret = secrets.get("op-service-cert").await.unwrap();
    let ca_pem = assert_valid_secret(&secret, h.clock.now());
    let apis: Api<APIService> = Api::all(h.client.clone());
    assert_eq!(
        apis.get(API)
            .await
            .unwrap()
            .spec
            .unwrap()
            .ca_bundle
            .unwrap()
            .0,
        ca_pem
    );
    assert_eq!(template_ca_hash(&h).await, olm_ca_hash(&ca_pem));
}

#[tokio::test]
async fn certificates_rotate_a_day_before_they_expire() {
    let h = start().await;
    h.operator_group(NS, "og", &[NS]).await;
    h.create_csv(webhook_csv("demo.v0.1.0")).await;
    let first = h
        .wait_for("demo.v0.1.0", P::Succeeded, R::InstallSucceeded)
        .await;
    let rotate_at = first.status.unwrap().certs_rotate_at.unwrap().0;
    let secrets: Api<Secret> = Api::namespaced(h.client.clone(), NS);
    let old_ca = secrets.get("op-service-cert").await.unwrap().data.unwrap()["olmCAKey"].clone();

    // One second past certsRotateAt; any event brings the CSV back (here: a label on it).
    h.clock.set(rotate_at + SignedDuration::from_secs(1));
    h.csvs()
        .patch(
            "demo.v0.1.0",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"touch": "1"}}})),
        )
        .await
        .unwrap();
    let message = h
        .wait_for_history("demo.v0.1.0", P::Pending, R::NeedsCertRotation)
        .await;
    assert_eq!(message, "CSV owns resources that require a cert refresh");
    let rotated: ClusterServiceVersion = eventually("new certificates in the status", || {
        let h = &h;
        async move {
            let csv = h.csvs().get("demo.v0.1.0").await.ok()?;
            let status = csv.status.clone()?;
            (status.phase() == P::Succeeded
                && status.certs_rotate_at.as_ref()?.0 > rotate_at + SignedDuration::from_hours(24))
            .then_some(csv)
        }
    })
    .await;
    let status = rotated.status.unwrap();
    let now = h.clock.now();
    assert_eq!(
        status.certs_last_updated.unwrap().0.as_second(),
        now.as_second()
    );
    let secret = secrets.get("op-service-cert").await.unwrap();
    assert_ne!(secret.data.as_ref().unwrap()["olmCAKey"], old_ca);
    assert_valid_secret(&secret, now);
}

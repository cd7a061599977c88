//! The test operator's CSV (e2e/testop/) installs on the embedded API server with every object
//! the real-node journeys will have the API server call: the ValidatingWebhookConfiguration,
//! the CRD's conversion webhook and the APIService, all pointing at the operator's Service on the
//! ports the operator listens on, and its Deployment mounting the certificate where the operator
//! reads it.

use std::path::Path;

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::{Api, ListParams, PostParams};
use olm_rs::api::{CsvPhase as P, CsvReason as R};
use serde::Deserialize as _;
use serde_json::{Value, json};

use crate::csv_support::{Harness, NS, eventually};

const BUNDLE: &str = "e2e/testop/bundles/olm-rs-testop/0.1.0/manifests";
const CSV: &str = "olm-rs-testop.v0.1.0";
const SERVICE: &str = "olm-rs-testop-service";

fn manifest(file: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(BUNDLE)
        .join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    Value::deserialize(serde_yaml_ng::Deserializer::from_str(&text)).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_good_version_installs_with_its_webhooks_and_api_service() {
    let h = Harness::start_all_controllers().await;
    // What the InstallPlan would have made: the CRD, the ServiceAccount and its rules, and an
    // all-namespaces OperatorGroup (a conversion webhook requires AllNamespaces).
    let crds: Api<CustomResourceDefinition> = Api::all(h.client.clone());
    crds.create(
        &PostParams::default(),
        &serde_json::from_value(manifest("gadgets.testop.olm-rs.dev.crd.yaml")).unwrap(),
    )
    .await
    .unwrap();
    let csv = manifest("olm-rs-testop.clusterserviceversion.yaml");
    let rules = csv["spec"]["install"]["spec"]["permissions"][0]["rules"].clone();
    h.service_account("olm-rs-testop").await;
    h.grant("olm-rs-testop", "olm-rs-testop", rules).await;
    h.groups(NS)
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
                "metadata": {"name": "global", "namespace": NS}, "spec": {}
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    h.create_csv(csv).await;
    h.wait_for(CSV, P::Succeeded, R::InstallSucceeded).await;

    let secrets: Api<Secret> = Api::namespaced(h.client.clone(), NS);
    let secret = secrets.get(&format!("{SERVICE}-cert")).await.unwrap();
    let ca = secret.data.unwrap()["olmCAKey"].0.clone();

    // One Service, a port per containerPort: 443 → the webhook server, 8443 → the API server.
    let services: Api<Service> = Api::namespaced(h.client.clone(), NS);
    let ports: Vec<(i32, Option<IntOrString>)> = services
        .get(SERVICE)
        .await
        .unwrap()
        .spec
        .unwrap()
        .ports
        .unwrap()
        .into_iter()
        .map(|p| (p.port, p.target_port))
        .collect();
    assert!(
        ports.contains(&(443, Some(IntOrString::Int(9443)))),
        "{ports:?}"
    );
    assert!(
        ports.contains(&(8443, Some(IntOrString::Int(8443)))),
        "{ports:?}"
    );

    let configs: Api<ValidatingWebhookConfiguration> = Api::all(h.client.clone());
    let list = configs
        .list(
            &ListParams::default()
                .labels("olm.webhook-description-generate-name=vgadget.testop.olm-rs.dev"),
        )
        .await
        .unwrap();
    assert_eq!(list.items.len(), 1);
    let hook = &list.items[0].webhooks.as_ref().unwrap()[0];
    let target = hook.client_config.service.as_ref().unwrap();
    assert_eq!(
        (target.name.as_str(), target.path.as_deref(), target.port),
        (SERVICE, Some("/validate"), Some(443))
    );
    assert_eq!(hook.client_config.ca_bundle.as_ref().unwrap().0, ca);

    let crd = eventually("the Gadget CRD converted by the webhook", || {
        let crds = crds.clone();
        async move {
            let crd = crds.get("gadgets.testop.olm-rs.dev").await.ok()?;
            let conversion = crd.spec.conversion.clone()?;
            (conversion.strategy == "Webhook").then_some(crd)
        }
    })
    .await;
    let webhook = crd.spec.conversion.unwrap().webhook.unwrap();
    let client = webhook.client_config.unwrap();
    let service = client.service.unwrap();
    assert_eq!(
        (service.name.as_str(), service.path.as_deref(), service.port),
        (SERVICE, Some("/convert"), Some(443))
    );
    assert_eq!(client.ca_bundle.unwrap().0, ca);

    let api_services: Api<APIService> = Api::all(h.client.clone());
    let api = api_services.get("v1.api.testop.olm-rs.dev").await.unwrap();
    let spec = api.spec.unwrap();
    let service = spec.service.unwrap();
    assert_eq!(
        (service.name.as_deref(), service.port),
        (Some(SERVICE), Some(8443))
    );
    assert_eq!(spec.ca_bundle.unwrap().0, ca);

    // The Deployment mounts the certificate where the operator reads it by default.
    let deployments: Api<Deployment> = Api::namespaced(h.client.clone(), NS);
    let pod = deployments
        .get("olm-rs-testop")
        .await
        .unwrap()
        .spec
        .unwrap()
        .template
        .spec
        .unwrap();
    let mounts: Vec<String> = pod.containers[0]
        .volume_mounts
        .clone()
        .unwrap()
        .into_iter()
        .map(|m| m.mount_path)
        .collect();
    for path in [
        "/tmp/k8s-webhook-server/serving-certs",
        "/apiserver.local.config/certificates",
    ] {
        assert!(mounts.iter().any(|m| m == path), "{path}: {mounts:?}");
    }
    assert_eq!(
        pod.containers[0].args.as_deref(),
        Some(&["--operator-version=0.1.0".to_string()][..])
    );
}

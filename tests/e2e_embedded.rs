//! The e2e user journeys (e2e/journeys/) against olm-rs's embedded API server, with the real
//! `olm-rs run` binary as the controller: preflight, leader election and every controller
//! cooperating over HTTP, as a user's `kubectl` sees them. The only difference from a kind
//! cluster is that nothing runs pods: the workload simulator marks Deployments available, and
//! the catalog-from-an-image journey skips (it needs a registry pod).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or bench: a panic is the report

// The journeys are shared with `cargo test --test e2e` (e2e/main.rs); this target does not use
// everything those modules offer (the static checks, the in-cluster controller access).
#[allow(dead_code)]
#[path = "../e2e/cluster.rs"]
mod cluster;
#[allow(dead_code)]
#[path = "../e2e/configmap_catalog.rs"]
mod configmap_catalog;
#[allow(dead_code)]
#[path = "../e2e/fixtures.rs"]
mod fixtures;
#[allow(dead_code)]
#[path = "../e2e/journeys/mod.rs"]
mod journeys;
#[allow(dead_code)]
#[path = "../e2e/suite.rs"]
mod suite;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, PostParams};
use olm_rs::sandbox::ApiServer;
use serde_json::{Value, json};

use cluster::{Cluster, ControllerAccess, Settings, core, operator_groups};

/// What the Helm chart installs besides the controller Deployment: the CRDs (its `crds/`),
/// the namespaces `olm` and `operators`, and OLM's two default OperatorGroups.
async fn install_like_the_chart(client: &kube::Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in olm_rs::api::crd::all().expect("olm-rs's CRDs") {
        crds.create(&PostParams::default(), &crd)
            .await
            .expect("creating a CRD");
    }
    let namespaces: Api<DynamicObject> =
        Api::all_with(client.clone(), &core("", "v1", "Namespace", "namespaces"));
    for name in ["olm", "operators"] {
        create(
            &namespaces,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
        )
        .await;
    }
    let groups =
        |ns: &str| Api::<DynamicObject>::namespaced_with(client.clone(), ns, &operator_groups());
    create(
        &groups("operators"),
        json!({
            "apiVersion": "operators.coreos.com/v1",
            "kind": "OperatorGroup",
            "metadata": {"name": "global-operators", "namespace": "operators"},
        }),
    )
    .await;
    create(
        &groups("olm"),
        json!({
            "apiVersion": "operators.coreos.com/v1",
            "kind": "OperatorGroup",
            "metadata": {"name": "olm-operators", "namespace": "olm"},
            "spec": {"targetNamespaces": ["olm"]},
        }),
    )
    .await;
}

async fn create(api: &Api<DynamicObject>, object: Value) {
    let object: DynamicObject = serde_json::from_value(object).expect("a valid object");
    api.create(&PostParams::default(), &object)
        .await
        .unwrap_or_else(|err| panic!("creating {:?}: {err}", object.metadata.name));
}

/// A free port on the loopback interface for the controller's probes.
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binding a free port");
    listener.local_addr().expect("a bound address").port()
}

/// `olm-rs run` as the chart runs it (its args and env), against `kubeconfig`.
fn spawn_controller(kubeconfig: &Path, probe_port: u16, log: &Path) -> tokio::process::Child {
    let log = std::fs::File::create(log).expect("creating the controller log");
    tokio::process::Command::new(env!("CARGO_BIN_EXE_olm-rs"))
        .args([
            "run",
            "--global-catalog-namespace=olm",
            &format!("--probe-addr=127.0.0.1:{probe_port}"),
            "--log-format=json",
            "--log-level=info",
            "--leader-elect",
            "--leader-election-lease-duration=15s",
            "--leader-election-renew-deadline=10s",
            "--leader-election-retry-period=2s",
        ])
        .env("KUBECONFIG", kubeconfig)
        .env("POD_NAMESPACE", "olm")
        .env("POD_NAME", "olm-rs-controller-embedded")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("a second log handle"))
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .expect("starting olm-rs run")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_journeys_against_the_embedded_api_server_and_olm_rs_run() {
    let started = Instant::now();
    let server = ApiServer::new();
    let serving = server
        .serve("127.0.0.1:0".parse().expect("an address"))
        .await
        .expect("serving the embedded API");
    let dir = tempfile::tempdir().expect("a temp dir");
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, serving.kubeconfig_yaml()).expect("writing the kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::from_yaml(&serving.kubeconfig_yaml()).expect("kubeconfig"),
        &Default::default(),
    )
    .await
    .expect("a client configuration");
    let client = kube::Client::try_from(config.clone()).expect("a client");
    install_like_the_chart(&client).await;

    let probe_port = free_port();
    let log = dir.path().join("olm-rs-run.log");
    let mut controller = spawn_controller(&kubeconfig, probe_port, &log);

    let settings = Settings {
        controller_namespace: "olm".to_owned(),
        operators_namespace: "operators".to_owned(),
        catalog_image: cluster::DEFAULT_CATALOG_IMAGE.to_owned(),
        timeout: Duration::from_secs(30),
        keep: false,
        controller: ControllerAccess::Local {
            probe_url: format!("http://127.0.0.1:{probe_port}"),
        },
        no_pods: false,
    };
    let summary = match Cluster::connect_with(config, settings).await {
        Ok(cluster) => suite::run_journeys(&cluster, |_| true).await,
        Err(err) => suite::Summary {
            failed: vec![("connect".to_owned(), format!("{err:#}"))],
            ..Default::default()
        },
    };
    let still_running = controller.try_wait().expect("polling olm-rs run").is_none();
    let _ = controller.kill().await;
    let log = std::fs::read_to_string(&log).unwrap_or_default();
    // `OLM_RS_E2E_EMBEDDED_LOG=<file>` keeps the controller's whole log for reading.
    if let Some(keep) = std::env::var_os("OLM_RS_E2E_EMBEDDED_LOG") {
        std::fs::write(&keep, &log).expect("writing OLM_RS_E2E_EMBEDDED_LOG");
    }
    let tail: Vec<&str> = log
        .lines()
        .rev()
        .take(60)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    println!("e2e_embedded: {:.1}s", started.elapsed().as_secs_f64());

    assert!(
        summary.failed.is_empty() && still_running,
        "journeys failed: {:#?} (olm-rs run still running: {still_running}); last lines of its log:\n{}",
        summary.failed,
        tail.join("\n")
    );
    assert_eq!(
        summary.passed,
        ["leader", "automatic", "manual", "adoption", "global"],
        "journeys that passed"
    );
    let skipped: Vec<&str> = summary
        .skipped
        .iter()
        .map(|(name, _)| name.as_str())
        .collect();
    assert_eq!(
        skipped,
        ["image"],
        "only the image catalog needs pods: {:?}",
        summary.skipped
    );
    serving.shutdown().await;
}

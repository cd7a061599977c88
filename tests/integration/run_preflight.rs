//! `olm-rs run` against the embedded API server: it refuses to start without the CRDs (naming
//! each missing one), and with them it turns ready and stops cleanly on shutdown.

use std::net::SocketAddr;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::PostParams;
use olm_rs::controller::{self, RunError, RunOptions};
use olm_rs::reconcile::ControllerOptions;
use olm_rs::sandbox::ApiServer;

fn free_addr() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("local addr")
}

fn options(probe_addr: SocketAddr) -> RunOptions {
    RunOptions {
        probe_addr,
        controller: ControllerOptions::default(),
        leader_election: None,
    }
}

#[tokio::test]
async fn refuses_to_start_without_crds_and_names_them() {
    let api = ApiServer::new();
    let err = controller::run(api.client(), options(free_addr()), std::future::pending())
        .await
        .expect_err("no CRDs installed");
    let RunError::CrdsMissing { missing } = &err else {
        panic!("expected CrdsMissing, got {err}");
    };
    for crd in [
        "clusterserviceversions.operators.coreos.com",
        "operatorgroups.operators.coreos.com",
        "subscriptions.operators.coreos.com",
        "installplans.operators.coreos.com",
        "catalogsources.operators.coreos.com",
        "operatorconditions.operators.coreos.com",
    ] {
        assert!(missing.contains(crd), "{crd} not named in: {err}");
    }
    assert!(err.to_string().contains("olm-rs crds"), "{err}");
}

#[tokio::test]
async fn becomes_ready_with_crds_and_stops_on_shutdown() {
    let api = ApiServer::new();
    let crds: Api<CustomResourceDefinition> = Api::all(api.client());
    for crd in olm_rs::api::crd::all().expect("CRDs generate") {
        crds.create(&PostParams::default(), &crd)
            .await
            .expect("CRD accepted");
    }

    let probe_addr = free_addr();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let shutdown = async move {
        let _ = stop_rx.await;
    };
    let running = tokio::spawn(controller::run(api.client(), options(probe_addr), shutdown));

    let url = format!("http://{probe_addr}/readyz");
    let mut last = String::new();
    let mut ready = false;
    for _ in 0..100 {
        if let Some((status, body)) = http_get(&url).await {
            last = format!("{status}: {body}");
            if status == 200 {
                ready = true;
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    if !ready && running.is_finished() {
        let outcome = running.await.expect("controller task did not panic");
        panic!("controller stopped before it was ready: {outcome:?}");
    }
    assert!(ready, "/readyz never turned 200; last answer {last}");
    let (status, _) = http_get(&format!("http://{probe_addr}/healthz"))
        .await
        .expect("healthz answers");
    assert_eq!(status, 200);

    stop_tx.send(()).expect("controller still running");
    let outcome = tokio::time::timeout(Duration::from_secs(10), running)
        .await
        .expect("controller stops within 10 s")
        .expect("controller task did not panic");
    assert!(outcome.is_ok(), "{outcome:?}");
}

/// A minimal HTTP/1.1 GET: status code and body, or None when nothing listens yet.
async fn http_get(url: &str) -> Option<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rest = url.strip_prefix("http://")?;
    let (host, path) = rest.split_once('/')?;
    let mut stream = tokio::net::TcpStream::connect(host).await.ok()?;
    let request = format!("GET /{path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await.ok()?;
    let status = response.split_whitespace().nth(1)?.parse().ok()?;
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_owned())?;
    Some((status, body))
}

//! `olm-rs run` against the embedded API server: it waits for the CRDs (naming each missing one
//! on `/readyz`), comes up while they are still being established, survives a CRD deleted and
//! created again, and stops cleanly on shutdown.

use std::net::SocketAddr;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::PostParams;
use olm_rs::api::operator_group::OperatorGroup;
use olm_rs::controller::{self, RunOptions};
use olm_rs::reconcile::ControllerOptions;
use olm_rs::sandbox::{ApiServer, ApiServerOptions};

fn free_addr() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("local addr")
}

fn options(probe_addr: SocketAddr) -> RunOptions {
    RunOptions {
        probe_addr,
        controller: ControllerOptions::default(),
        leader_election: None,
        packages: None,
    }
}

#[tokio::test]
async fn waits_for_missing_crds_naming_each_then_starts_when_they_are_served() {
    let api = ApiServer::new();
    let running = Running::start(&api);

    // No CRD yet: the process stays up and /readyz names every CRD it waits for.
    let url = running.readyz_url();
    let (status, body) = wait_for_readyz(&url, |status, body| {
        status == 503 && body.contains("waiting for the CRDs")
    })
    .await;
    assert_eq!(status, 503, "{body}");
    for crd in [
        "clusterserviceversions.operators.coreos.com",
        "operatorgroups.operators.coreos.com",
        "subscriptions.operators.coreos.com",
        "installplans.operators.coreos.com",
        "catalogsources.operators.coreos.com",
        "operatorconditions.operators.coreos.com",
    ] {
        assert!(body.contains(crd), "{crd} not named in: {body}");
    }
    assert!(body.contains("olm-rs crds"), "{body}");
    assert!(!running.is_finished(), "the controller must wait, not exit");

    install_crds(&api).await;
    let (status, body) = wait_for_readyz(&url, |status, _| status == 200).await;
    assert_eq!(status, 200, "never ready once the CRDs were served: {body}");

    running.stop().await;
}

/// `kubectl apply --server-side -f crds/` and `olm-rs run` at once: the group is listed while
/// its versions still answer 404, as on a real API server establishing the CRDs. The
/// controller waits and comes up (it used to exit with "cannot reach … 404 page not found").
#[tokio::test]
async fn starts_when_crds_are_still_being_established() {
    let api = ApiServer::with_options(ApiServerOptions {
        crd_establish_delay: Duration::from_millis(1500),
        ..ApiServerOptions::default()
    });
    install_crds(&api).await;
    let versions = api
        .client()
        .list_api_group_resources("operators.coreos.com/v1alpha1")
        .await;
    assert!(
        versions.is_err(),
        "the embedded API must answer 404 while establishing, got {versions:?}"
    );

    let running = Running::start(&api);
    let url = running.readyz_url();
    let (status, body) = wait_for_readyz(&url, |status, _| status == 200).await;
    if running.is_finished() {
        let outcome = running.task.await.expect("controller task did not panic");
        panic!("controller stopped while the CRDs were being established: {outcome:?}");
    }
    assert_eq!(status, 200, "never ready: {body}");

    // It works, too: an OperatorGroup gets its status from the running controller.
    let groups: Api<OperatorGroup> = Api::namespaced(api.client(), "default");
    groups
        .create(&PostParams::default(), &operator_group("og"))
        .await
        .expect("OperatorGroup created");
    wait_for_group_status(&groups, "og").await;

    running.stop().await;
}

/// A CRD deleted and created again while the controller runs: its watches recover and the
/// controller serves the new objects, without a restart.
#[tokio::test]
async fn watches_recover_when_a_crd_is_deleted_and_created_again() {
    let api = ApiServer::new();
    install_crds(&api).await;
    let running = Running::start(&api);
    let url = running.readyz_url();
    let (status, body) = wait_for_readyz(&url, |status, _| status == 200).await;
    assert_eq!(status, 200, "never ready: {body}");

    let groups: Api<OperatorGroup> = Api::namespaced(api.client(), "default");
    groups
        .create(&PostParams::default(), &operator_group("before"))
        .await
        .expect("OperatorGroup created");
    wait_for_group_status(&groups, "before").await;

    let crds: Api<CustomResourceDefinition> = Api::all(api.client());
    let crd = crds
        .get("operatorgroups.operators.coreos.com")
        .await
        .expect("the OperatorGroup CRD exists");
    crds.delete("operatorgroups.operators.coreos.com", &Default::default())
        .await
        .expect("CRD deleted");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while crds
        .get_opt("operatorgroups.operators.coreos.com")
        .await
        .expect("get CRD")
        .is_some()
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the CRD was never removed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut again = crd.clone();
    again.metadata = kube::api::ObjectMeta {
        name: crd.metadata.name.clone(),
        ..Default::default()
    };
    again.status = None;
    crds.create(&PostParams::default(), &again)
        .await
        .expect("CRD created again");

    groups
        .create(&PostParams::default(), &operator_group("after"))
        .await
        .expect("OperatorGroup created after the CRD came back");
    wait_for_group_status(&groups, "after").await;
    assert!(!running.is_finished(), "the controller must keep running");

    running.stop().await;
}

#[tokio::test]
async fn becomes_ready_with_crds_and_stops_on_shutdown() {
    let api = ApiServer::new();
    install_crds(&api).await;

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

/// `olm-rs run` in a task against `api`, with its probe address and a way to stop it.
struct Running {
    probe_addr: SocketAddr,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<(), controller::RunError>>,
}

impl Running {
    fn start(api: &ApiServer) -> Self {
        let probe_addr = free_addr();
        let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(controller::run(
            api.client(),
            options(probe_addr),
            async move {
                let _ = stop_rx.await;
            },
        ));
        Running {
            probe_addr,
            stop,
            task,
        }
    }

    fn readyz_url(&self) -> String {
        format!("http://{}/readyz", self.probe_addr)
    }

    fn is_finished(&self) -> bool {
        self.task.is_finished()
    }

    /// Stops the controller and checks it ends cleanly within 10 s.
    async fn stop(self) {
        self.stop.send(()).expect("controller still running");
        let outcome = tokio::time::timeout(Duration::from_secs(10), self.task)
            .await
            .expect("controller stops within 10 s")
            .expect("controller task did not panic");
        assert!(outcome.is_ok(), "{outcome:?}");
    }
}

async fn install_crds(api: &ApiServer) {
    let crds: Api<CustomResourceDefinition> = Api::all(api.client());
    for crd in olm_rs::api::crd::all().expect("CRDs generate") {
        crds.create(&PostParams::default(), &crd)
            .await
            .expect("CRD accepted");
    }
}

fn operator_group(name: &str) -> OperatorGroup {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "operators.coreos.com/v1",
        "kind": "OperatorGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {},
    }))
    .expect("valid OperatorGroup")
}

/// Waits until the controller has written the OperatorGroup's `status.namespaces`.
async fn wait_for_group_status(groups: &Api<OperatorGroup>, name: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let group = groups.get(name).await.expect("get OperatorGroup");
        if group
            .status
            .as_ref()
            .and_then(|s| s.namespaces.as_ref())
            .is_some()
        {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "OperatorGroup {name} never got a status: {group:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Polls `/readyz` until `done(status, body)` or 20 s; the last answer.
async fn wait_for_readyz(url: &str, done: impl Fn(u16, &str) -> bool) -> (u16, String) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let mut last = (0, "no answer".to_owned());
    while tokio::time::Instant::now() < deadline {
        if let Some((status, body)) = http_get(url).await {
            if done(status, &body) {
                return (status, body);
            }
            last = (status, body);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    last
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

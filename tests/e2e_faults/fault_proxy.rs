//! F8's proxy (issue #36 item 4): a TLS proxy on the node's bridge between the controller pods
//! and the real API server, answering a share of their requests with a transient failure —
//! 429, 500 `etcdserver: request timed out`, 504, or the connection dropped
//! (`injected_faults`) — and passing every other request through unchanged, the pods' own
//! service-account tokens included, so the API server authorizes and audits each pod as itself.
//! Watches pass untouched (tests/injected_faults).
//!
//! It serves the API server's own certificate, which names the bridge's address, so the pods
//! trust it with the CA they already hold; they are sent to it by `KUBERNETES_SERVICE_HOST` and
//! `KUBERNETES_SERVICE_PORT` in the Deployment (in-cluster configuration reads those first).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use hyper::body::Incoming;
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, Patch, PatchParams};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::chart_install::{self, NAMESPACE};
use crate::injected_faults::{Injected, is_watch, splitmix};
use crate::real_control_plane::ControlPlane;
use crate::real_control_plane::chart;
use crate::real_control_plane::real_node::NODE_IP;

/// One request in this many (not watches) fails.
const ONE_IN: u64 = 7;
const ROLLOUT: Duration = Duration::from_secs(180);

/// What the proxy saw.
#[derive(Debug, Default)]
pub struct Counts {
    /// Requests other than watches.
    pub requests: AtomicU64,
    /// Failures injected, by `Injected::nth`'s order: 429, 500, 504, dropped.
    pub injected: [AtomicU64; 4],
}

/// F8's figures: requests seen, failures injected by kind.
#[derive(Debug, Clone, Copy, Default)]
pub struct Injections {
    pub requests: u64,
    pub too_many: u64,
    pub internal: u64,
    pub timeout: u64,
    pub dropped: u64,
}

impl Injections {
    pub fn total(&self) -> u64 {
        self.too_many + self.internal + self.timeout + self.dropped
    }
}

/// The running proxy; the controller pods use it until [`FaultProxy::remove`].
pub struct FaultProxy {
    counts: Arc<Counts>,
    task: tokio::task::JoinHandle<()>,
}

type Upstream = HttpClient<hyper_rustls::HttpsConnector<HttpConnector>, Incoming>;

impl FaultProxy {
    /// Starts the proxy on the bridge and rolls the controller pods onto it: both Ready again
    /// and one leading.
    pub async fn install(plane: &ControlPlane) -> anyhow::Result<Self> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let certs = CertificateDer::pem_file_iter(&plane.pki.serving_cert)
            .context("reading the API server's certificate")?
            .collect::<Result<Vec<_>, _>>()?;
        let key = PrivateKeyDer::from_pem_file(&plane.pki.serving_key)
            .context("reading the API server's key")?;
        let mut server = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(certs, key)?;
        // HTTP/1.1 only, as the upstream side speaks it: nothing to translate between the two.
        server.alpn_protocols = vec![b"http/1.1".to_vec()];
        let mut roots = rustls::RootCertStore::empty();
        for ca in CertificateDer::pem_slice_iter(plane.pki.ca_pem.as_bytes()) {
            roots.add(ca?)?;
        }
        let client = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(client)
            .https_only()
            .enable_http1()
            .build();
        let upstream: Upstream = HttpClient::builder(TokioExecutor::new()).build(connector);
        let listener = tokio::net::TcpListener::bind((NODE_IP, 0)).await?;
        let port = listener.local_addr()?.port();
        let counts = Arc::new(Counts::default());
        let task = tokio::spawn(serve(
            listener,
            tokio_rustls::TlsAcceptor::from(Arc::new(server)),
            Arc::new(upstream),
            plane.url.clone(),
            counts.clone(),
        ));
        let proxy = Self { counts, task };
        route_pods(plane, Some(port)).await?;
        println!(
            "e2e-faults:   controller pods use the fault proxy {NODE_IP}:{port} (1 request in {ONE_IN} fails)"
        );
        Ok(proxy)
    }

    /// Rolls the controller pods back onto the API server itself, stops the proxy, and returns
    /// what it injected.
    pub async fn remove(self, plane: &ControlPlane) -> anyhow::Result<Injections> {
        let c = &self.counts;
        let injections = Injections {
            requests: c.requests.load(Ordering::Relaxed),
            too_many: c.injected[0].load(Ordering::Relaxed),
            internal: c.injected[1].load(Ordering::Relaxed),
            timeout: c.injected[2].load(Ordering::Relaxed),
            dropped: c.injected[3].load(Ordering::Relaxed),
        };
        route_pods(plane, None).await?;
        self.task.abort();
        Ok(injections)
    }
}

/// Accepts connections until aborted; each is served on a task of its own.
async fn serve(
    listener: tokio::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    upstream: Arc<Upstream>,
    url: String,
    counts: Arc<Counts>,
) {
    let seen = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            continue;
        };
        let (acceptor, upstream, url, counts) = (
            acceptor.clone(),
            upstream.clone(),
            url.clone(),
            counts.clone(),
        );
        let (seen, failed) = (seen.clone(), failed.clone());
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(tcp).await else {
                return;
            };
            let service = hyper::service::service_fn(move |request| {
                let n = seen.fetch_add(1, Ordering::Relaxed);
                let (upstream, url, counts, failed) = (
                    upstream.clone(),
                    url.clone(),
                    counts.clone(),
                    failed.clone(),
                );
                answer(request, n, upstream, url, counts, failed)
            });
            // A dropped connection is the service's error: hyper closes the connection.
            let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(tls), service)
                .await;
        });
    }
}

/// A failure for the `n`-th request when its turn came, else the API server's own answer.
async fn answer(
    request: http::Request<Incoming>,
    n: u64,
    upstream: Arc<Upstream>,
    url: String,
    counts: Arc<Counts>,
    failed: Arc<AtomicU64>,
) -> anyhow::Result<http::Response<axum::body::Body>> {
    if !is_watch(request.uri().query()) {
        counts.requests.fetch_add(1, Ordering::Relaxed);
        if splitmix(n).is_multiple_of(ONE_IN) {
            let nth = failed.fetch_add(1, Ordering::Relaxed);
            counts.injected[(nth % 4) as usize].fetch_add(1, Ordering::Relaxed);
            return match Injected::nth(nth) {
                Injected::Answer {
                    code,
                    reason,
                    message,
                } => Ok(http::Response::builder()
                    .status(code)
                    .header("content-type", "application/json")
                    .body(axum::body::Body::from(Injected::body(
                        code, reason, message,
                    )))?),
                Injected::Dropped => Err(anyhow::anyhow!("connection dropped by the fault proxy")),
            };
        }
    }
    let (mut parts, body) = request.into_parts();
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    parts.uri = format!("{url}{path}").parse()?;
    parts.version = http::Version::HTTP_11;
    parts.headers.remove(http::header::HOST);
    let response = upstream
        .request(http::Request::from_parts(parts, body))
        .await?;
    Ok(response.map(axum::body::Body::new))
}

/// Points the controller Deployment's pods at the proxy on `port` (`None`: back at the API
/// server), and waits until the rollout is done and one of the new pods leads.
async fn route_pods(plane: &ControlPlane, port: Option<u16>) -> anyhow::Result<()> {
    let deployments: Api<Deployment> = Api::namespaced(plane.client.clone(), NAMESPACE);
    let deployment = deployments.get(chart::NAME).await?;
    let container = deployment
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|s| s.containers.first())
        .map(|c| c.name.clone())
        .context("the controller Deployment has no container")?;
    let env = match port {
        Some(port) => serde_json::json!([
            {"name": "KUBERNETES_SERVICE_HOST", "value": NODE_IP},
            {"name": "KUBERNETES_SERVICE_PORT", "value": port.to_string()},
        ]),
        None => serde_json::json!([
            {"name": "KUBERNETES_SERVICE_HOST", "$patch": "delete"},
            {"name": "KUBERNETES_SERVICE_PORT", "$patch": "delete"},
        ]),
    };
    let patch = serde_json::json!({"spec": {"template": {"spec": {
        "containers": [{"name": container, "env": env}]}}}});
    let patched = deployments
        .patch(
            chart::NAME,
            &PatchParams::default(),
            &Patch::Strategic(patch),
        )
        .await?;
    let generation = patched.metadata.generation.unwrap_or_default();
    let started = std::time::Instant::now();
    loop {
        let d = deployments.get(chart::NAME).await?;
        let status = d.status.unwrap_or_default();
        let done = status.observed_generation == Some(generation)
            && status.updated_replicas == Some(2)
            && status.ready_replicas == Some(2)
            && status.replicas == Some(2);
        if done {
            break;
        }
        anyhow::ensure!(
            started.elapsed() < ROLLOUT,
            "the controller's rollout {} the fault proxy did not finish in {}s: {status:?}\n{}",
            if port.is_some() { "onto" } else { "off" },
            ROLLOUT.as_secs(),
            chart_install::describe_pods(&plane.client, 15).await
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let ready = chart_install::wait_pods_ready(&plane.client, 2, ROLLOUT).await?;
    chart_install::wait_leader(&plane.client, &ready, ROLLOUT).await?;
    Ok(())
}

//! The test operator (tests/test_operator/) as a process: its health endpoint, its validating
//! and conversion webhooks and its aggregated API, called over TLS with a test CA whose
//! certificates sit in directories laid out as the kubelet mounts a Secret (`..data` symlink);
//! `--never-ready` and `--crash-after`; and a rotation — new files, new CA — served without a
//! restart.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_olm-rs-test-operator");
const GROUP: &str = "api.testop.olm-rs.dev";

fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    l.local_addr().expect("local addr").port()
}

/// A CA (PEM) and a serving certificate and key for 127.0.0.1 signed by it.
fn ca_and_serving_cert(name: &str) -> (String, String, String) {
    let ca_key = KeyPair::generate().expect("ca key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("ca params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    let ca = ca_params.self_signed(&ca_key).expect("ca cert");
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().expect("key");
    let cert = CertificateParams::new(vec!["127.0.0.1".to_string()])
        .expect("params")
        .signed_by(&key, &issuer)
        .expect("cert");
    (ca.pem(), cert.pem(), key.serialize_pem())
}

/// Writes `files` into `dir` as the kubelet writes a Secret volume: a fresh timestamped
/// directory, `..data` switched to it by a rename, and each file a symlink through `..data`.
fn write_secret_volume(dir: &Path, generation: u32, files: &[(&str, &str)]) {
    std::fs::create_dir_all(dir).unwrap();
    let payload = format!("..generation_{generation}");
    std::fs::create_dir(dir.join(&payload)).unwrap();
    for (name, content) in files {
        std::fs::write(dir.join(&payload).join(name), content).unwrap();
    }
    let tmp = dir.join("..data_tmp");
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(&payload, &tmp).unwrap();
    std::fs::rename(&tmp, dir.join("..data")).unwrap();
    for (name, _) in files {
        let link = dir.join(name);
        if std::fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(Path::new("..data").join(name), &link).unwrap();
        }
    }
}

/// The certificate in both places OLM mounts it (docs/certificates.md §5).
fn mount_cert(root: &Path, generation: u32, cert: &str, key: &str) {
    write_secret_volume(
        &root.join("webhook"),
        generation,
        &[("tls.crt", cert), ("tls.key", key)],
    );
    write_secret_volume(
        &root.join("apiserver"),
        generation,
        &[("apiserver.crt", cert), ("apiserver.key", key)],
    );
}

struct Operator {
    child: Child,
    health: u16,
    webhook: u16,
    apiserver: u16,
}

impl Operator {
    fn start(certs: &Path, extra: &[&str]) -> Operator {
        let [health, webhook, apiserver] = [free_port(), free_port(), free_port()];
        let child = Command::new(BIN)
            .args(["--bind-address", "127.0.0.1"])
            .args(["--health-port", &health.to_string()])
            .args(["--webhook-port", &webhook.to_string()])
            .args(["--apiserver-port", &apiserver.to_string()])
            .arg("--webhook-cert-dir")
            .arg(certs.join("webhook"))
            .arg("--apiserver-cert-dir")
            .arg(certs.join("apiserver"))
            .args(["--operator-version", "1.2.3", "--report-name", "pod-a"])
            .args(extra)
            .env_remove("HOSTNAME")
            .stdin(Stdio::null())
            .spawn()
            .expect("start olm-rs-test-operator");
        Operator {
            child,
            health,
            webhook,
            apiserver,
        }
    }

    /// Waits until the health server answers (any status).
    async fn wait_listening(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("olm-rs-test-operator exited early: {status}");
            }
            if call(None, "GET", &self.health_url("/livez"), None)
                .await
                .is_ok()
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "olm-rs-test-operator did not listen within 60 s"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn health_url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.health)
    }

    fn webhook_url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.webhook)
    }

    fn api_url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.apiserver)
    }

    /// Waits for the process to exit, at most `timeout`.
    fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One request; `ca` (PEM) is the only root trusted for `https://` URLs.
async fn call(
    ca: Option<&str>,
    method: &str,
    url: &str,
    body: Option<Value>,
) -> Result<(u16, Value), String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut roots = rustls::RootCertStore::empty();
    if let Some(ca) = ca {
        use rustls::pki_types::CertificateDer;
        use rustls::pki_types::pem::PemObject as _;
        for cert in CertificateDer::pem_slice_iter(ca.as_bytes()) {
            roots.add(cert.unwrap()).unwrap();
        }
    }
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .enable_http2()
        .build();
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build(https);
    let request = hyper::Request::builder()
        .method(method)
        .uri(url)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(
            body.map(|b| b.to_string()).unwrap_or_default(),
        )))
        .unwrap();
    let response = tokio::time::timeout(Duration::from_secs(30), client.request(request))
        .await
        .map_err(|_| format!("{url}: no answer within 30 s"))?
        .map_err(|e| format!("{url}: {e:?}"))?;
    let status = response.status().as_u16();
    let bytes = response
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    let value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    Ok((status, value))
}

async fn ok(ca: &str, method: &str, url: &str, body: Option<Value>) -> Value {
    let (status, value) = call(Some(ca), method, url, body)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(status, 200, "{url}: {value}");
    value
}

fn admission_review(uid: &str, object: Value) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "testop.olm-rs.dev", "version": "v1", "kind": "Gadget"},
            "operation": "CREATE",
            "object": object,
        },
    })
}

fn conversion_review(uid: &str, desired: &str, objects: Vec<Value>) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": uid, "desiredAPIVersion": desired, "objects": objects},
    })
}

fn gadget(version: &str, spec: Value) -> Value {
    json!({
        "apiVersion": format!("testop.olm-rs.dev/{version}"),
        "kind": "Gadget",
        "metadata": {"name": "g1", "namespace": "ns", "uid": "u-1", "labels": {"a": "b"}},
        "spec": spec,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_and_aggregated_api_over_tls_and_a_rotation() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert, key) = ca_and_serving_cert("testop CA 1");
    mount_cert(dir.path(), 1, &cert, &key);
    let mut op = Operator::start(dir.path(), &[]);
    op.wait_listening().await;

    // Health, ready.
    for path in ["/livez", "/healthz", "/readyz"] {
        let (status, _) = call(None, "GET", &op.health_url(path), None).await.unwrap();
        assert_eq!(status, 200, "{path}");
    }

    // The validating webhook: spec.deny true is denied with a message, anything else allowed.
    let allowed = ok(
        &ca,
        "POST",
        &op.webhook_url("/validate"),
        Some(admission_review(
            "uid-1",
            gadget("v1", json!({"replicas": 1})),
        )),
    )
    .await;
    assert_eq!(allowed["kind"], "AdmissionReview");
    assert_eq!(allowed["response"]["uid"], "uid-1");
    assert_eq!(allowed["response"]["allowed"], true, "{allowed}");
    let denied = ok(
        &ca,
        "POST",
        &op.webhook_url("/validate"),
        Some(admission_review(
            "uid-2",
            gadget("v1", json!({"deny": true})),
        )),
    )
    .await;
    assert_eq!(denied["response"]["uid"], "uid-2");
    assert_eq!(denied["response"]["allowed"], false, "{denied}");
    assert_eq!(denied["response"]["status"]["code"], 403);
    let message = denied["response"]["status"]["message"].as_str().unwrap();
    assert!(
        message.contains("g1") && message.contains("spec.deny"),
        "{message}"
    );
    let not_true = ok(
        &ca,
        "POST",
        &op.webhook_url("/validate"),
        Some(admission_review(
            "uid-3",
            gadget("v1", json!({"deny": "yes"})),
        )),
    )
    .await;
    assert_eq!(
        not_true["response"]["allowed"], true,
        "only a boolean true denies"
    );

    // The conversion webhook, both ways, metadata kept.
    let up = ok(
        &ca,
        "POST",
        &op.webhook_url("/convert"),
        Some(conversion_review(
            "c-1",
            "testop.olm-rs.dev/v1",
            vec![gadget("v1alpha1", json!({"size": 3, "colour": "red"}))],
        )),
    )
    .await;
    assert_eq!(up["kind"], "ConversionReview");
    assert_eq!(up["response"]["uid"], "c-1");
    assert_eq!(up["response"]["result"]["status"], "Success", "{up}");
    let converted = &up["response"]["convertedObjects"][0];
    assert_eq!(converted["apiVersion"], "testop.olm-rs.dev/v1");
    assert_eq!(converted["spec"], json!({"replicas": 3, "colour": "red"}));
    assert_eq!(converted["metadata"], gadget("v1", json!({}))["metadata"]);
    let down = ok(
        &ca,
        "POST",
        &op.webhook_url("/convert"),
        Some(conversion_review(
            "c-2",
            "testop.olm-rs.dev/v1alpha1",
            vec![gadget("v1", json!({"replicas": 5}))],
        )),
    )
    .await;
    let converted = &down["response"]["convertedObjects"][0];
    assert_eq!(converted["apiVersion"], "testop.olm-rs.dev/v1alpha1");
    assert_eq!(converted["spec"], json!({"size": 5}));
    let unknown = ok(
        &ca,
        "POST",
        &op.webhook_url("/convert"),
        Some(conversion_review(
            "c-3",
            "testop.olm-rs.dev/v2",
            vec![gadget("v1", json!({}))],
        )),
    )
    .await;
    assert_eq!(unknown["response"]["result"]["status"], "Failure");

    // The aggregated API: discovery, list, get, and a 404 Status for anything else.
    let groups = ok(&ca, "GET", &op.api_url("/apis"), None).await;
    assert_eq!(groups["kind"], "APIGroupList");
    assert_eq!(groups["groups"][0]["name"], GROUP);
    let group = ok(&ca, "GET", &op.api_url(&format!("/apis/{GROUP}")), None).await;
    assert_eq!(group["kind"], "APIGroup");
    assert_eq!(
        group["preferredVersion"]["groupVersion"],
        format!("{GROUP}/v1")
    );
    let resources = ok(&ca, "GET", &op.api_url(&format!("/apis/{GROUP}/v1")), None).await;
    assert_eq!(resources["kind"], "APIResourceList");
    assert_eq!(resources["groupVersion"], format!("{GROUP}/v1"));
    assert_eq!(resources["resources"][0]["name"], "reports");
    assert_eq!(resources["resources"][0]["kind"], "Report");
    let list = ok(
        &ca,
        "GET",
        &op.api_url(&format!("/apis/{GROUP}/v1/reports")),
        None,
    )
    .await;
    assert_eq!(list["kind"], "ReportList");
    assert_eq!(list["items"][0]["metadata"]["name"], "pod-a");
    assert_eq!(list["items"][0]["spec"]["operatorVersion"], "1.2.3");
    let one = ok(
        &ca,
        "GET",
        &op.api_url(&format!("/apis/{GROUP}/v1/reports/pod-a")),
        None,
    )
    .await;
    assert_eq!(one["kind"], "Report");
    let (status, missing) = call(
        Some(&ca),
        "GET",
        &op.api_url(&format!("/apis/{GROUP}/v1/reports/pod-b")),
        None,
    )
    .await
    .unwrap();
    assert_eq!((status, &missing["reason"]), (404, &json!("NotFound")));
    ok(&ca, "GET", &op.api_url("/healthz"), None).await;

    // A client that does not trust the CA is refused: TLS really is on that certificate.
    let (other_ca, _, _) = ca_and_serving_cert("some other CA");
    assert!(
        call(Some(&other_ca), "GET", &op.api_url("/apis"), None)
            .await
            .is_err()
    );

    // Rotation: a new CA and certificate replace the files; both servers serve them without a
    // restart, and the old CA no longer verifies them.
    let (ca2, cert2, key2) = ca_and_serving_cert("testop CA 2");
    mount_cert(dir.path(), 2, &cert2, &key2);
    ok(&ca2, "GET", &op.api_url("/apis"), None).await;
    let after = ok(
        &ca2,
        "POST",
        &op.webhook_url("/validate"),
        Some(admission_review(
            "uid-4",
            gadget("v1", json!({"deny": true})),
        )),
    )
    .await;
    assert_eq!(after["response"]["allowed"], false);
    for url in [op.api_url("/apis"), op.webhook_url("/validate")] {
        assert!(
            call(Some(&ca), "GET", &url, None).await.is_err(),
            "{url} still served the certificate of the old CA"
        );
    }
    assert!(op.child.try_wait().unwrap().is_none(), "it kept running");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_ready_answers_503_but_lives() {
    let dir = tempfile::tempdir().unwrap();
    let mut op = Operator::start(dir.path(), &["--never-ready"]);
    op.wait_listening().await;
    for path in ["/healthz", "/readyz"] {
        let (status, body) = call(None, "GET", &op.health_url(path), None).await.unwrap();
        assert_eq!(status, 503, "{path}: {body}");
        assert!(body.as_str().unwrap().contains("never-ready"), "{body}");
    }
    let (status, _) = call(None, "GET", &op.health_url("/livez"), None)
        .await
        .unwrap();
    assert_eq!(status, 200);
    // Without certificate files the HTTPS servers refuse the handshake but the process lives.
    assert!(
        call(Some("no CA"), "GET", &op.api_url("/apis"), None)
            .await
            .is_err()
    );
    assert!(op.child.try_wait().unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_after_exits_with_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let mut op = Operator::start(dir.path(), &["--crash-after", "2s"]);
    // Ready until it crashes (on a machine slow enough, the first call may come too late).
    if let Ok((status, body)) = call(None, "GET", &op.health_url("/healthz"), None).await {
        assert_eq!(status, 200, "{body}");
    }
    let exit = op
        .wait_exit(Duration::from_secs(60))
        .expect("it exits within 60 s");
    assert_eq!(exit.code(), Some(1), "{exit}");
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "exited after {:?}, before the 2 s asked",
        started.elapsed()
    );
}

#[test]
fn a_bad_duration_is_refused() {
    let out = Command::new(BIN)
        .args(["--crash-after", "soon"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not a duration"), "{stderr}");
}

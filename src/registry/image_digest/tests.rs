//! The HTTP resolver against a tiny in-process registry on a real socket (no outside calls).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{HeaderMap as AxumHeaders, StatusCode as AxumStatus};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use sha2::Digest as _;

use super::http::{Challenge, basic_header, parse_challenge};
use super::*;

const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
const MANIFEST: &str = r#"{"schemaVersion":2,"manifests":[]}"#;

#[derive(Clone)]
struct Registry {
    addr: SocketAddr,
    /// `Some((user, pass))`: the token endpoint demands these; `None`: anonymous tokens.
    account: Option<(&'static str, &'static str)>,
    send_digest_header: bool,
    token_requests: Arc<AtomicUsize>,
}

async fn token(
    State(reg): State<Registry>,
    headers: AxumHeaders,
    Query(q): Query<BTreeMap<String, String>>,
) -> Response {
    reg.token_requests.fetch_add(1, Ordering::SeqCst);
    if q.get("scope").map(String::as_str) != Some("repository:org/catalog:pull")
        || q.get("service").map(String::as_str) != Some("test-registry")
    {
        return (AxumStatus::BAD_REQUEST, "bad scope").into_response();
    }
    if let Some((user, pass)) = reg.account {
        let expected = basic_header(&RegistryCredential {
            username: user.into(),
            password: pass.into(),
        });
        let given = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        if given != expected {
            return (AxumStatus::UNAUTHORIZED, "no").into_response();
        }
    }
    r#"{"token":"tok-123"}"#.into_response()
}

async fn manifest(State(reg): State<Registry>, headers: AxumHeaders) -> Response {
    let authorized =
        headers.get("authorization").and_then(|v| v.to_str().ok()) == Some("Bearer tok-123");
    if !authorized {
        let challenge = format!(
            "Bearer realm=\"http://{}/token\",service=\"test-registry\",scope=\"repository:org/catalog:pull\"",
            reg.addr
        );
        return (
            AxumStatus::UNAUTHORIZED,
            [("www-authenticate", challenge)],
            "",
        )
            .into_response();
    }
    let accept = headers
        .get("accept")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    assert!(accept.contains("application/vnd.oci.image.index.v1+json"));
    if reg.send_digest_header {
        ([("docker-content-digest", DIGEST)], MANIFEST).into_response()
    } else {
        MANIFEST.into_response()
    }
}

async fn start(
    account: Option<(&'static str, &'static str)>,
    send_digest_header: bool,
) -> Registry {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let reg = Registry {
        addr: listener.local_addr().unwrap(),
        account,
        send_digest_header,
        token_requests: Arc::new(AtomicUsize::new(0)),
    };
    let app = Router::new()
        .route("/token", get(token))
        .route("/v2/org/catalog/manifests/{tag}", get(manifest))
        .with_state(reg.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });
    reg
}

fn resolver(reg: &Registry) -> HttpDigestResolver {
    HttpDigestResolver::new()
        .unwrap()
        .with_plain_http_hosts([reg.addr.to_string()])
        .with_timeout(Duration::from_secs(5))
}

#[tokio::test]
async fn anonymous_token_then_digest_header() {
    let reg = start(None, true).await;
    let image = format!("{}/org/catalog:latest", reg.addr);
    let digest = resolver(&reg)
        .resolve(&image, &RegistryCredentials::new())
        .await
        .unwrap();
    assert_eq!(digest, DIGEST);
    assert_eq!(reg.token_requests.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn digest_is_hash_of_manifest_when_header_missing() {
    let reg = start(None, false).await;
    let image = format!("{}/org/catalog:v1", reg.addr);
    let digest = resolver(&reg)
        .resolve(&image, &RegistryCredentials::new())
        .await
        .unwrap();
    assert_eq!(
        digest,
        format!("sha256:{:x}", sha2::Sha256::digest(MANIFEST.as_bytes()))
    );
}

#[tokio::test]
async fn pull_secret_credentials_are_used_for_the_token() {
    let reg = start(Some(("robot", "s3cret")), true).await;
    let image = format!("{}/org/catalog:latest", reg.addr);
    let err = resolver(&reg)
        .resolve(&image, &RegistryCredentials::new())
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("no pull secret"), "{err}");

    let config = serde_json::json!({"auths": {
        format!("{}", reg.addr): {"auth": base64::engine::general_purpose::STANDARD.encode("robot:s3cret")}
    }});
    let creds = parse_docker_config(config.to_string().as_bytes());
    let digest = resolver(&reg).resolve(&image, &creds).await.unwrap();
    assert_eq!(digest, DIGEST);
}

#[tokio::test]
async fn pinned_digest_needs_no_registry() {
    let image = format!("unreachable.invalid/org/catalog@{DIGEST}");
    let digest = HttpDigestResolver::new()
        .unwrap()
        .resolve(&image, &RegistryCredentials::new())
        .await
        .unwrap();
    assert_eq!(digest, DIGEST);
}

#[tokio::test]
async fn unreachable_registry_is_named_in_the_error() {
    // Port 9 on loopback: nothing listens there.
    let image = "127.0.0.1:9/org/catalog:latest";
    let err = HttpDigestResolver::new()
        .unwrap()
        .with_plain_http_hosts(["127.0.0.1:9".to_owned()])
        .resolve(image, &RegistryCredentials::new())
        .await
        .unwrap_err();
    assert!(matches!(err, DigestError::Unreachable { .. }), "{err}");
    assert!(err.to_string().contains("127.0.0.1:9"), "{err}");
}

#[test]
fn docker_config_entries_by_host() {
    let json = serde_json::json!({"auths": {
        "https://index.docker.io/v1/": {"auth": base64::engine::general_purpose::STANDARD.encode("me:pw")},
        "quay.io": {"username": "bot", "password": "tok"},
        "broken.io": {"auth": "%%%"},
        "empty.io": {}
    }});
    let creds = parse_docker_config(json.to_string().as_bytes());
    assert_eq!(creds.len(), 2);
    assert_eq!(creds["docker.io"].username, "me");
    assert_eq!(creds["docker.io"].password, "pw");
    assert_eq!(creds["quay.io"].password, "tok");
    assert!(parse_docker_config(b"not json").is_empty());
    assert!(!format!("{:?}", creds["quay.io"]).contains("tok"));
}

#[test]
fn bearer_challenge_parameters() {
    let Challenge::Bearer(p) = parse_challenge(
        r#"Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/busybox:pull""#,
    ) else {
        panic!("not bearer");
    };
    assert_eq!(p["realm"], "https://auth.docker.io/token");
    assert_eq!(p["service"], "registry.docker.io");
    assert_eq!(p["scope"], "repository:library/busybox:pull");
    assert!(matches!(
        parse_challenge("Basic realm=\"x\""),
        Challenge::Basic
    ));
}

#[tokio::test]
async fn fake_resolver_answers_from_its_table() {
    let fake = FakeDigestResolver::new();
    let none = RegistryCredentials::new();
    assert!(fake.resolve("a:1", &none).await.is_err());
    fake.set("a:1", "sha256:1");
    assert_eq!(fake.resolve("a:1", &none).await.unwrap(), "sha256:1");
    fake.fail("a:1", "down");
    assert!(
        fake.resolve("a:1", &none)
            .await
            .unwrap_err()
            .to_string()
            .contains("down")
    );
    assert_eq!(fake.calls(), 3);
}

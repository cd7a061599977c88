//! The bearer-token flow of public registries (quay.io, ghcr.io, Docker Hub): the registry
//! answers 401 with `WWW-Authenticate: Bearer realm=…,service=…,scope=…`, the client asks the
//! realm for a token (anonymously, or with a login) and presents it. Here the realm is a small
//! token service started by the test, and docker-registry verifies its ES256 JWTs against the
//! certificate it was configured with (`auth.token.rootcertbundle`). Anonymous callers may pull
//! every repository except `private/…`; [`USER`]/[`PASSWORD`] may pull and push everything.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{RawQuery, State};
use axum::http::HeaderMap;
use axum::routing::get;
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair, SigningKey};
use serde_json::{Value, json};

use super::{PASSWORD, USER};

pub const SERVICE: &str = "olm-rs-test-registry";
pub const ISSUER: &str = "olm-rs-test-token-issuer";

struct Signer {
    key: KeyPair,
    cert_der: Vec<u8>,
}

/// A running token service; stops with the test's runtime.
pub struct TokenServer {
    pub addr: SocketAddr,
    /// The certificate the registry trusts for tokens (PEM).
    pub cert_pem: String,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TokenServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TokenServer {
    /// Starts on a free port (must be called inside a tokio runtime).
    pub fn start() -> TokenServer {
        let key = KeyPair::generate().expect("P-256 key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, ISSUER);
        params.distinguished_name = dn;
        let cert = params.self_signed(&key).expect("token certificate");
        let signer = Arc::new(Signer {
            cert_der: cert.der().to_vec(),
            key,
        });
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("addr");
        let listener = tokio::net::TcpListener::from_std(listener).expect("tokio listener");
        let app = Router::new().route("/token", get(token)).with_state(signer);
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        TokenServer {
            addr,
            cert_pem: cert.pem(),
            task,
        }
    }

    /// The registry's `auth:` section, with the certificate written into `dir`.
    pub fn registry_config(&self, dir: &std::path::Path) -> String {
        let bundle = dir.join("token-root.pem");
        std::fs::write(&bundle, &self.cert_pem).expect("write token root");
        format!(
            "auth:\n  token:\n    realm: http://{}/token\n    service: {SERVICE}\n    issuer: {ISSUER}\n    rootcertbundle: {}\n",
            self.addr,
            bundle.display()
        )
    }
}

async fn token(
    State(signer): State<Arc<Signer>>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> axum::Json<Value> {
    let logged_in = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Basic "))
        .and_then(|b| STANDARD.decode(b).ok())
        .is_some_and(|b| b == format!("{USER}:{PASSWORD}").as_bytes());
    let mut access = Vec::new();
    for (key, value) in parse_query(query.as_deref().unwrap_or_default()) {
        if key != "scope" {
            continue;
        }
        // repository:<name>:<action,action>
        let mut parts = value.splitn(3, ':');
        let (Some("repository"), Some(name), Some(actions)) =
            (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let granted: Vec<&str> = actions
            .split(',')
            .filter(|a| logged_in || (*a == "pull" && !name.starts_with("private/")))
            .collect();
        access.push(json!({"type": "repository", "name": name, "actions": granted}));
    }
    let now = jiff::Timestamp::now().as_second();
    let claims = json!({
        "iss": ISSUER, "sub": if logged_in { USER } else { "" }, "aud": SERVICE,
        "exp": now + 300, "nbf": now - 10, "iat": now,
        "jti": format!("{now}-{}", access.len()), "access": access,
    });
    let header = json!({"typ": "JWT", "alg": "ES256", "x5c": [STANDARD.encode(&signer.cert_der)]});
    let signing_input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    let der = signer.key.sign(signing_input.as_bytes()).expect("sign");
    let jwt = format!(
        "{signing_input}.{}",
        URL_SAFE_NO_PAD.encode(jws_signature(&der))
    );
    axum::Json(json!({"token": jwt, "access_token": jwt, "expires_in": 300}))
}

/// `a=b&c=d` with percent-decoding; repeated keys kept in order.
fn parse_query(query: &str) -> Vec<(String, String)> {
    let decode = |s: &str| {
        let bytes = s.replace('+', " ").into_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok());
            if let (b'%', Some(b)) = (bytes[i], hex) {
                out.push(b);
                i += 3;
                continue;
            }
            out.push(bytes[i]);
            i += 1;
        }
        String::from_utf8_lossy(&out).into_owned()
    };
    query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (decode(k), decode(v)))
        .collect()
}

/// An ECDSA signature in DER (`SEQUENCE { INTEGER r, INTEGER s }`) as JWS wants it: r ‖ s,
/// each 32 bytes.
fn jws_signature(der: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    // 0x30 len 0x02 len r 0x02 len s (short lengths: a P-256 signature is < 128 bytes).
    let mut at = 2;
    for _ in 0..2 {
        assert_eq!(der[at], 0x02, "INTEGER");
        let len = der[at + 1] as usize;
        let int = &der[at + 2..at + 2 + len];
        let int = &int[int.len().saturating_sub(32)..];
        out.extend(std::iter::repeat_n(0, 32 - int.len()));
        out.extend_from_slice(int);
        at += 2 + len;
    }
    out
}

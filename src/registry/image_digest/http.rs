//! The resolver that asks the registry over HTTP(S): the manifest's digest from a `HEAD`, with
//! the bearer-token or basic authentication the registry demands.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use futures::future::BoxFuture;
use http::{HeaderMap, Method, Request, StatusCode, header};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use sha2::Digest as _;

use super::super::image_ref::ImageReference;
use super::{DigestError, ImageDigestResolver, RegistryCredential, RegistryCredentials};

/// Manifest media types a digest may be reported for; an index (multi-arch) is preferred so the
/// digest is the one `docker pull <tag>` records.
const MANIFEST_ACCEPT: &str = "application/vnd.oci.image.index.v1+json, \
     application/vnd.docker.distribution.manifest.list.v2+json, \
     application/vnd.oci.image.manifest.v1+json, \
     application/vnd.docker.distribution.manifest.v2+json";

/// The real resolver: HTTPS (or plain HTTP for hosts listed as insecure), anonymous bearer-token
/// auth as registries require, basic auth from pull secrets when given.
#[derive(Clone)]
pub struct HttpDigestResolver {
    client: Client<hyper_rustls::HttpsConnector<HttpConnector>, Empty<Bytes>>,
    plain_http_hosts: Arc<HashSet<String>>,
    timeout: Duration,
}

impl std::fmt::Debug for HttpDigestResolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpDigestResolver")
            .field("plain_http_hosts", &self.plain_http_hosts)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl HttpDigestResolver {
    /// Uses the system's trust store; falls back to plain HTTP only for `plain_http_hosts`.
    pub fn new() -> Result<HttpDigestResolver, std::io::Error> {
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_native_roots()?
            .https_or_http()
            .enable_http1()
            .enable_http2()
            .build();
        Ok(HttpDigestResolver {
            client: Client::builder(TokioExecutor::new()).build(https),
            plain_http_hosts: Arc::new(HashSet::new()),
            timeout: Duration::from_secs(30),
        })
    }

    /// Registries (`host:port`) spoken to over plain HTTP, like a container runtime's
    /// "insecure registries".
    pub fn with_plain_http_hosts(mut self, hosts: impl IntoIterator<Item = String>) -> Self {
        self.plain_http_hosts = Arc::new(hosts.into_iter().collect());
        self
    }

    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    async fn resolve_reference(
        &self,
        image: &str,
        credentials: &RegistryCredentials,
    ) -> Result<String, DigestError> {
        let reference = ImageReference::parse(image)?;
        if let Some(digest) = &reference.digest {
            // A pinned reference never changes: nothing to ask.
            return Ok(digest.clone());
        }
        let host = reference.api_host().to_owned();
        let scheme = if self.plain_http_hosts.contains(&host)
            || self.plain_http_hosts.contains(&reference.domain)
        {
            "http"
        } else {
            "https"
        };
        let url = format!(
            "{scheme}://{host}/v2/{}/manifests/{}",
            reference.repository,
            reference.manifest_reference()
        );
        let credential = credentials.get(&reference.domain);
        let ctx = RequestContext { image, host: &host };

        let basic = credential.map(basic_header);
        let first = self.manifest_request(&ctx, &url, basic.as_deref()).await?;
        let response = if first.status == StatusCode::UNAUTHORIZED {
            let challenge = first
                .headers
                .get(header::WWW_AUTHENTICATE)
                .and_then(|v| v.to_str().ok())
                .map(parse_challenge);
            match challenge {
                Some(Challenge::Bearer(params)) => {
                    let token = self
                        .fetch_token(&ctx, &params, &reference.repository, credential)
                        .await?;
                    let bearer = format!("Bearer {token}");
                    self.manifest_request(&ctx, &url, Some(&bearer)).await?
                }
                Some(Challenge::Basic) if basic.is_none() => {
                    return Err(ctx.unauthorized(first.status, " (no pull secret for it)"));
                }
                _ => first,
            }
        } else {
            first
        };
        match response.status {
            s if s.is_success() => {}
            s @ (StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) => {
                let hint = if credential.is_none() {
                    " (no pull secret for it)"
                } else {
                    " (check the pull secret)"
                };
                return Err(ctx.unauthorized(s, hint));
            }
            status => {
                return Err(DigestError::Status {
                    image: image.to_owned(),
                    host,
                    status,
                });
            }
        }
        if let Some(digest) = response
            .headers
            .get("docker-content-digest")
            .and_then(|v| v.to_str().ok())
        {
            return Ok(digest.to_owned());
        }
        // Some registries omit the header; the digest is then the hash of the manifest bytes.
        let bytes = match response.body {
            Some(bytes) => bytes,
            None => self
                .fetch(&ctx, Method::GET, &url, response.authorization.as_deref())
                .await?
                .body
                .unwrap_or_default(),
        };
        Ok(format!("sha256:{:x}", sha2::Sha256::digest(&bytes)))
    }

    async fn manifest_request(
        &self,
        ctx: &RequestContext<'_>,
        url: &str,
        authorization: Option<&str>,
    ) -> Result<Fetched, DigestError> {
        self.fetch(ctx, Method::HEAD, url, authorization).await
    }

    async fn fetch(
        &self,
        ctx: &RequestContext<'_>,
        method: Method,
        url: &str,
        authorization: Option<&str>,
    ) -> Result<Fetched, DigestError> {
        let mut request = Request::builder()
            .method(method.clone())
            .uri(url)
            .header(header::ACCEPT, MANIFEST_ACCEPT)
            .header(
                header::USER_AGENT,
                concat!("olm-rs/", env!("CARGO_PKG_VERSION")),
            );
        if let Some(value) = authorization {
            request = request.header(header::AUTHORIZATION, value);
        }
        let request = request
            .body(Empty::new())
            .map_err(|e| ctx.protocol(format!("cannot build request for {url}: {e}")))?;
        let response = tokio::time::timeout(self.timeout, self.client.request(request))
            .await
            .map_err(|_| ctx.unreachable(format!("no answer within {:?}", self.timeout)))?
            .map_err(|e| ctx.unreachable(error_chain(&e)))?;
        let status = response.status();
        let headers = response.headers().clone();
        let body = if method == Method::HEAD {
            None
        } else {
            let collected = tokio::time::timeout(self.timeout, response.into_body().collect())
                .await
                .map_err(|_| ctx.unreachable(format!("no answer within {:?}", self.timeout)))?
                .map_err(|e| ctx.unreachable(error_chain(&e)))?;
            Some(collected.to_bytes())
        };
        Ok(Fetched {
            status,
            headers,
            body,
            authorization: authorization.map(str::to_owned),
        })
    }

    /// The token dance of the distribution spec: GET `<realm>?service=…&scope=repository:<name>:pull`,
    /// with basic credentials when there are some, else anonymously.
    async fn fetch_token(
        &self,
        ctx: &RequestContext<'_>,
        params: &BTreeMap<String, String>,
        repository: &str,
        credential: Option<&RegistryCredential>,
    ) -> Result<String, DigestError> {
        let realm = params
            .get("realm")
            .ok_or_else(|| ctx.protocol("bearer challenge without realm".to_owned()))?;
        let mut query = Vec::new();
        if let Some(service) = params.get("service") {
            query.push(format!("service={}", url_encode(service)));
        }
        let scope = params
            .get("scope")
            .cloned()
            .unwrap_or_else(|| format!("repository:{repository}:pull"));
        query.push(format!("scope={}", url_encode(&scope)));
        let separator = if realm.contains('?') { '&' } else { '?' };
        let url = format!("{realm}{separator}{}", query.join("&"));
        let basic = credential.map(basic_header);
        let fetched = self.fetch(ctx, Method::GET, &url, basic.as_deref()).await?;
        if !fetched.status.is_success() {
            let hint = if credential.is_none() {
                " (anonymous token refused; no pull secret for it)"
            } else {
                " (token refused; check the pull secret)"
            };
            return Err(ctx.unauthorized(fetched.status, hint));
        }
        #[derive(serde::Deserialize)]
        struct TokenResponse {
            token: Option<String>,
            access_token: Option<String>,
        }
        let body = fetched.body.unwrap_or_default();
        let parsed: TokenResponse = serde_json::from_slice(&body)
            .map_err(|e| ctx.protocol(format!("token response from {realm} is not JSON: {e}")))?;
        parsed
            .token
            .or(parsed.access_token)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| ctx.protocol(format!("token response from {realm} has no token")))
    }
}

impl ImageDigestResolver for HttpDigestResolver {
    fn resolve<'a>(
        &'a self,
        image: &'a str,
        credentials: &'a RegistryCredentials,
    ) -> BoxFuture<'a, Result<String, DigestError>> {
        Box::pin(self.resolve_reference(image, credentials))
    }
}

struct Fetched {
    status: StatusCode,
    headers: HeaderMap,
    body: Option<Bytes>,
    authorization: Option<String>,
}

struct RequestContext<'a> {
    image: &'a str,
    host: &'a str,
}

impl RequestContext<'_> {
    fn unreachable(&self, message: String) -> DigestError {
        DigestError::Unreachable {
            image: self.image.to_owned(),
            host: self.host.to_owned(),
            message,
        }
    }

    fn protocol(&self, message: String) -> DigestError {
        DigestError::Protocol {
            image: self.image.to_owned(),
            host: self.host.to_owned(),
            message,
        }
    }

    fn unauthorized(&self, status: StatusCode, hint: &'static str) -> DigestError {
        DigestError::Unauthorized {
            image: self.image.to_owned(),
            host: self.host.to_owned(),
            status,
            hint,
        }
    }
}

pub(super) enum Challenge {
    Bearer(BTreeMap<String, String>),
    Basic,
    Other,
}

/// `Bearer realm="https://auth.io/token",service="reg.io",scope="repository:a/b:pull"`.
pub(super) fn parse_challenge(value: &str) -> Challenge {
    let (scheme, rest) = value.trim().split_once(' ').unwrap_or((value.trim(), ""));
    if scheme.eq_ignore_ascii_case("basic") {
        return Challenge::Basic;
    }
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Challenge::Other;
    }
    let mut params = BTreeMap::new();
    let mut rest = rest.trim();
    while !rest.is_empty() {
        let Some((key, after)) = rest.split_once('=') else {
            break;
        };
        let key = key
            .trim()
            .trim_start_matches(',')
            .trim()
            .to_ascii_lowercase();
        let (value, remaining) = if let Some(quoted) = after.strip_prefix('"') {
            match quoted.find('"') {
                Some(end) => (&quoted[..end], &quoted[end + 1..]),
                None => (quoted, ""),
            }
        } else {
            match after.find(',') {
                Some(end) => (&after[..end], &after[end..]),
                None => (after, ""),
            }
        };
        params.insert(key, value.to_owned());
        rest = remaining.trim_start_matches([',', ' ']);
    }
    Challenge::Bearer(params)
}

pub(super) fn basic_header(credential: &RegistryCredential) -> String {
    let raw = format!("{}:{}", credential.username, credential.password);
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(raw)
    )
}

/// Percent-encodes a query value (RFC 3986 unreserved characters pass through).
fn url_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

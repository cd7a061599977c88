//! HTTPS for the API server's aggregation layer (docs/packagemanifests.md §8).
//!
//! The serving certificate comes from the Secret `cert_keeper.rs` keeps; the front proxy's
//! client certificate is checked against the request-header CA of
//! `kube-system/extension-apiserver-authentication`. Both are re-read periodically, so a
//! rotation needs no restart: each new connection uses the latest TLS settings.

use std::net::SocketAddr;
use std::sync::{Arc, RwLock};

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

use super::api::{PackageApi, router};
use super::auth::RequestHeaderConfig;

/// Why TLS settings could not be made.
#[derive(Debug, thiserror::Error)]
pub enum TlsSetupError {
    #[error("serving certificate: {0}")]
    Certificate(String),
    #[error("request-header client CA: {0}")]
    ClientCa(String),
    #[error("TLS settings: {0}")]
    Rustls(#[from] rustls::Error),
}

/// What the next connections are served with; `None` until a certificate is known.
#[derive(Default)]
pub struct TlsState {
    current: RwLock<Option<(Arc<rustls::ServerConfig>, Arc<RequestHeaderConfig>)>>,
}

impl std::fmt::Debug for TlsState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsState").finish_non_exhaustive()
    }
}

impl TlsState {
    /// Serves with `cert_pem`/`key_pem` from now on, trusting client certificates signed by
    /// the request-header CA.
    pub fn update(
        &self,
        cert_pem: &[u8],
        key_pem: &[u8],
        request_header: RequestHeaderConfig,
    ) -> Result<(), TlsSetupError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
            .collect::<Result<_, _>>()
            .map_err(|e| TlsSetupError::Certificate(e.to_string()))?;
        let key = PrivateKeyDer::from_pem_slice(key_pem)
            .map_err(|e| TlsSetupError::Certificate(e.to_string()))?;
        let mut roots = RootCertStore::empty();
        for ca in CertificateDer::pem_slice_iter(request_header.client_ca_pem.as_bytes()) {
            let ca = ca.map_err(|e| TlsSetupError::ClientCa(e.to_string()))?;
            roots
                .add(ca)
                .map_err(|e| TlsSetupError::ClientCa(e.to_string()))?;
        }
        // Without a client certificate a connection is still accepted; its requests are
        // then unauthenticated and refused (401) by the authorizer.
        let verifier =
            WebPkiClientVerifier::builder_with_provider(Arc::new(roots), Arc::clone(&provider))
                .allow_unauthenticated()
                .build()
                .map_err(|e| TlsSetupError::ClientCa(e.to_string()))?;
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain, key)?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        *self.current.write().unwrap_or_else(|p| p.into_inner()) =
            Some((Arc::new(config), Arc::new(request_header)));
        Ok(())
    }

    fn current(&self) -> Option<(Arc<rustls::ServerConfig>, Arc<RequestHeaderConfig>)> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn is_ready(&self) -> bool {
        self.current().is_some()
    }
}

/// The common name of a verified client certificate.
fn common_name(cert: &CertificateDer<'_>) -> Option<String> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).ok()?;
    parsed
        .subject()
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .map(str::to_owned)
}

/// Accepts connections on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: TcpListener,
    api: PackageApi,
    tls: Arc<TlsState>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let app = router(api);
    let mut connections = JoinSet::new();
    let mut shutdown = Box::pin(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => {
                let Ok((stream, peer)) = accepted else { continue };
                let Some((config, request_header)) = tls.current() else {
                    tracing::debug!(%peer, "no serving certificate yet; connection closed");
                    continue;
                };
                let app = app.clone();
                connections.spawn(async move {
                    let stream = match TlsAcceptor::from(config).accept(stream).await {
                        Ok(s) => s,
                        Err(err) => {
                            tracing::debug!(%peer, %err, "TLS handshake failed");
                            return;
                        }
                    };
                    let cn = stream
                        .get_ref()
                        .1
                        .peer_certificates()
                        .and_then(|c| c.first())
                        .and_then(common_name);
                    let service = hyper::service::service_fn(move |mut req: http::Request<hyper::body::Incoming>| {
                        if let Some(identity) = cn.as_deref().and_then(|cn| request_header.identity(cn, req.headers())) {
                            req.extensions_mut().insert(identity);
                        }
                        app.clone().oneshot(req.map(axum::body::Body::new))
                    });
                    if let Err(err) = auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), service)
                        .await
                    {
                        tracing::debug!(%peer, %err, "package API connection ended with an error");
                    }
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    connections.abort_all();
    while connections.join_next().await.is_some() {}
}

/// Binds the package API's port.
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

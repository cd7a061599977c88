//! HTTPS on a certificate that can change under the running process: the kubelet rewrites a
//! mounted Secret's files when olm-rs rotates it (docs/certificates.md §6), and an operator must
//! serve the new certificate without a restart. The files are read for each new connection and
//! a new TLS configuration is built only when their bytes changed.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

/// A certificate and key read from files, rebuilt when the files change.
pub struct ReloadingCert {
    crt: PathBuf,
    key: PathBuf,
    current: Mutex<Option<Loaded>>,
}

/// The files' bytes and the configuration built from them.
struct Loaded {
    crt: Vec<u8>,
    key: Vec<u8>,
    config: Arc<ServerConfig>,
}

impl ReloadingCert {
    pub fn new(crt: PathBuf, key: PathBuf) -> Self {
        ReloadingCert {
            crt,
            key,
            current: Mutex::new(None),
        }
    }

    /// The configuration for the files as they are now.
    pub fn config(&self) -> anyhow::Result<Arc<ServerConfig>> {
        let read = |p: &PathBuf| {
            std::fs::read(p).map_err(|e| anyhow::anyhow!("reading {}: {e}", p.display()))
        };
        let (crt, key) = (read(&self.crt)?, read(&self.key)?);
        let mut current = self
            .current
            .lock()
            .map_err(|_| anyhow::anyhow!("a connection panicked while loading the certificate"))?;
        if let Some(loaded) = current.as_ref()
            && loaded.crt == crt
            && loaded.key == key
        {
            return Ok(loaded.config.clone());
        }
        let config = Arc::new(self.build(&crt, &key)?);
        println!("loaded the serving certificate {}", self.crt.display());
        *current = Some(Loaded {
            crt,
            key,
            config: config.clone(),
        });
        Ok(config)
    }

    fn build(&self, crt: &[u8], key: &[u8]) -> anyhow::Result<ServerConfig> {
        let chain = CertificateDer::pem_slice_iter(crt)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| anyhow::anyhow!("{}: {e}", self.crt.display()))?;
        anyhow::ensure!(
            !chain.is_empty(),
            "{} holds no certificate",
            self.crt.display()
        );
        let key = PrivateKeyDer::from_pem_slice(key)
            .map_err(|e| anyhow::anyhow!("{}: {e}", self.key.display()))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(chain, key)?;
        // The API server speaks HTTP/2 to webhooks and aggregated APIs when offered.
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(config)
    }
}

/// Serves `app` over TLS on `listener` until accepting fails; a connection whose certificate
/// cannot be loaded or whose handshake fails is logged and closed.
pub async fn serve(
    listener: TcpListener,
    cert: Arc<ReloadingCert>,
    app: Router,
) -> std::io::Result<()> {
    loop {
        let (stream, peer) = listener.accept().await?;
        let config = match cert.config() {
            Ok(config) => config,
            Err(e) => {
                eprintln!("connection from {peer} closed: {e:#}");
                continue;
            }
        };
        let app = app.clone();
        tokio::spawn(async move {
            let stream = match TlsAcceptor::from(config).accept(stream).await {
                Ok(stream) => stream,
                Err(e) => {
                    eprintln!("TLS handshake with {peer} failed: {e}");
                    return;
                }
            };
            let service = TowerToHyperService::new(app);
            if let Err(e) = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                eprintln!("connection from {peer}: {e}");
            }
        });
    }
}

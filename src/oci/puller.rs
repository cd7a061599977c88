//! The network side: pulls a bundle image with the `oci-client` crate (the OCI distribution
//! protocol, bearer-token and basic auth, image indexes, blob digests verified), through the
//! mirrors `registries.conf` names, with anonymous access first and then each pull secret that
//! has a login for the registry.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::errors::OciDistributionError;
use oci_client::manifest::ImageIndexEntry;
use oci_client::secrets::RegistryAuth;
use sha2::Digest as _;

use super::bundle::PulledBundle;
use super::cache::{BundleCache, CacheStats};
use super::catalog_image::{PulledCatalog, fetch_catalog};
use super::classify::{Failure, classify};
use super::credentials::{Credentials, RegistryLogin, Secret};
use super::download::{download_layers, layer_blobs};
use super::error::{CaFileError, ConfigError, PullError};
use super::layers::{Limits, UnpackedFiles, unpack_layers};
use super::reference::ImageName;
use super::registries_conf::{PullSource, PullSourcesError, RegistriesConf};
use super::signatures;
use crate::image_policy::ImagePolicy;

/// The file podman and CRI-O read; used when it exists and no other is given.
pub const DEFAULT_REGISTRIES_CONF: &str = "/etc/containers/registries.conf";

/// How bundle images are pulled.
#[derive(Debug, Clone)]
pub struct PullerConfig {
    pub registries: RegistriesConf,
    /// Extra CA certificates (PEM) trusted besides the system's.
    pub extra_ca_pem: Option<Vec<u8>>,
    /// The disk cache; `None` keeps bundles in memory only.
    pub cache_dir: Option<PathBuf>,
    pub limits: Limits,
    /// Limits for catalog images (larger than a bundle's).
    pub catalog_limits: Limits,
    /// Rendered bundles kept in memory (count and total file bytes).
    pub memory_cache_entries: usize,
    pub memory_cache_bytes: usize,
    pub connect_timeout: Duration,
    /// Longest wait for the next bytes of an answer.
    pub read_timeout: Duration,
    /// What every pull obeys (docs/image-signatures.md); by default nothing is checked.
    pub image_policy: Arc<ImagePolicy>,
}

impl Default for PullerConfig {
    fn default() -> Self {
        PullerConfig {
            registries: RegistriesConf::default(),
            extra_ca_pem: None,
            cache_dir: None,
            limits: Limits::default(),
            catalog_limits: Limits::catalog(),
            memory_cache_entries: 64,
            memory_cache_bytes: 128 * 1024 * 1024,
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(30),
            image_policy: Arc::new(ImagePolicy::accept_anything()),
        }
    }
}

impl PullerConfig {
    /// A configuration from the files the flags name (each optional).
    pub fn from_files(
        registries_conf: Option<&Path>,
        ca_file: Option<&Path>,
        cache_dir: Option<PathBuf>,
    ) -> Result<PullerConfig, ConfigError> {
        let registries = match registries_conf {
            Some(f) => RegistriesConf::from_file(f)?,
            None => RegistriesConf::default(),
        };
        let extra_ca_pem = match ca_file {
            Some(f) => {
                let ca_error = |source| ConfigError::CaFile {
                    file: f.to_path_buf(),
                    source,
                };
                let pem = std::fs::read(f).map_err(|e| ca_error(CaFileError::Read(e)))?;
                check_ca_pem(&pem).map_err(ca_error)?;
                Some(pem)
            }
            None => None,
        };
        Ok(PullerConfig {
            registries,
            extra_ca_pem,
            cache_dir,
            ..PullerConfig::default()
        })
    }

    /// `/etc/containers/registries.conf` when it exists.
    pub fn default_registries_conf() -> Option<PathBuf> {
        let p = PathBuf::from(DEFAULT_REGISTRIES_CONF);
        p.is_file().then_some(p)
    }
}

fn check_ca_pem(pem: &[u8]) -> Result<(), CaFileError> {
    let blocks = pem::parse_many(pem).map_err(CaFileError::NotPem)?;
    let certs = blocks.iter().filter(|b| b.tag() == "CERTIFICATE").count();
    if certs == 0 {
        return Err(CaFileError::NoCertificate);
    }
    for b in blocks.iter().filter(|b| b.tag() == "CERTIFICATE") {
        x509_parser::parse_x509_certificate(b.contents()).map_err(CaFileError::BadCertificate)?;
    }
    Ok(())
}

/// The HTTP client of lookaside signature storage: the registries' CA certificates and
/// timeouts.
fn lookaside_client(config: &PullerConfig) -> Result<reqwest::Client, ConfigError> {
    let extra = config
        .extra_ca_pem
        .iter()
        .map(|pem| reqwest::Certificate::from_pem(pem))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ConfigError::Client(crate::error_chain::error_chain(&e)))?;
    reqwest::Client::builder()
        .tls_certs_merge(extra)
        .connect_timeout(config.connect_timeout)
        .read_timeout(config.read_timeout)
        .user_agent(concat!("olm-rs/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| ConfigError::Client(crate::error_chain::error_chain(&e)))
}

/// Pulls bundle images, shared by every reconcile (cheap to clone).
#[derive(Clone)]
pub struct BundlePuller(Arc<Inner>);

struct Inner {
    config: PullerConfig,
    cache: BundleCache,
    /// One client per (login, plain HTTP or not): a client remembers one login per registry.
    clients: Mutex<HashMap<String, oci_client::Client>>,
    /// Reads lookaside signature storage over HTTP(S) (docs/image-signatures.md §5).
    lookaside_http: reqwest::Client,
    /// (image as named, digest) pairs the policy accepted in this process: the cache serves
    /// them; anything else is checked before it is used (the policy is fixed at start).
    verified: Mutex<HashSet<(String, String)>>,
}

const MAX_VERIFIED: usize = 4096;

const MAX_CLIENTS: usize = 64;

impl BundlePuller {
    pub fn new(config: PullerConfig) -> Result<BundlePuller, ConfigError> {
        // reqwest is built without a crypto provider of its own; the project uses ring.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let cache = BundleCache::new(
            config.cache_dir.clone(),
            config.memory_cache_entries,
            config.memory_cache_bytes,
        )?;
        let lookaside_http = lookaside_client(&config)?;
        let puller = BundlePuller(Arc::new(Inner {
            config,
            cache,
            clients: Mutex::new(HashMap::new()),
            lookaside_http,
            verified: Mutex::new(HashSet::new()),
        }));
        // Fail now, not on the first pull, when the TLS setup is unusable.
        puller.client_for(None, false)?;
        Ok(puller)
    }

    pub fn config(&self) -> &PullerConfig {
        &self.0.config
    }

    pub fn stats(&self) -> CacheStats {
        self.0.cache.stats()
    }

    /// From the memory LRU or the disk cache only, never the network. The disk cache is found
    /// by the reference's digest, so a tag reference is found only in memory.
    ///
    /// While a policy is enforced, only content it accepted in this process is served: a disk
    /// cache written under another policy (or none) is checked again by a pull.
    pub fn cached(&self, image: &str) -> Option<Arc<PulledBundle>> {
        let image = image.trim();
        let hit = match self.0.cache.memory_get(image) {
            Some(b) => b,
            None => {
                let name = ImageName::parse(image).ok()?;
                let digest = name.digest()?;
                if !self.accepted(image, digest) {
                    return None;
                }
                self.0.cache.disk_get(image, digest)?
            }
        };
        self.accepted(image, &hit.digest).then_some(hit)
    }

    /// Whether the policy lets `image` at `digest` be used without asking again: no policy,
    /// or accepted in this process.
    fn accepted(&self, image: &str, digest: &str) -> bool {
        !self.0.config.image_policy.enforced()
            || self
                .0
                .verified
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains(&(image.to_string(), digest.to_string()))
    }

    /// Checks `image` (as named) at `digest` against the policy, with the signatures from
    /// `source` (docs/image-signatures.md §6). A refusal is never retried on another source.
    async fn check_policy(
        &self,
        image: &str,
        digest: &str,
        source: &PullSource,
        client: &oci_client::Client,
        auth: &RegistryAuth,
    ) -> Result<(), Failure> {
        if self.accepted(image, digest) {
            return Ok(());
        }
        let started = std::time::Instant::now();
        let policy = &self.0.config.image_policy;
        let http = &self.0.lookaside_http;
        match signatures::check(policy, image, digest, source, client, http, auth).await {
            Ok(scope) => {
                if let Some(scope) = scope {
                    tracing::info!(%image, %digest, %scope, elapsed_ms = started.elapsed().as_millis() as u64, "image accepted by the image policy");
                    self.mark_accepted(image, digest);
                }
                Ok(())
            }
            Err(Failure::Other(e @ PullError::Refused(_))) => {
                tracing::warn!(%image, %digest, error = %e, "image refused by the image policy");
                Err(Failure::Other(e))
            }
            Err(other) => Err(other),
        }
    }

    fn mark_accepted(&self, image: &str, digest: &str) {
        let mut verified = self.0.verified.lock().unwrap_or_else(|p| p.into_inner());
        if verified.len() >= MAX_VERIFIED {
            verified.clear();
        }
        verified.insert((image.to_string(), digest.to_string()));
    }

    /// Checks `image` (as named, a tag say) at `digest` (what it resolved to) against the
    /// policy, before content of that digest is used from anywhere (docs/image-signatures.md
    /// §6). `Ok` when no policy is enforced.
    pub async fn verify(
        &self,
        image: &str,
        digest: &str,
        creds: &Credentials,
    ) -> Result<(), PullError> {
        let image = image.trim();
        if self.accepted(image, digest) {
            return Ok(());
        }
        let name = parse_name(image)?.with_digest(digest);
        match self.attempt(image, &name, creds, Operation::Verify).await? {
            Fetched::Verified => Ok(()),
            other => Err(other.unexpected(image)),
        }
    }

    /// Pulls (or takes from the cache) and renders the bundle image.
    pub async fn pull(
        &self,
        image: &str,
        creds: &Credentials,
    ) -> Result<Arc<PulledBundle>, PullError> {
        let image = image.trim();
        let name = parse_name(image)?;
        // A digest names content that never changes: the cache answers without asking.
        if name.digest().is_some()
            && let Some(b) = self.cached(image)
        {
            return Ok(b);
        }
        match self.attempt(image, &name, creds, Operation::Bundle).await? {
            Fetched::Bundle(b) => Ok(b),
            other => Err(other.unexpected(image)),
        }
    }

    /// Takes in the files an unpack pod handed back for `image` (already checked by
    /// `handback::unpack_handed_back`), rendered and cached like a pull's, under `digest` and
    /// each name in `names` (the image as the catalog names it, and pinned to the digest).
    pub fn adopt_unpacked(
        &self,
        names: &[&str],
        digest: &str,
        files: &UnpackedFiles,
    ) -> Result<Arc<PulledBundle>, PullError> {
        let mut first = None;
        for name in names {
            let bundle = Arc::new(PulledBundle::from_files(name, digest, files)?);
            self.0.cache.memory_put(bundle.clone());
            first.get_or_insert(bundle);
        }
        if let Some(image) = names.first() {
            self.0.cache.disk_put(image, digest, None, files)?;
        }
        first.ok_or_else(|| PullError::Cache {
            image: String::new(),
            reason: "no image name to keep the bundle under".into(),
        })
    }

    /// The digest of the manifest (or image index) `image` names now: one HEAD request (a GET
    /// when the registry sends no digest header), nothing pulled. A digest reference answers
    /// itself.
    pub async fn digest(&self, image: &str, creds: &Credentials) -> Result<String, PullError> {
        let image = image.trim();
        let name = parse_name(image)?;
        if let Some(d) = name.digest() {
            return Ok(d.to_string());
        }
        match self.attempt(image, &name, creds, Operation::Digest).await? {
            Fetched::Digest(d) => Ok(d),
            other => Err(other.unexpected(image)),
        }
    }

    /// Pulls a catalog image pinned to `digest` (the digest [`Self::digest`] gave) and unpacks
    /// only the file-based catalog directory its label names (docs/catalog-images.md §2).
    pub async fn pull_catalog(
        &self,
        image: &str,
        digest: &str,
        creds: &Credentials,
    ) -> Result<PulledCatalog, PullError> {
        let image = image.trim();
        let name = parse_name(image)?.with_digest(digest);
        match self
            .attempt(image, &name, creds, Operation::Catalog)
            .await?
        {
            Fetched::Catalog(c) => Ok(c),
            other => Err(other.unexpected(image)),
        }
    }

    /// Runs `op` against each source `registries.conf` gives for `name` (mirrors first), and
    /// against each source anonymously first, then with each login that applies.
    async fn attempt(
        &self,
        image: &str,
        name: &ImageName,
        creds: &Credentials,
        op: Operation,
    ) -> Result<Fetched, PullError> {
        let sources = self
            .0
            .config
            .registries
            .pull_sources(name)
            .map_err(|e| match e {
                PullSourcesError::Blocked(_) => PullError::Blocked {
                    image: image.to_string(),
                    rule: e.to_string(),
                },
                PullSourcesError::BadRewrite(_) => PullError::InvalidReference {
                    image: image.to_string(),
                    reason: e.to_string(),
                },
            })?;
        let mut last = None;
        for source in &sources {
            match self.attempt_source(image, source, creds, op).await {
                Ok(b) => return Ok(b),
                Err(e @ PullError::Refused(_)) => return Err(e),
                Err(e) => {
                    if source.mirror {
                        tracing::debug!(%image, mirror = %source.image, error = %e, "mirror failed; trying the next source");
                    }
                    last = Some(e);
                }
            }
        }
        // pull_sources always yields the location itself last.
        Err(last.unwrap_or_else(|| PullError::NotFound {
            image: image.to_string(),
            detail: "no source to pull from".into(),
        }))
    }

    /// Anonymous first, then each login that applies, as the kubelet does.
    async fn attempt_source(
        &self,
        image: &str,
        source: &PullSource,
        creds: &Credentials,
        op: Operation,
    ) -> Result<Fetched, PullError> {
        let logins = creds.logins_for(&source.image);
        let mut tried: Vec<String> = Vec::new();
        let mut anonymous_not_found = None;
        let mut login_not_found = None;
        for login in std::iter::once(None).chain(logins.into_iter().map(Some)) {
            match self.fetch(image, source, login, op).await {
                Ok(b) => return Ok(b),
                Err(Failure::Unauthorized) => {}
                // Some registries hide private repositories behind "not found": go on with
                // the logins, and believe it once a login was accepted.
                Err(Failure::Other(e @ PullError::NotFound { .. })) => match login {
                    None => anonymous_not_found = Some(e),
                    Some(_) => {
                        login_not_found.get_or_insert(e);
                    }
                },
                Err(Failure::Other(e)) => return Err(e),
            }
            if let Some(l) = login
                && !tried.contains(&l.source)
            {
                tried.push(l.source.clone());
            }
        }
        if let Some(e) = login_not_found {
            return Err(e);
        }
        if tried.is_empty()
            && let Some(e) = anonymous_not_found
        {
            return Err(e);
        }
        Err(PullError::Unauthorized {
            image: image.to_string(),
            registry: source.image.registry().to_string(),
            secrets_tried: tried,
        })
    }

    fn client_for(
        &self,
        login: Option<&RegistryLogin>,
        insecure: bool,
    ) -> Result<oci_client::Client, ConfigError> {
        let key = format!(
            "{}|{}",
            insecure,
            login.map(login_key).unwrap_or_else(|| "anonymous".into())
        );
        let mut clients = self.0.clients.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = clients.get(&key) {
            return Ok(c.clone());
        }
        let cfg = &self.0.config;
        let config = ClientConfig {
            protocol: if insecure {
                ClientProtocol::Http
            } else {
                ClientProtocol::Https
            },
            extra_root_certificates: cfg
                .extra_ca_pem
                .iter()
                .map(|pem| Certificate {
                    encoding: CertificateEncoding::Pem,
                    data: pem.clone(),
                })
                .collect(),
            platform_resolver: Some(Box::new(bundle_platform)),
            connect_timeout: Some(cfg.connect_timeout),
            read_timeout: Some(cfg.read_timeout),
            user_agent: concat!("olm-rs/", env!("CARGO_PKG_VERSION")),
            ..ClientConfig::default()
        };
        // reqwest's own words are only "builder error"; the cause is in its sources (no
        // trusted CA certificates in the image, say).
        let client = oci_client::Client::try_from(config)
            .map_err(|e| ConfigError::Client(crate::error_chain::error_chain(&e)))?;
        if clients.len() >= MAX_CLIENTS {
            clients.clear();
        }
        clients.insert(key, client.clone());
        Ok(client)
    }

    async fn fetch(
        &self,
        image: &str,
        source: &PullSource,
        login: Option<&RegistryLogin>,
        op: Operation,
    ) -> Result<Fetched, Failure> {
        let client = self.client_for(login, source.insecure).map_err(|e| {
            Failure::Other(PullError::RegistryError {
                image: image.to_string(),
                registry: source.image.registry().to_string(),
                cause: e.to_string(),
                transient: false,
            })
        })?;
        let auth = match login.map(|l| &l.secret) {
            None => RegistryAuth::Anonymous,
            Some(Secret::Basic { username, password }) => {
                RegistryAuth::Basic(username.clone(), password.clone())
            }
            Some(Secret::Bearer(token)) => RegistryAuth::Bearer(token.clone()),
        };
        match op {
            Operation::Bundle => self
                .fetch_bundle(image, source, &client, &auth)
                .await
                .map(Fetched::Bundle),
            Operation::Digest => {
                let registry = source.image.registry().to_string();
                client
                    .fetch_manifest_digest(source.image.reference(), &auth)
                    .await
                    .map(Fetched::Digest)
                    .map_err(|e| classify(image, &registry, "image manifest", e))
            }
            Operation::Verify => {
                let digest = source.image.digest().unwrap_or_default();
                self.check_policy(image, digest, source, &client, &auth)
                    .await
                    .map(|()| Fetched::Verified)
            }
            Operation::Catalog => {
                let digest = source.image.digest().unwrap_or_default();
                self.check_policy(image, digest, source, &client, &auth)
                    .await?;
                let limits = self.0.config.catalog_limits;
                fetch_catalog(image, source, &client, &auth, &limits)
                    .await
                    .map(Fetched::Catalog)
            }
        }
    }

    async fn fetch_bundle(
        &self,
        image: &str,
        source: &PullSource,
        client: &oci_client::Client,
        auth: &RegistryAuth,
    ) -> Result<Arc<PulledBundle>, Failure> {
        let reference = source.image.reference();
        let registry = source.image.registry().to_string();
        let classify = |e: OciDistributionError, what: &str| classify(image, &registry, what, e);
        let (manifest, manifest_digest, list_digest) = client
            .pull_image_manifest_and_list_digest(reference, auth)
            .await
            .map_err(|e| classify(e, "image manifest"))?;
        let reference_digest = source.image.digest().map(str::to_string).or(list_digest);
        // Signatures sign what the reference names: the image index when there is one.
        let signed = reference_digest.as_deref().unwrap_or(&manifest_digest);
        self.check_policy(image, signed, source, client, auth)
            .await?;
        if self.0.config.image_policy.enforced() {
            // The bundle is cached under its platform manifest's digest.
            self.mark_accepted(image, &manifest_digest);
        }
        if let Some(b) = self.0.cache.disk_get(image, &manifest_digest) {
            return Ok(b);
        }
        let limits = self.0.config.limits;
        let blobs =
            download_layers(image, &registry, client, reference, &manifest, &limits).await?;
        self.0
            .cache
            .downloads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);

        let image_owned = image.to_string();
        let digest = manifest_digest.clone();
        let cache = self.0.clone();
        let bundle = tokio::task::spawn_blocking(move || {
            let layers = layer_blobs(&blobs);
            let files = unpack_layers(&layers, &limits).map_err(|e| PullError::InvalidContent {
                image: image_owned.clone(),
                file: e.file,
                reason: e.reason,
            })?;
            let bundle = PulledBundle::from_files(&image_owned, &digest, &files)?;
            cache
                .cache
                .disk_put(&image_owned, &digest, reference_digest.as_deref(), &files)?;
            Ok::<_, PullError>(bundle)
        })
        .await
        .map_err(|e| {
            Failure::Other(PullError::InvalidContent {
                image: image.to_string(),
                file: "bundle".into(),
                reason: format!("unpacking failed: {e}"),
            })
        })?
        .map_err(Failure::Other)?;
        let bundle = Arc::new(bundle);
        self.0.cache.memory_put(bundle.clone());
        Ok(bundle)
    }
}

fn parse_name(image: &str) -> Result<ImageName, PullError> {
    ImageName::parse(image).map_err(|e| PullError::InvalidReference {
        image: e.image,
        reason: e.reason,
    })
}

/// What one attempt (one source, one login) fetches.
#[derive(Debug, Clone, Copy)]
enum Operation {
    Bundle,
    Digest,
    Catalog,
    /// The image policy's check of a digest, nothing pulled but its signatures.
    Verify,
}

enum Fetched {
    Bundle(Arc<PulledBundle>),
    Digest(String),
    Catalog(PulledCatalog),
    Verified,
}

impl Fetched {
    /// `attempt` answers with what the operation fetches; anything else is a bug here.
    fn unexpected(&self, image: &str) -> PullError {
        let what = match self {
            Fetched::Bundle(_) => "a bundle",
            Fetched::Digest(_) => "a digest",
            Fetched::Catalog(_) => "a catalog",
            Fetched::Verified => "a verdict",
        };
        PullError::Cache {
            image: image.to_string(),
            reason: format!("internal error: the pull returned {what} unasked"),
        }
    }
}

/// Bundles are architecture-independent: linux/amd64 when the index has it, else the first.
fn bundle_platform(entries: &[ImageIndexEntry]) -> Option<String> {
    oci_client::client::linux_amd64_resolver(entries)
        .or_else(|| entries.first().map(|e| e.digest.clone()))
}

/// Identifies a login without keeping its secret in the map key.
fn login_key(login: &RegistryLogin) -> String {
    let text = match &login.secret {
        Secret::Basic { username, password } => format!("basic\0{username}\0{password}"),
        Secret::Bearer(t) => format!("bearer\0{t}"),
    };
    let hash = sha2::Sha256::digest(text.as_bytes());
    hash.iter().map(|b| format!("{b:02x}")).collect()
}

//! Shared setup of the CatalogSource controller tests: the embedded API server with OLM's CRDs,
//! the controller running against it, and registries served in-process.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, PostParams};
use olm_rs::api::CatalogSource;
use olm_rs::catalog::CatalogIndex;
use olm_rs::catalog::validated;
use olm_rs::catalog_source::serving::ServingMode;
use olm_rs::k8s::clock::{Clock, ManualClock, SystemClock};
use olm_rs::reconcile::bundle_images::BundleImageOptions;
use olm_rs::reconcile::catalog_source::CatalogSourceOptions;
use olm_rs::reconcile::{Context, ControllerOptions};
use olm_rs::registry::server;
use olm_rs::sandbox::ApiServer;

pub const GLOBAL_NS: &str = "olm";

pub struct Harness {
    /// Held so the server lives as long as the harness.
    _api_server: ApiServer,
    /// The catalog image cache when the test named none (removed with the harness).
    _catalog_cache: tempfile::TempDir,
    pub client: kube::Client,
    pub ctx: Arc<Context>,
    pub clock: Option<ManualClock>,
    controller: tokio::task::JoinHandle<()>,
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.controller.abort();
    }
}

#[derive(Default)]
pub struct Setup {
    /// Dialled address → in-process registry address.
    pub address_overrides: BTreeMap<String, String>,
    /// Use a manual clock (poll tests move time by hand).
    pub manual_clock: bool,
    /// The controller's default for image catalogs (in-process unless a test asks for pods).
    pub serving: ServingMode,
    /// Where in-process catalog images are unpacked (default: a temporary directory).
    pub catalog_cache_dir: Option<std::path::PathBuf>,
    /// registries.conf for image pulls (marks a test registry as plain HTTP).
    pub registries_conf: Option<std::path::PathBuf>,
    /// The image policy in-process pulls obey (default: none, anything accepted).
    pub image_policy: Option<std::sync::Arc<olm_rs::image_policy::ImagePolicy>>,
    /// How long an image the controller cannot pull is served by its registry pod before
    /// in-process serving is tried again (default: the controller's).
    pub fallback_retry: Option<Duration>,
}

pub async fn start(setup: Setup) -> Harness {
    let api_server = ApiServer::new();
    let client = api_server.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(
        &PostParams::default(),
        &olm_rs::api::crd::catalog_source().unwrap(),
    )
    .await
    .unwrap();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for ns in [GLOBAL_NS, "team-a", "team-b"] {
        let namespace: Namespace =
            serde_json::from_value(serde_json::json!({"metadata": {"name": ns}})).unwrap();
        namespaces
            .create(&PostParams::default(), &namespace)
            .await
            .unwrap();
    }
    // The CRD is served at once; wait until lists answer.
    let catalogs: Api<CatalogSource> = Api::all(client.clone());
    eventually("CatalogSource API served", || async {
        catalogs
            .list(&ListParams::default())
            .await
            .is_ok()
            .then_some(())
    })
    .await;

    // Starts at the wall time: the API server stamps objects (creationTimestamp) with it.
    let manual = setup
        .manual_clock
        .then(|| ManualClock::new(jiff::Timestamp::now()));
    let clock: Arc<dyn Clock> = match &manual {
        Some(m) => Arc::new(m.clone()),
        None => Arc::new(SystemClock),
    };
    let mut catalog_sources = CatalogSourceOptions::quick();
    catalog_sources.address_overrides = setup.address_overrides;
    catalog_sources.serving = setup.serving;
    catalog_sources.fallback_retry = setup.fallback_retry;
    let catalog_cache = tempfile::tempdir().unwrap();
    catalog_sources.cache_dir = Some(
        setup
            .catalog_cache_dir
            .unwrap_or_else(|| catalog_cache.path().to_path_buf()),
    );
    let options = ControllerOptions {
        global_catalog_namespace: GLOBAL_NS.to_owned(),
        catalog_sources,
        bundle_images: BundleImageOptions {
            registries_config: setup.registries_conf,
            image_policy: setup.image_policy.unwrap_or_default(),
            ..BundleImageOptions::default()
        },
        ..ControllerOptions::default()
    };
    let ctx = Arc::new(Context::new(client.clone(), clock, options));
    let controller = tokio::spawn(olm_rs::reconcile::catalog_source::run(Arc::clone(&ctx)));
    Harness {
        _api_server: api_server,
        _catalog_cache: catalog_cache,
        client,
        ctx,
        clock: manual,
        controller,
    }
}

/// Waits (up to 20 s) until `probe` returns `Some`.
pub async fn eventually<T, F, Fut>(what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("timed out waiting for: {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A registry served in-process; stops when dropped.
pub struct LocalRegistry {
    pub address: String,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for LocalRegistry {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub async fn serve_index(index: Arc<CatalogIndex>) -> LocalRegistry {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    serve_on(index, listener)
}

pub fn serve_on(index: Arc<CatalogIndex>, listener: tokio::net::TcpListener) -> LocalRegistry {
    let address = listener.local_addr().unwrap().to_string();
    let task = tokio::spawn(async move {
        let _ = server::serve(index, listener, std::future::pending()).await;
    });
    LocalRegistry { address, task }
}

/// The etcd package from the community bundle directories (6 bundles, 3 channels).
pub fn etcd_index() -> Arc<CatalogIndex> {
    let dir = crate::common::operators_dir().join("etcd");
    Arc::new(validated::load_for_serving(&dir).unwrap().index)
}

/// A free local port with nothing listening.
pub fn closed_address() -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    format!("127.0.0.1:{port}")
}

pub fn catalog_source(namespace: &str, name: &str, spec: serde_json::Value) -> CatalogSource {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "CatalogSource",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }))
    .unwrap()
}

pub async fn create(h: &Harness, cs: &CatalogSource) -> CatalogSource {
    let api: Api<CatalogSource> =
        Api::namespaced(h.client.clone(), cs.metadata.namespace.as_deref().unwrap());
    api.create(&PostParams::default(), cs).await.unwrap()
}

pub async fn get(h: &Harness, namespace: &str, name: &str) -> CatalogSource {
    let api: Api<CatalogSource> = Api::namespaced(h.client.clone(), namespace);
    api.get(name).await.unwrap()
}

/// Waits until the CatalogSource's status satisfies `check`.
pub async fn status_where(
    h: &Harness,
    namespace: &str,
    name: &str,
    what: &str,
    check: impl Fn(&olm_rs::api::CatalogSourceStatus) -> bool,
) -> CatalogSource {
    eventually(what, || async {
        let cs = get(h, namespace, name).await;
        cs.status.as_ref().is_some_and(&check).then_some(cs)
    })
    .await
}

pub fn state_of(s: &olm_rs::api::CatalogSourceStatus) -> Option<String> {
    s.connection_state
        .as_ref()
        .map(|c| c.last_observed_state.as_str().to_owned())
}

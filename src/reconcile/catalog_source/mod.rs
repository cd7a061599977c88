//! The CatalogSource controller (docs/catalog.md §1–§4): validate the spec, run or read the
//! catalog (address, registry pod, ConfigMap), keep one registry connection per catalog, and
//! publish each catalog's content and health in `ctx.catalogs` for the rest of olm-rs.
//!
//! The one shape (docs/catalog.md §1): a queue keyed by catalog, fed by `feeds`; each sync
//! observes (`sync`, `configmap`, `pod_mode`, `in_process`) — the catalog's memos among what it
//! observes —, lets the core decide once (`crate::catalog_source::decision::decide`) and carries
//! out the decision: writes through `k8s::effects::execute`, the connection, the catalog cache,
//! and the memos the decision returns.
//!
//! A broken catalog marks only itself: its status says why in plain words, its cache entry is
//! unhealthy, and no other catalog is affected.
//!
//! Address resolution: an `address` catalog is dialled at `spec.address`; an image catalog at
//! its Service, `<service>.<namespace>.svc:50051`, as OLM does.
//! `ControllerOptions::catalog_sources.address_overrides` maps such an address to another one —
//! tests point image catalogs at registries they run in-process; a controller running outside
//! the cluster can reach registries through port-forwards.

mod configmap;
mod feeds;
mod in_process;
mod pod_mode;
mod sync;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::Api;
use kube::{Resource, ResourceExt};
use kube_runtime::watcher;

use crate::api::CatalogRef;
use crate::api::CatalogSource;
use crate::catalog_cache::image_catalogs::{ImageCatalogError, ImageCatalogs};
use crate::catalog_cache::{CatalogHealth, HealthReason};
use crate::catalog_source::cache_update::{CacheUpdate, Unhealthy};
use crate::catalog_source::memo::Memo;
use crate::catalog_source::registry_objects::RegistryPodOptions;
use crate::catalog_source::serving::ServingMode;
use crate::k8s::store::{NamespacedStore, keep_all, reflect_namespaced};
use crate::k8s::write::ApiError;
use crate::reconcile::work_queue::{Backoff, Loop, Next, WorkQueue, run_workers};
use crate::registry::client::ClientTimeouts;
use crate::registry::connection::{ConnectionOptions, Connections};

use super::Context;

/// Settings of the CatalogSource controller.
#[derive(Debug, Clone, Default)]
pub struct CatalogSourceOptions {
    /// Shapes the registry pods of image catalogs.
    pub registry_pod: RegistryPodOptions,
    /// Registry connection timing (timeouts, back-off, health checks, refreshes).
    pub connection: ConnectionOptions,
    /// Dialled address → address actually dialled (see the module docs).
    pub address_overrides: BTreeMap<String, String>,
    /// How `spec.image` catalogs are served unless their annotation says otherwise
    /// (`--catalog-serving`; docs/catalog-images.md §1).
    pub serving: ServingMode,
    /// Where in-process catalog images are unpacked (`--catalog-cache-dir`); default: a
    /// `catalog-images` directory in the bundle cache directory, else in the temp directory.
    pub cache_dir: Option<std::path::PathBuf>,
    /// How long an image catalog the controller could not pull is served by its registry pod
    /// before in-process serving is tried again; `None`: `fallback::RETRY_IN_PROCESS`
    /// (docs/catalog-images.md §7).
    pub fallback_retry: Option<Duration>,
}

impl CatalogSourceOptions {
    /// Fast timing for tests and local runs against in-process registries.
    pub fn quick() -> CatalogSourceOptions {
        CatalogSourceOptions {
            connection: ConnectionOptions {
                timeouts: ClientTimeouts {
                    connect: Duration::from_secs(2),
                    request: Duration::from_secs(5),
                    fetch: Duration::from_secs(60),
                },
                backoff_initial: Duration::from_millis(100),
                backoff_max: Duration::from_secs(1),
                health_interval: Duration::from_millis(300),
                refresh_interval: Duration::from_secs(60),
            },
            ..CatalogSourceOptions::default()
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("CatalogSource {key}: {source}")]
    Status {
        key: CatalogRef,
        #[source]
        source: Box<ApiError>,
    },
    #[error(transparent)]
    StoresStopped(#[from] crate::k8s::store::StoreStopped),
}

impl crate::k8s::errors::ReconcileFailure for Error {
    fn error_label(&self) -> &'static str {
        match self {
            Error::Status { source, .. } => source.metric_label(),
            Error::StoresStopped(_) => crate::k8s::errors::SHUTDOWN,
        }
    }
}

/// The controller's own state next to the shared context.
pub struct Reconciler {
    ctx: Arc<Context>,
    /// Every CatalogSource of the cluster.
    catalogs: NamespacedStore<CatalogSource>,
    registry_stores: pod_mode::RegistryStores,
    connections: Connections,
    /// What each catalog's last sync decided to remember; a sync reads its catalog's as part of
    /// what it observes and keeps the value its decision returns (one sync of a key at a time).
    memos: Mutex<HashMap<CatalogRef, Memo>>,
    /// Digests no catalog serves any more whose content is still on disk.
    retired: Mutex<Vec<String>>,
    /// Opened on first use: a controller without in-process catalogs creates no directory.
    image_catalogs: std::sync::OnceLock<Result<Arc<ImageCatalogs>, ImageCatalogError>>,
}

impl Reconciler {
    fn memos(&self) -> MutexGuard<'_, HashMap<CatalogRef, Memo>> {
        self.memos.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn retired(&self) -> MutexGuard<'_, Vec<String>> {
        self.retired.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The memos of `key` as its last sync left them.
    fn memo(&self, key: &CatalogRef) -> Memo {
        self.memos().get(key).cloned().unwrap_or_default()
    }

    /// Everything olm-rs holds for a catalog that no longer exists.
    fn forget(&self, key: &CatalogRef) {
        self.ctx
            .metrics
            .catalog_source_deleted(&key.namespace, &key.name);
        self.connections.close(key);
        self.ctx.catalogs.remove(key);
        if let Some(served) = self.memos().remove(key).and_then(|m| m.served) {
            self.retired().push(served.digest);
        }
    }

    /// Changes the catalog's cache entry as a decision says.
    fn update_cache(&self, key: &CatalogRef, now: jiff::Timestamp, updates: &[CacheUpdate]) {
        let catalogs = &self.ctx.catalogs;
        for update in updates {
            match update {
                CacheUpdate::Index(index) => catalogs.set_index(key, Arc::clone(index), now),
                CacheUpdate::Ready => catalogs.set_health(key, CatalogHealth::ready(now), false),
                CacheUpdate::Unhealthy {
                    reason,
                    message,
                    drop_index,
                } => {
                    let reason = match reason {
                        Unhealthy::SpecInvalid => HealthReason::SpecInvalid,
                        Unhealthy::Unreachable => HealthReason::Unreachable,
                        Unhealthy::Invalid => HealthReason::Invalid,
                    };
                    let health = CatalogHealth::unhealthy(reason, message.as_str(), now);
                    catalogs.set_health(key, health, *drop_index);
                }
            }
        }
    }

    /// The catalogs olm-rs holds something for (a connection, a cache entry).
    fn held_keys(&self) -> Vec<CatalogRef> {
        let mut keys = self.connections.keys();
        keys.extend(self.ctx.catalogs.all().into_iter().map(|s| s.key));
        keys
    }

    /// The content store of in-process catalog images.
    fn image_catalogs(&self) -> &Result<Arc<ImageCatalogs>, ImageCatalogError> {
        self.image_catalogs
            .get_or_init(|| in_process::open_store(&catalog_cache_dir(&self.ctx.options)))
    }
}

/// The CatalogSource a registry object belongs to (its controller owner reference).
fn catalog_of(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Option<CatalogRef> {
    let namespace = meta.namespace.as_deref()?;
    meta.owner_references
        .iter()
        .flatten()
        .find(|o| o.kind == "CatalogSource")
        .map(|o| CatalogRef::new(namespace, &o.name))
}

pub(super) fn key_of(cs: &CatalogSource) -> CatalogRef {
    CatalogRef::new(cs.namespace().unwrap_or_default(), cs.name_any())
}

/// Where in-process catalog images are kept (see [`CatalogSourceOptions::cache_dir`]).
fn catalog_cache_dir(options: &super::ControllerOptions) -> std::path::PathBuf {
    if let Some(dir) = &options.catalog_sources.cache_dir {
        return dir.clone();
    }
    match &options.bundle_images.cache_dir {
        Some(dir) => dir.join("catalog-images"),
        // Unique per controller: two in one process (tests) must not share a temp directory.
        None => std::env::temp_dir().join(format!(
            "olm-rs-catalog-images-{}-{:08x}",
            std::process::id(),
            rand::random::<u32>()
        )),
    }
}

/// Runs the controller until the process stops, on the one engine (`reconcile::work_queue`),
/// keyed by the catalog's namespace and name (docs/catalog.md §1).
pub async fn run(ctx: Arc<Context>) {
    let (connections, connection_changes) = Connections::new(
        Arc::clone(&ctx.catalogs),
        Arc::clone(&ctx.clock),
        ctx.options.catalog_sources.connection,
    );
    let client = ctx.client.clone();
    let managed = || watcher::Config::default().labels("olm.managed=true");
    let (namespaces, namespace_changes) = ctx.watches.namespaces();
    let (service_accounts, sa_changes) = ctx.watches.service_accounts();
    let (network_policies, np_changes) = reflect_namespaced(
        Api::<NetworkPolicy>::all(client.clone()),
        managed(),
        keep_all,
    );
    let (services, service_changes) = ctx.watches.managed_services();
    let (pods, pod_changes) =
        reflect_namespaced(Api::<Pod>::all(client.clone()), managed(), keep_all);
    // Shared with the PackageManifest API: one watch of CatalogSources per process.
    let (catalogs, catalog_changes) = ctx.watches.catalog_sources();
    let registry_stores = pod_mode::RegistryStores {
        namespaces,
        service_accounts,
        network_policies,
        services,
        pods,
    };
    let reconciler = Arc::new(Reconciler {
        ctx: Arc::clone(&ctx),
        catalogs,
        registry_stores,
        connections,
        memos: Mutex::new(HashMap::new()),
        retired: Mutex::new(Vec::new()),
        image_catalogs: std::sync::OnceLock::new(),
    });
    let queue: WorkQueue<CatalogRef> = WorkQueue::with_backoff(BACKOFF);
    let feeds = feeds::drive(
        Arc::clone(&reconciler),
        queue.clone(),
        feeds::Triggers {
            catalogs: catalog_changes,
            connections: connection_changes,
            pods: pod_changes,
            services: service_changes,
            service_accounts: sa_changes,
            network_policies: np_changes,
            namespaces: namespace_changes,
            config_maps: feeds::config_map_changes(&client),
        },
    );
    let workers = async move {
        if reconciler.catalogs.wait_until_ready().await.is_err() {
            return;
        }
        // What olm-rs holds for catalogs that no longer exist (a restart of the watch): the sync
        // of each such key finds no catalog and forgets it.
        queue.add_all(reconciler.held_keys());
        let spec = Loop {
            kind: "CatalogSource",
            workers: WORKERS,
            metrics: Arc::clone(&ctx.metrics),
        };
        run_workers(spec, queue, move |key: CatalogRef| {
            let r = Arc::clone(&reconciler);
            async move { sync(&r, &key).await }
        })
        .await;
    };
    tokio::select! {
        () = feeds => tracing::error!("the watches of the CatalogSource controller ended"),
        () = workers => {}
    }
}

/// Catalogs synced at once. A sync may pull a catalog image (in-process serving), so more than
/// the other controllers: one slow registry must not hold up every catalog.
const WORKERS: usize = 16;

/// A failed sync is tried again after 10 s (as before the one engine), doubling while it keeps
/// failing, to at most 5 minutes.
const BACKOFF: Backoff = Backoff {
    first: Duration::from_secs(10),
    max: Duration::from_secs(300),
};

/// How soon a catalog whose status write met a newer copy is synced again.
const CONFLICT_RETRY: Duration = Duration::from_secs(1);

/// One sync of one CatalogSource; a catalog gone from the store (or being deleted) is
/// forgotten: its connection closed, its cache entry and memos dropped.
async fn sync(r: &Reconciler, key: &CatalogRef) -> Result<Next, Error> {
    let Some(cs) = r.catalogs.get(&key.namespace, &key.name) else {
        r.forget(key);
        return Ok(Next::Done);
    };
    if cs.meta().deletion_timestamp.is_some() {
        r.forget(key);
        return Ok(Next::Done);
    }
    // Deciding on half-listed stores would see registry objects as missing.
    r.registry_stores.ready().await?;
    // Known from now on (loading until its content is read), before anything is observed.
    r.ctx.catalogs.register(
        key,
        cs.meta().uid.as_deref(),
        cs.spec.priority.unwrap_or(0),
        r.ctx.clock.now(),
    );
    sync::sync_catalog(r, &cs, key).await
}

/// What a failed execution means for the next run.
fn executed_failure(key: &CatalogRef, err: ApiError) -> Result<Next, Error> {
    match err {
        // Deleted while this sync ran: the deletion queues its key, which forgets it.
        err if err.is_not_found() => Ok(Next::Done),
        // Changed while this sync ran: the change brings it back; look again soon anyway.
        err if err.is_conflict() => Ok(Next::After(CONFLICT_RETRY)),
        source => Err(Error::Status {
            key: key.clone(),
            source: Box::new(source),
        }),
    }
}

//! The thin shell: one reconciler per kind, each in its own module, each shaped the same way —
//! read observed state (shared stores), call the pure core, hand its decision to the one
//! executor (`k8s::effects`, `k8s::write`; docs/controller-startup.md, "One reconciler shape").
//!
//! Every reconciler module exposes `pub async fn run(ctx: Arc<Context>)`, which feeds its
//! `work_queue::WorkQueue` with keys from the shared stores' change streams and runs it on the
//! one engine, `work_queue::run_workers`, until the process stops (docs/architecture.md §2,
//! "One engine"). `controller::run` starts them all.

pub mod bundle_images;
pub mod catalog_source;
pub mod cluster_service_version;
pub mod install_plan;
pub mod keys;
pub mod operator;
pub mod operator_group;
pub mod subscription;
pub mod work_queue;

use std::sync::Arc;

use kube::Client;

use crate::catalog_cache::CatalogCache;
use crate::k8s::clock::Clock;
use crate::k8s::events::EventPublisher;
use crate::k8s::shared::SharedWatches;
use crate::metrics::Metrics;

/// Settings that every reconciler may read.
#[derive(Debug, Clone)]
pub struct ControllerOptions {
    /// Catalogs in this namespace are visible from every namespace (OLM's `olm`).
    pub global_catalog_namespace: String,
    /// CatalogSource controller settings (registry pods, connections, address overrides).
    pub catalog_sources: catalog_source::CatalogSourceOptions,
    /// How often each CSV is synced without an event (OLM: 5 minutes, ±20 % jitter). Tests
    /// shorten it to run many real resyncs in little time.
    pub csv_resync: std::time::Duration,
    /// Bundle image pulls (registries.conf, CA, cache, pull secrets, unpack timeout).
    pub bundle_images: bundle_images::BundleImageOptions,
}

impl Default for ControllerOptions {
    fn default() -> Self {
        Self {
            global_catalog_namespace: "olm".to_owned(),
            catalog_sources: catalog_source::CatalogSourceOptions::default(),
            csv_resync: cluster_service_version::RESYNC,
            bundle_images: bundle_images::BundleImageOptions::default(),
        }
    }
}

/// What reconcilers share. Nothing global: tests build one against the embedded API server with a
/// manual clock.
#[derive(Clone)]
pub struct Context {
    pub client: Client,
    pub clock: Arc<dyn Clock>,
    pub events: EventPublisher,
    pub options: ControllerOptions,
    /// Served at `/metrics`; `controller::run` puts the served registry here.
    pub metrics: Arc<Metrics>,
    /// Every CatalogSource's loaded catalog and health; written by the CatalogSource
    /// controller, read by everything that resolves against catalogs.
    pub catalogs: Arc<CatalogCache>,
    /// The one OCI client: bundle pulls, catalog image pulls and digest polls (shared cache:
    /// every namespace, Subscription and CatalogSource).
    pub bundle_images: Arc<bundle_images::BundleImages>,
    /// The kinds several controllers read, each watched and kept once.
    pub watches: Arc<SharedWatches>,
    /// What the API server serves (discovery, its version), asked once and kept until a CRD
    /// or an APIService changes: the controllers that read it clear it on those events.
    pub served_apis: Arc<crate::k8s::discovery::ServedApis>,
}

impl Context {
    pub fn new(client: Client, clock: Arc<dyn Clock>, options: ControllerOptions) -> Self {
        Self::with_metrics(client, clock, options, Arc::new(Metrics::new()))
    }

    /// As [`Context::new`], recording into `metrics` (the registry `/metrics` serves).
    pub fn with_metrics(
        client: Client,
        clock: Arc<dyn Clock>,
        options: ControllerOptions,
        metrics: Arc<Metrics>,
    ) -> Self {
        let events = EventPublisher::new(client.clone(), std::env::var("POD_NAME").ok());
        let bundle_images = Arc::new(bundle_images::BundleImages::new(
            options.bundle_images.clone(),
        ));
        Self {
            watches: Arc::new(SharedWatches::new(client.clone())),
            served_apis: Arc::default(),
            client,
            clock,
            events,
            bundle_images,
            options,
            catalogs: Arc::new(CatalogCache::with_metrics(Arc::clone(&metrics))),
            metrics,
        }
    }
}

//! `olm-rs sandbox`: a simulated cluster with OLM running in it, in one process.
//!
//! [`Sandbox::start`] wires together what the project already has: the embedded API server
//! (`crate::sandbox`, workload simulator on, served over HTTP on loopback for `kubectl`), OLM's
//! CRDs and the chart's namespaces and OperatorGroups, the registry gRPC server over a catalog
//! directory on a loopback port, a CatalogSource dialling it, and the real controllers
//! (`controller::run`, exactly as `olm-rs run` starts them). [`Sandbox::follow`] watches what a
//! user follows; [`Sandbox::subscribe`] creates the Subscription; [`Sandbox::shutdown`] stops
//! everything in reverse order.

pub mod follow;
pub mod objects;
pub mod tracker;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{ApiResource, DynamicObject};
use kube::{Api, Client, Resource};
use serde_json::Value;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::api::{CatalogSource, OperatorGroup, Subscription};
use crate::catalog::validated::{self, ServeLoadError};
use crate::controller::{self, RunError, RunOptions};
use crate::k8s::clock::SystemClock;
use crate::package_manifest::ManifestStore;
use crate::package_manifest::types::{GROUP, VERSION};
use crate::package_server::{AllowAll, FeedSlot, PackageApi, PackageServing, discovery, router};
use crate::reconcile::ControllerOptions;
use crate::reconcile::bundle_images::BundleImageOptions;
use crate::reconcile::catalog_source::CatalogSourceOptions;
use crate::registry::server::{self, ServeError};
use crate::sandbox::{AggregatedApi, ApiServer, ServingHandle};

pub use follow::{Follower, Report};
pub use objects::{
    CATALOG_NAMESPACE, CATALOG_SOURCE, ChoiceError, OPERATORS_NAMESPACE, SubscriptionChoice,
    SubscriptionRequest,
};
pub use tracker::{Kind, Settled, Transition};

/// How long each component may take to stop before it is abandoned.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// What to start.
#[derive(Debug, Clone)]
pub struct SandboxOptions {
    /// Where the API is served for `kubectl` (loopback; port 0 picks a free one).
    pub api_addr: SocketAddr,
    /// FBC directory (or directory of bundle directories) the registry serves.
    pub catalog: PathBuf,
    pub subscription: SubscriptionRequest,
    /// How the controllers pull bundle images (a catalog whose bundles are images).
    pub bundle_images: BundleImageOptions,
}

/// Why the sandbox could not start or stopped badly. Causes are part of each message (not
/// `source()`), so the CLI prints every cause once.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("catalog {}: {cause}", path.display())]
    Catalog {
        path: PathBuf,
        cause: ServeLoadError,
    },
    #[error("catalog {}: {cause}", path.display())]
    Choice { path: PathBuf, cause: ChoiceError },
    #[error("cannot listen on {addr} ({what}): {cause}")]
    Listen {
        what: &'static str,
        addr: SocketAddr,
        cause: std::io::Error,
    },
    #[error("creating {what}: {cause}")]
    Create { what: String, cause: kube::Error },
    #[error("{what} is not a valid object: {cause}")]
    Object {
        what: String,
        cause: serde_json::Error,
    },
    #[error("generating OLM's CRDs: {0}")]
    Crds(String),
    #[error("the controllers stopped: {0}")]
    Controllers(RunError),
    #[error("the registry stopped: {0}")]
    Registry(ServeError),
}

/// A background task stopped through a oneshot.
struct Stoppable<T> {
    stop: oneshot::Sender<()>,
    task: JoinHandle<T>,
}

impl<T> Stoppable<T> {
    /// Asks the task to stop and waits up to [`STOP_GRACE`]; `None` if it had to be aborted
    /// (or panicked).
    async fn stop(self) -> Option<T> {
        let _ = self.stop.send(());
        let abort = self.task.abort_handle();
        match tokio::time::timeout(STOP_GRACE, self.task).await {
            Ok(joined) => joined.ok(),
            Err(_) => {
                abort.abort();
                None
            }
        }
    }
}

/// Registers the PackageManifest API with the embedded server; its store is filled by the
/// controller process (`RunOptions::packages`).
pub fn package_api(api: &ApiServer) -> PackageServing {
    let store = Arc::new(ManifestStore::new(CATALOG_NAMESPACE));
    let feed = FeedSlot::default();
    let handler = PackageApi {
        store: Arc::clone(&store),
        feed: feed.clone(),
        authorizer: Arc::new(AllowAll),
        clock: Arc::new(SystemClock),
    };
    api.register_aggregated(AggregatedApi {
        group: GROUP.to_owned(),
        version: VERSION.to_owned(),
        resource_list: discovery::resource_list(),
        router: router(handler),
    });
    PackageServing {
        store,
        feed,
        https: None,
        serving_pod: None,
    }
}

/// The running sandbox.
pub struct Sandbox {
    client: Client,
    http: ServingHandle,
    registry: Stoppable<Result<(), ServeError>>,
    controllers: Stoppable<Result<(), RunError>>,
    registry_address: String,
    catalog: PathBuf,
    packages: usize,
    bundles: usize,
    choice: SubscriptionChoice,
    // Kept so the store (and its simulator) lives as long as the sandbox.
    _api: ApiServer,
}

impl Sandbox {
    /// Loads the catalog and checks the Subscription against it first (bad flags fail before
    /// anything listens), then starts everything but the Subscription.
    pub async fn start(options: SandboxOptions) -> Result<Sandbox, SandboxError> {
        let path = options.catalog.clone();
        let loaded = validated::load_for_serving(&path).map_err(|cause| SandboxError::Catalog {
            path: path.clone(),
            cause,
        })?;
        let choice = objects::choose_subscription(&loaded.index, &options.subscription).map_err(
            |cause| SandboxError::Choice {
                path: path.clone(),
                cause,
            },
        )?;
        let packages = loaded.index.packages().len();
        let bundles = loaded.index.bundle_count();

        let api = ApiServer::new();
        let client = api.client();
        // `kubectl get packagemanifests`: the embedded server routes the group to the same
        // handler `olm-rs run` serves behind the aggregation layer (docs/packagemanifests.md §10).
        let package_serving = package_api(&api);
        let http = api
            .serve(options.api_addr)
            .await
            .map_err(|cause| SandboxError::Listen {
                what: "Kubernetes API",
                addr: options.api_addr,
                cause,
            })?;
        install_olm(&client).await?;

        let registry_addr: SocketAddr = ([127, 0, 0, 1], 0).into();
        let listener = tokio::net::TcpListener::bind(registry_addr)
            .await
            .map_err(|cause| SandboxError::Listen {
                what: "registry",
                addr: registry_addr,
                cause,
            })?;
        let registry_address = listener
            .local_addr()
            .map_err(|cause| SandboxError::Listen {
                what: "registry",
                addr: registry_addr,
                cause,
            })?
            .to_string();
        let index = Arc::new(loaded.index);
        let (stop, stopped) = oneshot::channel::<()>();
        let registry = Stoppable {
            stop,
            task: tokio::spawn(server::serve(index, listener, async {
                let _ = stopped.await;
            })),
        };

        let (stop, stopped) = oneshot::channel::<()>();
        let run_options = RunOptions {
            probe_addr: ([127, 0, 0, 1], 0).into(),
            controller: ControllerOptions {
                global_catalog_namespace: CATALOG_NAMESPACE.to_owned(),
                catalog_sources: CatalogSourceOptions::quick(),
                bundle_images: options.bundle_images.clone(),
                ..ControllerOptions::default()
            },
            leader_election: None,
            packages: Some(package_serving),
        };
        let controllers = Stoppable {
            stop,
            task: tokio::spawn(controller::run(client.clone(), run_options, async {
                let _ = stopped.await;
            })),
        };
        create::<CatalogSource>(
            &client,
            "CatalogSource",
            objects::catalog_source(&registry_address),
        )
        .await?;
        Ok(Sandbox {
            client,
            http,
            registry,
            controllers,
            registry_address,
            catalog: path,
            packages,
            bundles,
            choice,
            _api: api,
        })
    }

    /// `http://127.0.0.1:<port>`
    pub fn url(&self) -> String {
        self.http.url()
    }

    /// A kubeconfig for the served API, default namespace `operators`.
    pub fn kubeconfig_yaml(&self) -> String {
        crate::sandbox::kubeconfig_yaml(&self.url(), OPERATORS_NAMESPACE)
    }

    pub fn registry_address(&self) -> &str {
        &self.registry_address
    }

    pub fn catalog(&self) -> (&Path, usize, usize) {
        (&self.catalog, self.packages, self.bundles)
    }

    pub fn choice(&self) -> &SubscriptionChoice {
        &self.choice
    }

    /// An in-process client of the sandbox's API.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// Starts following CatalogSources, the Subscription, InstallPlans and CSVs; returns once
    /// the watches have listed.
    pub async fn follow(&self) -> Follower {
        follow::follow(self.client.clone(), CATALOG_NAMESPACE, OPERATORS_NAMESPACE).await
    }

    /// Creates the Subscription chosen at start.
    pub async fn subscribe(&self) -> Result<(), SandboxError> {
        create::<Subscription>(
            &self.client,
            "Subscription",
            objects::subscription(&self.choice),
        )
        .await
    }

    /// Stops the controllers, then the registry, then the API listener. A component that
    /// failed on its own is reported; one that does not stop within 5 s is abandoned.
    pub async fn shutdown(self) -> Result<(), SandboxError> {
        let controllers = self.controllers.stop().await;
        let registry = self.registry.stop().await;
        self.http.shutdown().await;
        if let Some(Err(err)) = controllers {
            return Err(SandboxError::Controllers(err));
        }
        if let Some(Err(err)) = registry {
            return Err(SandboxError::Registry(err));
        }
        Ok(())
    }
}

/// OLM's CRDs, then the chart's namespaces and OperatorGroups.
async fn install_olm(client: &Client) -> Result<(), SandboxError> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in crate::api::crd::all().map_err(|e| SandboxError::Crds(e.to_string()))? {
        let name = crd.metadata.name.clone().unwrap_or_default();
        crds.create(&crate::k8s::post_params(), &crd)
            .await
            .map_err(|cause| SandboxError::Create {
                what: format!("CustomResourceDefinition {name}"),
                cause,
            })?;
    }
    for ns in objects::namespaces() {
        create::<Namespace>(client, "Namespace", ns).await?;
    }
    for og in objects::operator_groups() {
        create::<OperatorGroup>(client, "OperatorGroup", og).await?;
    }
    Ok(())
}

/// Creates `value` (a `K`, as JSON) through the API; K only says where it goes.
async fn create<K>(client: &Client, kind: &str, value: Value) -> Result<(), SandboxError>
where
    K: Resource<DynamicType = ()>,
{
    let resource = ApiResource::erase::<K>(&());
    let name = value["metadata"]["name"].as_str().unwrap_or_default();
    let namespace = value["metadata"]["namespace"].as_str().map(str::to_owned);
    let what = match &namespace {
        Some(ns) => format!("{kind} {ns}/{name}"),
        None => format!("{kind} {name}"),
    };
    let api: Api<DynamicObject> = match &namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    let object: DynamicObject =
        serde_json::from_value(value).map_err(|cause| SandboxError::Object {
            what: what.clone(),
            cause,
        })?;
    api.create(&crate::k8s::post_params(), &object)
        .await
        .map_err(|cause| SandboxError::Create { what, cause })?;
    Ok(())
}

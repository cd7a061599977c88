//! An embedded Kubernetes API server for tests and `olm-rs sandbox`.
//!
//! [`ApiServer`] keeps objects in memory and serves the Kubernetes HTTP API, either in-process
//! (`ApiServer::client()` gives a `kube::Client` whose requests never leave the process) or over
//! plain HTTP on 127.0.0.1 (`ApiServer::serve`, with a kubeconfig for `kubectl`).
//!
//! What is real:
//! - create/get/list/update/patch/delete/deletecollection for the built-in kinds OLM touches
//!   (see `resources.rs`) and for every served version of a stored CustomResourceDefinition
//!   (scope, status subresource, `Established`/`NamesAccepted` conditions, several versions
//!   stored once with `apiVersion` rewritten on read, pruning and defaulting from the
//!   structural schema);
//! - discovery (`/api`, `/apis`, group and version lists, aggregated discovery v2, `/version`);
//! - `resourceVersion` from one store-wide counter, 409 on a stale update, `generation` bumped
//!   on spec changes only, `uid`, `creationTimestamp`, `generateName`, no-op writes that change
//!   nothing;
//! - the status subresource (main writes keep status, status writes keep everything else);
//! - JSON merge, JSON, strategic merge patches and server-side apply with field managers
//!   (module `patch`);
//! - label selectors (`=`, `!=`, `in`, `notin`, `key`, `!key`) and field selectors;
//! - list paging (`limit`/`continue`), watch from a `resourceVersion`, bookmarks, streaming
//!   lists (`sendInitialEvents`), 410 Gone for versions no longer kept;
//! - deletion with finalizers, ownerReference garbage collection (background, foreground,
//!   orphan), namespace deletion cascading to its content, CRD deletion removing its objects;
//! - server-side `Table` output for `kubectl get` (CRD `additionalPrinterColumns`).
//!
//! What it is not:
//! - no admission chain (no webhooks are called, no quota, no defaulting beyond a few built-in
//!   fields), except the namespace lifecycle rule (no content in missing or terminating
//!   namespaces);
//! - no authentication and no RBAC enforcement: every request is allowed;
//! - no kubelet, scheduler or controllers besides its own: no pod ever runs. The workload
//!   simulator ([`WorkloadSimulator`], on by default) only writes the status a healthy (or, on
//!   request, failed) Deployment would get, and marks APIServices Available when their Service
//!   exists; nothing is proxied to aggregated API servers;
//! - no schema validation of objects (types, required fields, CEL; `fieldValidation=Strict` is
//!   accepted and ignored), no conversion webhooks, no OpenAPI schemas (`/openapi/v3` lists
//!   PATCH operations only, `/openapi/v2` is 404), no protobuf or CBOR bodies (so
//!   `kubectl create <kind> …` generators fail with 415; `kubectl apply/create -f` work), no
//!   `exec`/`logs`/`proxy`/`scale`, no snapshot reads (`resourceVersionMatch=Exact` and paged
//!   lists see the current state);
//! - CRDs are served as soon as they are stored; their `Established` condition follows a moment
//!   later, written by the built-in CRD controller, as on a real cluster.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use olm_rs_sandbox::{ApiServer, ApiServerOptions};
//!
//! let server = ApiServer::with_options(ApiServerOptions { simulate_workloads: false, ..Default::default() });
//! let cms: kube::Api<ConfigMap> = kube::Api::default_namespaced(server.client());
//! let listed = cms.list(&Default::default()).await?;
//! let http = server.serve("127.0.0.1:0".parse()?).await?; // for kubectl
//! std::fs::write("sandbox.kubeconfig", http.kubeconfig_yaml())?;
//! # Ok(()) }
//! ```

pub mod aggregated;
mod conditions;
mod connect;
mod controllers;
mod conversion;
mod crd_controller;
mod crd_registry;
mod crd_schema;
mod discovery;
mod error;
mod gc;
mod http;
mod kubeconfig;
mod meta;
mod namespaces;
mod objects;
mod openapi;
pub mod patch;
mod resources;
mod selectors;
mod server;
mod simulator;
mod state;
mod store;
mod table;
mod tcp;
mod workload_simulator;

pub use aggregated::AggregatedApi;
pub use kubeconfig::kubeconfig_yaml;
pub use server::{ApiServer, ApiServerOptions};
pub use tcp::ServingHandle;
pub use workload_simulator::WorkloadSimulator;

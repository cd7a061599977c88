//! Serving the PackageManifest API (`packages.operators.coreos.com/v1`) from olm-rs's own
//! catalog indexes: the HTTP handler (`api`), delegated authentication and authorization
//! (`auth`), HTTPS for the API server's aggregation layer (`tls`), the serving certificate and
//! APIService (`apiservice`), and the task that keeps the manifests current (`sync`).
//! docs/packagemanifests.md.

pub mod api;
pub mod auth;
pub mod cert_keeper;
pub mod discovery;
pub mod responses;
pub mod serving_pod;
pub mod sync;
pub mod tls;

pub use api::{PackageApi, router};
pub use auth::{AllowAll, Authorizer, Identity, SubjectAccessReviewer};
pub use sync::{CatalogContents, FeedSlot, ManifestFeed, keep_current};

use std::net::SocketAddr;
use std::sync::Arc;

use crate::certs::ServiceName;
use crate::package_manifest::ManifestStore;

/// The package API of a controller process: the store it fills, and where it serves it.
#[derive(Debug, Clone)]
pub struct PackageServing {
    pub store: Arc<ManifestStore>,
    /// Shared with the request handler: requests bring the store up to date through it.
    pub feed: FeedSlot,
    /// `Some` for `olm-rs run`: HTTPS for the aggregation layer. `None`: the store is only
    /// kept current (the sandbox's embedded API server routes requests to it).
    pub https: Option<HttpsOptions>,
    /// This replica's Pod, labelled while it runs the reconcilers (`serving_pod`); `None`
    /// outside a Pod.
    pub serving_pod: Option<serving_pod::PodRef>,
}

/// Where `olm-rs run` serves the package API and the Service the API server reaches it by
/// (the serving certificate's names).
#[derive(Debug, Clone)]
pub struct HttpsOptions {
    pub addr: SocketAddr,
    pub service: ServiceName,
}

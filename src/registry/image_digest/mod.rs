//! "What digest does this tag point at now?" — asked of the image registry through the OCI
//! distribution API, without pulling anything and without a container runtime.
//!
//! OLM polls a catalog image by starting a whole pod every interval and comparing the image IDs
//! the kubelet reports (docs/catalog.md §3.4, a known pain). olm-rs asks the registry for the
//! tag's manifest digest (`HEAD /v2/<name>/manifests/<tag>` → `Docker-Content-Digest`) and rolls
//! the registry pod only when that digest changed.

mod docker_config;
mod fixed;
mod http;

use std::collections::BTreeMap;

use ::http::StatusCode;
use futures::future::BoxFuture;

use super::image_ref::ImageReferenceError;

pub use docker_config::parse_docker_config;
pub use fixed::{FakeDigestResolver, UnavailableDigestResolver};
pub use http::HttpDigestResolver;

/// Basic credentials for one registry host, e.g. from a `kubernetes.io/dockerconfigjson` pull
/// secret.
#[derive(Clone, PartialEq, Eq)]
pub struct RegistryCredential {
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for RegistryCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryCredential")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// Credentials by registry host (`quay.io`, `docker.io`, `localhost:5000`).
pub type RegistryCredentials = BTreeMap<String, RegistryCredential>;

#[derive(Debug, thiserror::Error)]
pub enum DigestError {
    #[error(transparent)]
    Reference(#[from] ImageReferenceError),
    #[error("image {image}: cannot reach registry {host}: {message}")]
    Unreachable {
        image: String,
        host: String,
        message: String,
    },
    #[error("image {image}: registry {host} refused access ({status}){hint}")]
    Unauthorized {
        image: String,
        host: String,
        status: StatusCode,
        hint: &'static str,
    },
    #[error("image {image}: registry {host} answered {status} for the manifest")]
    Status {
        image: String,
        host: String,
        status: StatusCode,
    },
    #[error("image {image}: registry {host}: {message}")]
    Protocol {
        image: String,
        host: String,
        message: String,
    },
}

/// Resolves an image reference to the digest of the manifest it names now.
pub trait ImageDigestResolver: Send + Sync + 'static {
    /// `credentials` are the pull secrets that apply (may be empty: anonymous access).
    fn resolve<'a>(
        &'a self,
        image: &'a str,
        credentials: &'a RegistryCredentials,
    ) -> BoxFuture<'a, Result<String, DigestError>>;
}

#[cfg(test)]
mod tests;

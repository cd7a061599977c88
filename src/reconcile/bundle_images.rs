//! Bundle images for the reconcilers: the shared puller (`bundle_image`), the pull secrets OLM
//! would use for a catalog's bundles, and the classification of pull failures into the plain
//! words of a lookup condition.
//!
//! Pull secrets: the CatalogSource's `spec.secrets` (read from the catalog's namespace, as OLM's
//! unpack Jobs use them) plus the controller-wide `--pull-secret NAMESPACE/NAME` list. Messages
//! name the secrets tried, never their content.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::Api;

use crate::api::CatalogRef;
use crate::api::CatalogSource;
use crate::api::install_plan::bundle_lookup_reason as reason;
use crate::bundle_unpack::unpack_pod::UnpackPodOptions;
use crate::image_policy::ImagePolicy;
use crate::oci::{BundlePuller, ConfigError, Credentials, PullError, PulledBundle, PullerConfig};
use crate::plan::unpack::{DEFAULT_UNPACK_TIMEOUT, PullFailure};

/// A Secret by namespace and name (`--pull-secret NAMESPACE/NAME`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretRef {
    pub namespace: String,
    pub name: String,
}

/// A `--pull-secret` value that is not `NAMESPACE/NAME`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("pull secret {0:?} must be written NAMESPACE/NAME (for example olm/quay-pull)")]
pub struct SecretRefError(pub String);

impl std::str::FromStr for SecretRef {
    type Err = SecretRefError;
    fn from_str(s: &str) -> Result<Self, SecretRefError> {
        match s.split_once('/') {
            Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
                Ok(SecretRef {
                    namespace: ns.to_owned(),
                    name: name.to_owned(),
                })
            }
            _ => Err(SecretRefError(s.to_owned())),
        }
    }
}

impl std::fmt::Display for SecretRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Settings of the bundle image path (`olm-rs run` flags).
#[derive(Debug, Clone)]
pub struct BundleImageOptions {
    /// `--registries-config`: containers-registries.conf v2 (mirrors, insecure, blocked).
    pub registries_config: Option<PathBuf>,
    /// `--registry-ca-file`: extra PEM CAs trusted for registries.
    pub registry_ca_file: Option<PathBuf>,
    /// `--bundle-cache-dir`: where pulled bundles are kept across restarts.
    pub cache_dir: Option<PathBuf>,
    /// `--pull-secret`: secrets tried for every bundle image.
    pub pull_secrets: Vec<SecretRef>,
    /// `--bundle-unpack-timeout` (zero: no deadline).
    pub unpack_timeout: Duration,
    /// `--image-policy` and `--registries-d`, read: what every in-process pull obeys
    /// (docs/image-signatures.md); by default nothing is checked, as in OLM.
    pub image_policy: Arc<ImagePolicy>,
    /// `--bundle-unpack-image`: when set, a bundle image the controller cannot pull itself is
    /// unpacked by a pod on a node (docs/bundle-images.md, "When only the node can pull").
    pub unpack_pod: Option<UnpackPodOptions>,
}

impl Default for BundleImageOptions {
    fn default() -> Self {
        BundleImageOptions {
            registries_config: None,
            registry_ca_file: None,
            cache_dir: None,
            pull_secrets: Vec::new(),
            unpack_timeout: DEFAULT_UNPACK_TIMEOUT,
            image_policy: Arc::new(ImagePolicy::accept_anything()),
            unpack_pod: None,
        }
    }
}

/// The puller every reconciler shares, with the controller-wide pull secrets.
#[derive(Clone)]
pub struct BundleImages {
    /// Shared: the error is not `Clone`.
    puller: Result<BundlePuller, Arc<ConfigError>>,
    pub options: BundleImageOptions,
}

impl BundleImages {
    /// Builds the puller; a configuration that cannot be read makes every pull fail with its
    /// reason (`olm-rs run` checks the files before starting, so this is for embedders).
    pub fn new(options: BundleImageOptions) -> Self {
        let puller = PullerConfig::from_files(
            options.registries_config.as_deref(),
            options.registry_ca_file.as_deref(),
            options.cache_dir.clone(),
        )
        .map(|config| PullerConfig {
            image_policy: Arc::clone(&options.image_policy),
            ..config
        })
        .and_then(BundlePuller::new)
        .map_err(Arc::new);
        BundleImages { puller, options }
    }

    /// The configuration error, if the puller could not be built.
    pub fn config_error(&self) -> Option<&ConfigError> {
        self.puller.as_ref().err().map(AsRef::as_ref)
    }

    /// The bundle of `image` from the cache (memory, then disk), without the network.
    pub fn cached(&self, image: &str) -> Option<Arc<PulledBundle>> {
        self.puller.as_ref().ok()?.cached(image)
    }

    /// Pulls `image` (or takes it from the cache), within `within` when given.
    pub async fn pull(
        &self,
        image: &str,
        credentials: &Credentials,
        within: Option<Duration>,
    ) -> Result<Arc<PulledBundle>, PullFailure> {
        let puller = self.puller.as_ref().map_err(|e| PullFailure {
            reason: reason::PULL_FAILED,
            message: format!("bundle image {image} cannot be pulled: {e}"),
            transient: false,
        })?;
        // A digest names fixed content: the cache answers. A tag may have moved, so the
        // registry is asked (the puller then reuses cached blobs by digest).
        if image.contains('@')
            && let Some(bundle) = puller.cached(image)
        {
            return Ok(bundle);
        }
        let pull = puller.pull(image, credentials);
        let pulled = match within {
            Some(limit) => tokio::time::timeout(limit, pull)
                .await
                .map_err(|_| PullFailure {
                    reason: reason::DEADLINE_EXCEEDED,
                    message: format!(
                        "bundle image {image} was not pulled within the unpack timeout"
                    ),
                    transient: true,
                })?,
            None => pull.await,
        };
        pulled.map_err(|e| classify(image, &e))
    }

    /// The credentials for bundles of `catalog`: its `spec.secrets` and the controller-wide
    /// pull secrets. Secrets that are missing or unreadable are logged (a pull that then needs
    /// them is refused, and the message lists the secrets that were tried).
    pub async fn credentials(&self, client: &Client, catalog: &CatalogRef) -> Credentials {
        let catalogs: Api<CatalogSource> = Api::namespaced(client.clone(), &catalog.namespace);
        let secrets = match catalogs.get_opt(&catalog.name).await {
            Ok(Some(source)) => source.spec.secrets.unwrap_or_default(),
            _ => Vec::new(),
        };
        let read = self
            .read_credentials(client, &catalog.namespace, &secrets)
            .await;
        for problem in &read.problems {
            tracing::warn!(%problem, "pull secret not used");
        }
        read.credentials
    }

    /// The one credentials reader of every image pull (catalog digests, catalog content,
    /// bundles): the pull secrets named `secrets` in `namespace` (a CatalogSource's
    /// `spec.secrets`) and the controller-wide `--pull-secret`s, each secret that cannot be
    /// used reported.
    pub async fn read_credentials(
        &self,
        client: &Client,
        namespace: &str,
        secrets: &[String],
    ) -> CredentialsRead {
        let mut read = CredentialsRead {
            credentials: Credentials::anonymous(),
            problems: Vec::new(),
        };
        let wanted = secrets
            .iter()
            .filter(|s| !s.is_empty())
            .map(|name| SecretRef {
                namespace: namespace.to_owned(),
                name: name.clone(),
            })
            .chain(self.options.pull_secrets.iter().cloned());
        for secret in wanted {
            let api: Api<Secret> = Api::namespaced(client.clone(), &secret.namespace);
            match api.get_opt(&secret.name).await {
                Ok(Some(found)) => {
                    let data: BTreeMap<String, Vec<u8>> = found
                        .data
                        .unwrap_or_default()
                        .into_iter()
                        .map(|(k, v)| (k, v.0))
                        .collect();
                    let type_ = found.type_.unwrap_or_default();
                    if let Err(source) =
                        read.credentials
                            .add_secret(&secret.namespace, &secret.name, &type_, &data)
                    {
                        read.problems.push(SecretProblem::Unusable { source });
                    }
                }
                Ok(None) => read.problems.push(SecretProblem::NotFound { secret }),
                Err(source) => read.problems.push(SecretProblem::Unreadable {
                    secret,
                    source: Box::new(source),
                }),
            }
        }
        read
    }

    /// The shared OCI client, or why it could not be set up.
    pub fn puller(&self) -> Result<&BundlePuller, NoImageClient> {
        self.puller.as_ref().map_err(|source| NoImageClient {
            source: source.clone(),
        })
    }
}

/// The image client could not be set up (a bad registries.conf or CA file): every pull fails.
#[derive(Debug, thiserror::Error)]
#[error("the image client is not set up: {source}")]
pub struct NoImageClient {
    #[source]
    pub source: Arc<ConfigError>,
}

/// Registry logins read from pull secrets, and the secrets that could not be used.
#[derive(Debug)]
pub struct CredentialsRead {
    pub credentials: Credentials,
    pub problems: Vec<SecretProblem>,
}

/// A pull secret that could not be used, in plain words.
#[derive(Debug, thiserror::Error)]
pub enum SecretProblem {
    #[error("pull secret {secret} was not found")]
    NotFound { secret: SecretRef },
    #[error("pull secret {secret} cannot be read: {source}")]
    Unreadable {
        secret: SecretRef,
        #[source]
        source: Box<kube::Error>,
    },
    #[error(transparent)]
    Unusable {
        #[from]
        source: crate::oci::CredentialsError,
    },
}

/// A pull error in a lookup's words: its reason, the message (which names the image and the
/// registry or file at fault), and whether to retry soon.
pub fn classify(image: &str, error: &PullError) -> PullFailure {
    let why = match error {
        PullError::Unauthorized { .. } => reason::UNAUTHORIZED,
        PullError::NotFound { .. } => reason::IMAGE_NOT_FOUND,
        PullError::Unreachable { .. } => reason::REGISTRY_UNREACHABLE,
        PullError::TimedOut { .. } => reason::REGISTRY_UNREACHABLE,
        PullError::InvalidContent { .. } => reason::INVALID_BUNDLE_CONTENT,
        PullError::Blocked { .. } => reason::IMAGE_BLOCKED,
        PullError::Refused(_) => reason::IMAGE_POLICY_REFUSED,
        _ => reason::PULL_FAILED,
    };
    let text = error.to_string();
    let message = if matches!(error, PullError::Refused(_)) {
        // OLM's words for a bundle that cannot be unpacked, then why.
        format!("bundle unpacking failed: {text}")
    } else if text.contains(image) {
        text
    } else {
        format!("bundle image {image}: {text}")
    };
    PullFailure {
        reason: why,
        message,
        transient: error.is_transient(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_secret_flags_are_namespace_slash_name() {
        assert_eq!(
            "olm/quay-pull".parse::<SecretRef>(),
            Ok(SecretRef {
                namespace: "olm".into(),
                name: "quay-pull".into()
            })
        );
        for bad in ["quay-pull", "/x", "olm/", "a/b/c"] {
            let err = bad.parse::<SecretRef>().unwrap_err().to_string();
            assert!(err.contains("NAMESPACE/NAME"), "{bad}: {err}");
        }
    }

    #[test]
    fn pull_errors_become_lookup_reasons_in_plain_words() {
        let image = "127.0.0.1:5000/op-bundle:v1";
        let denied = classify(
            image,
            &PullError::Unauthorized {
                image: image.into(),
                registry: "127.0.0.1:5000".into(),
                secrets_tried: vec!["olm/pull".into()],
            },
        );
        assert_eq!(denied.reason, reason::UNAUTHORIZED);
        assert!(!denied.transient);
        assert!(denied.message.contains("olm/pull"), "{}", denied.message);
        let down = classify(
            image,
            &PullError::Unreachable {
                image: image.into(),
                registry: "127.0.0.1:5000".into(),
                cause: "connection refused".into(),
            },
        );
        assert_eq!(down.reason, reason::REGISTRY_UNREACHABLE);
        assert!(down.transient);
        let bad = classify(
            image,
            &PullError::InvalidContent {
                image: image.into(),
                file: "manifests/../x".into(),
                reason: "path leaves the bundle".into(),
            },
        );
        assert_eq!(bad.reason, reason::INVALID_BUNDLE_CONTENT);
        assert!(bad.message.contains("manifests/../x") && bad.message.contains(image));
        let blocked = classify(
            image,
            &PullError::Blocked {
                image: image.into(),
                rule: "blocked by registries.conf".into(),
            },
        );
        assert_eq!(blocked.reason, reason::IMAGE_BLOCKED);
        let refused = classify(
            image,
            &PullError::Refused(Box::new(crate::oci::PolicyRefusal {
                image: image.into(),
                digest: "sha256:ab".into(),
                policy: "/etc/containers/policy.json".into(),
                scope: "default".into(),
                kind: "WrongKey",
                reason: "no signature accepted: wrong key".into(),
            })),
        );
        assert_eq!(refused.reason, reason::IMAGE_POLICY_REFUSED);
        assert!(!refused.transient);
        assert!(
            refused
                .message
                .starts_with("bundle unpacking failed: image ")
                && refused.message.contains("scope default")
                && refused.message.contains("wrong key"),
            "{}",
            refused.message
        );
    }
}

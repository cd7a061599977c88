//! Why a bundle image could not be pulled, in the words a user acts on.

use std::path::PathBuf;

use super::credentials::CredentialsError;
use super::registries_conf::RegistriesConfError;

/// The puller cannot be set up (bad `registries.conf`, CA file or cache directory).
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(transparent)]
    RegistriesConf(#[from] RegistriesConfError),
    #[error("registry CA file {}: {source}", file.display())]
    CaFile {
        file: PathBuf,
        #[source]
        source: CaFileError,
    },
    #[error("bundle cache directory {}: {source}", dir.display())]
    CacheDir {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Credentials(#[from] CredentialsError),
    #[error("cannot set up the registry client: {0}")]
    Client(String),
}

/// Why a registry CA file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum CaFileError {
    #[error(transparent)]
    Read(std::io::Error),
    #[error("not PEM: {0}")]
    NotPem(pem::PemError),
    #[error("holds no CERTIFICATE block")]
    NoCertificate,
    #[error("a certificate cannot be read: {0}")]
    BadCertificate(x509_parser::nom::Err<x509_parser::error::X509Error>),
}

/// Why a pull failed. Messages name the image (and the file, for bad content) and the pull
/// secrets tried, never their content.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PullError {
    #[error("image reference {image:?} is not valid: {reason}")]
    InvalidReference { image: String, reason: String },
    #[error("image {image}: {rule}")]
    Blocked { image: String, rule: String },
    #[error("image {image}: registry {registry} refused access ({})", tried(.secrets_tried))]
    Unauthorized {
        image: String,
        registry: String,
        secrets_tried: Vec<String>,
    },
    #[error("image {image} was not found in its registry ({detail})")]
    NotFound { image: String, detail: String },
    #[error("image {image}: registry {registry} cannot be reached: {cause}")]
    Unreachable {
        image: String,
        registry: String,
        cause: String,
    },
    #[error("image {image}: registry {registry} did not answer in time ({cause})")]
    TimedOut {
        image: String,
        registry: String,
        cause: String,
    },
    #[error("image {image}: registry {registry} failed: {cause}")]
    RegistryError {
        image: String,
        registry: String,
        cause: String,
        /// Overloaded or failing for now (HTTP 429, 5xx), not refusing the request.
        transient: bool,
    },
    #[error("image {image}: {file}: {reason}")]
    InvalidContent {
        image: String,
        /// The file (or layer, or manifest) at fault.
        file: String,
        reason: String,
    },
    #[error("image {image}: bundle cache: {reason}")]
    Cache { image: String, reason: String },
    /// A catalog image without the file-based catalog label (a SQLite index image, or not a
    /// catalog at all), or whose labelled directory is missing or empty.
    #[error("image {image} is not a file-based catalog image: {reason}")]
    NotACatalog { image: String, reason: String },
    /// The image policy refuses the image (docs/image-signatures.md §6): nothing of it is
    /// unpacked.
    #[error(transparent)]
    Refused(Box<PolicyRefusal>),
}

/// An image the policy refused: the image, its digest, the policy file, the scope that applied
/// and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("image {image} ({digest}) refused by image policy {policy}, scope {scope}: {reason}")]
pub struct PolicyRefusal {
    pub image: String,
    pub digest: String,
    /// The policy file.
    pub policy: String,
    /// The scope whose requirements applied (`transports.docker."quay.io/org"`, `default`).
    pub scope: String,
    /// Why, in one word (`NoSignature`, `WrongKey`, `IdentityMismatch`, `Rejected`, …).
    pub kind: &'static str,
    pub reason: String,
}

fn tried(secrets: &[String]) -> String {
    if secrets.is_empty() {
        "anonymous pull; no pull secret has a login for it".to_string()
    } else {
        format!(
            "tried anonymous and the pull secrets {}",
            secrets.join(", ")
        )
    }
}

impl PullError {
    /// A failure that can go away by itself (network, registry overloaded); the others need
    /// someone to change something (a secret, a tag, the image, registries.conf).
    pub fn is_transient(&self) -> bool {
        match self {
            PullError::Unreachable { .. }
            | PullError::TimedOut { .. }
            | PullError::Cache { .. } => true,
            PullError::RegistryError { transient, .. } => *transient,
            _ => false,
        }
    }

    /// The image named in the message.
    pub fn image(&self) -> &str {
        match self {
            PullError::InvalidReference { image, .. }
            | PullError::Blocked { image, .. }
            | PullError::Unauthorized { image, .. }
            | PullError::NotFound { image, .. }
            | PullError::Unreachable { image, .. }
            | PullError::TimedOut { image, .. }
            | PullError::RegistryError { image, .. }
            | PullError::InvalidContent { image, .. }
            | PullError::Cache { image, .. }
            | PullError::NotACatalog { image, .. } => image,
            PullError::Refused(r) => &r.image,
        }
    }

    /// A short CamelCase word for the kind of failure (event reasons, metrics labels).
    pub fn kind(&self) -> &'static str {
        match self {
            PullError::InvalidReference { .. } => "InvalidReference",
            PullError::Blocked { .. } => "Blocked",
            PullError::Unauthorized { .. } => "Unauthorized",
            PullError::NotFound { .. } => "NotFound",
            PullError::Unreachable { .. } => "Unreachable",
            PullError::TimedOut { .. } => "TimedOut",
            PullError::RegistryError { .. } => "RegistryError",
            PullError::InvalidContent { .. } => "InvalidContent",
            PullError::Cache { .. } => "CacheError",
            PullError::NotACatalog { .. } => "NotACatalog",
            PullError::Refused(_) => "ImagePolicyRefused",
        }
    }
}

//! registry+v1 bundle images, pulled straight from their registry: no unpack Job, no ConfigMap,
//! no size limit but the ones set here (docs/bundle-images.md).
//!
//! The pure parts live in their own files: image names (`reference`), `registries.conf`
//! matching (`registries_conf`), pull-secret parsing (`credentials`), the checks on layer
//! contents (`layers`) and rendering (`bundle`). The network (`puller`, on the `oci-client`
//! crate) and the disk (`cache`) are kept apart from them.

mod bundle;
mod cache;
mod classify;
mod credentials;
mod error;
mod layers;
mod puller;
mod reference;
mod registries_conf;

pub use bundle::PulledBundle;
pub use cache::CacheStats;
pub use credentials::{Credentials, CredentialsError, RegistryLogin};
pub use error::{ConfigError, PullError};
pub use layers::{LayerBlob, LayerError, Limits, UnpackedFiles, unpack_layers};
pub use puller::{BundlePuller, DEFAULT_REGISTRIES_CONF, PullerConfig};
pub use reference::{ImageName, ImageNameError};
pub use registries_conf::{
    BlockedBy, PullSource, PullSourcesError, RegistriesConf, RegistriesConfError,
};

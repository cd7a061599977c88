//! The one OCI client of olm-rs: registry+v1 bundle images pulled straight from their registry
//! (no unpack Job, no ConfigMap, no size limit but the ones set here; docs/bundle-images.md),
//! catalog images pulled and unpacked the same way, and the digest polls of catalog images
//! (docs/catalog-images.md). One image reference type, one credentials reader, one
//! `registries.conf`, one CA option.
//!
//! The pure parts live in their own files: image names (`reference`), `registries.conf`
//! matching (`registries_conf`), pull-secret parsing (`credentials`), the checks on layer
//! contents (`layers`) and rendering (`bundle`). The network (`puller`, on the `oci-client`
//! crate) and the disk (`cache`) are kept apart from them.

mod bundle;
mod cache;
mod catalog_image;
mod classify;
mod credentials;
mod download;
mod error;
mod layers;
mod puller;
mod reference;
mod registries_conf;
mod signatures;

pub use bundle::PulledBundle;
pub use cache::CacheStats;
pub use cache::digest_dir;
pub use catalog_image::{CATALOG_CONFIGS_LABEL, PulledCatalog, catalog_dir_of};
pub use credentials::{Credentials, CredentialsError, RegistryLogin};
pub use error::{CaFileError, ConfigError, PolicyRefusal, PullError};
pub use layers::{
    LayerBlob, LayerError, Limits, UnpackedFiles, label_dir, unpack_layers, unpack_layers_under,
    write_files,
};
pub use puller::{BundlePuller, DEFAULT_REGISTRIES_CONF, PullerConfig};
pub use reference::{ImageName, ImageNameError};
pub use registries_conf::{
    BlockedBy, PullSource, PullSourcesError, RegistriesConf, RegistriesConfError,
};
pub use signatures::{DEFAULT_REGISTRIES_D, ImagePolicyError, load_image_policy};

//! The catalog engine (pure): file-based catalogs, registry+v1 bundle directories, validation
//! as `opm validate` does it, blang semver ranges, and the upgrade graph OLM walks.
//! docs/catalog.md §5.3, §6, §8; docs/catalog.md §9.2, docs/resolution.md §4, docs/resolution.md §8.

pub mod api_projection;
pub mod bundle_dir;
pub mod configmap_catalog;
pub mod csv_metadata;
pub mod dot;
pub mod error;
pub mod fbc;
pub mod go_json;
pub mod index;
pub mod load;
pub mod model;
pub mod packed;
pub mod properties;
pub mod replaces_mode;
pub mod semver_range;
pub mod upgrade_graph;
pub mod validate;
pub mod validated;

pub use error::{CatalogError, Location, Problem, Rule};
pub use fbc::{CsvMetadataHold, LoadOptions};
pub use index::{CatalogIndex, ChannelIndex, EntryRef, IndexedBundle, PackageIndex};
pub use load::{CatalogKind, load_catalog, load_catalog_with};
pub use model::{
    Bundle, Channel, ChannelEntry, DeclarativeConfig, DeprecationEntry, DeprecationReference,
    Deprecations, Icon, Origin, OtherBlob, Package, Property, RelatedImage,
};
pub use upgrade_graph::{
    Candidate, EdgeKind, GraphEdge, GraphEntry, GraphError, NoUpdate, UpgradeGraph, UpgradePath,
};

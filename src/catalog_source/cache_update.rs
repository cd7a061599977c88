//! What a CatalogSource's sync asks of the shared catalog cache (`catalog_cache`): the
//! content to serve, or why the catalog is unhealthy. Decided by `decision` (pod mode,
//! ConfigMaps, addresses) and `in_process` (images served in-process); carried out by the
//! shell (docs/catalog.md §1).

use std::sync::Arc;

use crate::catalog::CatalogIndex;

/// Why a catalog is unhealthy in the catalog cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unhealthy {
    SpecInvalid,
    Unreachable,
    Invalid,
}

/// A change of the catalog's entry in the shared catalog cache (registered by the controller
/// before it observes: a catalog being loaded is known as loading).
#[derive(Debug, Clone)]
pub enum CacheUpdate {
    /// This content is served.
    Index(Arc<CatalogIndex>),
    /// The content held is current.
    Ready,
    Unhealthy {
        reason: Unhealthy,
        message: String,
        /// Drop the content served so far.
        drop_index: bool,
    },
}

//! Where the Subscription sync gets catalogs from. The controller reads the registry's catalog
//! cache; tests and `olm-rs resolve` hand in catalogs loaded from disk.

use std::path::Path;
use std::sync::Arc;

use crate::catalog::{CatalogIndex, load_catalog};
use crate::resolve::{CatalogContent, CatalogInput, CatalogRef};

/// Catalogs visible from a namespace: those in it and, when different, in the global catalog
/// namespace (resolution.md §2).
pub trait CatalogSnapshots: Send + Sync {
    fn visible_from(&self, namespace: &str, global_namespace: &str) -> Vec<CatalogInput>;
}

/// A fixed set of catalogs.
#[derive(Debug, Clone, Default)]
pub struct StaticCatalogs {
    catalogs: Vec<CatalogInput>,
}

impl StaticCatalogs {
    pub fn new(catalogs: Vec<CatalogInput>) -> Self {
        StaticCatalogs { catalogs }
    }

    /// Adds (or replaces) a readable catalog.
    pub fn with_index(mut self, key: CatalogRef, index: Arc<CatalogIndex>) -> Self {
        self.catalogs.retain(|c| c.key != key);
        self.catalogs.push(CatalogInput {
            uid: Some(format!("static-{key}")),
            key,
            priority: 0,
            content: CatalogContent::Ready(index),
            healthy: true,
        });
        self
    }

    /// Adds (or replaces) a catalog that cannot be read.
    pub fn with_unavailable(mut self, key: CatalogRef, reason: impl Into<String>) -> Self {
        self.catalogs.retain(|c| c.key != key);
        self.catalogs.push(CatalogInput {
            uid: Some(format!("static-{key}")),
            key,
            priority: 0,
            content: CatalogContent::Unavailable(reason.into()),
            healthy: false,
        });
        self
    }
}

impl CatalogSnapshots for StaticCatalogs {
    fn visible_from(&self, namespace: &str, global_namespace: &str) -> Vec<CatalogInput> {
        self.catalogs
            .iter()
            .filter(|c| c.key.namespace == namespace || c.key.namespace == global_namespace)
            .cloned()
            .collect()
    }
}

/// Why a catalog directory could not be loaded.
#[derive(Debug, thiserror::Error)]
#[error("catalog {path}: {reason}")]
pub struct LoadError {
    pub path: String,
    pub reason: String,
}

/// Loads a catalog directory (FBC, or registry+v1 bundle directories) into an index.
pub fn load_index(path: &Path) -> Result<Arc<CatalogIndex>, LoadError> {
    let (_, config, _problems) = load_catalog(path).map_err(|e| LoadError {
        path: path.display().to_string(),
        reason: e.to_string(),
    })?;
    Ok(Arc::new(CatalogIndex::new(config)))
}

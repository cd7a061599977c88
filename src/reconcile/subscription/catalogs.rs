//! Where the Subscription sync gets catalogs from: the controller reads the registry's catalog
//! cache; tests hand in a fixed set of their own.

use std::path::Path;
use std::sync::Arc;

use futures::Stream;

use crate::api::CatalogRef;
use crate::catalog::{CatalogIndex, load_catalog};
use crate::catalog_cache::{CatalogCache, CatalogSnapshot, HealthReason};
use crate::resolve::{CatalogContent, CatalogInput};

/// Catalogs visible from a namespace: those in it and, when different, in the global catalog
/// namespace (docs/resolution.md §2).
pub trait CatalogSnapshots: Send + Sync {
    fn visible_from(&self, namespace: &str, global_namespace: &str) -> Vec<CatalogInput>;

    /// Whether the catalog `key` is known and past its first load (fixed sets always are).
    fn first_load_done(&self, _key: &CatalogRef) -> bool {
        true
    }
}

/// The running controller's catalogs: what the CatalogSource controller loaded. The index is
/// shared (`Arc`), never copied. Stale content of a catalog that went unhealthy stays readable,
/// as OLM keeps resolving from its last good cache, while `healthy: false` still reaches
/// `status.catalogHealth` and the `CatalogSourcesUnhealthy` condition.
impl CatalogSnapshots for CatalogCache {
    fn visible_from(&self, namespace: &str, global_namespace: &str) -> Vec<CatalogInput> {
        CatalogCache::visible_from(self, namespace, global_namespace)
            .into_iter()
            .map(catalog_input)
            .collect()
    }

    fn first_load_done(&self, key: &CatalogRef) -> bool {
        self.get(key)
            .is_some_and(|c| c.health.reason != HealthReason::Loading)
    }
}

fn catalog_input(snapshot: CatalogSnapshot) -> CatalogInput {
    let content = match snapshot.index {
        Some(index) => CatalogContent::Ready(index),
        None if snapshot.health.reason == HealthReason::Loading => {
            CatalogContent::Loading(format!("catalog {} has not been loaded yet", snapshot.key))
        }
        None if snapshot.health.message.is_empty() => {
            CatalogContent::Unavailable(format!("catalog {} has not been loaded yet", snapshot.key))
        }
        None => CatalogContent::Unavailable(snapshot.health.message.clone()),
    };
    CatalogInput {
        priority: snapshot.priority.clamp(i32::MIN.into(), i32::MAX.into()) as i32,
        uid: snapshot.uid,
        healthy: snapshot.health.healthy,
        key: snapshot.key,
        content,
    }
}

/// Yields once per change to any catalog (content, health, existence): the Subscription
/// controller then re-syncs every namespace with Subscriptions. Changes that land while a
/// sync runs collapse into one wake-up.
pub fn catalog_changes(cache: &CatalogCache) -> impl Stream<Item = ()> + Send + 'static {
    futures::stream::unfold(cache.changes(), |mut rx| async move {
        rx.changed().await.ok()?;
        rx.borrow_and_update();
        Some(((), rx))
    })
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

//! Keeps the `ManifestStore` current: a watch of CatalogSources (their labels, display name,
//! publisher, creation time) and the catalog contents olm-rs holds. On any change, after a
//! short pause that gathers bursts, every catalog with content is handed to `store.sync`,
//! which rebuilds only what changed (docs/packagemanifests.md §5).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::ResourceExt;
use tokio::sync::watch;

use crate::api::catalog_source::CatalogSource;
use crate::catalog::CatalogIndex;
use crate::k8s::shared::Subscribed;
use crate::package_manifest::{CatalogMeta, ManifestStore};
use crate::plan::CatalogRef;
use crate::registry::cache::CatalogCache;

/// Where catalog content comes from: the current index of CatalogSource ns/name, and a signal
/// that some content changed. The boundary other catalog loaders plug into (today the
/// CatalogSource controller's `CatalogCache`).
pub trait CatalogContents: Send + Sync {
    fn current_index(&self, key: &CatalogRef) -> Option<Arc<CatalogIndex>>;
    fn changes(&self) -> watch::Receiver<u64>;
}

impl CatalogContents for CatalogCache {
    fn current_index(&self, key: &CatalogRef) -> Option<Arc<CatalogIndex>> {
        // Stale content of a catalog that became unreachable is still what it serves, as
        // OLM's package server keeps serving its cache until the source is removed.
        self.get(key).and_then(|s| s.index)
    }

    fn changes(&self) -> watch::Receiver<u64> {
        CatalogCache::changes(self)
    }
}

/// What a PackageManifest shows of a CatalogSource.
pub fn catalog_meta(source: &CatalogSource) -> CatalogMeta {
    CatalogMeta {
        namespace: source.namespace().unwrap_or_default(),
        name: source.name_any(),
        labels: source.labels().clone(),
        creation_timestamp: source
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.to_string()),
        display_name: source.spec.display_name.clone().unwrap_or_default(),
        publisher: source.spec.publisher.clone().unwrap_or_default(),
    }
}

/// A pause after a change, so a burst of changes (start-up, a catalog's many events) costs
/// one pass.
const SETTLE: Duration = Duration::from_millis(200);

/// Runs until the process stops. `sources` is the process's one watch of CatalogSources
/// (`SharedWatches::catalog_sources`), shared with the CatalogSource controller.
pub async fn keep_current(
    (sources, mut source_changes): Subscribed<CatalogSource>,
    contents: Arc<dyn CatalogContents>,
    store: Arc<ManifestStore>,
) {
    let mut content_changes = contents.changes();
    loop {
        tokio::select! {
            changed = source_changes.next() => if changed.is_none() { return },
            changed = content_changes.changed() => if changed.is_err() { return },
        }
        tokio::time::sleep(SETTLE).await;
        content_changes.borrow_and_update();
        let current: Vec<(CatalogMeta, Arc<CatalogIndex>)> = sources
            .all()
            .iter()
            .filter_map(|source| {
                let meta = catalog_meta(source);
                let key = CatalogRef::new(&meta.namespace, &meta.name);
                contents.current_index(&key).map(|index| (meta, index))
            })
            .collect();
        let report = store.sync(current);
        for elided in &report.elided {
            tracing::warn!("{elided}; it has no PackageManifest");
        }
        if !report.rebuilt.is_empty() || !report.removed.is_empty() {
            tracing::info!(
                rebuilt = ?report.rebuilt.iter().map(ToString::to_string).collect::<Vec<_>>(),
                removed = ?report.removed.iter().map(ToString::to_string).collect::<Vec<_>>(),
                packagemanifests = store.len(),
                "PackageManifests updated"
            );
        }
    }
}

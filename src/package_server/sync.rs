//! Keeps the `ManifestStore` current: a watch of CatalogSources (their labels, display name,
//! publisher, creation time) and the catalog contents olm-rs holds. On any change, after a
//! short pause that gathers bursts, every catalog with content is handed to `store.sync`,
//! which rebuilds only what changed; every request does the same first
//! (docs/packagemanifests.md §5).

use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures::StreamExt;
use kube::ResourceExt;
use tokio::sync::watch;

use crate::api::CatalogRef;
use crate::api::catalog_source::CatalogSource;
use crate::catalog::CatalogIndex;
use crate::catalog_cache::CatalogCache;
use crate::k8s::shared::Subscribed;
use crate::k8s::store::NamespacedStore;
use crate::package_manifest::{CatalogMeta, ManifestStore};

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

/// The store and what fills it: the CatalogSources (watched) and their loaded contents.
///
/// Two callers bring the store up to date: the loop of [`keep_current`], after a pause that
/// gathers bursts, and every request, first. So a catalog whose content is loaded is listed in
/// every namespace at once — a client that waits for its CatalogSource to be `READY` and then
/// lists, in a namespace created a moment before, finds its packages (docs/packagemanifests.md
/// §5), as with OLM's package server. A pass is cheap when nothing changed: the store rebuilds
/// a catalog only for new content or metadata.
pub struct ManifestFeed {
    sources: NamespacedStore<CatalogSource>,
    contents: Arc<dyn CatalogContents>,
    store: Arc<ManifestStore>,
    /// Held during a pass, so passes never interleave (an older pass cannot overwrite a newer
    /// one).
    pass: Mutex<()>,
}

impl ManifestFeed {
    /// One pass: the store holds exactly the catalogs with content.
    pub fn refresh(&self) {
        let _one_at_a_time = self.pass.lock().unwrap_or_else(|p| p.into_inner());
        let current: Vec<(CatalogMeta, Arc<CatalogIndex>)> = self
            .sources
            .all()
            .iter()
            .filter_map(|source| {
                let meta = catalog_meta(source);
                let key = CatalogRef::new(&meta.namespace, &meta.name);
                self.contents.current_index(&key).map(|index| (meta, index))
            })
            .collect();
        let report = self.store.sync(current);
        for elided in &report.elided {
            tracing::warn!("{elided}; it has no PackageManifest");
        }
        if !report.rebuilt.is_empty() || !report.removed.is_empty() {
            tracing::info!(
                rebuilt = ?report.rebuilt.iter().map(ToString::to_string).collect::<Vec<_>>(),
                removed = ?report.removed.iter().map(ToString::to_string).collect::<Vec<_>>(),
                packagemanifests = self.store.len(),
                "PackageManifests updated"
            );
        }
    }
}

/// Where the request handler finds the feed, which exists once the controller runs (the
/// sandbox registers the handler with its API server before). Empty: requests read the store
/// as it is.
#[derive(Clone, Default)]
pub struct FeedSlot(Arc<RwLock<Option<Arc<ManifestFeed>>>>);

impl FeedSlot {
    /// Brings the store up to the current catalogs, if the feed runs.
    pub fn refresh(&self) {
        let feed = self.0.read().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some(feed) = feed {
            feed.refresh();
        }
    }

    /// The newest feed wins: a controller started again in the same process replaces the one
    /// whose watch stopped.
    fn set(&self, feed: Arc<ManifestFeed>) {
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = Some(feed);
    }
}

impl std::fmt::Debug for FeedSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let running = self.0.read().unwrap_or_else(|p| p.into_inner()).is_some();
        f.debug_tuple("FeedSlot").field(&running).finish()
    }
}

/// Runs until the process stops; `slot` lets requests bring the store up to date too.
/// `sources` is the process's one watch of CatalogSources (`SharedWatches::catalog_sources`),
/// shared with the CatalogSource controller.
pub async fn keep_current(
    (sources, mut source_changes): Subscribed<CatalogSource>,
    contents: Arc<dyn CatalogContents>,
    store: Arc<ManifestStore>,
    slot: FeedSlot,
) {
    let mut content_changes = contents.changes();
    let feed = Arc::new(ManifestFeed {
        sources,
        contents,
        store,
        pass: Mutex::new(()),
    });
    slot.set(Arc::clone(&feed));
    loop {
        tokio::select! {
            changed = source_changes.next() => if changed.is_none() { return },
            changed = content_changes.changed() => if changed.is_err() { return },
        }
        tokio::time::sleep(SETTLE).await;
        content_changes.borrow_and_update();
        feed.refresh();
    }
}

//! Catalog images served in-process (docs/catalog-images.md §2–§3): the content of each digest
//! unpacked once into a disk cache (`<dir>/<algo>-<hex>/`, written to a temporary directory,
//! validated, then renamed into place: a crash never leaves half a catalog, and a restart
//! reads it back without pulling), loaded once, and shared as one `Arc<CatalogIndex>` by every
//! CatalogSource that names the same digest. A digest no CatalogSource serves any more is
//! removed from disk.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use crate::catalog::CatalogIndex;
use crate::oci::{BundlePuller, Credentials, PullError, PulledCatalog, digest_dir, write_files};

use crate::catalog::validated::{ServeLoadError, load_for_serving};

const CONTENT: &str = "catalogs";
const TMP: &str = "catalogs-tmp";

/// Why a catalog image cannot be served.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ImageCatalogError {
    #[error(transparent)]
    Pull(#[from] PullError),
    /// The content was pulled but fails validation (as `olm-rs catalog validate` checks it).
    #[error("image {image}@{digest}: {message}")]
    Invalid {
        image: String,
        digest: String,
        message: String,
    },
    #[error("catalog cache {}: {reason}", dir.display())]
    Disk { dir: PathBuf, reason: String },
}

impl ImageCatalogError {
    /// A failure that may go away by itself (network, disk); the others need someone to change
    /// the image, a secret or registries.conf.
    pub fn is_transient(&self) -> bool {
        match self {
            ImageCatalogError::Pull(e) => e.is_transient(),
            ImageCatalogError::Invalid { .. } => false,
            ImageCatalogError::Disk { .. } => true,
        }
    }
}

/// The content of one digest, ready to serve.
#[derive(Debug, Clone)]
pub struct ServedContent {
    pub digest: String,
    pub index: Arc<CatalogIndex>,
    /// Where it came from this time (for logs and figures).
    pub origin: ContentOrigin,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContentOrigin {
    /// Another CatalogSource already serves this digest: the same index.
    Shared,
    /// Read back from the disk cache.
    Disk,
    /// Pulled from the registry.
    Pulled,
}

/// The disk cache and the shared indexes of catalog images.
pub struct ImageCatalogs {
    content: PathBuf,
    tmp: PathBuf,
    /// Digest → the index served for it, while some CatalogSource holds it.
    live: Mutex<HashMap<String, Weak<CatalogIndex>>>,
    /// One load per digest at a time (two CatalogSources naming one digest pull it once).
    loading: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl ImageCatalogs {
    /// A cache under `root` (created if missing; leftovers of a crash are removed).
    pub fn new(root: &Path) -> Result<ImageCatalogs, ImageCatalogError> {
        let disk = |reason: std::io::Error| ImageCatalogError::Disk {
            dir: root.to_path_buf(),
            reason: reason.to_string(),
        };
        let content = root.join(CONTENT);
        let tmp = root.join(TMP);
        std::fs::create_dir_all(&content).map_err(disk)?;
        // Never renamed into place, so never used.
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp).map_err(disk)?;
        Ok(ImageCatalogs {
            content,
            tmp,
            live: Mutex::new(HashMap::new()),
            loading: Mutex::new(HashMap::new()),
        })
    }

    fn live_index(&self, digest: &str) -> Option<Arc<CatalogIndex>> {
        self.live
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(digest)
            .and_then(Weak::upgrade)
    }

    fn share(&self, digest: &str, index: Arc<CatalogIndex>) {
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        live.retain(|_, w| w.strong_count() > 0);
        live.insert(digest.to_string(), Arc::downgrade(&index));
    }

    /// Digests some CatalogSource serves now.
    pub fn live_digests(&self) -> Vec<String> {
        let live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        live.iter()
            .filter(|(_, w)| w.strong_count() > 0)
            .map(|(d, _)| d.clone())
            .collect()
    }

    /// Whether the disk cache holds `digest`.
    pub fn on_disk(&self, digest: &str) -> bool {
        digest_dir(digest).is_some_and(|d| self.content.join(d).is_dir())
    }

    /// The content of `image` at `digest`: shared, from disk, or pulled (in that order).
    pub async fn content(
        &self,
        puller: &BundlePuller,
        image: &str,
        digest: &str,
        creds: &Credentials,
    ) -> Result<ServedContent, ImageCatalogError> {
        let served = |index, origin| ServedContent {
            digest: digest.to_string(),
            index,
            origin,
        };
        if let Some(index) = self.live_index(digest) {
            return Ok(served(index, ContentOrigin::Shared));
        }
        let Some(name) = digest_dir(digest) else {
            return Err(ImageCatalogError::Pull(PullError::InvalidReference {
                image: image.to_string(),
                reason: format!("{digest:?} is not a digest"),
            }));
        };
        let gate = {
            let mut loading = self.loading.lock().unwrap_or_else(|p| p.into_inner());
            loading.retain(|_, g| Arc::strong_count(g) > 1);
            Arc::clone(loading.entry(digest.to_string()).or_default())
        };
        let _held = gate.lock().await;
        if let Some(index) = self.live_index(digest) {
            return Ok(served(index, ContentOrigin::Shared));
        }
        let dir = self.content.join(&name);
        if dir.is_dir() {
            let loaded = load_blocking(dir.clone()).await;
            match loaded {
                Ok(index) => {
                    // Marks it used: the collector spares recently used directories.
                    if let Ok(f) = std::fs::File::open(&dir) {
                        let _ = f.set_modified(std::time::SystemTime::now());
                    }
                    let index = Arc::new(index);
                    self.share(digest, Arc::clone(&index));
                    return Ok(served(index, ContentOrigin::Disk));
                }
                Err(e) => {
                    // Written only after validation: changed on disk since. Pull it again.
                    tracing::warn!(dir = %dir.display(), error = %e, "cached catalog unreadable; pulling it again");
                    let _ = std::fs::remove_dir_all(&dir);
                }
            }
        }
        let pulled = puller.pull_catalog(image, digest, creds).await?;
        let index = self.install(pulled, &name).await?;
        let index = Arc::new(index);
        self.share(digest, Arc::clone(&index));
        Ok(served(index, ContentOrigin::Pulled))
    }

    /// Writes the files to a temporary directory, validates and indexes them there, and only
    /// then renames the directory into place.
    async fn install(
        &self,
        pulled: PulledCatalog,
        name: &str,
    ) -> Result<CatalogIndex, ImageCatalogError> {
        let tmp = self
            .tmp
            .join(format!("{name}-{:016x}", rand::random::<u64>()));
        let target = self.content.join(name);
        tokio::task::spawn_blocking(move || {
            let disk = |reason: String| ImageCatalogError::Disk {
                dir: tmp.clone(),
                reason,
            };
            if let Err(e) = write_files(&tmp, &pulled.files) {
                let _ = std::fs::remove_dir_all(&tmp);
                return Err(disk(e.to_string()));
            }
            let index = match load_for_serving(&tmp) {
                Ok(loaded) => loaded.index,
                Err(e) => {
                    let _ = std::fs::remove_dir_all(&tmp);
                    return Err(invalid(&pulled.image, &pulled.digest, &e));
                }
            };
            if target.is_dir() {
                let _ = std::fs::remove_dir_all(&tmp);
            } else if let Err(e) = std::fs::rename(&tmp, &target) {
                let _ = std::fs::remove_dir_all(&tmp);
                return Err(disk(e.to_string()));
            }
            Ok(index)
        })
        .await
        .map_err(|e| ImageCatalogError::Disk {
            dir: self.tmp.clone(),
            reason: format!("unpacking stopped: {e}"),
        })?
    }

    /// Removes the content of `digest` now unless some CatalogSource serves it (`serving`, or
    /// an index still shared); returns whether it was removed.
    pub fn release(&self, digest: &str, serving: &[String]) -> bool {
        if serving.iter().any(|d| d == digest) || self.live_index(digest).is_some() {
            return false;
        }
        let Some(name) = digest_dir(digest) else {
            return false;
        };
        std::fs::remove_dir_all(self.content.join(name)).is_ok()
    }

    /// Removes the content of digests no CatalogSource serves, except `keep` and directories
    /// used within `grace` (a restarted controller reloads its catalogs one by one).
    pub fn collect(&self, keep: &[String], grace: std::time::Duration) -> Vec<String> {
        let live = self.live_digests();
        let kept: Vec<String> = keep
            .iter()
            .chain(live.iter())
            .filter_map(|d| digest_dir(d))
            .collect();
        let mut removed = Vec::new();
        let Ok(entries) = std::fs::read_dir(&self.content) else {
            return removed;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if kept.contains(&name) {
                continue;
            }
            let recent = entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age < grace);
            if !recent && std::fs::remove_dir_all(entry.path()).is_ok() {
                removed.push(name);
            }
        }
        removed
    }
}

fn invalid(image: &str, digest: &str, e: &ServeLoadError) -> ImageCatalogError {
    let message = match e {
        ServeLoadError::Invalid { problems, .. } => {
            crate::catalog::validated::describe_problems(problems)
        }
        ServeLoadError::Load(e) => format!("catalog cannot be read: {e}"),
    };
    ImageCatalogError::Invalid {
        image: image.to_string(),
        digest: digest.to_string(),
        message,
    }
}

/// Why a catalog cached on disk cannot be served again (it is pulled again).
#[derive(Debug, thiserror::Error)]
enum CachedLoadError {
    #[error(transparent)]
    Load(#[from] ServeLoadError),
    #[error(transparent)]
    Stopped(#[from] tokio::task::JoinError),
}

async fn load_blocking(dir: PathBuf) -> Result<CatalogIndex, CachedLoadError> {
    let loaded = tokio::task::spawn_blocking(move || load_for_serving(&dir)).await??;
    Ok(loaded.index)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collect_keeps_served_and_recent_digests() {
        let root = tempfile::tempdir().unwrap();
        let store = ImageCatalogs::new(root.path()).unwrap();
        for d in ["sha256-aa", "sha256-bb", "sha256-cc"] {
            std::fs::create_dir_all(root.path().join(CONTENT).join(d)).unwrap();
        }
        let index = Arc::new(CatalogIndex::new(Default::default()));
        store.share("sha256:cc", Arc::clone(&index));
        // Everything is recent: nothing goes.
        assert!(
            store
                .collect(&[], std::time::Duration::from_secs(3600))
                .is_empty()
        );
        let mut removed = store.collect(&["sha256:aa".to_string()], std::time::Duration::ZERO);
        removed.sort();
        assert_eq!(removed, ["sha256-bb"]);
        assert!(store.on_disk("sha256:aa") && store.on_disk("sha256:cc"));
        drop(index);
        let mut removed = store.collect(&[], std::time::Duration::ZERO);
        removed.sort();
        assert_eq!(removed, ["sha256-aa", "sha256-cc"]);
    }
}

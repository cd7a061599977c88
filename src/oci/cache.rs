//! The bundle cache: on disk, content-addressed by image manifest digest (a bundle directory per
//! digest, written to a temporary directory and renamed into place, so a crash never leaves half
//! a bundle); in memory, a small LRU of rendered bundles in front of it. Shared by every
//! Subscription and namespace; a restart reads the disk cache back and pulls nothing it has.

use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use lru::LruCache;

use super::bundle::PulledBundle;
use super::error::{ConfigError, PullError};
use super::layers::{UnpackedFiles, write_files};

/// How the cache has been used since the puller started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Bundles served from memory.
    pub memory_hits: u64,
    /// Bundles read back from the disk cache.
    pub disk_hits: u64,
    /// Bundles whose layers were downloaded.
    pub downloads: u64,
}

pub(super) struct BundleCache {
    dir: Option<PathBuf>,
    memory: Mutex<Memory>,
    memory_hits: AtomicU64,
    disk_hits: AtomicU64,
    pub(super) downloads: AtomicU64,
}

struct Memory {
    /// By image reference as asked for.
    bundles: LruCache<String, Arc<PulledBundle>>,
    max_bytes: usize,
}

const BUNDLES: &str = "bundles";
const INDEXES: &str = "indexes";
const TMP: &str = "tmp";

/// `sha256:abc` → `sha256-abc`; anything but a plain `algo:hex` digest is refused (it names a
/// directory of a content store: pulled bundles here, catalog images in
/// `catalog_cache::image_catalogs`).
pub fn digest_dir(digest: &str) -> Option<String> {
    let (algo, hex) = digest.split_once(':')?;
    let ok = !algo.is_empty()
        && algo.chars().all(|c| c.is_ascii_alphanumeric())
        && !hex.is_empty()
        && hex.chars().all(|c| c.is_ascii_hexdigit());
    ok.then(|| format!("{algo}-{hex}"))
}

impl BundleCache {
    pub(super) fn new(
        dir: Option<PathBuf>,
        max_entries: usize,
        max_bytes: usize,
    ) -> Result<BundleCache, ConfigError> {
        if let Some(d) = &dir {
            for sub in [BUNDLES, INDEXES, TMP] {
                std::fs::create_dir_all(d.join(sub)).map_err(|source| ConfigError::CacheDir {
                    dir: d.clone(),
                    source,
                })?;
            }
            // Left over by a crash while writing: never renamed into place, so never used.
            if let Ok(entries) = std::fs::read_dir(d.join(TMP)) {
                for e in entries.flatten() {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
        }
        let entries = NonZeroUsize::new(max_entries.max(1)).unwrap_or(NonZeroUsize::MIN);
        Ok(BundleCache {
            dir,
            memory: Mutex::new(Memory {
                bundles: LruCache::new(entries),
                max_bytes,
            }),
            memory_hits: AtomicU64::new(0),
            disk_hits: AtomicU64::new(0),
            downloads: AtomicU64::new(0),
        })
    }

    pub(super) fn stats(&self) -> CacheStats {
        CacheStats {
            memory_hits: self.memory_hits.load(Ordering::Relaxed),
            disk_hits: self.disk_hits.load(Ordering::Relaxed),
            downloads: self.downloads.load(Ordering::Relaxed),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Memory> {
        // A panic while holding the lock leaves a consistent LRU (every update is one call).
        self.memory.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn memory_get(&self, image: &str) -> Option<Arc<PulledBundle>> {
        let hit = self.lock().bundles.get(image).cloned();
        if hit.is_some() {
            self.memory_hits.fetch_add(1, Ordering::Relaxed);
        }
        hit
    }

    pub(super) fn memory_put(&self, bundle: Arc<PulledBundle>) {
        let mut m = self.lock();
        m.bundles.put(bundle.image.clone(), bundle);
        let mut bytes: usize = m.bundles.iter().map(|(_, b)| b.size()).sum();
        while bytes > m.max_bytes && m.bundles.len() > 1 {
            match m.bundles.pop_lru() {
                Some((_, old)) => bytes -= old.size(),
                None => break,
            }
        }
    }

    /// The manifest digest a reference digest (an image index's, or the manifest's own) stands
    /// for, as recorded on disk.
    fn manifest_digest_for(&self, digest: &str) -> Option<String> {
        let dir = self.dir.as_ref()?;
        let name = digest_dir(digest)?;
        if dir.join(BUNDLES).join(&name).is_dir() {
            return Some(digest.to_string());
        }
        let alias = std::fs::read_to_string(dir.join(INDEXES).join(&name)).ok()?;
        let alias = alias.trim();
        digest_dir(alias).is_some().then(|| alias.to_string())
    }

    /// The bundle for `image` pinned to `digest`, from the disk cache.
    pub(super) fn disk_get(&self, image: &str, digest: &str) -> Option<Arc<PulledBundle>> {
        let manifest_digest = self.manifest_digest_for(digest)?;
        let path = self.bundle_path(&manifest_digest)?;
        match PulledBundle::from_dir(image, &manifest_digest, &path) {
            Ok(b) => {
                self.disk_hits.fetch_add(1, Ordering::Relaxed);
                let b = Arc::new(b);
                self.memory_put(b.clone());
                Some(b)
            }
            Err(e) => {
                // Only verified content is ever written, so this is damage on disk: pull again.
                tracing::warn!(%image, error = %e, "bundle cache entry unreadable; pulling again");
                let _ = std::fs::remove_dir_all(&path);
                None
            }
        }
    }

    fn bundle_path(&self, manifest_digest: &str) -> Option<PathBuf> {
        Some(
            self.dir
                .as_ref()?
                .join(BUNDLES)
                .join(digest_dir(manifest_digest)?),
        )
    }

    /// Stores verified files under their manifest digest; `reference_digest` (an image index's
    /// digest the image was asked by) is recorded as an alias.
    pub(super) fn disk_put(
        &self,
        image: &str,
        manifest_digest: &str,
        reference_digest: Option<&str>,
        files: &UnpackedFiles,
    ) -> Result<(), PullError> {
        let Some(dir) = &self.dir else {
            return Ok(());
        };
        let fail = |reason: String| PullError::Cache {
            image: image.to_string(),
            reason,
        };
        let name = digest_dir(manifest_digest)
            .ok_or_else(|| fail(format!("{manifest_digest:?} is not a digest")))?;
        let target = dir.join(BUNDLES).join(&name);
        if !target.is_dir() {
            let tmp = dir.join(TMP).join(format!(
                "{name}-{}-{}",
                std::process::id(),
                rand::random::<u32>()
            ));
            write_bundle(&tmp, files)
                .map_err(|e| fail(format!("cannot write {}: {e}", tmp.display())))?;
            if let Err(e) = std::fs::rename(&tmp, &target) {
                let _ = std::fs::remove_dir_all(&tmp);
                // Another pull of the same digest got there first: same content.
                if !target.is_dir() {
                    return Err(fail(format!("cannot move into {}: {e}", target.display())));
                }
            }
        }
        if let Some(reference) = reference_digest.filter(|d| *d != manifest_digest)
            && let Some(alias) = digest_dir(reference)
        {
            let tmp = dir
                .join(TMP)
                .join(format!("{alias}-{}", rand::random::<u32>()));
            let written = std::fs::write(&tmp, manifest_digest)
                .and_then(|()| std::fs::rename(&tmp, dir.join(INDEXES).join(alias)));
            if let Err(e) = written {
                let _ = std::fs::remove_file(&tmp);
                return Err(fail(format!("cannot record the index digest: {e}")));
            }
        }
        Ok(())
    }
}

/// A bundle's files under `root`, with its `manifests/` and `metadata/` even when empty.
fn write_bundle(root: &Path, files: &UnpackedFiles) -> std::io::Result<()> {
    std::fs::create_dir_all(root.join("manifests"))?;
    std::fs::create_dir_all(root.join("metadata"))?;
    write_files(root, files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_become_safe_directory_names() {
        assert_eq!(digest_dir("sha256:abc123"), Some("sha256-abc123".into()));
        for bad in ["sha256:../x", "sha256:", ":abc", "abc", "sha256:ab/cd"] {
            assert_eq!(digest_dir(bad), None, "{bad}");
        }
    }
}

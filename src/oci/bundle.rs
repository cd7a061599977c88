//! A pulled bundle, rendered by the same registry+v1 renderer as `olm-rs catalog render DIR`,
//! so an image and the same bundle directory give the same bytes. Pure.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::catalog::bundle_dir::{self, BundleFiles, DiskBundle, MemoryBundle, render};
use crate::catalog::model::{Bundle, Property};

use super::error::PullError;
use super::layers::UnpackedFiles;

/// A bundle image, pulled and rendered.
#[derive(Debug)]
pub struct PulledBundle {
    /// The reference it was asked for (as written in the catalog).
    pub image: String,
    /// The digest of the image manifest the files came from (`sha256:…`).
    pub digest: String,
    /// The rendered `olm.bundle`, its `image` set to `image`.
    pub bundle: Bundle,
    /// What opm would warn about (files skipped).
    pub warnings: Vec<String>,
    /// The bytes of the bundle's files (for the memory cache's bound).
    pub(super) size: usize,
}

impl PulledBundle {
    /// Renders bundle files unpacked from an image.
    pub fn from_files(
        image: &str,
        digest: &str,
        files: &UnpackedFiles,
    ) -> Result<PulledBundle, PullError> {
        let src = MemoryBundle {
            root: PathBuf::from(image),
            files,
        };
        let size = files.values().map(Vec::len).sum();
        PulledBundle::render(image, digest, &src, size)
    }

    /// Renders a bundle directory (the disk cache's copy of an image's files).
    pub fn from_dir(image: &str, digest: &str, dir: &Path) -> Result<PulledBundle, PullError> {
        let size = ["manifests", "metadata"]
            .iter()
            .filter_map(|d| std::fs::read_dir(dir.join(d)).ok())
            .flatten()
            .filter_map(|e| e.ok()?.metadata().ok())
            .map(|m| m.len() as usize)
            .sum();
        PulledBundle::render(image, digest, &DiskBundle(dir), size)
    }

    fn render(
        image: &str,
        digest: &str,
        src: &dyn BundleFiles,
        size: usize,
    ) -> Result<PulledBundle, PullError> {
        let invalid = |e: bundle_dir::BundleDirError| {
            let text = e.to_string();
            // The renderer names the root first ("<root>: …"); the image is named anyway.
            let root = format!("{}: ", src.root().display());
            let reason = text.strip_prefix(&root).unwrap_or(&text).to_string();
            let file = match &e {
                bundle_dir::BundleDirError::NoPackage { file }
                | bundle_dir::BundleDirError::BadField { file, .. } => relative(src, file),
                bundle_dir::BundleDirError::NoAnnotations { .. } => "metadata/".into(),
                bundle_dir::BundleDirError::Io { path, .. } => relative(src, path),
                _ => "manifests/".into(),
            };
            PullError::InvalidContent {
                image: image.to_string(),
                file,
                reason,
            }
        };
        let dir = bundle_dir::read_from(src).map_err(invalid)?;
        let rendered = render::render(&dir, image).map_err(invalid)?;
        Ok(PulledBundle {
            image: image.to_string(),
            digest: digest.to_string(),
            bundle: rendered.bundle,
            warnings: rendered.warnings,
            size,
        })
    }

    /// The bundle's objects (CSV, CRDs, …) as JSON, in the renderer's order.
    pub fn manifests(&self) -> Vec<Value> {
        self.bundle
            .objects
            .iter()
            .filter_map(|o| serde_json::from_str(o.get()).ok())
            .collect()
    }

    /// The ClusterServiceVersion.
    pub fn csv(&self) -> Option<Value> {
        self.manifests()
            .into_iter()
            .find(|m| m["kind"] == "ClusterServiceVersion")
    }

    /// The rendered properties (`olm.package`, `olm.gvk`, …).
    pub fn properties(&self) -> &[Property] {
        &self.bundle.properties
    }

    /// The `olm.bundle` blob, exactly as `olm-rs catalog render` prints it.
    pub fn blob(&self) -> Value {
        render::bundle_blob(&self.bundle)
    }

    /// Bytes of the bundle's files.
    pub fn size(&self) -> usize {
        self.size
    }
}

fn relative(src: &dyn BundleFiles, file: &Path) -> String {
    file.strip_prefix(src.root())
        .unwrap_or(file)
        .display()
        .to_string()
}

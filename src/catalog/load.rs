//! Opening a catalog path of any supported shape: an FBC directory, a directory of registry+v1
//! bundle directories (replaces mode), or a single bundle directory.

use std::path::Path;

use super::bundle_dir;
use super::error::{CatalogError, Problem};
use super::fbc::{self, LoadOptions};
use super::model::DeclarativeConfig;
use super::replaces_mode;

/// What a catalog path turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CatalogKind {
    FileBased,
    BundleDirectories,
}

/// Loads any catalog path, collecting problems (load problems only; run `validate` for the rest).
pub fn load_catalog(
    path: &Path,
) -> Result<(CatalogKind, DeclarativeConfig, Vec<Problem>), CatalogError> {
    load_catalog_with(path, LoadOptions::default())
}

/// `load_catalog` with `options` (they apply to file-based catalogs).
pub fn load_catalog_with(
    path: &Path,
    options: LoadOptions,
) -> Result<(CatalogKind, DeclarativeConfig, Vec<Problem>), CatalogError> {
    if !path.is_dir() {
        return Err(CatalogError::NotADirectory(path.to_path_buf()));
    }
    if bundle_dir::is_bundle_dir(path) || replaces_mode::has_bundle_dirs(path)? {
        let (config, problems) = replaces_mode::load(path)?;
        return Ok((CatalogKind::BundleDirectories, config, problems));
    }
    let loaded = fbc::load_dir_with(path, options)?;
    Ok((CatalogKind::FileBased, loaded.config, loaded.problems))
}

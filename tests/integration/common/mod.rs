//! Helpers shared by the integration tests.

#![allow(dead_code)] // the copied-CSV bench includes this file too and uses a subset

pub mod roundtrip;

use std::path::PathBuf;

/// The shared reference directory (`spec/`, `data/catalogs/…`): `$OLM_RS_SHARED`, else
/// `<crate>/../shared` (a clean clone in CI), else `/work/shared` (a worktree). Panics with the
/// places tried when none exists — a test that needs the data must not silently pass.
pub fn shared_dir() -> PathBuf {
    let crate_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let candidates: Vec<PathBuf> = std::env::var_os("OLM_RS_SHARED")
        .map(PathBuf::from)
        .into_iter()
        .chain([crate_dir.join("../shared"), PathBuf::from("/work/shared")])
        .collect();
    candidates
        .iter()
        .find(|p| p.join("spec").is_dir())
        .cloned()
        .unwrap_or_else(|| {
            panic!("shared reference data not found; tried {candidates:?} (set OLM_RS_SHARED)")
        })
}

pub fn community_operators() -> PathBuf {
    shared_dir().join("data/catalogs/community-operators-prod")
}

pub fn fbc_v420() -> PathBuf {
    community_operators().join("catalogs/v4.20")
}

pub fn operators_dir() -> PathBuf {
    community_operators().join("operators")
}

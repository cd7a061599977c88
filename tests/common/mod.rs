//! Locating the shared reference data (`shared/` beside the crate in CI).
#![allow(dead_code)]

use std::path::PathBuf;

/// `$OLM_RS_SHARED`, else `<crate>/../shared`, else `/work/shared`. Panics (never skips) when
/// none exists: CI always has `shared/` beside the clone.
pub fn shared_dir() -> PathBuf {
    let candidates = [
        std::env::var_os("OLM_RS_SHARED").map(PathBuf::from),
        Some(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared")),
        Some(PathBuf::from("/work/shared")),
    ];
    candidates
        .into_iter()
        .flatten()
        .find(|p| p.join("data").is_dir())
        .expect("shared data not found: set OLM_RS_SHARED or put shared/ beside the crate")
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

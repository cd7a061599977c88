//! Where the shared reference material is (README, "What `cargo test` needs"): the directory
//! `$OLM_RS_SHARED` names, else `shared/` beside the repository (`<crate>/../shared`). No other
//! place is tried, so the tests find the same data on every machine or say it is missing.
//! Every test program and bench reads it through this one module.

use std::path::{Path, PathBuf};

/// The variable that points the tests at the shared directory.
pub const VAR: &str = "OLM_RS_SHARED";

/// The shared directory, or why there is none (what a test that needs it prints when skipped).
pub fn locate() -> Result<PathBuf, String> {
    match std::env::var_os(VAR).filter(|v| !v.is_empty()) {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            if dir.is_dir() {
                Ok(dir)
            } else {
                Err(format!("{VAR}={} is not a directory", dir.display()))
            }
        }
        None => {
            let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared");
            if dir.is_dir() {
                Ok(dir)
            } else {
                Err(format!(
                    "needs the shared reference data: no {} beside the repository and {VAR} \
                     unset (README, \"What cargo test needs\")",
                    dir.display()
                ))
            }
        }
    }
}

/// What the tests and benches read of the shared directory through [`shared_dir`]; the
/// real-cluster programs check their own parts (`k8s/bin`, `olm/bin`).
const DATA: [&str; 2] = ["data/catalogs/community-operators-prod", "spec"];

/// The shared directory with its reference data; a test that asks for it where there is none
/// (or an incomplete one) is skipped, saying why (tests/real_control_plane/skip.rs).
pub fn shared_dir() -> PathBuf {
    let dir = locate().unwrap_or_else(|why| super::skip::skip(&why));
    if let Some(absent) = DATA.iter().find(|part| !dir.join(part).is_dir()) {
        super::skip::skip(&format!(
            "needs the shared reference data: {} has no {absent} (README, \"What cargo test \
             needs\")",
            dir.display()
        ));
    }
    dir
}

/// The real catalog (`data/catalogs/community-operators-prod`).
pub fn community_operators() -> PathBuf {
    shared_dir().join("data/catalogs/community-operators-prod")
}

/// The real catalog's file-based catalog for OpenShift 4.20.
pub fn fbc_v420() -> PathBuf {
    community_operators().join("catalogs/v4.20")
}

/// The real catalog's bundle directories (`data/catalogs/community-operators-prod/operators`).
pub fn operators_dir() -> PathBuf {
    community_operators().join("operators")
}

//! Where the shared material is (`../shared`, or `OLM_RS_SHARED`).

/// The real catalog's bundle directories (`data/catalogs/community-operators-prod/operators`).
pub fn operators_dir() -> std::path::PathBuf {
    let crate_dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    std::env::var_os("OLM_RS_SHARED")
        .map(std::path::PathBuf::from)
        .into_iter()
        .chain([crate_dir.join("../shared"), "/work/shared".into()])
        .find(|p| p.join("data").is_dir())
        .unwrap_or_else(|| crate_dir.join("../shared"))
        .join("data/catalogs/community-operators-prod/operators")
}

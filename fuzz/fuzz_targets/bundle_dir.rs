//! A bundle directory with fuzzed CSV, CRD, annotations and dependencies: reading and
//! rendering must not panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use olm_rs::catalog::bundle_dir::{self, render};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    // Four files separated by NUL: CSV, CRD, annotations, dependencies.
    let mut parts = text.split('\0');
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("manifests")).unwrap();
    std::fs::create_dir_all(root.join("metadata")).unwrap();
    let files = ["manifests/csv.yaml", "manifests/crd.yaml", "metadata/annotations.yaml", "metadata/dependencies.yaml"];
    for file in files {
        std::fs::write(root.join(file), parts.next().unwrap_or("")).unwrap();
    }
    if let Ok(read) = bundle_dir::read(root) {
        if let Ok(out) = render::render(&read, "") {
            let _ = render::bundle_blob(&out.bundle);
        }
    }
});

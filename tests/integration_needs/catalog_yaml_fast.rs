//! The fast YAML path must agree with libyaml on every real catalog file and handle all of
//! catalogs/v4.20 itself (otherwise the speed target is lost silently).

use crate::common;

use olm_rs::catalog::fbc::{catalog_files, documents, yaml_fast};
use serde_json::Value;

fn fast_yaml_handles_and_agrees_on_every_v420_file() {
    let root = common::fbc_v420();
    let files = catalog_files(&root).unwrap();
    assert!(files.len() >= 30, "{} files", files.len());
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let fast = yaml_fast::to_json_documents(&text)
            .unwrap_or_else(|| panic!("fast path declined {}", file.display()));
        let slow = documents::split_yaml_slow(&text).unwrap();
        assert_eq!(fast.len(), slow.len(), "{}", file.display());
        for ((f, _), s) in fast.iter().zip(&slow) {
            let f: Value = serde_json::from_str(f).unwrap();
            let s: Value = serde_json::from_str(&s.json).unwrap();
            assert_eq!(f, s, "{}", file.display());
        }
    }
}

fn fast_yaml_agrees_on_bundle_manifests() {
    let mut handled = 0;
    let mut total = 0;
    for pkg in std::fs::read_dir(common::operators_dir()).unwrap() {
        let pkg = pkg.unwrap().path();
        let Ok(versions) = std::fs::read_dir(&pkg) else {
            continue;
        };
        for version in versions.take(3) {
            let dir = version.unwrap().path().join("manifests");
            let Ok(files) = std::fs::read_dir(&dir) else {
                continue;
            };
            for f in files {
                let f = f.unwrap().path();
                let Ok(text) = std::fs::read_to_string(&f) else {
                    continue;
                };
                if text.trim_start().starts_with('{') {
                    continue;
                }
                total += 1;
                let Some(fast) = yaml_fast::to_json_documents(&text) else {
                    continue;
                };
                handled += 1;
                let slow = documents::split_yaml_slow(&text).unwrap();
                let fast: Vec<Value> = fast
                    .iter()
                    .map(|(j, _)| serde_json::from_str(j).unwrap())
                    .collect();
                let slow: Vec<Value> = slow
                    .iter()
                    .map(|d| serde_json::from_str(&d.json).unwrap())
                    .collect();
                assert_eq!(fast, slow, "{}", f.display());
            }
        }
    }
    assert!(total > 500, "{total} manifests");
    assert!(
        handled * 10 >= total * 9,
        "fast path handled only {handled} of {total} manifests"
    );
}

crate::trials! {
    sync fast_yaml_handles_and_agrees_on_every_v420_file,
    sync fast_yaml_agrees_on_bundle_manifests,
}

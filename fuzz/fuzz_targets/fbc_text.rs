//! Any bytes as an FBC file: loading and validating must not panic, and `catalog validate`'s
//! way of loading (CSV metadata only checked, its strings emptied while transcoding) must find
//! exactly the problems a full load finds.
#![no_main]

use libfuzzer_sys::fuzz_target;
use olm_rs::catalog::fbc::{CsvMetadataHold, LoadOptions};
use olm_rs::catalog::{CatalogIndex, fbc, validate};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let (config, mut problems) = fbc::load_text("fuzz.yaml".into(), text);
    problems.extend(validate::validate(&config));
    let check_only = LoadOptions {
        csv_metadata: CsvMetadataHold::CheckOnly,
    };
    let (checked, mut checked_problems) = fbc::load_text_with("fuzz.yaml".into(), text, check_only);
    checked_problems.extend(validate::validate(&checked));
    assert_eq!(problems, checked_problems);
    let index = CatalogIndex::new(config);
    for p in index.packages() {
        for c in p.channels() {
            let g = c.graph();
            for e in g.entries() {
                let _ = g.upgrade_path(&e.name, None);
            }
        }
    }
});

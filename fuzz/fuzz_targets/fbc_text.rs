//! Any bytes as an FBC file: loading and validating must not panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use olm_rs::catalog::{CatalogIndex, fbc, validate};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let (config, _problems) = fbc::load_text("fuzz.yaml".into(), text);
    let _ = validate::validate(&config);
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

//! The fast YAML path either declines or produces exactly what libyaml produces.
#![no_main]

use libfuzzer_sys::fuzz_target;
use olm_rs::catalog::fbc::{documents, yaml_fast};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Some(fast) = yaml_fast::to_json_documents(text) else { return };
    let slow = documents::split_yaml_slow(text).expect("fast path accepted what libyaml rejects");
    let fast: Vec<serde_json::Value> = fast.iter().map(|(j, _)| serde_json::from_str(j).unwrap()).collect();
    let slow: Vec<serde_json::Value> = slow.iter().map(|d| serde_json::from_str(&d.json).unwrap()).collect();
    assert_eq!(fast, slow);
});

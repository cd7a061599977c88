//! Range and version parsing must not panic; a parsed range evaluates any version.
#![no_main]

use libfuzzer_sys::fuzz_target;
use olm_rs::catalog::semver_range::{VersionRange, parse_strict, parse_tolerant};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let (range, version) = text.split_once('\n').unwrap_or((text, "1.0.0"));
    let _ = parse_strict(version);
    if let (Ok(r), Ok(v)) = (VersionRange::parse(range), parse_tolerant(version)) {
        let _ = r.contains(&v);
    }
});

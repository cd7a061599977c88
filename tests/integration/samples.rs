//! The objects in `config/samples/` — the CatalogSource, OperatorGroups and Subscription users
//! copy — must be valid as written: accepted by our CRD schemas with nothing pruned, read by
//! our types and written back unchanged.

use crate::common;

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde_json::Value;

use common::roundtrip::Kinds;

fn samples_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("config/samples")
}

fn sample_files() -> BTreeSet<String> {
    std::fs::read_dir(samples_dir())
        .expect("config/samples exists")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml") && n != "kustomization.yaml")
        .collect()
}

#[test]
fn samples_are_valid_as_written_and_round_trip() {
    let kinds = Kinds::new();
    let mut kinds_seen = BTreeSet::new();
    let mut problems = Vec::new();
    for name in sample_files() {
        let path = samples_dir().join(&name);
        let text = std::fs::read_to_string(&path).expect("sample readable");
        let doc: Value =
            serde_yaml_ng::from_str(&text).unwrap_or_else(|e| panic!("{name}: not YAML: {e}"));
        let check = kinds
            .check(&name, &doc)
            .unwrap_or_else(|| panic!("{name}: not an OLM kind: {:?}", doc.get("kind")));
        kinds_seen.insert(check.kind.clone());
        assert!(
            doc.get("apiVersion").is_some(),
            "{name}: a sample must name its apiVersion"
        );
        let strict = [
            ("rejected as written", &check.rejected_as_written),
            ("pruned", &check.pruned),
            ("null", &check.nulls_dropped),
            ("zero-filled", &check.zero_filled),
        ];
        for (what, items) in strict {
            problems.extend(items.iter().map(|i| format!("{name}: {what}: {i}")));
        }
        problems.extend(check.failures().into_iter().map(|f| format!("{name}: {f}")));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    let wanted: BTreeSet<String> = ["CatalogSource", "OperatorGroup", "Subscription"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert!(
        wanted.is_subset(&kinds_seen),
        "samples lack some of {wanted:?}: have {kinds_seen:?}"
    );
}

#[test]
fn samples_kustomization_lists_every_sample() {
    let text =
        std::fs::read_to_string(samples_dir().join("kustomization.yaml")).expect("kustomization");
    let doc: Value = serde_yaml_ng::from_str(&text).expect("kustomization is YAML");
    let listed: BTreeSet<String> = doc["resources"]
        .as_array()
        .expect("resources list")
        .iter()
        .filter_map(|r| r.as_str().map(str::to_owned))
        .collect();
    assert_eq!(listed, sample_files());
}

//! `crds/`, `config/crd/` and the Helm chart's `crds/` must be exactly what `olm-rs crds` generates, so that a change to
//! the Rust types cannot ship without the CRDs that serve them.
//!
//! Regenerate with `OLM_RS_UPDATE_CRDS=1 cargo test --test integration crds_up_to_date`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use olm_rs::api::crd;

const UPDATE_VAR: &str = "OLM_RS_UPDATE_CRDS";

/// File name → content for one directory.
fn expected() -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    let crds = crd::all().expect("CRDs generate");
    let files: BTreeMap<String, String> = crds
        .iter()
        .map(|c| (crd::file_name(c), crd::to_yaml(c).expect("CRD renders")))
        .collect();
    let mut config = files.clone();
    config.insert("kustomization.yaml".into(), crd::kustomization(&crds));
    (files, config)
}

/// Differences between `dir` and `want`; rewrites `dir` instead when updating.
fn compare(dir: &Path, want: &BTreeMap<String, String>, update: bool) -> Vec<String> {
    let mut problems = Vec::new();
    if update {
        std::fs::create_dir_all(dir).expect("create directory");
    }
    for (name, content) in want {
        let path = dir.join(name);
        let have = std::fs::read_to_string(&path).ok();
        if have.as_deref() == Some(content.as_str()) {
            continue;
        }
        if update {
            std::fs::write(&path, content).expect("write file");
        } else if have.is_none() {
            problems.push(format!("missing {}", path.display()));
        } else {
            problems.push(format!("outdated {}", path.display()));
        }
    }
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".yaml") && !want.contains_key(&name) {
            if update {
                std::fs::remove_file(entry.path()).expect("remove stale file");
            } else {
                problems.push(format!(
                    "stale {} (no longer generated)",
                    entry.path().display()
                ));
            }
        }
    }
    problems
}

#[test]
fn crd_manifests_match_the_generator() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let update = std::env::var(UPDATE_VAR).is_ok_and(|v| v == "1");
    let (files, config) = expected();
    let mut problems = compare(&root.join("crds"), &files, update);
    problems.extend(compare(&root.join("config/crd"), &config, update));
    // Helm installs CRDs from the chart's own crds/ directory: the same files.
    problems.extend(compare(&root.join("charts/olm-rs/crds"), &files, update));
    assert!(
        problems.is_empty(),
        "CRD manifests differ from what the Rust types generate:\n  {}\nRegenerate with:\n  {UPDATE_VAR}=1 cargo test --test integration crds_up_to_date",
        problems.join("\n  ")
    );
}

#[test]
fn olm_rs_crds_prints_the_same_stream() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_olm-rs"))
        .arg("crds")
        .output()
        .expect("olm-rs runs");
    assert!(
        output.status.success(),
        "olm-rs crds failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let crds = crd::all().expect("CRDs generate");
    let want = crd::to_yaml_stream(&crds).expect("CRDs render");
    assert!(
        String::from_utf8_lossy(&output.stdout) == want,
        "olm-rs crds output differs from the generator"
    );
    let documents = want.matches("\nkind: CustomResourceDefinition\n").count();
    assert_eq!(documents, 8);
}

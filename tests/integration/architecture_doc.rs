//! docs/architecture.md is the newcomer's map: every file or folder it names must exist, so a
//! rename or a removal that leaves the map behind fails here.
//!
//! A name in backquotes counts when it has a `/` or a file ending (`.rs`, `.md`, `.yaml`,
//! `.toml`). It is looked up, in order: beside the shell folder of its table row (a bare
//! `sync.rs` in the CatalogSource row is `src/reconcile/catalog_source/sync.rs`), under `src/`,
//! at the repository's top, under `docs/`. Placeholders (`<kind>`, `*_tests.rs`) and Rust paths
//! (`a::b`) are not file names.

use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The backquoted names of `line` that name a file or folder.
fn named_paths(line: &str) -> Vec<&str> {
    line.split('`')
        .skip(1)
        .step_by(2)
        .filter(|t| !t.contains("::") && !t.contains(['<', '*', ' ']))
        .filter(|t| {
            t.contains('/')
                || [".rs", ".md", ".yaml", ".toml"]
                    .iter()
                    .any(|ending| t.ends_with(ending))
        })
        .collect()
}

/// The folder a table row's bare names are relative to: its `reconcile/…/` shell.
fn row_folder(line: &str) -> Option<PathBuf> {
    if !line.starts_with('|') {
        return None;
    }
    named_paths(line)
        .into_iter()
        .find(|t| t.starts_with("reconcile/") && t.ends_with('/'))
        .map(|t| repo().join("src").join(t))
}

fn exists(name: &str, folder: Option<&Path>) -> bool {
    let root = repo();
    folder
        .into_iter()
        .map(|f| f.join(name))
        .chain([
            root.join("src").join(name),
            root.join(name),
            root.join("docs").join(name),
        ])
        .any(|p| p.exists())
}

#[test]
fn every_path_docs_architecture_names_exists() {
    let doc = std::fs::read_to_string(repo().join("docs/architecture.md")).unwrap();
    let mut missing = Vec::new();
    let mut checked = 0;
    for (number, line) in doc.lines().enumerate() {
        let folder = row_folder(line);
        for name in named_paths(line) {
            checked += 1;
            if !exists(name, folder.as_deref()) {
                missing.push(format!("docs/architecture.md:{}: `{name}`", number + 1));
            }
        }
    }
    assert!(
        checked > 100,
        "only {checked} names read: is the map still there?"
    );
    assert!(
        missing.is_empty(),
        "names in the map with no file or folder:\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_check_sees_a_missing_name() {
    assert!(!exists("reconcile/no_such_controller.rs", None));
    assert!(exists(
        "sync.rs",
        row_folder("| x | `reconcile/catalog_source/` |").as_deref()
    ));
    assert_eq!(
        named_paths("`k8s::write` `reconcile/<kind>/` `plan/order.rs` `decide` `README.md`"),
        ["plan/order.rs", "README.md"]
    );
}

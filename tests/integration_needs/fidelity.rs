//! Wire fidelity against real OLM content: every ClusterServiceVersion of the community
//! catalog (`operators/<pkg>/<version>/manifests/`) must be accepted by our CRD schema and
//! survive a round trip through our Rust types unchanged (see `common/roundtrip.rs` for what
//! "unchanged" means). Also every OLM object in a ```yaml block of the spec files.
//!
//! Run with `-- --nocapture` to see the summary (files, pruned fields, normalisations, time).

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::Value;

use common::roundtrip::{DocCheck, Kinds, generalise};

/// Every regular file below `dir` whose path has a `manifests` directory component.
fn manifest_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            manifest_files(&path, out);
        } else if path.components().any(|c| c.as_os_str() == "manifests")
            && path
                .extension()
                .is_some_and(|e| e == "yaml" || e == "yml" || e == "json")
        {
            out.push(path);
        }
    }
}

/// All YAML documents of a file (a manifest file may hold several).
fn documents(text: &str) -> Result<Vec<Value>, String> {
    serde_yaml_ng::Deserializer::from_str(text)
        .map(|doc| serde::Deserialize::deserialize(doc).map_err(|e| e.to_string()))
        .filter(|d| !matches!(d, Ok(Value::Null)))
        .collect()
}

/// Checks the documents of `kind` in `files`, spread over the machine's cores.
fn check_files(kinds: &Kinds, files: &[PathBuf], kind: &str) -> (Vec<DocCheck>, Vec<String>) {
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let chunk = files.len().div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = files
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || {
                    let mut checks = Vec::new();
                    let mut unreadable = Vec::new();
                    for path in part {
                        let label = path.display().to_string();
                        let text = match std::fs::read_to_string(path) {
                            Ok(text) => text,
                            Err(e) => {
                                unreadable.push(format!("{label}: {e}"));
                                continue;
                            }
                        };
                        // Cheap filter before parsing: most manifests are CRDs, Services, ...
                        if !text.contains(kind) {
                            continue;
                        }
                        match documents(&text) {
                            Ok(docs) => {
                                for (i, doc) in docs.iter().enumerate() {
                                    if doc.get("kind").and_then(Value::as_str) == Some(kind) {
                                        let label = if docs.len() > 1 {
                                            format!("{label}#{i}")
                                        } else {
                                            label.clone()
                                        };
                                        checks.extend(kinds.check(&label, doc));
                                    }
                                }
                            }
                            Err(e) => unreadable.push(format!("{label}: not YAML: {e}")),
                        }
                    }
                    (checks, unreadable)
                })
            })
            .collect();
        let mut checks = Vec::new();
        let mut unreadable = Vec::new();
        for handle in handles {
            let (c, u) = handle.join().expect("checker thread panicked");
            checks.extend(c);
            unreadable.extend(u);
        }
        (checks, unreadable)
    })
}

/// Counts of generalised paths, with one example document each.
fn tally<'a>(
    checks: &'a [DocCheck],
    field: impl Fn(&'a DocCheck) -> &'a [String],
) -> BTreeMap<String, (usize, &'a str)> {
    let mut out: BTreeMap<String, (usize, &str)> = BTreeMap::new();
    for check in checks {
        for path in field(check) {
            let entry = out
                .entry(generalise(path.split(':').next().unwrap_or(path)))
                .or_insert((0, &check.label));
            entry.0 += 1;
        }
    }
    out
}

fn print_tally(title: &str, tally: &BTreeMap<String, (usize, &str)>) {
    let total: usize = tally.values().map(|(n, _)| n).sum();
    println!("{title}: {total}");
    for (path, (count, example)) in tally {
        println!("  {count:>5}  {path}   e.g. {example}");
    }
}

fn failures(checks: &[DocCheck]) -> Vec<String> {
    checks
        .iter()
        .flat_map(|c| {
            c.failures()
                .into_iter()
                .map(move |f| format!("{}: {f}", c.label))
        })
        .collect()
}

/// Every field of the catalog that our CSV schema prunes, and why OLM's CRD prunes it too.
/// A path outside this list means our types lost a field OLM keeps.
const KNOWN_PRUNED: &[(&str, &str)] = &[
    (".ApiVersion", "misspelt apiVersion"),
    (
        ".metadata.features.operators.openshift.io/",
        "annotations mis-indented into metadata",
    ),
    (
        ".spec.com.redhat.openshift.versions",
        "an annotation written into spec",
    ),
    (
        ".spec.customresourcedefinitions.owned[].group",
        "not a CRDDescription field",
    ),
    (
        ".spec.install.spec.deployments[].spec.template.spec.volumes[].",
        "mis-indented below `secret:`",
    ),
    (
        ".spec.install.spec.permissions[].rules[].apigroups",
        "misspelt apiGroups",
    ),
    (
        ".spec.install.spec.spec",
        "install strategy nested one level too deep",
    ),
    (
        ".spec.install.spec.strategy",
        "install strategy nested one level too deep",
    ),
    (".spec.miniKubeVersion", "misspelt minKubeVersion"),
    (".spec.skipRange", "belongs in the olm.skipRange annotation"),
    (".spec.support", "an annotation written into spec"),
];

fn community_catalog_csvs_round_trip_and_validate() {
    let started = Instant::now();
    let operators = common::shared_dir().join("data/catalogs/community-operators-prod/operators");
    let mut files = Vec::new();
    manifest_files(&operators, &mut files);
    assert!(
        !files.is_empty(),
        "no manifest files under {}",
        operators.display()
    );

    let kinds = Kinds::new();
    let (checks, unreadable) = check_files(&kinds, &files, "ClusterServiceVersion");
    let elapsed = started.elapsed();

    println!(
        "community catalog: {} manifest files, {} ClusterServiceVersions checked in {elapsed:.2?}",
        files.len(),
        checks.len()
    );
    print_tally(
        "fields pruned by the CSV schema (OLM's CRD prunes them too)",
        &tally(&checks, |c| &c.pruned),
    );
    print_tally(
        "explicit nulls dropped",
        &tally(&checks, |c| &c.nulls_dropped),
    );
    print_tally(
        "rejected as written (OLM decodes bundles into typed objects first)",
        &tally(&checks, |c| &c.rejected_as_written),
    );
    print_tally(
        "required fields absent from the file, written as zero values",
        &tally(&checks, |c| &c.zero_filled),
    );
    print_tally(
        "fields the API server would default on what olm-rs writes",
        &tally(&checks, |c| &c.defaulted),
    );
    print_tally(
        "normalisations of the typed model",
        &tally(&checks, |c| &c.normalised),
    );

    let mut failures = failures(&checks);
    for (path, (count, example)) in tally(&checks, |c| &c.pruned) {
        if !KNOWN_PRUNED
            .iter()
            .any(|(known, _)| path.starts_with(known))
        {
            failures.push(format!("{example}: {path} is pruned by our schema ({count} documents) but is not a known OLM-pruned field"));
        }
    }
    assert!(
        unreadable.is_empty(),
        "unreadable manifest files:\n{}",
        unreadable.join("\n")
    );
    // The catalog holds ~1,500 CSVs; finding far fewer means the walk or the filter broke.
    assert!(
        checks.len() >= 1000,
        "only {} CSVs found under {}",
        checks.len(),
        operators.display()
    );
    assert!(
        failures.is_empty(),
        "{} problems:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The ```yaml blocks of a markdown text, with the line each starts on.
fn yaml_blocks(markdown: &str) -> Vec<(usize, String)> {
    let mut blocks = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (number, line) in markdown.lines().enumerate() {
        match &mut current {
            None if line.trim_start().starts_with("```yaml")
                || line.trim_start().starts_with("```yml") =>
            {
                current = Some((number + 2, String::new()));
            }
            Some(_) if line.trim_start().starts_with("```") => blocks.extend(current.take()),
            Some((_, text)) => {
                text.push_str(line);
                text.push('\n');
            }
            None => {}
        }
    }
    blocks
}

fn yaml_blocks_are_found_with_their_line() {
    let markdown =
        "# t\n```yaml\nkind: Subscription\n```\ntext\n```\nnot yaml\n```\n  ```yaml\na: 1\n  ```\n";
    assert_eq!(
        yaml_blocks(markdown),
        vec![
            (3, "kind: Subscription\n".to_string()),
            (10, "a: 1\n".to_string())
        ]
    );
}

fn spec_examples_of_olm_kinds_round_trip_and_validate() {
    let spec_dir = common::shared_dir().join("spec");
    let kinds = Kinds::new();
    let mut checks = Vec::new();
    let mut blocks_seen = 0;
    let mut entries: Vec<PathBuf> = std::fs::read_dir(&spec_dir)
        .expect("spec dir")
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for path in entries
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
    {
        let text = std::fs::read_to_string(path).expect("spec file readable");
        for (line, block) in yaml_blocks(&text) {
            blocks_seen += 1;
            let docs = documents(&block).unwrap_or_else(|e| {
                panic!("{}:{line}: yaml block does not parse: {e}", path.display())
            });
            for doc in docs {
                let is_example = [
                    "Subscription",
                    "CatalogSource",
                    "OperatorGroup",
                    "ClusterServiceVersion",
                ]
                .iter()
                .any(|k| doc.get("kind").and_then(Value::as_str) == Some(k));
                if is_example {
                    checks.extend(kinds.check(&format!("{}:{line}", path.display()), &doc));
                }
            }
        }
    }
    // When the spec has no examples of these kinds this checks nothing; say so.
    println!(
        "spec files: {blocks_seen} yaml blocks, {} OLM objects checked",
        checks.len()
    );
    let failures = failures(&checks);
    assert!(
        failures.is_empty(),
        "{} problems:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

crate::trials! {
    sync community_catalog_csvs_round_trip_and_validate,
    sync yaml_blocks_are_found_with_their_line,
    sync spec_examples_of_olm_kinds_round_trip_and_validate,
}

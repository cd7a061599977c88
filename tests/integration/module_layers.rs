//! Imports between the folders of `src/` point one way (docs/architecture.md §1): the
//! top-level modules — `api/`, `plan/`, `reconcile/`, `controller.rs`, … — never import each
//! other in a cycle. An entry's imports are those of every file beneath it, tests included:
//! `crate::a::b` paths (and `{…}` groups of them) and `super::` paths in code (not comments),
//! resolved. A cycle is how
//! a layer starts leaning on the one above it; the failure names the entries going round.
//!
//! Inside a folder, the cycles among its entries are listed in [`KNOWN_INNER_CYCLES`], each a
//! debt to pay: a new one fails, and so does a listed one that is gone (the list stays true).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Cycles among the entries of one folder (folder, entries in the cycle), each to be broken.
const KNOWN_INNER_CYCLES: &[(&str, &[&str])] = &[
    ("catalog", &["csv_metadata", "fbc", "go_json", "properties"]),
    ("catalog/fbc", &["documents", "yaml_fast"]),
    (
        "csv",
        &[
            "certs",
            "fixtures",
            "install_strategy",
            "observed",
            "ownership",
            "replacement",
        ],
    ),
    (
        "olm_hash/go_json",
        &["types_meta", "types_pod", "types_volume"],
    ),
    ("resolve", &["candidates", "solver"]),
];

type ModulePath = Vec<String>;

/// One source file: the module it is (`*_tests.rs` files and `*_tests/` folders are the `tests`
/// module of their namesake, which includes them by `#[path]`), and its source.
struct SourceFile {
    module: ModulePath,
    /// Where it sits in the folders of `src/` (what a cycle is reported in).
    location: ModulePath,
    source: String,
}

fn source_files(root: &Path) -> Vec<SourceFile> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(root).unwrap();
                let mut location: ModulePath = rel
                    .iter()
                    .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_owned())
                    .collect();
                if matches!(location.last().map(String::as_str), Some("mod" | "lib")) {
                    location.pop();
                }
                if location == ["main"] {
                    continue;
                }
                let module = location
                    .iter()
                    .flat_map(|part| match part.strip_suffix("_tests") {
                        Some(tested) => vec![tested.to_owned(), "tests".to_owned()],
                        None => vec![part.clone()],
                    })
                    .collect();
                // Code only: a comment naming a path (a doc link) is no import.
                let source = std::fs::read_to_string(&path)
                    .unwrap()
                    .lines()
                    .map(|line| line.split("//").next().unwrap_or_default())
                    .collect::<Vec<_>>()
                    .join("\n");
                out.push(SourceFile {
                    module,
                    location,
                    source,
                });
            }
        }
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Every path `source` names starting with `crate::` or `super::`, resolved from `module`
/// (a group `a::{b, c::d}` gives `a::b` and `a::c`).
fn referenced(source: &str, module: &[String]) -> Vec<ModulePath> {
    let mut out = Vec::new();
    for start in ["crate::", "super::"] {
        for (at, _) in source.match_indices(start) {
            if source[..at]
                .chars()
                .next_back()
                .is_some_and(|c| is_ident(c) || c == ':')
            {
                continue;
            }
            let mut base: ModulePath = Vec::new();
            let mut rest = &source[at..];
            if let Some(r) = rest.strip_prefix("crate::") {
                rest = r;
            } else {
                base = module.to_vec();
                while let Some(r) = rest.strip_prefix("super::") {
                    base.pop();
                    rest = r;
                }
            }
            let mut path = base;
            loop {
                let word: String = rest.chars().take_while(|c| is_ident(*c)).collect();
                if word.is_empty() {
                    if let Some(group) = rest.strip_prefix('{') {
                        let end = group.find('}').unwrap_or(group.len());
                        for item in group[..end].split(',') {
                            let name: String =
                                item.trim().chars().take_while(|c| is_ident(*c)).collect();
                            if !name.is_empty() && name != "self" {
                                let mut p = path.clone();
                                p.push(name);
                                out.push(p);
                            }
                        }
                    }
                    break;
                }
                rest = &rest[word.len()..];
                path.push(word);
                match rest.strip_prefix("::") {
                    Some(r) => rest = r,
                    None => break,
                }
            }
            out.push(path);
        }
    }
    out
}

/// For each folder (by module path), the import edges between its entries.
fn entry_graphs(files: &[SourceFile]) -> BTreeMap<ModulePath, BTreeMap<String, BTreeSet<String>>> {
    let entries: BTreeMap<ModulePath, BTreeSet<String>> =
        files.iter().fold(BTreeMap::new(), |mut acc, f| {
            for depth in 0..f.location.len() {
                acc.entry(f.location[..depth].to_vec())
                    .or_default()
                    .insert(f.location[depth].clone());
            }
            acc
        });
    let mut graphs: BTreeMap<ModulePath, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for file in files {
        let targets = referenced(&file.source, &file.module);
        for depth in 0..file.location.len() {
            let folder = &file.location[..depth];
            let from = &file.location[depth];
            let siblings = &entries[folder];
            let edges = graphs
                .entry(folder.to_vec())
                .or_default()
                .entry(from.clone())
                .or_default();
            for target in &targets {
                if target.len() > depth && target.starts_with(folder) {
                    let to = &target[depth];
                    if to != from && siblings.contains(to) {
                        edges.insert(to.clone());
                    }
                }
            }
        }
    }
    graphs
}

/// The strongly connected parts of `graph` with more than one entry (Tarjan).
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<BTreeSet<String>> {
    struct Walk<'g> {
        graph: &'g BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        found: Vec<BTreeSet<String>>,
    }
    fn visit<'g>(w: &mut Walk<'g>, node: &'g str) {
        let n = w.index.len();
        w.index.insert(node, n);
        w.low.insert(node, n);
        w.stack.push(node);
        for next in w.graph.get(node).into_iter().flatten() {
            if !w.index.contains_key(next.as_str()) {
                visit(w, next);
                let low = w.low[next.as_str()].min(w.low[node]);
                w.low.insert(node, low);
            } else if w.stack.contains(&next.as_str()) {
                let low = w.index[next.as_str()].min(w.low[node]);
                w.low.insert(node, low);
            }
        }
        if w.low[node] == w.index[node] {
            let mut part = BTreeSet::new();
            while let Some(top) = w.stack.pop() {
                part.insert(top.to_owned());
                if top == node {
                    break;
                }
            }
            if part.len() > 1 {
                w.found.push(part);
            }
        }
    }
    let mut w = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for node in graph.keys() {
        if !w.index.contains_key(node.as_str()) {
            visit(&mut w, node);
        }
    }
    w.found
}

#[test]
fn top_level_modules_import_one_way_and_inner_cycles_do_not_grow() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = source_files(&root);
    assert!(files.len() > 100, "read {} files", files.len());
    let mut problems = Vec::new();
    let mut inner = BTreeSet::new();
    for (folder, graph) in entry_graphs(&files) {
        for part in cycles(&graph) {
            if folder.is_empty() {
                problems.push(format!(
                    "import cycle among the top-level modules of src/: {}",
                    part.iter().cloned().collect::<Vec<_>>().join(" ⇄ ")
                ));
            } else {
                inner.insert((folder.join("/"), part));
            }
        }
    }
    let known: BTreeSet<(String, BTreeSet<String>)> = KNOWN_INNER_CYCLES
        .iter()
        .map(|(folder, entries)| {
            let entries = entries.iter().map(|e| (*e).to_owned()).collect();
            ((*folder).to_owned(), entries)
        })
        .collect();
    for (folder, part) in inner.difference(&known) {
        problems.push(format!(
            "a new import cycle in src/{folder}/: {part:?} (break it: a listed cycle is a debt, not a licence)"
        ));
    }
    for (folder, part) in known.difference(&inner) {
        problems.push(format!(
            "KNOWN_INNER_CYCLES lists src/{folder}/: {part:?}, which is gone: take it off the list"
        ));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_check_sees_cycles_through_folders_and_resolves_paths() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a".to_owned(), BTreeSet::from(["b".to_owned()])),
        ("b".to_owned(), BTreeSet::from(["c".to_owned()])),
        ("c".to_owned(), BTreeSet::from(["a".to_owned()])),
        ("d".to_owned(), BTreeSet::from(["a".to_owned()])),
    ]
    .into();
    assert_eq!(
        cycles(&graph),
        [BTreeSet::from([
            "a".to_owned(),
            "b".to_owned(),
            "c".to_owned()
        ])]
    );
    let here: ModulePath = vec!["plan".into(), "steps".into()];
    let seen = referenced(
        "use super::{rbac::x, draft};\nuse crate::registry::cache::{self, Ref};\nlet d = super::super::api::keys::X;",
        &here,
    );
    let has = |p: &[&str]| seen.iter().any(|s| s == p);
    assert!(has(&["plan", "rbac"]), "{seen:?}");
    assert!(has(&["plan", "draft"]), "{seen:?}");
    assert!(has(&["registry", "cache", "Ref"]), "{seen:?}");
    assert!(has(&["api", "keys", "X"]), "{seen:?}");
    // A folder-level edge: a file deep in `reconcile/` naming `crate::plan` is an edge of the
    // entry `reconcile` in `src/`.
    let files = vec![
        SourceFile {
            module: vec!["reconcile".into(), "deep".into(), "x".into()],
            location: vec!["reconcile".into(), "deep".into(), "x".into()],
            source: "use crate::plan::Thing;".into(),
        },
        SourceFile {
            module: vec!["plan".into()],
            location: vec!["plan".into()],
            source: "use crate::reconcile::deep::x;".into(),
        },
    ];
    let graphs = entry_graphs(&files);
    assert_eq!(
        cycles(&graphs[&Vec::new()]),
        [BTreeSet::from(["plan".to_owned(), "reconcile".to_owned()])]
    );
}

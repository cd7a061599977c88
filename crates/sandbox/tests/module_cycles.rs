//! The crate's modules form no import cycle: each module's `use` of a sibling (`super::x`,
//! `crate::x`, `crate::dir::x`, grouped `{x, y}` forms included) is an edge, and the graph of
//! every directory's modules must be acyclic. A cycle is how a layer starts leaning on the one
//! above it (the server hub once did); the failure names the modules going round.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is the report

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Module path (`["http", "objects"]`) → its source.
fn modules(root: &Path) -> BTreeMap<Vec<String>, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel: PathBuf = path.strip_prefix(root).unwrap().to_path_buf();
            let mut parts: Vec<String> = rel
                .iter()
                .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
                .collect();
            if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
                parts.pop();
            }
            out.insert(parts, std::fs::read_to_string(&path).unwrap());
        }
    }
    out
}

/// The identifiers right after `prefix`, alone or in a `{…}` group (first level only).
fn names_after(source: &str, prefix: &str) -> Vec<String> {
    let mut names = Vec::new();
    for (at, _) in source.match_indices(prefix) {
        let before = source[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let rest = &source[at + prefix.len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                let word: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                names.push(word);
            }
        } else {
            names.push(
                rest.chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect(),
            );
        }
    }
    names
}

/// Edges between sibling modules of each directory (module path of the parent → edges).
fn sibling_edges(
    modules: &BTreeMap<Vec<String>, String>,
) -> BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>> {
    let mut graphs: BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (path, source) in modules {
        let Some((name, parent)) = path.split_last() else {
            continue;
        };
        let siblings: BTreeSet<&String> = modules
            .keys()
            .filter(|p| p.len() == path.len() && p.starts_with(parent))
            .filter_map(|p| p.last())
            .collect();
        let mut prefix = String::from("crate::");
        for p in parent {
            prefix.push_str(p);
            prefix.push_str("::");
        }
        let used = names_after(source, &prefix)
            .into_iter()
            .chain(names_after(source, "super::"));
        let graph = graphs.entry(parent.to_vec()).or_default();
        let edges = graph.entry(name.clone()).or_default();
        for target in used {
            if &target != name && siblings.contains(&target) {
                edges.insert(target);
            }
        }
    }
    graphs
}

/// A cycle in `graph`, if any, as the modules along it.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|n| n == node) {
            let mut cycle = path[start..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

#[test]
fn no_module_imports_go_round() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let modules = modules(&root);
    assert!(modules.len() > 20, "read {} modules", modules.len());
    for (parent, graph) in sibling_edges(&modules) {
        if let Some(cycle) = find_cycle(&graph) {
            let scope = if parent.is_empty() {
                "the crate root".to_string()
            } else {
                format!("`crate::{}`", parent.join("::"))
            };
            panic!(
                "import cycle among the modules of {scope}: {}",
                cycle.join(" -> ")
            );
        }
    }
}

#[test]
fn the_check_sees_a_cycle() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a".to_string(), BTreeSet::from(["b".to_string()])),
        ("b".to_string(), BTreeSet::from(["c".to_string()])),
        ("c".to_string(), BTreeSet::from(["a".to_string()])),
    ]
    .into();
    assert_eq!(
        find_cycle(&graph),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
    assert_eq!(
        names_after("use super::{server::ApiServer, state};", "super::"),
        ["server", "state"]
    );
}

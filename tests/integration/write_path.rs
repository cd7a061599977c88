//! The one write path, checked mechanically: every create, replace and patch olm-rs sends
//! carries its field manager, because server-side-apply ownership, conflict reports and a
//! takeover from OLM all read it (docs/api-types.md). Library code outside `src/k8s/` builds no
//! `PostParams`/`PatchParams` of its own: it calls `k8s::post_params()`, `k8s::patch_params()`
//! or applies with `PatchParams::apply(MANAGER)`. The embedded API server (`crates/sandbox/`) is a
//! server, not a writer, and is left out; so are tests. Likewise no status code is matched by
//! hand outside `src/k8s/errors.rs`: reconcilers ask `is_not_found`, `is_conflict`, `absent_ok`.

use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, recursively (also read by `typed_errors`).
pub(crate) fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The lines of `text` before its first `#[cfg(test)]` (tests sit at the end of a file).
fn library_part(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .take_while(|(_, l)| l.trim() != "#[cfg(test)]")
}

/// Each line of library code (before the first `#[cfg(test)]`) of the Rust
/// files under `root/dir`, with its path relative to `root` and 1-based line number; test
/// files and the directories `skip` names are left out.
fn library_code_lines(root: &Path, dir: &str, skip: &[&str]) -> Vec<(String, usize, String)> {
    let mut files = Vec::new();
    rust_files(&root.join(dir), &mut files);
    let mut lines = Vec::new();
    for file in files {
        let rel = file
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        if skip.iter().any(|s| rel.starts_with(s))
            || rel.contains("/tests/")
            || name.ends_with("tests.rs")
        {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        for (i, line) in library_part(&text) {
            lines.push((rel.clone(), i + 1, line.to_owned()));
        }
    }
    lines
}

/// Every place in library code that would write without olm-rs's field manager.
fn bypasses(root: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for (rel, number, line) in library_code_lines(root, "src", &["src/k8s/"]) {
        let code = line.split("//").next().unwrap_or_default();
        let own_params = [
                "PostParams::default()",
                "PatchParams::default()",
                "PostParams {",
                "PatchParams {",
            ]
            .iter()
            .any(|p| code.contains(p))
                // A signature naming the type builds nothing.
                && !code.contains("fn ");
        let foreign_apply = code.contains("PatchParams::apply(")
            && !code.contains("PatchParams::apply(MANAGER)")
            && !code.contains("PatchParams::apply(crate::k8s::MANAGER)");
        // Status codes are told apart in one place (src/k8s/errors.rs).
        let status_match = ["code == 404", "code == 409", "code == 403"]
            .iter()
            .any(|p| code.contains(p));
        if own_params || foreign_apply || status_match {
            found.push(format!("{rel}:{number}: {}", line.trim()));
        }
    }
    found
}

/// The files of `src/` that call the API server's write verbs themselves, each for a reason that
/// makes it not a controller write: everything else goes through `k8s::write` or
/// `k8s::effects`.
const OWN_WRITERS: &[(&str, &str)] = &[
    // The write path itself.
    ("src/k8s/", "the one write path and its executor"),
    // Reviews are questions asked with a POST; the server stores nothing.
    ("src/access_review.rs", "SelfSubjectAccessReviews"),
    (
        "src/package_server/auth.rs",
        "TokenReviews and SubjectAccessReviews",
    ),
    // The Lease is leader election's compare-and-swap on its resourceVersion, before any
    // controller runs.
    ("src/leader_election/elector.rs", "the leader Lease"),
    // `olm-rs sandbox` is a client of its embedded API server, as a user with kubectl.
    ("src/sandbox_run/", "the sandbox's user-side objects"),
];

/// Every place in `src/` (but [`OWN_WRITERS`]) that calls the API server to write without going
/// through `k8s::write` or `k8s::effects` (docs/controller-startup.md, "One write path").
fn direct_writes(root: &Path) -> Vec<String> {
    let calls = [
        ".create(&",
        ".replace(&",
        ".replace_status(",
        ".patch(",
        ".patch_status(",
        ".delete(",
        ".delete_collection(",
        "k8s::apply::",
    ];
    let mut found = Vec::new();
    let own: Vec<&str> = OWN_WRITERS.iter().map(|(path, _)| *path).collect();
    for (rel, number, line) in library_code_lines(root, "src", &own) {
        let code = line.split("//").next().unwrap_or_default();
        // A request built by hand (`kube::core::Request`) is sent through
        // `k8s::write::send`, which reports it like every other write.
        if code.contains("Request::new(") {
            continue;
        }
        // `Api::create` takes its parameters first; another type's `create(&…)` is not a
        // write to the API server.
        let api_create = code.contains(".create(&")
            && (code.contains("post_params") || code.contains("PostParams"));
        let other = calls
            .iter()
            .filter(|c| **c != ".create(&")
            .any(|c| code.contains(c));
        if api_create || other {
            found.push(format!("{rel}:{number}: {}", line.trim()));
        }
    }
    found
}

#[test]
fn library_code_writes_only_through_the_one_write_path() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let found = direct_writes(root);
    assert!(
        found.is_empty(),
        "API writes in src/ that bypass k8s::write / k8s::effects:\n{}",
        found.join("\n")
    );
    // Each exception names a path that exists, so a moved file is not silently let through.
    for (path, _) in OWN_WRITERS {
        assert!(
            root.join(path).exists(),
            "OWN_WRITERS names {path}, which is gone"
        );
    }
}

#[test]
fn the_direct_write_check_finds_one() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("src/reconcile");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("bad.rs"),
        "fn f() {\n    // api.delete(name, &p) in a comment is fine\n    write::delete(client, &key, &o);\n    api.replace_status(n, &pp, &o);\n    api.create(&k8s::post_params(), &o);\n    writer.create(&namespace);\n    let r = Request::new(url).delete(name, &params);\n}\n#[cfg(test)]\nmod tests { fn t() { api.patch(n, &p, &b); } }\n",
    )
    .unwrap();
    // Anywhere in src/, not only the reconcilers; src/k8s/ is the write path itself.
    for (dir, file) in [("src/package_server", "keeper.rs"), ("src/k8s", "write.rs")] {
        std::fs::create_dir_all(root.path().join(dir)).unwrap();
        std::fs::write(
            root.path().join(dir).join(file),
            "fn g() {\n    api.patch(n, &p, &b);\n}\n",
        )
        .unwrap();
    }
    let mut found = direct_writes(root.path());
    found.sort();
    assert_eq!(found.len(), 3, "{found:?}");
    assert!(
        found[0].starts_with("src/package_server/keeper.rs:2:"),
        "{found:?}"
    );
    assert!(found[1].starts_with("src/reconcile/bad.rs:4:"), "{found:?}");
    assert!(found[2].starts_with("src/reconcile/bad.rs:5:"), "{found:?}");
}

#[test]
fn every_write_in_library_code_carries_the_olm_rs_field_manager() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let found = bypasses(root);
    assert!(
        found.is_empty(),
        "writes that bypass crate::k8s (use k8s::post_params()/patch_params() or \
         PatchParams::apply(MANAGER)):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_check_finds_a_bypass() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("src/reconcile");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("bad.rs"),
        "fn f() {\n    api.create(&PostParams::default(), &o);\n    api.patch(n, &PatchParams::apply(\"me\"), &p);\n    Err(kube::Error::Api(s)) if s.code == 404 => {}\n}\n#[cfg(test)]\nmod tests { fn t() { PostParams::default(); } }\n",
    )
    .unwrap();
    let found = bypasses(root.path());
    assert_eq!(found.len(), 3, "{found:?}");
    assert!(found[0].starts_with("src/reconcile/bad.rs:2:"));
}

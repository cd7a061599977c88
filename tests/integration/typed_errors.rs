//! Typed errors, checked mechanically (STYLE.md rule 5): library code returns `thiserror`
//! enums that keep the object and the cause matchable, never a `Result<_, String>` whose
//! text is all a caller can look at, and never flattens a typed cause into a string with
//! `map_err(|e| e.to_string())`. The CLI (`src/cli/`, `src/main.rs`) prints the final error
//! and is left out; so are tests.

use std::path::Path;

use crate::write_path::rust_files;

/// The library code of `text`: the lines before its first `#[cfg(test)]` (tests sit at the end
/// of a file), each cut at its `//` comment, with their 1-based numbers.
fn library_code(text: &str) -> Vec<(usize, String)> {
    text.lines()
        .enumerate()
        .take_while(|(_, l)| l.trim() != "#[cfg(test)]")
        .map(|(i, l)| (i + 1, strip_comment(l).to_owned()))
        .collect()
}

/// `line` without its `//` comment (a `//` inside a string literal, as in a URL, is kept).
fn strip_comment(line: &str) -> &str {
    let mut in_string = false;
    let mut escaped = false;
    let bytes = line.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            _ if escaped => escaped = false,
            b'\\' if in_string => escaped = true,
            b'"' => in_string = !in_string,
            b'/' if !in_string && bytes.get(i + 1) == Some(&b'/') => return &line[..i],
            _ => {}
        }
    }
    line
}

/// The generic arguments of the `Result<` starting at byte `open` (just past the `<`) of
/// `code`, split at their top-level commas; `None` if the brackets do not close.
fn generic_arguments(code: &str, open: usize) -> Option<Vec<String>> {
    let mut depth = 1;
    let mut args = Vec::new();
    let mut start = open;
    let bytes = code.as_bytes();
    for i in open..bytes.len() {
        match bytes[i] {
            b'<' | b'(' | b'[' => depth += 1,
            // `->` in a closure or fn type is no bracket.
            b'>' if i > 0 && bytes[i - 1] == b'-' => {}
            b'>' | b')' | b']' => {
                depth -= 1;
                if depth == 0 {
                    let last = code[start..i].trim();
                    // A trailing comma (rustfmt's multi-line style) ends no argument.
                    if !last.is_empty() {
                        args.push(last.to_owned());
                    }
                    return Some(args);
                }
            }
            b',' if depth == 1 => {
                args.push(code[start..i].trim().to_owned());
                start = i + 1;
            }
            _ => {}
        }
    }
    None
}

/// Every `Result<…, String>` and every `map_err(|e| e.to_string())` in the library code of the
/// Rust files under `root/src` and the workspace's `root/crates/*/src`, as `path:line: code`.
fn string_errors(root: &Path) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    if let Ok(crates) = std::fs::read_dir(root.join("crates")) {
        for krate in crates.flatten() {
            rust_files(&krate.path().join("src"), &mut files);
        }
    }
    files.sort();
    let mut found = Vec::new();
    for file in files {
        let rel = file
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        if rel.starts_with("src/cli/")
            || rel == "src/main.rs"
            || rel.contains("/tests/")
            || name.ends_with("tests.rs")
        {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        let lines = library_code(&text);
        // Signatures spread over lines: scan the code joined, and map offsets back to lines.
        let mut code = String::new();
        let mut starts = Vec::new();
        for (number, line) in &lines {
            starts.push((code.len(), *number));
            code.push_str(line);
            code.push('\n');
        }
        let line_of = |offset: usize| {
            let i = starts.partition_point(|(start, _)| *start <= offset);
            starts[i - 1].1
        };
        let mut report = |offset: usize| {
            let number = line_of(offset);
            let line = &lines.iter().find(|(n, _)| *n == number).unwrap().1;
            found.push(format!("{rel}:{number}: {}", line.trim()));
        };
        for (at, _) in code.match_indices("Result<") {
            // `io::Result<T>`, `fmt::Result` and the like take no error argument.
            let args = generic_arguments(&code, at + "Result<".len()).unwrap_or_default();
            if args.len() == 2 && args[1] == "String" {
                report(at);
            }
        }
        let compact: String = code.chars().filter(|c| !c.is_whitespace()).collect();
        if compact.contains("map_err(|e|e.to_string())")
            || compact.contains("map_err(|err|err.to_string())")
            || compact.contains("map_err(|error|error.to_string())")
            || compact.contains("map_err(ToString::to_string)")
        {
            for needle in [
                "|e| e.to_string()",
                "|err| err.to_string()",
                "|error| error.to_string()",
                "ToString::to_string)",
            ] {
                for (at, _) in code.match_indices(needle) {
                    if code[..at].trim_end().ends_with("map_err(") {
                        report(at);
                    }
                }
            }
        }
    }
    found
}

#[test]
fn library_code_returns_typed_errors() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let found = string_errors(root);
    assert!(
        found.is_empty(),
        "string errors in library code (return a thiserror enum that keeps the cause):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_check_finds_string_errors() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("src/catalog");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("bad.rs"),
        "fn a() -> Result<(), String> {}\n\
         // fn b() -> Result<(), String> in a comment is fine\n\
         fn c(f: impl Fn(&str) -> Result<u8, Error>) -> std::io::Result<Vec<u8>> {}\n\
         fn d() -> Result<\n    BTreeMap<String, Vec<u8>>,\n    String,\n> {}\n\
         fn e() { x.parse().map_err(|e| e.to_string())?; }\n\
         fn f() -> Result<String, Error> {}\n\
         #[cfg(test)]\nmod tests { fn t() -> Result<(), String> {} }\n",
    )
    .unwrap();
    let cli = root.path().join("src/cli");
    std::fs::create_dir_all(&cli).unwrap();
    std::fs::write(cli.join("print.rs"), "fn a() -> Result<(), String> {}\n").unwrap();
    let found = string_errors(root.path());
    assert_eq!(found.len(), 3, "{found:?}");
    assert!(found[0].starts_with("src/catalog/bad.rs:1:"), "{found:?}");
    assert!(found[1].starts_with("src/catalog/bad.rs:4:"), "{found:?}");
    assert!(found[2].starts_with("src/catalog/bad.rs:8:"), "{found:?}");
}

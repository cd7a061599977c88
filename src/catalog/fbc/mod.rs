//! Loading a file-based catalog directory (spec/catalog.md §7.1).

pub mod blob;
pub mod documents;
pub mod yaml_fast;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::error::{CatalogError, Location, Problem, Rule};
use super::model::{DeclarativeConfig, Origin};
use blob::Blob;

/// The result of reading a catalog directory: what could be read, and every problem met.
#[derive(Debug, Default)]
pub struct Loaded {
    pub config: DeclarativeConfig,
    pub problems: Vec<Problem>,
}

/// How to hold what is loaded.
#[derive(Debug, Clone, Copy, Default)]
pub struct LoadOptions {
    /// Keep valid `olm.csv.metadata` values compressed (`Property::pack`): most of a catalog's
    /// bytes, rarely read by a long-lived server (`catalog serve`).
    pub pack_csv_metadata: bool,
}

const INDEX_IGNORE: &str = ".indexignore";

/// Every file of the catalog that opm would parse, sorted: regular files (or links to files)
/// not excluded by an `.indexignore` of their directory or a parent, and not `.indexignore`
/// itself.
pub fn catalog_files(root: &Path) -> Result<Vec<PathBuf>, CatalogError> {
    if !root.is_dir() {
        return Err(CatalogError::NotADirectory(root.to_path_buf()));
    }
    let walker = ignore::WalkBuilder::new(root)
        .standard_filters(false)
        .add_custom_ignore_filename(INDEX_IGNORE)
        .sort_by_file_name(|a, b| a.cmp(b))
        .build();
    let mut files = Vec::new();
    for entry in walker {
        let entry = entry.map_err(|source| CatalogError::Walk {
            path: root.to_path_buf(),
            source,
        })?;
        if entry.file_name() == INDEX_IGNORE {
            continue;
        }
        let is_file = match entry.file_type() {
            Some(t) if t.is_file() => true,
            Some(t) if t.is_symlink() => entry.path().is_file(),
            _ => false,
        };
        if is_file {
            files.push(entry.into_path());
        }
    }
    Ok(files)
}

/// Reads every catalog file (in parallel) and parses every document, collecting problems
/// instead of stopping at the first one. Fails only when the directory cannot be walked.
pub fn load_dir(root: &Path) -> Result<Loaded, CatalogError> {
    load_dir_with(root, LoadOptions::default())
}

/// `load_dir` with `options`.
pub fn load_dir_with(root: &Path, options: LoadOptions) -> Result<Loaded, CatalogError> {
    let files = catalog_files(root)?;
    // Biggest files first: a big file taken last would leave the other cores idle while one
    // parses it (catalogs/v4.20 has one directory per package, 3 KB to 2.3 MB each).
    let mut by_size: Vec<(u64, usize)> = files
        .iter()
        .enumerate()
        .map(|(i, path)| (std::fs::metadata(path).map_or(0, |m| m.len()), i))
        .collect();
    by_size.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut results = parallel_map(&by_size, |&(_, i)| (i, load_file(root, &files[i], options)));
    results.sort_by_key(|(i, _)| *i);
    let mut loaded = Loaded::default();
    for (_, (config, problems)) in results {
        loaded.config.merge(config);
        loaded.problems.extend(problems);
    }
    Ok(loaded)
}

/// Loads a catalog directory and fails if any file or document could not be read.
pub fn load_dir_strict(root: &Path) -> Result<DeclarativeConfig, CatalogError> {
    let loaded = load_dir(root)?;
    if loaded.problems.is_empty() {
        Ok(loaded.config)
    } else {
        Err(CatalogError::Invalid(loaded.problems))
    }
}

fn relative_name(root: &Path, path: &Path) -> Arc<str> {
    let rel = path.strip_prefix(root).unwrap_or(path);
    Arc::from(rel.to_string_lossy().as_ref())
}

/// Parses one file's text into blobs; `name` is used in origins and messages.
pub fn load_text(name: Arc<str>, text: &str) -> (DeclarativeConfig, Vec<Problem>) {
    load_text_with(name, text, LoadOptions::default())
}

/// `load_text` with `options`.
pub fn load_text_with(
    name: Arc<str>,
    text: &str,
    options: LoadOptions,
) -> (DeclarativeConfig, Vec<Problem>) {
    let mut loaded = (DeclarativeConfig::default(), Vec::new());
    // Block YAML (every catalog opm writes) is transcoded one document at a time and each
    // document parsed at once, so a file's JSON is never held whole (peak memory).
    if !text.trim_start().starts_with('{') {
        let fast = yaml_fast::for_each_document(text, |json, line| {
            add_document(
                &mut loaded,
                json,
                Origin::new(name.clone(), Some(line)),
                options,
            );
        });
        if fast.is_some() {
            return loaded;
        }
        // Outside the fast subset: start over on the general path.
        loaded = (DeclarativeConfig::default(), Vec::new());
    }
    let documents = match documents::split_general(text) {
        Ok(d) => d,
        Err(e) => {
            loaded.1.push(Problem::new(
                Rule::L1,
                Location::file(name.to_string(), e.line),
                e.message,
            ));
            return loaded;
        }
    };
    for doc in documents {
        add_document(
            &mut loaded,
            &doc.json,
            Origin::new(name.clone(), doc.line),
            options,
        );
    }
    loaded
}

fn add_document(
    (config, problems): &mut (DeclarativeConfig, Vec<Problem>),
    json: &str,
    origin: Origin,
    options: LoadOptions,
) {
    match blob::parse_with(json, &origin, options) {
        Err(p) => problems.push(*p),
        Ok((blob, extra)) => {
            problems.extend(extra);
            match blob {
                Blob::Package(p) => config.packages.push(p),
                Blob::Channel(c) => config.channels.push(c),
                Blob::Bundle(b) => config.bundles.push(b),
                Blob::Deprecations(d) => config.deprecations.push(d),
                Blob::Other(o) => config.others.push(o),
            }
        }
    }
}

/// Reads a file with one plain `read` into a fresh buffer, freed when the file is done.
/// Mapping the file instead (memmap2) was measured on catalogs/v4.20: 10 ms less CPU but
/// 2–3 MB more peak RSS, since the mapped pages of the files being parsed count as resident
/// on top of the heap, and peak memory is the scarcer budget (catalog serve).
fn load_file(root: &Path, path: &Path, options: LoadOptions) -> (DeclarativeConfig, Vec<Problem>) {
    let name = relative_name(root, path);
    match std::fs::read(path) {
        Err(e) => (
            DeclarativeConfig::default(),
            vec![Problem::new(
                Rule::L1,
                Location::file(name.to_string(), None),
                e.to_string(),
            )],
        ),
        Ok(bytes) => match String::from_utf8(bytes) {
            Ok(text) => load_text_with(name, &text, options),
            Err(e) => (
                DeclarativeConfig::default(),
                vec![Problem::new(
                    Rule::L1,
                    Location::file(name.to_string(), None),
                    format!(
                        "file is not UTF-8 text: invalid byte at offset {}",
                        e.utf8_error().valid_up_to()
                    ),
                )],
            ),
        },
    }
}

/// Maps `f` over `items` on all cores (std threads; the pure core has no async runtime),
/// keeping the input order.
pub fn parallel_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(items.len().max(1));
    if workers <= 1 {
        return items.iter().map(f).collect();
    }
    let next = AtomicUsize::new(0);
    let mut results: Vec<(usize, R)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(item) = items.get(i) else { break };
                        done.push((i, f(item)));
                    }
                    done
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| match h.join() {
                Ok(done) => done,
                // A worker only panics if `f` panics; re-raise it on the caller's thread.
                Err(panic) => std::panic::resume_unwind(panic),
            })
            .collect()
    });
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, r)| r).collect()
}

//! Loading a file-based catalog directory (docs/catalog.md §6.1).

pub mod blob;
pub mod documents;
pub mod yaml_fast;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::error::{CatalogError, Location, Problem, Rule};
use super::model::{DeclarativeConfig, Origin};
use super::properties;
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
    /// How bundles keep their `olm.csv.metadata` values, most of a catalog's bytes.
    pub csv_metadata: CsvMetadataHold,
}

/// How a bundle keeps an `olm.csv.metadata` value that passed its check (C11, made at load).
/// A value that fails is always kept as text, for validation to word the error.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CsvMetadataHold {
    /// As JSON text.
    #[default]
    Text,
    /// Compressed (`Property::packed`): for a long-lived process that rarely reads them
    /// (`catalog serve`).
    Packed,
    /// Not at all (`Property::checked_only`, whose value reads as `null`): for a one-shot
    /// validation that only needs to know they are valid (`catalog validate`).
    CheckOnly,
}

/// Buffers one loader thread reuses from file to file, so that their memory is allocated
/// (and its pages faulted in) about once per thread rather than once per file: on
/// catalogs/v4.20, 7,500 → 2,400 page faults and a fifth less CPU for `catalog validate`.
/// A buffer more than twice as big as the next file needs is shrunk to fit, so that the
/// biggest file's buffers (read first) are not still held while the catalog's content piles
/// up towards the end of the load (`catalog serve`'s peak memory).
#[derive(Default)]
struct Buffers {
    file: Vec<u8>,
    json: String,
}

impl Buffers {
    fn fit(&mut self, file_len: usize) {
        if self.file.capacity() / 2 > file_len {
            self.file = Vec::new();
        }
        // A document's JSON is about as long as its YAML.
        if self.json.capacity() / 2 > file_len {
            self.json = String::new();
        }
    }
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
    let mut results = parallel_map_with(&by_size, Buffers::default, |buffers, &(_, i)| {
        (i, load_file(root, &files[i], options, buffers))
    });
    results.sort_by_key(|(i, _)| *i);
    let mut loaded = Loaded::default();
    for (_, (config, problems)) in results {
        loaded.config.merge(config);
        loaded.problems.extend(problems);
    }
    Ok(loaded)
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
    load_text_in(name, text, options, &mut String::new())
}

/// `load_text_with` transcoding YAML into `json_buffer`.
fn load_text_in(
    name: Arc<str>,
    text: &str,
    options: LoadOptions,
    json_buffer: &mut String,
) -> (DeclarativeConfig, Vec<Problem>) {
    let mut loaded = (DeclarativeConfig::default(), Vec::new());
    // Block YAML (every catalog opm writes) is transcoded one document at a time and each
    // document parsed at once, so a file's JSON is never held whole (peak memory).
    if !text.trim_start().starts_with('{') {
        let fast = if options.csv_metadata == CsvMetadataHold::CheckOnly {
            yaml_fast::for_each_document_emptying_csv_metadata(
                text,
                json_buffer,
                |json, line, emptied| {
                    let origin = Origin::new(name.clone(), Some(line));
                    if emptied {
                        add_checked_bundle(&mut loaded, json, origin, options)
                    } else {
                        add_document(&mut loaded, json, origin, options);
                        true
                    }
                },
            )
        } else {
            yaml_fast::for_each_document_in(text, json_buffer, |json, line| {
                add_document(
                    &mut loaded,
                    json,
                    Origin::new(name.clone(), Some(line)),
                    options,
                );
            })
        };
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

/// Adds a document whose `olm.csv.metadata` strings were emptied (`CheckOnly`), if it is a
/// bundle without problems whose CSV metadata passed its check, and so whose model is the same
/// as the full text's (the values are not kept). Otherwise adds nothing and returns `false`:
/// the caller hands over the full text, whose problems are worded from what the file says.
fn add_checked_bundle(
    (config, _): &mut (DeclarativeConfig, Vec<Problem>),
    json: &str,
    origin: Origin,
    options: LoadOptions,
) -> bool {
    match blob::parse_with(json, &origin, options) {
        Ok((Blob::Bundle(bundle), extra))
            if extra.is_empty()
                && bundle
                    .properties
                    .iter()
                    .all(|p| p.type_ != properties::CSV_METADATA || p.is_checked()) =>
        {
            config.bundles.push(bundle);
            true
        }
        _ => false,
    }
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

/// Reads a file with one plain `read` into the thread's reused buffer. Mapping the file instead
/// (memmap2) was measured on catalogs/v4.20: 10 ms less CPU but 2–3 MB more peak RSS, since
/// the mapped pages of the files being parsed count as resident on top of the heap, and peak
/// memory is the scarcer budget (catalog serve). A fresh buffer per file (as before) faulted in
/// all 15 MB of the catalog page by page; the reused one faults in its biggest file once.
fn load_file(
    root: &Path,
    path: &Path,
    options: LoadOptions,
    buffers: &mut Buffers,
) -> (DeclarativeConfig, Vec<Problem>) {
    let name = relative_name(root, path);
    let problem = |message: String| {
        (
            DeclarativeConfig::default(),
            vec![Problem::new(
                Rule::L1,
                Location::file(name.to_string(), None),
                message,
            )],
        )
    };
    if let Err(e) = read_into(path, buffers) {
        return problem(e.to_string());
    }
    match std::str::from_utf8(&buffers.file) {
        Ok(text) => load_text_in(name.clone(), text, options, &mut buffers.json),
        Err(e) => problem(format!(
            "file is not UTF-8 text: invalid byte at offset {}",
            e.valid_up_to()
        )),
    }
}

/// `std::fs::read` into `buffers.file` (replacing its content).
fn read_into(path: &Path, buffers: &mut Buffers) -> std::io::Result<()> {
    use std::io::Read;
    let mut file = std::fs::File::open(path)?;
    let len = file
        .metadata()
        .map_or(0, |m| usize::try_from(m.len()).unwrap_or(0));
    buffers.fit(len);
    buffers.file.clear();
    buffers.file.reserve(len);
    file.read_to_end(&mut buffers.file)?;
    Ok(())
}

/// Maps `f` over `items` on all cores (std threads; the pure core has no async runtime),
/// keeping the input order.
pub fn parallel_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    parallel_map_with(items, || (), |_, item| f(item))
}

/// `parallel_map` where each worker thread has its own state, made by `init` (buffers to
/// reuse from item to item) and dropped when the worker is done.
pub fn parallel_map_with<T: Sync, S, R: Send>(
    items: &[T],
    init: impl Fn() -> S + Sync,
    f: impl Fn(&mut S, &T) -> R + Sync,
) -> Vec<R> {
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(items.len().max(1));
    if workers <= 1 {
        let mut state = init();
        return items.iter().map(|item| f(&mut state, item)).collect();
    }
    let next = AtomicUsize::new(0);
    let mut results: Vec<(usize, R)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| {
                    let mut state = init();
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(item) = items.get(i) else { break };
                        done.push((i, f(&mut state, item)));
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

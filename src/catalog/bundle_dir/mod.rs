//! registry+v1 bundle directories: `manifests/` + `metadata/` (docs/catalog.md §8.1), read the
//! way `opm render` reads them (docs/catalog.md §8.3).

pub mod render;

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::fbc::documents;

pub const ANNOTATION_PACKAGE: &str = "operators.operatorframework.io.bundle.package.v1";
pub const ANNOTATION_CHANNELS: &str = "operators.operatorframework.io.bundle.channels.v1";
pub const ANNOTATION_DEFAULT_CHANNEL: &str =
    "operators.operatorframework.io.bundle.channel.default.v1";
pub const ANNOTATION_MEDIATYPE: &str = "operators.operatorframework.io.bundle.mediatype.v1";

/// Why a bundle directory cannot be read or rendered.
#[derive(Debug, thiserror::Error)]
pub enum BundleDirError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: Could not find annotations file", dir.display())]
    NoAnnotations { dir: PathBuf },
    #[error("{}: annotation {ANNOTATION_PACKAGE} is missing or empty", file.display())]
    NoPackage { file: PathBuf },
    #[error("{}: no manifests found in manifests/", dir.display())]
    NoObjects { dir: PathBuf },
    #[error("{}: no ClusterServiceVersion found in manifests/", dir.display())]
    NoCsv { dir: PathBuf },
    #[error("{}: {field}: {message}", file.display())]
    BadField {
        file: PathBuf,
        field: String,
        message: String,
    },
    #[error(
        "error checking provided apis in bundle {csv}: couldn't find {group}/{version}/{kind} ({plural}) in bundle"
    )]
    MissingOwnedCrd {
        csv: String,
        group: String,
        version: String,
        kind: String,
        plural: String,
    },
}

/// Why one file of a bundle could not be read as a document (the file is skipped, with a
/// warning saying this).
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("outside the bundle")]
    OutsideBundle,
    #[error("no such file")]
    Missing,
    #[error(transparent)]
    NotUtf8(#[from] std::str::Utf8Error),
    #[error("{}", located(.0))]
    Syntax(#[from] documents::SyntaxError),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

/// A syntax error with its line, when known.
fn located(e: &documents::SyntaxError) -> String {
    match e.line {
        Some(l) => format!("line {l}: {}", e.message),
        None => e.message.clone(),
    }
}

/// One manifest of `manifests/`.
#[derive(Debug, Clone)]
pub struct Manifest {
    pub file: PathBuf,
    pub object: Value,
}

/// A bundle directory as read from disk.
#[derive(Debug, Clone)]
pub struct BundleDir {
    pub path: PathBuf,
    /// Manifests in file-name order; only the first CSV is kept.
    pub manifests: Vec<Manifest>,
    /// Index of the CSV in `manifests`.
    pub csv: usize,
    pub annotations: Map<String, Value>,
    pub annotations_file: PathBuf,
    pub dependencies: Vec<Value>,
    pub properties: Vec<Value>,
    /// Files skipped with a reason (opm only warns about them).
    pub warnings: Vec<String>,
}

impl BundleDir {
    pub fn csv(&self) -> &Value {
        &self.manifests[self.csv].object
    }

    pub fn csv_name(&self) -> &str {
        self.csv()["metadata"]["name"].as_str().unwrap_or_default()
    }

    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.annotations
            .get(key)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    }

    pub fn package(&self) -> &str {
        self.annotation(ANNOTATION_PACKAGE).unwrap_or_default()
    }

    /// Channels from the annotations (comma-separated, trimmed, empty items dropped).
    pub fn channels(&self) -> Vec<String> {
        self.annotation(ANNOTATION_CHANNELS)
            .map(|c| {
                c.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    }

    pub fn default_channel(&self) -> Option<&str> {
        self.annotation(ANNOTATION_DEFAULT_CHANNEL)
    }
}

/// A directory is a bundle when it has both `manifests/` and `metadata/` (docs/catalog.md §8.3).
pub fn is_bundle_dir(path: &Path) -> bool {
    path.join("manifests").is_dir() && path.join("metadata").is_dir()
}

/// Where a bundle's files come from: a directory on disk, or files taken from an image's layers
/// (`bundle_image`). Both are read by the same code, so both render the same bytes.
pub trait BundleFiles {
    /// The bundle's root, as shown in messages (a directory, or an image reference).
    fn root(&self) -> &Path;
    /// Regular files directly inside `sub` (`manifests` or `metadata`), sorted by path, dot
    /// files left out; each path is `root/sub/name`.
    fn list(&self, sub: &str) -> Result<Vec<PathBuf>, BundleDirError>;
    /// The text of one listed file.
    fn read_text(&self, file: &Path) -> Result<String, FileError>;
}

/// A bundle directory on disk.
pub struct DiskBundle<'a>(pub &'a Path);

impl BundleFiles for DiskBundle<'_> {
    fn root(&self) -> &Path {
        self.0
    }

    fn list(&self, sub: &str) -> Result<Vec<PathBuf>, BundleDirError> {
        let dir = self.0.join(sub);
        let io = |source| BundleDirError::Io {
            path: dir.clone(),
            source,
        };
        let mut files = Vec::new();
        for entry in std::fs::read_dir(&dir).map_err(io)? {
            let entry = entry.map_err(io)?;
            let name = entry.file_name();
            if name.to_string_lossy().starts_with('.') {
                continue;
            }
            if entry.path().is_file() {
                files.push(entry.path());
            }
        }
        files.sort();
        Ok(files)
    }

    fn read_text(&self, file: &Path) -> Result<String, FileError> {
        Ok(std::fs::read_to_string(file)?)
    }
}

/// A bundle held in memory: file contents by path relative to the bundle root
/// (`manifests/csv.yaml`), e.g. as unpacked from an image's layers.
pub struct MemoryBundle<'a> {
    pub root: PathBuf,
    pub files: &'a std::collections::BTreeMap<String, Vec<u8>>,
}

impl BundleFiles for MemoryBundle<'_> {
    fn root(&self) -> &Path {
        &self.root
    }

    fn list(&self, sub: &str) -> Result<Vec<PathBuf>, BundleDirError> {
        let prefix = format!("{sub}/");
        // Sorted like the directory listing: by the joined path, which for one directory is
        // the order of the file names.
        let mut files: Vec<PathBuf> = self
            .files
            .keys()
            .filter_map(|k| k.strip_prefix(&prefix))
            .filter(|name| !name.is_empty() && !name.contains('/') && !name.starts_with('.'))
            .map(|name| self.root.join(sub).join(name))
            .collect();
        files.sort();
        Ok(files)
    }

    fn read_text(&self, file: &Path) -> Result<String, FileError> {
        let key = file
            .strip_prefix(&self.root)
            .map_err(|_| FileError::OutsideBundle)?
            .to_string_lossy()
            .into_owned();
        let bytes = self.files.get(&key).ok_or(FileError::Missing)?;
        Ok(std::str::from_utf8(bytes)?.to_owned())
    }
}

/// The first document of a YAML/JSON file as a JSON value.
fn first_document(src: &dyn BundleFiles, path: &Path) -> Result<Option<Value>, FileError> {
    let text = src.read_text(path)?;
    let docs = documents::split(&text)?;
    match docs.into_iter().next() {
        None => Ok(None),
        Some(d) => Ok(Some(serde_json::from_str(&d.json)?)),
    }
}

/// Reads a bundle directory as `opm render` does.
pub fn read(path: &Path) -> Result<BundleDir, BundleDirError> {
    read_from(&DiskBundle(path))
}

/// Reads a bundle from any file source as `opm render` reads a directory.
pub fn read_from(src: &dyn BundleFiles) -> Result<BundleDir, BundleDirError> {
    let path = src.root();
    let mut warnings = Vec::new();
    let mut manifests = Vec::new();
    let mut csv = None;
    for file in src.list("manifests")? {
        let object = match first_document(src, &file) {
            Ok(Some(v @ Value::Object(_))) => v,
            Ok(_) => {
                warnings.push(format!("{}: not an object, skipped", file.display()));
                continue;
            }
            Err(e) => {
                warnings.push(format!("{}: {e}, skipped", file.display()));
                continue;
            }
        };
        if object["kind"] == "ClusterServiceVersion" {
            if csv.is_some() {
                warnings.push(format!(
                    "{}: second ClusterServiceVersion ignored",
                    file.display()
                ));
                continue;
            }
            csv = Some(manifests.len());
        }
        manifests.push(Manifest { file, object });
    }
    if manifests.is_empty() {
        return Err(BundleDirError::NoObjects {
            dir: path.to_path_buf(),
        });
    }
    let Some(csv) = csv else {
        return Err(BundleDirError::NoCsv {
            dir: path.to_path_buf(),
        });
    };

    // docs/catalog.md §8.1: every metadata file is tried as each kind; the first non-empty wins.
    let mut annotations = None;
    let mut dependencies = None;
    let mut properties = None;
    for file in src.list("metadata")? {
        let Ok(Some(Value::Object(doc))) = first_document(src, &file) else {
            continue;
        };
        if annotations.is_none()
            && let Some(Value::Object(a)) = doc
                .get("annotations")
                .filter(|a| a.as_object().is_some_and(|m| !m.is_empty()))
        {
            annotations = Some((a.clone(), file.clone()));
        }
        if dependencies.is_none()
            && let Some(Value::Array(d)) = doc
                .get("dependencies")
                .filter(|d| d.as_array().is_some_and(|l| !l.is_empty()))
        {
            dependencies = Some(d.clone());
        }
        if properties.is_none()
            && let Some(Value::Array(p)) = doc
                .get("properties")
                .filter(|p| p.as_array().is_some_and(|l| !l.is_empty()))
        {
            properties = Some(p.clone());
        }
    }
    let Some((annotations, annotations_file)) = annotations else {
        return Err(BundleDirError::NoAnnotations {
            dir: path.to_path_buf(),
        });
    };
    let dir = BundleDir {
        path: path.to_path_buf(),
        manifests,
        csv,
        annotations,
        annotations_file,
        dependencies: dependencies.unwrap_or_default(),
        properties: properties.unwrap_or_default(),
        warnings,
    };
    if dir.package().is_empty() {
        return Err(BundleDirError::NoPackage {
            file: dir.annotations_file.clone(),
        });
    }
    check_owned_crds(&dir)?;
    Ok(dir)
}

/// Every CRD the CSV owns must be in the bundle, matched by plural.group, version and kind.
fn check_owned_crds(dir: &BundleDir) -> Result<(), BundleDirError> {
    let csv = dir.csv();
    let owned = csv["spec"]["customresourcedefinitions"]["owned"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for o in owned {
        let name = o["name"].as_str().unwrap_or_default();
        let version = o["version"].as_str().unwrap_or_default();
        let kind = o["kind"].as_str().unwrap_or_default();
        let (plural, group) = name.split_once('.').unwrap_or((name, ""));
        let found = dir.manifests.iter().any(|m| {
            let crd = &m.object;
            crd["kind"] == "CustomResourceDefinition"
                && crd["spec"]["names"]["plural"] == plural
                && crd["spec"]["group"] == group
                && crd["spec"]["names"]["kind"] == kind
                && render::crd_versions(crd).iter().any(|v| v == version)
        });
        if !found {
            return Err(BundleDirError::MissingOwnedCrd {
                csv: dir.csv_name().to_string(),
                group: group.to_string(),
                version: version.to_string(),
                kind: kind.to_string(),
                plural: plural.to_string(),
            });
        }
    }
    Ok(())
}

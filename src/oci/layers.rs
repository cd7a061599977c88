//! An image's layers → the bundle's `manifests/` and `metadata/` files, checked on the way.
//!
//! Only those two directories are kept. Every entry of every layer is checked: no absolute path,
//! no `..`, no link (a link is never followed, and one inside the bundle directories is refused),
//! a per-file and a total size limit, a limit on how much a layer may decompress to (a gzip bomb
//! is refused, not unpacked) and on the number of layers. Whiteouts (`.wh.name`,
//! `.wh..wh..opq`) remove what earlier layers put there, as a container runtime applies them.
//! Pure: bytes in, files out.

use std::collections::BTreeMap;
use std::io::Read;

use tar::EntryType;

/// The bundle files by path relative to the image root (`manifests/csv.yaml`).
pub type UnpackedFiles = BTreeMap<String, Vec<u8>>;

/// Size limits on what a bundle image may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest single file of `manifests/` or `metadata/`.
    pub max_file_bytes: u64,
    /// Largest total of the bundle's files.
    pub max_total_bytes: u64,
    /// Most layers an image may have.
    pub max_layers: usize,
    /// Largest layer blob as downloaded (compressed).
    pub max_layer_bytes: u64,
    /// Most bytes one layer may decompress to (all entries, kept or not).
    pub max_unpacked_layer_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        const MIB: u64 = 1024 * 1024;
        Limits {
            max_file_bytes: 16 * MIB,
            max_total_bytes: 64 * MIB,
            max_layers: 16,
            max_layer_bytes: 64 * MIB,
            max_unpacked_layer_bytes: 256 * MIB,
        }
    }
}

impl Limits {
    /// Limits for catalog images: a big catalog (all of OperatorHub) unpacks to a few hundred
    /// megabytes, and its image carries the `opm` binary's layers besides.
    pub fn catalog() -> Limits {
        const MIB: u64 = 1024 * 1024;
        Limits {
            max_file_bytes: 256 * MIB,
            max_total_bytes: 1024 * MIB,
            max_layers: 128,
            max_layer_bytes: 1024 * MIB,
            max_unpacked_layer_bytes: 4096 * MIB,
        }
    }
}

/// What is wrong with a layer: the file (or the layer) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {reason}")]
pub struct LayerError {
    pub file: String,
    pub reason: String,
}

/// One downloaded layer blob.
#[derive(Debug, Clone, Copy)]
pub struct LayerBlob<'a> {
    pub digest: &'a str,
    pub media_type: &'a str,
    pub data: &'a [u8],
}

const BUNDLE_DIRS: [&str; 2] = ["manifests", "metadata"];
const WHITEOUT_PREFIX: &str = ".wh.";
const OPAQUE_WHITEOUT: &str = ".wh..wh..opq";

/// Unpacks the bundle files of `layers` (bottom layer first).
pub fn unpack_layers(
    layers: &[LayerBlob<'_>],
    limits: &Limits,
) -> Result<UnpackedFiles, LayerError> {
    unpack_layers_under(layers, limits, &BUNDLE_DIRS)
}

/// Unpacks the files under the directories `kept` (relative, `configs`) of `layers` (bottom
/// layer first), with the same checks as bundle files: a catalog image keeps only the
/// directory its label names.
pub fn unpack_layers_under(
    layers: &[LayerBlob<'_>],
    limits: &Limits,
    kept: &[&str],
) -> Result<UnpackedFiles, LayerError> {
    if layers.len() > limits.max_layers {
        return Err(LayerError {
            file: "image manifest".into(),
            reason: format!(
                "{} layers, more than the {} allowed",
                layers.len(),
                limits.max_layers
            ),
        });
    }
    let mut files = UnpackedFiles::new();
    for layer in layers {
        let unpacked = unpack_layer(layer, limits, kept)?;
        for w in &unpacked.whiteouts {
            apply_whiteout(&mut files, w);
        }
        files.extend(unpacked.files);
        let total: u64 = files.values().map(|f| f.len() as u64).sum();
        if total > limits.max_total_bytes {
            return Err(LayerError {
                file: format!("layer {}", layer.digest),
                reason: format!(
                    "the bundle's files add up to {total} bytes, more than the {} allowed",
                    limits.max_total_bytes
                ),
            });
        }
    }
    Ok(files)
}

enum Whiteout {
    /// Removes one path (and what is under it).
    Path(String),
    /// Removes everything under a directory.
    Opaque(String),
}

fn apply_whiteout(files: &mut UnpackedFiles, w: &Whiteout) {
    let (exact, under) = match w {
        Whiteout::Path(p) => (Some(p.as_str()), format!("{p}/")),
        Whiteout::Opaque(dir) if dir.is_empty() => (None, String::new()),
        Whiteout::Opaque(dir) => (None, format!("{dir}/")),
    };
    files.retain(|k, _| Some(k.as_str()) != exact && !k.starts_with(&under));
}

struct Unpacked {
    files: UnpackedFiles,
    whiteouts: Vec<Whiteout>,
}

/// Counts what is read and stops past the limit.
struct Capped<R> {
    inner: R,
    read: u64,
    limit: u64,
    exceeded: bool,
}

impl<R: Read> Read for Capped<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        if self.read > self.limit {
            self.exceeded = true;
            return Err(std::io::Error::other("decompression limit exceeded"));
        }
        Ok(n)
    }
}

enum Compression {
    None,
    Gzip,
    Zstd,
}

fn compression_of(data: &[u8]) -> Compression {
    if data.starts_with(&[0x1f, 0x8b]) {
        Compression::Gzip
    } else if data.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Compression::Zstd
    } else {
        Compression::None
    }
}

fn unpack_layer(
    layer: &LayerBlob<'_>,
    limits: &Limits,
    kept: &[&str],
) -> Result<Unpacked, LayerError> {
    let layer_name = format!("layer {}", layer.digest);
    let media = layer.media_type;
    if !(media.contains("tar") || media.contains("rootfs") || media.is_empty()) {
        return Err(LayerError {
            file: layer_name,
            reason: format!("media type {media:?} is not an image layer"),
        });
    }
    let reader: Box<dyn Read + '_> = match compression_of(layer.data) {
        Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(layer.data)),
        Compression::Zstd => Box::new(
            ruzstd::decoding::StreamingDecoder::new(layer.data).map_err(|e| LayerError {
                file: layer_name.clone(),
                reason: format!("not a zstd stream: {e}"),
            })?,
        ),
        Compression::None => Box::new(layer.data),
    };
    let mut capped = Capped {
        inner: reader,
        read: 0,
        limit: limits.max_unpacked_layer_bytes,
        exceeded: false,
    };
    let result = read_tar(&mut capped, &layer_name, limits, kept);
    if capped.exceeded {
        return Err(LayerError {
            file: layer_name,
            reason: format!(
                "decompresses to more than {} bytes; refused (a decompression bomb?)",
                limits.max_unpacked_layer_bytes
            ),
        });
    }
    result
}

fn read_tar(
    reader: &mut dyn Read,
    layer_name: &str,
    limits: &Limits,
    kept: &[&str],
) -> Result<Unpacked, LayerError> {
    let broken = |e: std::io::Error| LayerError {
        file: layer_name.to_string(),
        reason: format!("not a readable tar archive: {e}"),
    };
    let mut archive = tar::Archive::new(reader);
    let mut out = Unpacked {
        files: UnpackedFiles::new(),
        whiteouts: Vec::new(),
    };
    for entry in archive.entries().map_err(broken)? {
        let mut entry = entry.map_err(broken)?;
        let raw = entry.path_bytes().into_owned();
        let shown = String::from_utf8_lossy(&raw).into_owned();
        let bad = |reason: String| LayerError {
            file: format!("{shown} (in {layer_name})"),
            reason,
        };
        let path = clean_path(&raw).map_err(|e| bad(e.to_string()))?;
        let kind = entry.header().entry_type();
        let in_bundle = kept
            .iter()
            .any(|d| path == *d || path.starts_with(&format!("{d}/")));
        let (parent, base) = path.rsplit_once('/').unwrap_or(("", path.as_str()));
        if base == OPAQUE_WHITEOUT {
            out.whiteouts.push(Whiteout::Opaque(parent.to_string()));
            continue;
        }
        if let Some(target) = base.strip_prefix(WHITEOUT_PREFIX) {
            let target = if parent.is_empty() {
                target.to_string()
            } else {
                format!("{parent}/{target}")
            };
            out.whiteouts.push(Whiteout::Path(target));
            continue;
        }
        match kind {
            EntryType::Symlink | EntryType::Link if in_bundle => {
                let target = entry
                    .link_name_bytes()
                    .map(|l| String::from_utf8_lossy(&l).into_owned())
                    .unwrap_or_default();
                return Err(bad(format!(
                    "is a link to {target:?}; links in a bundle are not followed"
                )));
            }
            EntryType::Regular | EntryType::Continuous if in_bundle => {
                let size = entry.header().size().map_err(|e| bad(e.to_string()))?;
                if size > limits.max_file_bytes {
                    return Err(bad(format!(
                        "is {size} bytes, more than the {} allowed for one file",
                        limits.max_file_bytes
                    )));
                }
                let mut data = Vec::with_capacity(size as usize);
                (&mut entry)
                    .take(limits.max_file_bytes + 1)
                    .read_to_end(&mut data)
                    .map_err(|e| bad(format!("cannot be read: {e}")))?;
                if data.len() as u64 > limits.max_file_bytes {
                    return Err(bad(format!(
                        "is larger than the {} bytes allowed for one file",
                        limits.max_file_bytes
                    )));
                }
                out.files.insert(path, data);
            }
            EntryType::Directory => {}
            _ if in_bundle => {
                return Err(bad(format!(
                    "is a {kind:?} entry; a bundle holds only regular files"
                )));
            }
            // Outside manifests/ and metadata/ nothing is kept, so nothing else matters.
            _ => {}
        }
    }
    Ok(out)
}

/// Why a path in a layer (or an image label naming a directory) is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("the path is not UTF-8")]
    NotUtf8,
    #[error("has an absolute path; refused")]
    Absolute,
    #[error("has a path with \"..\"; refused")]
    ParentDir,
    #[error("names the image root, not a directory")]
    ImageRoot,
}

/// `./manifests//a.yaml` → `manifests/a.yaml`; absolute paths and `..` are refused.
fn clean_path(raw: &[u8]) -> Result<String, PathError> {
    let text = std::str::from_utf8(raw).map_err(|_| PathError::NotUtf8)?;
    if text.starts_with('/') {
        return Err(PathError::Absolute);
    }
    let mut parts = Vec::new();
    for part in text.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err(PathError::ParentDir),
            p => parts.push(p),
        }
    }
    Ok(parts.join("/"))
}

/// A directory named by an image label (`/configs`, `configs/`) as a relative path, or why it
/// cannot be one (`..`, empty).
pub fn label_dir(dir: &str) -> Result<String, PathError> {
    let cleaned = clean_path(dir.trim_start_matches('/').as_bytes())?;
    if cleaned.is_empty() {
        return Err(PathError::ImageRoot);
    }
    Ok(cleaned)
}

/// Writes unpacked `files` under `root` (created if missing). Their paths were cleaned when
/// the layers were unpacked (relative, no `..`, no links), so none lands outside `root`.
pub fn write_files(root: &std::path::Path, files: &UnpackedFiles) -> std::io::Result<()> {
    std::fs::create_dir_all(root)?;
    for (path, data) in files {
        let file = root.join(path);
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(file, data)?;
    }
    Ok(())
}

#[cfg(test)]
#[path = "layers_tests.rs"]
mod tests;

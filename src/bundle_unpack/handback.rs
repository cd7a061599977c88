//! How an unpack pod hands a bundle's files back to the controller (docs/bundle-images.md §
//! "When only the node can pull"): the pod's container, running in the bundle image, writes
//! `manifests/` and `metadata/` as one gzip-compressed tar archive to its log, base64 in
//! lines, between a header that states the archive's length and sha256 and an end line. The
//! controller reads the log, checks the frame, and unpacks the archive with the very checks
//! (and limits) of an in-process pull: it is treated as a one-layer image. Nothing the pod
//! writes is trusted more than a registry's layer.
//!
//! Pure, but for [`pack_dir`], which reads the bundle directories of the container it runs in.

use std::path::Path;

use base64::Engine as _;
use sha2::{Digest as _, Sha256};

use crate::oci::{LayerBlob, LayerError, Limits, UnpackedFiles, unpack_layers};

/// First word of the header line.
pub const HEADER: &str = "OLM-RS-BUNDLE-ARCHIVE";
/// The line after the last base64 line.
pub const END: &str = "OLM-RS-BUNDLE-ARCHIVE-END";
/// The most an archive may take, compressed: its base64 (4/3 of it) stays below the 10 MiB at
/// which the kubelet rotates a container's log by default (`containerLogMaxSize`), so the log
/// holds all of it.
pub const MAX_ARCHIVE_BYTES: usize = 7 * 1024 * 1024;
/// The most of a log the controller reads: the largest frame with room to spare.
pub const MAX_LOG_BYTES: i64 = 10 * 1024 * 1024;
const LINE: usize = 76;
const BUNDLE_DIRS: [&str; 2] = ["manifests", "metadata"];

/// Why a log does not hold a bundle archive.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandbackError {
    #[error("the unpack pod's log holds no bundle archive (no {HEADER} line)")]
    NoHeader,
    #[error("the unpack pod's log has a malformed {HEADER} line: {line:?}")]
    BadHeader { line: String },
    #[error("the bundle archive in the unpack pod's log is cut short (no {END} line)")]
    Truncated,
    #[error("the bundle archive in the unpack pod's log is not base64: {0}")]
    NotBase64(String),
    #[error("the bundle archive is {bytes} bytes, more than the {max} a log may carry")]
    TooLarge { bytes: usize, max: usize },
    #[error("the bundle archive is {got} bytes, but its header says {want}")]
    WrongLength { got: usize, want: usize },
    #[error("the bundle archive does not match the sha256 in its header")]
    WrongChecksum,
}

/// The bundle directories under `root` (`/` in the bundle container) as a gzip-compressed tar
/// archive. Links are archived as links, never followed: the controller refuses them, as it
/// refuses them in a registry's layer. A missing directory is left out (the controller then
/// says what the bundle lacks).
pub fn pack_dir(root: &Path) -> std::io::Result<Vec<u8>> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut tar = tar::Builder::new(gz);
    tar.follow_symlinks(false);
    for dir in BUNDLE_DIRS {
        let path = root.join(dir);
        if path.symlink_metadata().is_ok() {
            tar.append_dir_all(dir, &path)?;
        }
    }
    tar.into_inner()?.finish()
}

/// The archive as the pod writes it to its log.
pub fn frame(archive: &[u8]) -> String {
    let text = base64::engine::general_purpose::STANDARD.encode(archive);
    let mut out = String::with_capacity(text.len() + text.len() / LINE + 200);
    out.push_str(&format!(
        "{HEADER} v1 bytes={} sha256={:x}\n",
        archive.len(),
        Sha256::digest(archive)
    ));
    for chunk in text.as_bytes().chunks(LINE) {
        // base64 is ASCII.
        out.push_str(&String::from_utf8_lossy(chunk));
        out.push('\n');
    }
    out.push_str(END);
    out.push('\n');
    out
}

/// The archive a pod's log carries, checked against its header (length, sha256) and
/// [`MAX_ARCHIVE_BYTES`]. Lines before the header (anything the image printed) are ignored.
pub fn unframe(log: &str) -> Result<Vec<u8>, HandbackError> {
    let mut lines = log.lines().map(str::trim_end);
    let header = lines
        .by_ref()
        .find(|l| l.starts_with(HEADER) && !l.starts_with(END))
        .ok_or(HandbackError::NoHeader)?;
    let bad = || HandbackError::BadHeader {
        line: header.chars().take(200).collect(),
    };
    let mut fields = header.split_whitespace().skip(1);
    if fields.next() != Some("v1") {
        return Err(bad());
    }
    let bytes: usize = fields
        .next()
        .and_then(|f| f.strip_prefix("bytes="))
        .and_then(|n| n.parse().ok())
        .ok_or_else(bad)?;
    let sha = fields
        .next()
        .and_then(|f| f.strip_prefix("sha256="))
        .filter(|h| h.len() == 64)
        .ok_or_else(bad)?;
    if bytes > MAX_ARCHIVE_BYTES {
        return Err(HandbackError::TooLarge {
            bytes,
            max: MAX_ARCHIVE_BYTES,
        });
    }
    let mut text = String::with_capacity(bytes * 4 / 3 + 4);
    let mut ended = false;
    for line in lines {
        if line == END {
            ended = true;
            break;
        }
        if text.len() > MAX_ARCHIVE_BYTES * 4 / 3 + 4 {
            return Err(HandbackError::TooLarge {
                bytes: text.len() * 3 / 4,
                max: MAX_ARCHIVE_BYTES,
            });
        }
        text.push_str(line);
    }
    if !ended {
        return Err(HandbackError::Truncated);
    }
    let archive = base64::engine::general_purpose::STANDARD
        .decode(text.as_bytes())
        .map_err(|e| HandbackError::NotBase64(e.to_string()))?;
    if archive.len() != bytes {
        return Err(HandbackError::WrongLength {
            got: archive.len(),
            want: bytes,
        });
    }
    if format!("{:x}", Sha256::digest(&archive)) != sha {
        return Err(HandbackError::WrongChecksum);
    }
    Ok(archive)
}

/// Why a handed-back bundle is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandbackRefused {
    #[error(transparent)]
    Frame(#[from] HandbackError),
    #[error("{0}")]
    Content(LayerError),
}

/// The bundle files of an archive a pod handed back, with every check of a registry's layer
/// (`layers::unpack_layers`: paths, links, whiteouts, per-file and total sizes, decompression
/// bound) under `limits`.
pub fn unpack_handed_back(log: &str, limits: &Limits) -> Result<UnpackedFiles, HandbackRefused> {
    let archive = unframe(log)?;
    let layer = LayerBlob {
        digest: "handed back by the unpack pod",
        media_type: "application/vnd.oci.image.layer.v1.tar+gzip",
        data: &archive,
    };
    unpack_layers(&[layer], limits).map_err(HandbackRefused::Content)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundle_root() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("manifests")).unwrap();
        std::fs::create_dir_all(dir.path().join("metadata")).unwrap();
        std::fs::write(
            dir.path().join("manifests/op.clusterserviceversion.yaml"),
            "kind: ClusterServiceVersion\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("metadata/annotations.yaml"),
            "annotations: {}\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("ignored.txt"), "not a bundle file").unwrap();
        dir
    }

    #[test]
    fn a_bundle_directory_comes_back_as_it_was_among_other_log_lines() {
        let root = bundle_root();
        let archive = pack_dir(root.path()).unwrap();
        let log = format!("something the image printed\n{}", frame(&archive));
        let files = unpack_handed_back(&log, &Limits::default()).unwrap();
        assert_eq!(
            files.keys().collect::<Vec<_>>(),
            [
                "manifests/op.clusterserviceversion.yaml",
                "metadata/annotations.yaml"
            ]
        );
        assert_eq!(
            files["manifests/op.clusterserviceversion.yaml"],
            b"kind: ClusterServiceVersion\n"
        );
    }

    #[test]
    fn a_damaged_or_cut_frame_is_refused() {
        let archive = pack_dir(bundle_root().path()).unwrap();
        let framed = frame(&archive);
        assert_eq!(unframe("nothing here"), Err(HandbackError::NoHeader));
        let cut: String = framed.lines().take(2).map(|l| format!("{l}\n")).collect();
        assert_eq!(unframe(&cut), Err(HandbackError::Truncated));
        // One character of the base64 changed: the checksum says so.
        let mut lines: Vec<String> = framed.lines().map(str::to_owned).collect();
        let body = &mut lines[1];
        let first = if body.starts_with('A') { "B" } else { "A" };
        body.replace_range(0..1, first);
        let damaged = lines.join("\n");
        assert!(matches!(
            unframe(&damaged),
            Err(HandbackError::WrongChecksum | HandbackError::WrongLength { .. })
        ));
        let huge = format!("{HEADER} v1 bytes={} sha256={}\n", 8 << 20, "0".repeat(64));
        assert!(matches!(
            unframe(&huge),
            Err(HandbackError::TooLarge { .. })
        ));
        assert!(matches!(
            unframe(&format!("{HEADER} v2 bytes=1 sha256=00\n")),
            Err(HandbackError::BadHeader { .. })
        ));
    }

    #[test]
    fn the_in_process_checks_hold_for_what_a_pod_hands_back() {
        // A link inside manifests/ is refused, as in a registry's layer.
        let root = bundle_root();
        #[cfg(unix)]
        std::os::unix::fs::symlink("/etc/passwd", root.path().join("manifests/x.yaml")).unwrap();
        let log = frame(&pack_dir(root.path()).unwrap());
        let refused = unpack_handed_back(&log, &Limits::default()).unwrap_err();
        assert!(
            refused.to_string().contains("manifests/x.yaml"),
            "{refused}"
        );
        // The size limits are the pull's.
        let root = bundle_root();
        std::fs::write(root.path().join("manifests/big.yaml"), vec![b'a'; 4096]).unwrap();
        let log = frame(&pack_dir(root.path()).unwrap());
        let small = Limits {
            max_file_bytes: 1024,
            ..Limits::default()
        };
        let refused = unpack_handed_back(&log, &small).unwrap_err();
        assert!(
            refused.to_string().contains("manifests/big.yaml"),
            "{refused}"
        );
    }
}

//! Lookaside signature storage (docs/image-signatures.md §5), as containers/image reads it for
//! the `docker` transport: beside the sigstore attachments, the signatures found under the
//! registries.d `lookaside` URL (or its old name `sigstore`) of the image —
//! `<base>/<repository path>@<algo>=<hex>/signature-<n>`, n = 1, 2, … until one is missing —
//! or, when no scope names one, under the built-in `file:///var/lib/containers/sigstore` (what
//! CRI-O, running as root on the node, reads). Each file is a signature blob: a sigstore one
//! (`\0sigstore-json\n` then JSON) is checked as an attachment's layer would be; GPG
//! simple-signing blobs are counted and otherwise ignored, as containers/image's
//! `sigstoreSigned` ignores them. `lookaside-staging` is where signatures are written, never
//! read. Pure: the shell reads the files and URLs.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde::Deserialize;

use super::reference::DockerRef;
use super::sigstore::{PAYLOAD_MEDIA_TYPE, SIGNATURE_ANNOTATION, UntrustedSignature};

/// containers/image's built-in lookaside for root (`defaultDockerDir`).
pub const BUILTIN_LOOKASIDE: &str = "file:///var/lib/containers/sigstore";

/// containers/image's `maxLookasideSignatures`: more is taken for a server error.
pub const MAX_LOOKASIDE_SIGNATURES: usize = 128;

/// The lookaside storage of one image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lookaside {
    /// The top-level URL, as configured (or the built-in default).
    pub base: String,
    /// Which setting gave it: `docker."quay.io/org"`, `default-docker`, or `built-in default`.
    pub setting: String,
}

/// Where the n-th signature (from 0) is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignatureLocation {
    File(std::path::PathBuf),
    Http(String),
}

impl std::fmt::Display for SignatureLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SignatureLocation::File(p) => write!(f, "file://{}", p.display()),
            SignatureLocation::Http(u) => f.write_str(u),
        }
    }
}

/// A lookaside URL that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LookasideError {
    #[error("lookaside {base}: unsupported scheme (file, http and https are read)")]
    Scheme { base: String },
    #[error("digest {digest:?} is not algo:hex")]
    Digest { digest: String },
}

impl Lookaside {
    /// Where signature `index` (from 0) of `image`'s manifest `digest` is:
    /// `<base>/<path>@<algo>=<hex>/signature-<index+1>` (containers/image's
    /// `lookasideStorageURL`; the base's path and the repository path are joined by one `/`,
    /// even after a trailing one, as containers/image does).
    pub fn location(
        &self,
        image: &DockerRef,
        digest: &str,
        index: usize,
    ) -> Result<SignatureLocation, LookasideError> {
        let Some((algo, hex)) = digest.split_once(':').filter(|(a, h)| {
            !a.is_empty()
                && a.chars().all(|c| c.is_ascii_alphanumeric())
                && !h.is_empty()
                && h.chars().all(|c| c.is_ascii_hexdigit())
        }) else {
            return Err(LookasideError::Digest {
                digest: digest.to_string(),
            });
        };
        let tail = format!("/{}@{algo}={hex}/signature-{}", image.path(), index + 1);
        let base = self.base.as_str();
        if let Some(rest) = base.strip_prefix("file://") {
            // `file:///dir` or `file:dir`-less forms: only an absolute path is a file URL's.
            let path = rest.split(['?', '#']).next().unwrap_or_default();
            if !path.starts_with('/') {
                return Err(LookasideError::Scheme {
                    base: base.to_string(),
                });
            }
            return Ok(SignatureLocation::File(format!("{path}{tail}").into()));
        }
        let lower = base.to_ascii_lowercase();
        if lower.starts_with("http://") || lower.starts_with("https://") {
            let (before, after) = match base.find(['?', '#']) {
                Some(at) => base.split_at(at),
                None => (base, ""),
            };
            return Ok(SignatureLocation::Http(format!("{before}{tail}{after}")));
        }
        Err(LookasideError::Scheme {
            base: base.to_string(),
        })
    }
}

/// What one lookaside file holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LookasideBlob {
    /// A sigstore signature of an image (cosign's simple-signing media type).
    Sigstore(UntrustedSignature),
    /// A signature `sigstoreSigned` does not read: GPG simple signing, or a sigstore blob of
    /// another media type; the words say which.
    Other(String),
}

/// A blob that is no signature containers/image knows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a signature blob: {0}")]
pub struct BlobError(pub String);

#[derive(Deserialize)]
struct SigstoreJson {
    #[serde(rename = "mimeType", default)]
    mime_type: String,
    /// Go's `[]byte` in JSON: standard base64.
    #[serde(default)]
    payload: Option<String>,
    #[serde(default)]
    annotations: Option<BTreeMap<String, String>>,
}

/// Reads a lookaside blob as containers/image's `signature.FromBlob` does: an OpenPGP packet
/// first byte is a simple-signing signature; `\0<format>\n<chunk>` names its format.
pub fn parse_blob(blob: &[u8]) -> Result<LookasideBlob, BlobError> {
    let Some(&first) = blob.first() else {
        return Err(BlobError("empty signature blob".into()));
    };
    const OPENPGP: [u8; 15] = [
        0xA0, 0xA1, 0xA2, 0xA3, 0xC8, 0x90, 0x91, 0x92, 0x3d, 0xC4, 0x88, 0x89, 0x8A, 0x8B, 0xC2,
    ];
    if OPENPGP.contains(&first) {
        return Ok(LookasideBlob::Other(
            "a GPG simple-signing signature".into(),
        ));
    }
    if first != 0 {
        return Err(BlobError(format!(
            "unrecognized signature format, starting with binary {first:#x}"
        )));
    }
    let rest = &blob[1..];
    let Some(newline) = rest.iter().position(|b| *b == b'\n') else {
        return Err(BlobError(
            "invalid signature format, missing newline".into(),
        ));
    };
    let (format, chunk) = (&rest[..newline], &rest[newline + 1..]);
    if let Some(b) = format.iter().find(|b| **b < 32 || **b >= 0x7F) {
        return Err(BlobError(format!(
            "invalid signature format, non-ASCII byte {b:#x}"
        )));
    }
    match format {
        b"simple-signing" => Ok(LookasideBlob::Other(
            "a GPG simple-signing signature".into(),
        )),
        b"sigstore-json" => {
            let json: SigstoreJson = serde_json::from_slice(chunk)
                .map_err(|e| BlobError(format!("sigstore-json: {e}")))?;
            let payload = base64::engine::general_purpose::STANDARD
                .decode(json.payload.unwrap_or_default())
                .map_err(|e| BlobError(format!("sigstore-json: payload: {e}")))?;
            if json.mime_type != PAYLOAD_MEDIA_TYPE {
                return Ok(LookasideBlob::Other(format!(
                    "a sigstore attachment of type {:?}, not a signature",
                    json.mime_type
                )));
            }
            Ok(LookasideBlob::Sigstore(UntrustedSignature {
                payload,
                base64_signature: json
                    .annotations
                    .and_then(|mut a| a.remove(SIGNATURE_ANNOTATION)),
            }))
        }
        other => Err(BlobError(format!(
            "unrecognized signature format {:?}",
            String::from_utf8_lossy(other)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn at(base: &str, image: &str, index: usize) -> Result<String, LookasideError> {
        Lookaside {
            base: base.into(),
            setting: "test".into(),
        }
        .location(&DockerRef::parse(image).unwrap(), D, index)
        .map(|l| l.to_string())
    }

    // docs/signature-protocols.md of containers/image: the path under the base is the
    // repository without the registry, then `@algo=hex/signature-N` from 1.
    #[test]
    fn locations_follow_containers_image_layout() {
        let hex = &D[7..];
        assert_eq!(
            at(
                "file:///var/lib/containers/sigstore",
                "quay.io/ns/app:v1",
                0
            ),
            Ok(format!(
                "file:///var/lib/containers/sigstore/ns/app@sha256={hex}/signature-1"
            ))
        );
        assert_eq!(
            at("https://sigs.example.com/sigstore", "busybox", 2),
            Ok(format!(
                "https://sigs.example.com/sigstore/library/busybox@sha256={hex}/signature-3"
            ))
        );
        // A trailing slash is kept, as containers/image keeps it.
        assert_eq!(
            at(
                "http://privateregistry.com/sigstore/",
                "privateregistry.com/a/b:v1",
                0
            ),
            Ok(format!(
                "http://privateregistry.com/sigstore//a/b@sha256={hex}/signature-1"
            ))
        );
        assert!(matches!(
            at("ftp://x/y", "quay.io/a:v1", 0),
            Err(LookasideError::Scheme { .. })
        ));
        assert!(matches!(
            at("/mnt/nfs/sigstore", "quay.io/a:v1", 0),
            Err(LookasideError::Scheme { .. })
        ));
        let bad = Lookaside {
            base: "file:///x".into(),
            setting: "t".into(),
        }
        .location(
            &DockerRef::parse("quay.io/a:v1").unwrap(),
            "sha256:../..",
            0,
        );
        assert!(matches!(bad, Err(LookasideError::Digest { .. })), "{bad:?}");
    }

    #[test]
    fn blobs_are_read_as_containers_image_reads_them() {
        let sig_json = serde_json::json!({
            "mimeType": PAYLOAD_MEDIA_TYPE,
            "payload": base64::engine::general_purpose::STANDARD.encode(b"{\"critical\":{}}"),
            "annotations": {SIGNATURE_ANNOTATION: "MEUCIQ=="},
        });
        let blob = [
            b"\0sigstore-json\n".as_slice(),
            sig_json.to_string().as_bytes(),
        ]
        .concat();
        assert_eq!(
            parse_blob(&blob),
            Ok(LookasideBlob::Sigstore(UntrustedSignature {
                payload: b"{\"critical\":{}}".to_vec(),
                base64_signature: Some("MEUCIQ==".into()),
            }))
        );
        let other_type = serde_json::json!({"mimeType": "application/x-sbom", "payload": ""});
        let blob = [
            b"\0sigstore-json\n".as_slice(),
            other_type.to_string().as_bytes(),
        ]
        .concat();
        assert!(matches!(parse_blob(&blob), Ok(LookasideBlob::Other(w)) if w.contains("x-sbom")));
        // GPG: a bare OpenPGP packet, or with the simple-signing prefix.
        assert!(matches!(
            parse_blob(&[0xA3, 1, 2]),
            Ok(LookasideBlob::Other(_))
        ));
        assert!(matches!(
            parse_blob(b"\0simple-signing\n\xa3\x01"),
            Ok(LookasideBlob::Other(_))
        ));
        for bad in [
            b"".as_slice(),
            b"<html>not found</html>",
            b"\0sigstore-json",
            b"\0other-format\n{}",
            b"\0sigstore-json\n{not json",
        ] {
            assert!(parse_blob(bad).is_err(), "{bad:?}");
        }
    }
}

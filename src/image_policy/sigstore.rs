//! Sigstore signatures as cosign and skopeo store them beside an image (docs/image-signatures.md
//! §3): the `sha256-<hex>.sig` tag of the image's repository holds an OCI manifest whose layers
//! are simple-signing payloads, each with its base64 signature in the
//! `dev.cosignproject.cosign/signature` annotation. Pure: the shell fetches, this reads.

use base64::Engine as _;
use serde_json::{Map, Value};

/// The annotation holding the base64 signature of a layer's payload.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// The media type of a payload layer.
pub const PAYLOAD_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// `critical.type` of a cosign container image signature.
const SIGNATURE_TYPE: &str = "cosign container image signature";

/// The tag holding the signatures of `digest` (`sha256:ab…` → `sha256-ab….sig`); `None` for a
/// value that is not `algo:hex`.
pub fn attachment_tag(digest: &str) -> Option<String> {
    let (algo, hex) = digest.split_once(':')?;
    let ok = !algo.is_empty()
        && algo.chars().all(|c| c.is_ascii_alphanumeric())
        && !hex.is_empty()
        && hex.chars().all(|c| c.is_ascii_hexdigit());
    ok.then(|| format!("{algo}-{hex}.sig"))
}

/// One signature as found, nothing about it verified yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UntrustedSignature {
    pub payload: Vec<u8>,
    /// The annotation's value; `None` when the layer has none.
    pub base64_signature: Option<String>,
}

/// What a verified payload claims.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claims {
    pub manifest_digest: String,
    pub docker_reference: String,
}

/// Why a signature cannot even be checked: its layer or payload is malformed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureFormatError {
    #[error("payload is not JSON: {0}")]
    NotJson(String),
    #[error("{at} is not an object")]
    NotObject { at: &'static str },
    #[error("{at} has an unknown field {field:?}")]
    UnknownField { at: &'static str, field: String },
    #[error("{at}.{field} is missing")]
    Missing {
        at: &'static str,
        field: &'static str,
    },
    #[error("{at}.{field} is not a string")]
    NotString {
        at: &'static str,
        field: &'static str,
    },
    #[error("critical.type is {0:?}, not {SIGNATURE_TYPE:?}")]
    WrongType(String),
    #[error("critical.image.docker-manifest-digest {0:?} is not a digest")]
    BadDigest(String),
    #[error("the layer has no {SIGNATURE_ANNOTATION} annotation")]
    NoAnnotation,
    #[error("the signature is not base64: {0}")]
    NotBase64(#[from] base64::DecodeError),
}

/// Reads a payload as containers/image does: `critical` with exactly `type`, `image`
/// (exactly `docker-manifest-digest`) and `identity` (exactly `docker-reference`);
/// `optional` free.
pub fn parse_payload(payload: &[u8]) -> Result<Claims, SignatureFormatError> {
    let v: Value = serde_json::from_slice(payload)
        .map_err(|e| SignatureFormatError::NotJson(e.to_string()))?;
    let top = exact(&v, "payload", &["critical", "optional"], &["critical"])?;
    let critical = exact(
        field(top, "critical"),
        "critical",
        &["type", "image", "identity"],
        &["type", "image", "identity"],
    )?;
    let ty = text(critical, "critical", "type")?;
    if ty != SIGNATURE_TYPE {
        return Err(SignatureFormatError::WrongType(ty));
    }
    let image = exact(
        field(critical, "image"),
        "critical.image",
        &["docker-manifest-digest"],
        &["docker-manifest-digest"],
    )?;
    let identity = exact(
        field(critical, "identity"),
        "critical.identity",
        &["docker-reference"],
        &["docker-reference"],
    )?;
    let manifest_digest = text(image, "critical.image", "docker-manifest-digest")?;
    if attachment_tag(&manifest_digest).is_none() {
        return Err(SignatureFormatError::BadDigest(manifest_digest));
    }
    Ok(Claims {
        manifest_digest,
        docker_reference: text(identity, "critical.identity", "docker-reference")?,
    })
}

fn field<'v>(o: &'v Map<String, Value>, key: &str) -> &'v Value {
    o.get(key).unwrap_or(&Value::Null)
}

fn text(
    o: &Map<String, Value>,
    at: &'static str,
    key: &'static str,
) -> Result<String, SignatureFormatError> {
    field(o, key)
        .as_str()
        .map(str::to_string)
        .ok_or(SignatureFormatError::NotString { at, field: key })
}

fn exact<'v>(
    v: &'v Value,
    at: &'static str,
    allowed: &[&str],
    required: &[&'static str],
) -> Result<&'v Map<String, Value>, SignatureFormatError> {
    let o = v
        .as_object()
        .ok_or(SignatureFormatError::NotObject { at })?;
    if let Some(k) = o.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(SignatureFormatError::UnknownField {
            at,
            field: k.clone(),
        });
    }
    if let Some(k) = required.iter().find(|k| !o.contains_key(**k)) {
        return Err(SignatureFormatError::Missing { at, field: k });
    }
    Ok(o)
}

/// The decoded signature bytes of `sig`, or why there are none.
pub fn signature_bytes(sig: &UntrustedSignature) -> Result<Vec<u8>, SignatureFormatError> {
    let b64 = sig
        .base64_signature
        .as_deref()
        .ok_or(SignatureFormatError::NoAnnotation)?;
    Ok(base64::engine::general_purpose::STANDARD.decode(b64)?)
}

/// The payload skopeo and cosign write for `reference` at `digest` (tests and docs).
pub fn payload_for(reference: &str, digest: &str) -> Vec<u8> {
    serde_json::json!({
        "critical": {
            "identity": {"docker-reference": reference},
            "image": {"docker-manifest-digest": digest},
            "type": SIGNATURE_TYPE,
        },
        "optional": null,
    })
    .to_string()
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn attachment_tags_replace_the_colon() {
        assert_eq!(
            attachment_tag(D).unwrap(),
            format!("sha256-{}.sig", &D[7..])
        );
        assert_eq!(attachment_tag("sha256"), None);
        assert_eq!(attachment_tag("sha256:xyz"), None);
    }

    #[test]
    fn payloads_are_read_strictly() {
        let ok = parse_payload(&payload_for("quay.io/a/b:v1", D)).unwrap();
        assert_eq!(
            ok,
            Claims {
                manifest_digest: D.into(),
                docker_reference: "quay.io/a/b:v1".into()
            }
        );
        let with_optional = format!(
            r#"{{"critical":{{"identity":{{"docker-reference":"r/x:1"}},"image":{{"docker-manifest-digest":"{D}"}},"type":"cosign container image signature"}},"optional":{{"creator":"skopeo","timestamp":1}}}}"#
        );
        assert!(parse_payload(with_optional.as_bytes()).is_ok());
        let bad = [
            (r#"not json"#.to_string(), "not JSON"),
            (r#"{"optional":{}}"#.to_string(), "critical is missing"),
            (
                format!(r#"{{"critical":{{"identity":{{"docker-reference":"r/x:1"}},"image":{{"docker-manifest-digest":"{D}"}},"type":"other"}}}}"#),
                "critical.type",
            ),
            (
                format!(r#"{{"critical":{{"identity":{{"docker-reference":"r/x:1","extra":1}},"image":{{"docker-manifest-digest":"{D}"}},"type":"cosign container image signature"}}}}"#),
                "unknown field \"extra\"",
            ),
            (
                r#"{"critical":{"identity":{"docker-reference":"r/x:1"},"image":{"docker-manifest-digest":"nope"},"type":"cosign container image signature"}}"#.to_string(),
                "is not a digest",
            ),
        ];
        for (payload, words) in bad {
            let e = parse_payload(payload.as_bytes()).unwrap_err().to_string();
            assert!(e.contains(words), "{payload}: {e}");
        }
    }
}

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

/// Reads a payload as containers/image does: `critical` with exactly `type`, `image`
/// (exactly `docker-manifest-digest`) and `identity` (exactly `docker-reference`);
/// `optional` free.
pub fn parse_payload(payload: &[u8]) -> Result<Claims, String> {
    let v: Value =
        serde_json::from_slice(payload).map_err(|e| format!("payload is not JSON: {e}"))?;
    let top = exact(&v, "payload", &["critical", "optional"], &["critical"])?;
    let critical = exact(
        &top["critical"],
        "critical",
        &["type", "image", "identity"],
        &["type", "image", "identity"],
    )?;
    let ty = critical["type"].as_str().unwrap_or_default();
    if ty != SIGNATURE_TYPE {
        return Err(format!("critical.type is {ty:?}, not {SIGNATURE_TYPE:?}"));
    }
    let image = exact(
        &critical["image"],
        "critical.image",
        &["docker-manifest-digest"],
        &["docker-manifest-digest"],
    )?;
    let identity = exact(
        &critical["identity"],
        "critical.identity",
        &["docker-reference"],
        &["docker-reference"],
    )?;
    let text = |o: &Map<String, Value>, k: &str, at: &str| {
        o[k].as_str()
            .map(str::to_string)
            .ok_or_else(|| format!("{at}.{k} is not a string"))
    };
    let manifest_digest = text(image, "docker-manifest-digest", "critical.image")?;
    if attachment_tag(&manifest_digest).is_none() {
        return Err(format!(
            "critical.image.docker-manifest-digest {manifest_digest:?} is not a digest"
        ));
    }
    Ok(Claims {
        manifest_digest,
        docker_reference: text(identity, "docker-reference", "critical.identity")?,
    })
}

fn exact<'v>(
    v: &'v Value,
    at: &str,
    allowed: &[&str],
    required: &[&str],
) -> Result<&'v Map<String, Value>, String> {
    let o = v
        .as_object()
        .ok_or_else(|| format!("{at} is not an object"))?;
    if let Some(k) = o.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(format!("{at} has an unknown field {k:?}"));
    }
    if let Some(k) = required.iter().find(|k| !o.contains_key(**k)) {
        return Err(format!("{at}.{k} is missing"));
    }
    Ok(o)
}

/// The decoded signature bytes of `sig`, or why there are none.
pub fn signature_bytes(sig: &UntrustedSignature) -> Result<Vec<u8>, String> {
    let b64 = sig
        .base64_signature
        .as_deref()
        .ok_or_else(|| format!("the layer has no {SIGNATURE_ANNOTATION} annotation"))?;
    base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|e| format!("the signature is not base64: {e}"))
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
            let e = parse_payload(payload.as_bytes()).unwrap_err();
            assert!(e.contains(words), "{payload}: {e}");
        }
    }
}

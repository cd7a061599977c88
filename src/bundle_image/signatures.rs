//! The image policy at pull time (docs/image-signatures.md §6): reads the policy file and the
//! registries.d directory once at start, and, for each image pulled while a policy is
//! enforced, fetches its sigstore attachment (the `sha256-<hex>.sig` tag of the repository
//! pulled from: one manifest and one small blob per signature) and asks `image_policy` for the
//! verdict. The decision is pure; this file only reads files and the registry.

use std::path::{Path, PathBuf};

use oci_client::Reference;
use oci_client::secrets::RegistryAuth;

use crate::image_policy::{
    DockerRef, ImagePolicy, PAYLOAD_MEDIA_TYPE, Policy, PolicyError, RegistriesD, RegistriesDError,
    SIGNATURE_ANNOTATION, Signatures, UntrustedSignature, attachment_tag, evaluate,
    needs_signatures,
};

use super::classify::{Failure, classify};
use super::download::CappedSink;
use super::error::{PolicyRefusal, PullError};
use super::registries_conf::PullSource;

/// The directory podman, skopeo and CRI-O read.
pub const DEFAULT_REGISTRIES_D: &str = "/etc/containers/registries.d";

/// Signature layers read from one attachment, and the bytes allowed for each: payloads are a
/// few hundred bytes.
const MAX_SIGNATURES: usize = 64;
const MAX_PAYLOAD_BYTES: u64 = 64 * 1024;

/// The policy or registries.d cannot be used: the controller does not start.
#[derive(Debug, thiserror::Error)]
pub enum ImagePolicyError {
    #[error("image policy {}: {source}", file.display())]
    Read {
        file: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Policy(#[from] PolicyError),
    #[error("registries.d directory {}: {source}", dir.display())]
    ReadDir {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    RegistriesD(#[from] RegistriesDError),
}

/// Reads `policy` (none: accept anything) and the `*.yaml` files of `registries_d` (none, or
/// a directory that does not exist: no attachments read).
pub fn load_image_policy(
    policy: Option<&Path>,
    registries_d: Option<&Path>,
) -> Result<ImagePolicy, ImagePolicyError> {
    let Some(file) = policy else {
        return Ok(ImagePolicy::accept_anything());
    };
    let text = std::fs::read_to_string(file).map_err(|source| ImagePolicyError::Read {
        file: file.to_path_buf(),
        source,
    })?;
    let policy = Policy::parse(file, &text, &|p: &Path| std::fs::read(p))?;
    let registries = match registries_d {
        Some(dir) => RegistriesD::parse(&read_yaml_files(dir)?)?,
        None => RegistriesD::default(),
    };
    Ok(ImagePolicy::new(policy, registries))
}

/// The `*.yaml` files of `dir`, sorted by name (a missing directory holds none, as for
/// containers/image).
fn read_yaml_files(dir: &Path) -> Result<Vec<(PathBuf, String)>, ImagePolicyError> {
    let read_err = |source| ImagePolicyError::ReadDir {
        dir: dir.to_path_buf(),
        source,
    };
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(read_err(e)),
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml") && p.is_file())
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).map_err(read_err)?;
            Ok((p, text))
        })
        .collect()
}

/// Checks `image` (as the user named it) whose pulled manifest has `digest`, fetching the
/// signatures from `source` when a requirement needs them. `Ok(Some(scope))` when a policy
/// accepted it, `Ok(None)` when none is enforced.
pub(super) async fn check(
    policy: &ImagePolicy,
    image: &str,
    digest: &str,
    source: &PullSource,
    client: &oci_client::Client,
    auth: &RegistryAuth,
) -> Result<Option<String>, Failure> {
    if !policy.enforced() {
        return Ok(None);
    }
    let refused = |scope: String, reason: String, kind: &'static str| {
        Failure::Other(PullError::Refused(Box::new(PolicyRefusal {
            image: image.to_string(),
            digest: digest.to_string(),
            policy: policy
                .file()
                .map(|f| f.display().to_string())
                .unwrap_or_default(),
            scope,
            kind,
            reason,
        })))
    };
    // A reference the policy cannot read is refused: failing closed.
    let intended = DockerRef::parse(image)
        .map_err(|e| refused("(none)".into(), e.to_string(), "InvalidReference"))?;
    let Some((scope, requirements)) = policy.requirements_for(&intended) else {
        return Ok(None);
    };
    let signatures = if needs_signatures(requirements) {
        let attachments = policy.attachments(&intended);
        if attachments.enabled {
            Signatures::Attachments(fetch_attachments(image, digest, source, client, auth).await?)
        } else {
            Signatures::NotLooked {
                setting: attachments.setting,
            }
        }
    } else {
        Signatures::Attachments(Vec::new())
    };
    match evaluate(requirements, &intended, digest, &signatures) {
        Ok(()) => Ok(Some(scope.to_string())),
        Err(r) => Err(refused(scope.to_string(), r.to_string(), r.kind())),
    }
}

/// The signatures in the attachment of `digest` in `source`'s repository; none when the tag
/// does not exist.
async fn fetch_attachments(
    image: &str,
    digest: &str,
    source: &PullSource,
    client: &oci_client::Client,
    auth: &RegistryAuth,
) -> Result<Vec<UntrustedSignature>, Failure> {
    let registry = source.image.registry().to_string();
    let Some(tag) = attachment_tag(digest) else {
        return Ok(Vec::new());
    };
    let at = Reference::with_tag(
        registry.clone(),
        source.image.reference().repository().to_string(),
        tag.clone(),
    );
    let what = format!("signature attachment {tag}");
    let manifest = match client.pull_image_manifest(&at, auth).await {
        Ok((m, _)) => m,
        Err(e) => {
            return match classify(image, &registry, &what, e) {
                Failure::Other(PullError::NotFound { .. }) => Ok(Vec::new()),
                other => Err(other),
            };
        }
    };
    let mut found = Vec::new();
    let layers = manifest
        .layers
        .iter()
        .filter(|l| l.media_type == PAYLOAD_MEDIA_TYPE)
        .take(MAX_SIGNATURES);
    for layer in layers {
        if layer.size < 0 || layer.size as u64 > MAX_PAYLOAD_BYTES {
            // Not a payload anyone signed with cosign or skopeo; skipped, not fatal.
            continue;
        }
        let mut sink = CappedSink::new(MAX_PAYLOAD_BYTES);
        client.pull_blob(&at, layer, &mut sink).await.map_err(|e| {
            classify(
                image,
                &registry,
                &format!("{what} layer {}", layer.digest),
                e,
            )
        })?;
        found.push(UntrustedSignature {
            payload: sink.data,
            base64_signature: layer
                .annotations
                .as_ref()
                .and_then(|a| a.get(SIGNATURE_ANNOTATION))
                .cloned(),
        });
    }
    Ok(found)
}

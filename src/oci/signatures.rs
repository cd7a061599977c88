//! The image policy at pull time (docs/image-signatures.md §6): reads the policy file and the
//! registries.d directory once at start, and, for each image pulled while a policy is
//! enforced, reads its sigstore signatures — from its lookaside storage (registries.d, a
//! `file://` directory or an `http(s)://` server) and its sigstore attachment (the
//! `sha256-<hex>.sig` tag of the repository pulled from: one manifest and one small blob per
//! signature) — and asks `image_policy` for the verdict. The decision is pure; this file only reads files and the registry.

use std::path::{Path, PathBuf};

use oci_client::Reference;
use oci_client::secrets::RegistryAuth;

use crate::image_policy::{
    DockerRef, ImagePolicy, Lookaside, LookasideBlob, MAX_LOOKASIDE_SIGNATURES, PAYLOAD_MEDIA_TYPE,
    Policy, PolicyError, RegistriesD, RegistriesDError, SIGNATURE_ANNOTATION, SignatureLocation,
    Signatures, UntrustedSignature, attachment_tag, evaluate, needs_signatures, parse_blob,
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
    http: &reqwest::Client,
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
        // registries.d is read for the source pulled from (a mirror has its own settings), as
        // containers/image reads it for the physical reference.
        let physical = DockerRef::parse(source.image.given()).unwrap_or_else(|_| intended.clone());
        let mut signatures = Signatures::default();
        let lookaside = policy.lookaside(&physical);
        read_lookaside(image, digest, &physical, &lookaside, http, &mut signatures)
            .await
            .map_err(|e| match e {
                LookasideFailure::Refused(reason) => {
                    refused(scope.to_string(), reason, "MalformedSignature")
                }
                LookasideFailure::Pull(e) => Failure::Other(e),
            })?;
        let attachments = policy.attachments(&physical);
        if attachments.enabled {
            let tag = attachment_tag(digest).unwrap_or_default();
            signatures
                .searched
                .push(format!("the sigstore attachment {tag}"));
            let (found, other) = fetch_attachments(image, digest, source, client, auth).await?;
            signatures.found.extend(found);
            signatures.other_formats += other;
        } else {
            signatures.searched.push(format!(
                "no sigstore attachments (use-sigstore-attachments is not on: {})",
                attachments.setting
            ));
        }
        signatures
    } else {
        Signatures::default()
    };
    match evaluate(requirements, &intended, digest, &signatures) {
        Ok(()) => Ok(Some(scope.to_string())),
        Err(r) => Err(refused(scope.to_string(), r.to_string(), r.kind())),
    }
}

/// Why the lookaside could not be read: a blob that is no signature refuses the image (as
/// containers/image fails the pull); a storage that cannot be read fails this pull.
enum LookasideFailure {
    Refused(String),
    Pull(PullError),
}

/// Appends the sigstore signatures of `digest` in `physical`'s lookaside storage
/// (docs/image-signatures.md §5): `signature-1`, `signature-2`, … until one is missing.
async fn read_lookaside(
    image: &str,
    digest: &str,
    physical: &DockerRef,
    lookaside: &Lookaside,
    http: &reqwest::Client,
    into: &mut Signatures,
) -> Result<(), LookasideFailure> {
    let unreadable = |cause: String, transient: bool| {
        LookasideFailure::Pull(PullError::RegistryError {
            image: image.to_string(),
            registry: format!("lookaside {} ({})", lookaside.base, lookaside.setting),
            cause,
            transient,
        })
    };
    let mut first = None;
    for index in 0..=MAX_LOOKASIDE_SIGNATURES {
        if index == MAX_LOOKASIDE_SIGNATURES {
            return Err(unreadable(
                format!("{MAX_LOOKASIDE_SIGNATURES} signatures or more, taken for a server error"),
                false,
            ));
        }
        let at = lookaside
            .location(physical, digest, index)
            .map_err(|e| unreadable(e.to_string(), false))?;
        first.get_or_insert_with(|| at.to_string());
        let blob = match &at {
            SignatureLocation::File(path) => match read_capped(path).await {
                Ok(Some(b)) => b,
                Ok(None) => break,
                Err(e) => return Err(unreadable(format!("{at}: {e}"), false)),
            },
            SignatureLocation::Http(url) => match get_capped(http, url).await {
                Ok(Some(b)) => b,
                Ok(None) => break,
                Err((cause, transient)) => {
                    return Err(unreadable(format!("{at}: {cause}"), transient));
                }
            },
        };
        match parse_blob(&blob) {
            Ok(LookasideBlob::Sigstore(sig)) => into.found.push(sig),
            Ok(LookasideBlob::Other(_)) => into.other_formats += 1,
            Err(e) => return Err(LookasideFailure::Refused(format!("{at}: {e}"))),
        }
    }
    into.searched.push(format!(
        "lookaside {} ({})",
        first.unwrap_or_default(),
        lookaside.setting
    ));
    Ok(())
}

/// A lookaside file: `None` when it does not exist (the end of the list).
async fn read_capped(path: &Path) -> std::io::Result<Option<Vec<u8>>> {
    use tokio::io::AsyncReadExt as _;
    let file = match tokio::fs::File::open(path).await {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut data = Vec::new();
    file.take(MAX_PAYLOAD_BYTES + 1)
        .read_to_end(&mut data)
        .await?;
    if data.len() as u64 > MAX_PAYLOAD_BYTES {
        return Err(std::io::Error::other(format!(
            "larger than {MAX_PAYLOAD_BYTES} bytes"
        )));
    }
    Ok(Some(data))
}

/// A lookaside URL: `None` on 404 (the end of the list); otherwise an error with whether it
/// is worth retrying.
async fn get_capped(http: &reqwest::Client, url: &str) -> Result<Option<Vec<u8>>, (String, bool)> {
    let mut response = http
        .get(url)
        .send()
        .await
        .map_err(|e| (crate::error_chain::error_chain(&e), true))?;
    let status = response.status();
    if status == reqwest::StatusCode::NOT_FOUND {
        return Ok(None);
    }
    if !status.is_success() {
        let transient = status.is_server_error() || status.as_u16() == 429;
        return Err((format!("HTTP {status}"), transient));
    }
    let mut data = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| (crate::error_chain::error_chain(&e), true))?
    {
        data.extend_from_slice(&chunk);
        if data.len() as u64 > MAX_PAYLOAD_BYTES {
            return Err((format!("larger than {MAX_PAYLOAD_BYTES} bytes"), false));
        }
    }
    Ok(Some(data))
}

/// The signatures in the attachment of `digest` in `source`'s repository, and how many of its
/// layers are not signatures; none when the tag does not exist.
async fn fetch_attachments(
    image: &str,
    digest: &str,
    source: &PullSource,
    client: &oci_client::Client,
    auth: &RegistryAuth,
) -> Result<(Vec<UntrustedSignature>, usize), Failure> {
    let registry = source.image.registry().to_string();
    let Some(tag) = attachment_tag(digest) else {
        return Ok((Vec::new(), 0));
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
                Failure::Other(PullError::NotFound { .. }) => Ok((Vec::new(), 0)),
                other => Err(other),
            };
        }
    };
    let mut found = Vec::new();
    let other = manifest
        .layers
        .iter()
        .filter(|l| l.media_type != PAYLOAD_MEDIA_TYPE)
        .count();
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
    Ok((found, other))
}

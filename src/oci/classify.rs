//! Registry answers → `PullError`s in plain words: refused (try the next login), not found,
//! unreachable or timed out (transient), overloaded (transient), or bad content.

use oci_client::errors::{OciDistributionError, OciErrorCode};

use super::error::PullError;

pub(super) enum Failure {
    Unauthorized,
    Other(PullError),
}

pub(super) fn classify(
    image: &str,
    registry: &str,
    what: &str,
    e: OciDistributionError,
) -> Failure {
    let other = |cause: String, transient: bool| {
        Failure::Other(PullError::RegistryError {
            image: image.to_string(),
            registry: registry.to_string(),
            cause,
            transient,
        })
    };
    let invalid = |reason: String| {
        Failure::Other(PullError::InvalidContent {
            image: image.to_string(),
            file: what.to_string(),
            reason,
        })
    };
    let not_found = |detail: String| {
        Failure::Other(PullError::NotFound {
            image: image.to_string(),
            detail,
        })
    };
    match e {
        OciDistributionError::UnauthorizedError { .. }
        | OciDistributionError::AuthenticationFailure(_) => Failure::Unauthorized,
        OciDistributionError::RegistryError { envelope, .. } => {
            let codes: Vec<&OciErrorCode> = envelope.errors.iter().map(|e| &e.code).collect();
            let text = envelope
                .errors
                .iter()
                .map(|e| e.message.clone())
                .collect::<Vec<_>>()
                .join("; ");
            if codes
                .iter()
                .any(|c| matches!(c, OciErrorCode::Unauthorized | OciErrorCode::Denied))
            {
                Failure::Unauthorized
            } else if codes.iter().any(|c| {
                matches!(
                    c,
                    OciErrorCode::ManifestUnknown
                        | OciErrorCode::NameUnknown
                        | OciErrorCode::NotFound
                        | OciErrorCode::BlobUnknown
                )
            }) {
                not_found(format!("{what}: {text}"))
            } else {
                let transient = codes
                    .iter()
                    .any(|c| matches!(c, OciErrorCode::Toomanyrequests));
                other(format!("{what}: {text}"), transient)
            }
        }
        OciDistributionError::ServerError { code, message, .. } => match code {
            401 | 403 => Failure::Unauthorized,
            404 => not_found(format!("{what}: HTTP 404")),
            429 | 500..=599 => other(
                format!("{what}: HTTP {code} {}", first_line(&message)),
                true,
            ),
            _ => other(
                format!("{what}: HTTP {code} {}", first_line(&message)),
                false,
            ),
        },
        OciDistributionError::ImageManifestNotFoundError(m) => not_found(m),
        OciDistributionError::RequestError(r) => {
            let cause = crate::error_chain::error_chain(&r);
            if r.is_timeout() {
                Failure::Other(PullError::TimedOut {
                    image: image.to_string(),
                    registry: registry.to_string(),
                    cause,
                })
            } else {
                Failure::Other(PullError::Unreachable {
                    image: image.to_string(),
                    registry: registry.to_string(),
                    cause,
                })
            }
        }
        OciDistributionError::DigestError(d) => {
            invalid(format!("content does not match its digest: {d}"))
        }
        OciDistributionError::ManifestParsingError(m)
        | OciDistributionError::VersionedParsingError(m) => {
            invalid(format!("not an image manifest: {m}"))
        }
        OciDistributionError::UnsupportedMediaTypeError(m) => invalid(format!(
            "media type {m:?} is not an image manifest or index"
        )),
        OciDistributionError::UnsupportedSchemaVersionError(v) => {
            invalid(format!("schema version {v} is not supported (want 2)"))
        }
        OciDistributionError::IoError(io) => other(format!("{what}: {io}"), true),
        e => other(format!("{what}: {e}"), false),
    }
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("").trim()
}

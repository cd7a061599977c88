//! Errors of the API types' helpers.

/// An error reading a value of an OLM object.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum ApiError {
    /// `spec.version` (or another operator version) is not a version OLM would accept.
    #[error("invalid operator version {value:?}: {reason}")]
    InvalidVersion { value: String, reason: String },
}

//! Errors of the patch operations, each mapping to the HTTP status the API server answers with.

/// One field that an apply wanted to change while another manager owns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldConflict {
    /// The field path in the API server's notation, e.g. `.spec.replicas` or
    /// `.spec.template.spec.containers[name="app"].image`.
    pub field: String,
    /// The field manager that owns the field.
    pub manager: String,
}

/// Why a patch could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    /// The patch document is malformed or cannot be applied to this object (HTTP 422/400).
    #[error("invalid patch: {0}")]
    Invalid(String),
    /// A server-side apply touched fields owned by other managers (HTTP 409).
    #[error("{}", conflict_message(.conflicts))]
    Conflict {
        /// Every conflicting field with its owner.
        conflicts: Vec<FieldConflict>,
    },
    /// The patch type does not apply to this kind (HTTP 415).
    #[error("{0}")]
    UnsupportedMediaType(String),
}

/// The API server's wording: `Apply failed with 1 conflict: conflict with "kubectl" using
/// apps/v1: .spec.replicas`; several conflicts are listed one per line.
fn conflict_message(conflicts: &[FieldConflict]) -> String {
    match conflicts {
        [one] => format!(
            "Apply failed with 1 conflict: conflict with \"{}\": {}",
            one.manager, one.field
        ),
        many => {
            let mut msg = format!("Apply failed with {} conflicts:", many.len());
            for c in many {
                msg.push_str(&format!(" conflict with \"{}\": {}\n", c.manager, c.field));
            }
            msg
        }
    }
}

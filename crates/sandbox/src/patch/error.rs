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
    #[error("{0}")]
    Invalid(String),
    /// A server-side apply changed fields owned by other managers (HTTP 409).
    #[error("{}", conflict_message(.conflicts))]
    Conflict {
        /// Every conflicting field with its owner.
        conflicts: Vec<FieldConflict>,
    },
    /// The patch type does not apply to this kind (HTTP 415).
    #[error("{0}")]
    UnsupportedMediaType(String),
}

/// The API server's wording: `Apply failed with 1 conflict: conflict with "kubectl":
/// .spec.replicas`, or for several, grouped by manager in name order:
/// `Apply failed with 2 conflicts: conflicts with "a":\n- .x\nconflicts with "b":\n- .y`.
fn conflict_message(conflicts: &[FieldConflict]) -> String {
    if let [one] = conflicts {
        return format!(
            "Apply failed with 1 conflict: conflict with {:?}: {}",
            one.manager, one.field
        );
    }
    let mut managers: Vec<&str> = conflicts.iter().map(|c| c.manager.as_str()).collect();
    managers.sort_unstable();
    managers.dedup();
    let mut lines = Vec::new();
    for manager in managers {
        lines.push(format!("conflicts with {manager:?}:"));
        for c in conflicts.iter().filter(|c| c.manager == manager) {
            lines.push(format!("- {}", c.field));
        }
    }
    format!(
        "Apply failed with {} conflicts: {}",
        conflicts.len(),
        lines.join("\n")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conflict(manager: &str, field: &str) -> FieldConflict {
        FieldConflict {
            field: field.into(),
            manager: manager.into(),
        }
    }

    #[test]
    fn one_conflict_reads_like_the_api_server() {
        let err = PatchError::Conflict {
            conflicts: vec![conflict("kubectl", ".spec.replicas")],
        };
        assert_eq!(
            err.to_string(),
            "Apply failed with 1 conflict: conflict with \"kubectl\": .spec.replicas"
        );
    }

    #[test]
    fn several_conflicts_are_grouped_by_manager() {
        let err = PatchError::Conflict {
            conflicts: vec![
                conflict("b", ".spec.paused"),
                conflict("a", ".spec.replicas"),
                conflict("b", ".spec.minReadySeconds"),
            ],
        };
        assert_eq!(
            err.to_string(),
            "Apply failed with 3 conflicts: conflicts with \"a\":\n- .spec.replicas\n\
             conflicts with \"b\":\n- .spec.paused\n- .spec.minReadySeconds"
        );
    }
}

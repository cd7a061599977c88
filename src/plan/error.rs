//! Why a bundle could not be turned into InstallPlan steps. Every variant names the bundle (the
//! CSV name) and the object or field at fault, so the message can go straight into a condition.

use crate::olm_hash::GoJsonError;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    #[error(
        "bundle {bundle}: the catalog entry carries no manifests (no olm.bundle.object properties and no csvJson)"
    )]
    NoManifests { bundle: String },
    #[error("bundle {bundle}: no ClusterServiceVersion among its {count} manifests")]
    NoCsv { bundle: String, count: usize },
    #[error("bundle {bundle}: manifest #{index} is not valid JSON: {reason}")]
    BadJson {
        bundle: String,
        index: usize,
        reason: String,
    },
    #[error("bundle {bundle}: manifest #{index} has no {field}")]
    MissingField {
        bundle: String,
        index: usize,
        field: &'static str,
    },
    #[error("bundle CSV {bundle} missing {field}")]
    CsvMissing { bundle: String, field: &'static str },
    #[error("bundle {bundle}: {field}: {reason}")]
    BadField {
        bundle: String,
        field: String,
        reason: String,
    },
    #[error("bundle {bundle}: {field} cannot be hashed as OLM does: {source}")]
    Hash {
        bundle: String,
        field: String,
        #[source]
        source: GoJsonError,
    },
}

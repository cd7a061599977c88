//! Strategic merge patch, `application/strategic-merge-patch+json`.

use serde_json::Value;

use super::{GroupVersionKindRef, PatchError, merge_keys};

/// The API server's answer to a strategic merge patch on a custom resource.
pub const UNSUPPORTED_FOR_CUSTOM_RESOURCES: &str =
    "strategic merge patch is not supported for custom resources";

/// Applies a strategic merge patch to a built-in kind.
pub fn apply_strategic_merge_patch(
    target: &mut Value,
    patch: &Value,
    kind: &GroupVersionKindRef,
) -> Result<(), PatchError> {
    if !merge_keys::is_builtin_group(kind.group) {
        return Err(PatchError::UnsupportedMediaType(
            UNSUPPORTED_FOR_CUSTOM_RESOURCES.to_string(),
        ));
    }
    if !patch.is_object() {
        return Err(PatchError::Invalid(
            "strategic merge patch must be a JSON object".to_string(),
        ));
    }
    // First version: merge-patch semantics; list merging by key follows.
    super::apply_merge_patch(target, patch);
    Ok(())
}

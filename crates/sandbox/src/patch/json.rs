//! JSON patch (RFC 6902), `application/json-patch+json`.

use serde_json::Value;

use super::PatchError;

/// Applies an RFC 6902 JSON patch. The patch is all-or-nothing: on any failed operation
/// (a `test` mismatch included) `target` is left unchanged.
pub fn apply_json_patch(target: &mut Value, patch: &Value) -> Result<(), PatchError> {
    let ops: json_patch::Patch = serde_json::from_value(patch.clone())
        .map_err(|e| PatchError::Invalid(format!("malformed JSON patch: {e}")))?;
    json_patch::patch(target, &ops)
        .map_err(|e| PatchError::Invalid(format!("JSON patch failed: {e}")))
}

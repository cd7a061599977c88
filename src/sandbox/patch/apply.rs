//! Server-side apply with field managers.

use serde_json::Value;

use super::{GroupVersionKindRef, PatchError};

/// Applies `applied` as field manager `manager` onto `live` (None when the object does not
/// exist yet) and returns the new object. `now` is the RFC 3339 time recorded in
/// `metadata.managedFields`.
pub fn server_side_apply(
    live: Option<&Value>,
    applied: &Value,
    manager: &str,
    force: bool,
    kind: &GroupVersionKindRef,
    now: &str,
) -> Result<Value, PatchError> {
    let _ = (manager, force, kind, now);
    if !applied.is_object() {
        return Err(PatchError::Invalid(
            "apply configuration must be a JSON object".to_string(),
        ));
    }
    // First version: merge without ownership tracking.
    let mut out = live
        .cloned()
        .unwrap_or_else(|| Value::Object(Default::default()));
    super::apply_merge_patch(&mut out, applied);
    Ok(out)
}

/// Records `manager` as the owner (operation `Update`) of the fields a non-apply write
/// (create, update, merge/JSON/strategic patch) changed from `old` to `new`.
pub fn record_update(old: Option<&Value>, new: &mut Value, manager: &str, now: &str) {
    let _ = (old, new, manager, now);
}

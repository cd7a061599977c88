//! JSON merge patch (RFC 7386), `application/merge-patch+json`.

use serde_json::{Map, Value};

/// Applies an RFC 7386 merge patch: objects merge key by key, `null` deletes a key, anything
/// else (arrays included) replaces the target value wholesale.
pub fn apply_merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch_map) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Value::Object(target_map) = target {
        for (key, value) in patch_map {
            if value.is_null() {
                target_map.remove(key);
            } else {
                apply_merge_patch(target_map.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
    }
}

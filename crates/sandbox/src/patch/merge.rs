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

/// The merge patch that turns `from` into `to`: `apply_merge_patch(from, diff) == to` for
/// every `to` without `null` values (a merge patch cannot set a value to null).
pub fn diff_merge_patch(from: &Value, to: &Value) -> Value {
    match (from, to) {
        (Value::Object(f), Value::Object(t)) => {
            let mut patch = Map::new();
            for key in f.keys().filter(|k| !t.contains_key(*k)) {
                patch.insert(key.clone(), Value::Null);
            }
            for (key, tv) in t {
                match f.get(key) {
                    Some(fv) if fv == tv => {}
                    Some(fv) => {
                        patch.insert(key.clone(), diff_merge_patch(fv, tv));
                    }
                    None => {
                        patch.insert(key.clone(), tv.clone());
                    }
                }
            }
            Value::Object(patch)
        }
        _ => to.clone(),
    }
}

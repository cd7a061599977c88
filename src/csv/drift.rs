//! Field-level drift of a live Deployment from the desired one (docs/csv-phases.md §11 item 6): OLM only
//! compares a hash label, so a scaled-down or hand-edited Deployment stayed as it was while the
//! CSV showed Succeeded. olm-rs re-applies the desired object when any field it sets differs.
//!
//! The comparison is "desired ⊆ live": fields the API server defaults or other controllers add
//! are not drift; only values olm-rs would write and that differ count.

use serde_json::Value;

use crate::olm_hash::go_json::canonical_quantity;

/// The JSON path of the first field of `desired` that `live` does not match.
pub fn first_difference(desired: &Value, live: &Value) -> Option<String> {
    difference_at(desired, live, String::new())
}

fn is_vacuous(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Array(items) => items.is_empty(),
        Value::Object(map) => map.values().all(is_vacuous),
        _ => false,
    }
}

fn difference_at(desired: &Value, live: &Value, path: String) -> Option<String> {
    if is_vacuous(desired) && is_vacuous(live) {
        return None;
    }
    match (desired, live) {
        (Value::Object(want), Value::Object(have)) => want.iter().find_map(|(key, value)| {
            let child = format!("{path}.{key}");
            match have.get(key) {
                Some(found) => difference_at(value, found, child),
                None if is_vacuous(value) => None,
                None => Some(child),
            }
        }),
        (Value::Object(want), Value::Null) if is_vacuous(&Value::Object(want.clone())) => None,
        (Value::Array(want), Value::Array(have)) => {
            if want.len() != have.len() {
                return Some(path);
            }
            want.iter()
                .zip(have)
                .enumerate()
                .find_map(|(i, (w, h))| difference_at(w, h, format!("{path}[{i}]")))
        }
        (Value::String(a), Value::String(b)) if a != b => {
            // Quantities may be written differently (`0.1` vs `100m`) and still be equal.
            match (canonical_quantity(a), canonical_quantity(b)) {
                (Ok(x), Ok(y)) if x == y => None,
                _ => Some(path),
            }
        }
        (Value::Number(n), Value::String(s)) | (Value::String(s), Value::Number(n)) => {
            match (canonical_quantity(&n.to_string()), canonical_quantity(s)) {
                (Ok(x), Ok(y)) if x == y => None,
                _ => Some(path),
            }
        }
        (a, b) if a == b => None,
        _ => Some(path),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_added_by_the_server_are_not_drift() {
        let desired = json!({"replicas": 1, "template": {"spec": {"containers": [{"name": "m", "image": "a"}]}}});
        let live = json!({"replicas": 1, "progressDeadlineSeconds": 600, "template": {"spec": {"containers": [{"name": "m", "image": "a", "imagePullPolicy": "IfNotPresent"}], "dnsPolicy": "ClusterFirst"}}});
        assert_eq!(first_difference(&desired, &live), None);
    }

    #[test]
    fn edited_values_are_drift_and_named_by_path() {
        let desired = json!({"replicas": 1, "template": {"spec": {"containers": [{"name": "m", "image": "a"}]}}});
        let scaled = json!({"replicas": 0, "template": {"spec": {"containers": [{"name": "m", "image": "a"}]}}});
        assert_eq!(
            first_difference(&desired, &scaled).as_deref(),
            Some(".replicas")
        );
        let image = json!({"replicas": 1, "template": {"spec": {"containers": [{"name": "m", "image": "b"}]}}});
        assert_eq!(
            first_difference(&desired, &image).as_deref(),
            Some(".template.spec.containers[0].image")
        );
        let extra = json!({"replicas": 1, "template": {"spec": {"containers": [{"name": "m", "image": "a"}, {"name": "x"}]}}});
        assert_eq!(
            first_difference(&desired, &extra).as_deref(),
            Some(".template.spec.containers")
        );
    }

    #[test]
    fn quantities_compare_by_value_and_empties_match_absent() {
        let desired = json!({"resources": {"limits": {"cpu": "0.1", "memory": "1024Mi"}}, "env": [], "x": {}});
        let live = json!({"resources": {"limits": {"cpu": "100m", "memory": "1Gi"}}});
        assert_eq!(first_difference(&desired, &live), None);
        let other = json!({"resources": {"limits": {"cpu": "200m", "memory": "1Gi"}}});
        assert_eq!(
            first_difference(&desired, &other).as_deref(),
            Some(".resources.limits.cpu")
        );
    }
}

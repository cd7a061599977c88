//! Resources that share storage with another version of a different shape. The only such pair
//! the sandbox serves is Event: `events.k8s.io/v1` objects are stored as `v1` Events (as the real
//! server stores both as one internal type), so events a controller records through
//! `events.k8s.io` show up in `kubectl get events` and `kubectl describe`, and vice versa.

use serde_json::Value;

use super::resources::{ResourceInfo, is_events_v1};

/// (`events.k8s.io/v1` field, `v1` field) for fields that were renamed.
const EVENT_FIELDS: &[(&str, &str)] = &[
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

/// `apiVersion` and `kind` of the stored form.
pub fn storage_type(res: &ResourceInfo) -> (String, String) {
    if is_events_v1(&res.group, &res.plural) {
        ("v1".into(), "Event".into())
    } else {
        (res.api_version(), res.kind.clone())
    }
}

fn rename(obj: &mut Value, from_to: impl Iterator<Item = (&'static str, &'static str)>) {
    let Value::Object(map) = obj else { return };
    for (from, to) in from_to {
        if let Some(v) = map.shift_remove(from) {
            map.insert(to.to_string(), v);
        }
    }
}

/// The request's object in stored form.
pub fn to_storage(mut obj: Value, res: &ResourceInfo) -> Value {
    if is_events_v1(&res.group, &res.plural) {
        rename(&mut obj, EVENT_FIELDS.iter().copied());
    }
    obj
}

/// Whether objects of `res` are served in another shape than they are stored in (beyond
/// `apiVersion` and `kind`).
pub fn reshapes(res: &ResourceInfo) -> bool {
    is_events_v1(&res.group, &res.plural)
}

/// A stored object in the form of `res` (type fields are set by the caller).
pub fn from_storage(obj: &Value, res: &ResourceInfo) -> Value {
    let mut out = obj.clone();
    if is_events_v1(&res.group, &res.plural) {
        rename(&mut out, EVENT_FIELDS.iter().map(|(a, b)| (*b, *a)));
    }
    out
}

/// A field selector path of `res` as a path into the stored object.
pub fn storage_field_path(res: &ResourceInfo, path: &str) -> String {
    if is_events_v1(&res.group, &res.plural) {
        let (head, rest) = path
            .split_once('.')
            .map_or((path, None), |(h, r)| (h, Some(r)));
        if let Some((_, stored)) = EVENT_FIELDS.iter().find(|(served, _)| *served == head) {
            return match rest {
                Some(r) => format!("{stored}.{r}"),
                None => stored.to_string(),
            };
        }
    }
    path.to_string()
}

/// Keeps only the keys of a map-typed value; used by tests.
#[cfg(test)]
fn keys(v: &Value) -> Vec<String> {
    v.as_object()
        .map(serde_json::Map::keys)
        .into_iter()
        .flatten()
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::{builtins, storage_key};
    use serde_json::json;

    fn events_v1() -> ResourceInfo {
        (*builtins()
            .into_iter()
            .find(|r| r.group == "events.k8s.io")
            .unwrap())
        .clone()
    }

    #[test]
    fn events_v1_round_trips_through_core_storage() {
        let res = events_v1();
        let ev = json!({"metadata": {"name": "e"}, "regarding": {"kind": "Pod", "name": "p"}, "note": "hi",
                        "reason": "Started", "reportingController": "olm", "deprecatedCount": 2});
        let stored = to_storage(ev.clone(), &res);
        assert_eq!(stored["involvedObject"]["name"], "p");
        assert_eq!(stored["message"], "hi");
        assert_eq!(stored["reportingComponent"], "olm");
        assert!(!keys(&stored).contains(&"regarding".to_string()));
        assert_eq!(from_storage(&stored, &res), ev);
        assert_eq!(
            storage_key("events.k8s.io", "events"),
            storage_key("", "events")
        );
        assert_eq!(
            storage_field_path(&res, "regarding.name"),
            "involvedObject.name"
        );
        assert_eq!(storage_field_path(&res, "reason"), "reason");
    }
}

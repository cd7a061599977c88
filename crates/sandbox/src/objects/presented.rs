//! Stored objects as served, without copying them. Every watch event and every response used to
//! deep-clone the stored object only to put `apiVersion`/`kind` first and rename a few Event
//! fields; for a 35 kB CSV fanned out to thousands of namespaces (docs/operator-groups.md §10) those clones were
//! the largest cost of the server (profiled: a fifth of its CPU). Objects whose served shape
//! equals the stored one are now encoded straight from the store.

use std::borrow::Cow;

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::Value;

use super::present;
use crate::conversion;
use crate::resources::ResourceInfo;

/// A stored object serialised as [`present`] would return it.
pub struct Presented<'a> {
    pub obj: &'a Value,
    pub res: &'a ResourceInfo,
}

impl Serialize for Presented<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let Value::Object(fields) = self.obj else {
            return self.obj.serialize(serializer);
        };
        if conversion::reshapes(self.res) {
            return present(self.obj, self.res).serialize(serializer);
        }
        let mut map = serializer.serialize_map(Some(fields.len() + 2))?;
        map.serialize_entry("apiVersion", &self.res.api_version())?;
        map.serialize_entry("kind", &self.res.kind)?;
        for (key, value) in fields {
            if key != "apiVersion" && key != "kind" {
                map.serialize_entry(key, value)?;
            }
        }
        map.end()
    }
}

/// The object as served, borrowed when the stored form already is it (same type fields, no
/// renamed fields): what the write path compares against, under the server's lock.
pub fn present_ref<'a>(obj: &'a Value, res: &ResourceInfo) -> Cow<'a, Value> {
    let same_type = obj.get("apiVersion").and_then(Value::as_str) == Some(&res.api_version())
        && obj.get("kind").and_then(Value::as_str) == Some(res.kind.as_str());
    if same_type && !conversion::reshapes(res) {
        Cow::Borrowed(obj)
    } else {
        Cow::Owned(present(obj, res))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn resource(kind: &str) -> ResourceInfo {
        crate::resources::builtins()
            .into_iter()
            .find(|r| r.kind == kind)
            .map(|r| (*r).clone())
            .unwrap()
    }

    #[test]
    fn encodes_as_present_does() {
        let deployment = resource("Deployment");
        let obj =
            json!({"metadata": {"name": "x"}, "apiVersion": "apps/v1beta1", "spec": {"a": 1}});
        let direct = serde_json::to_string(&Presented {
            obj: &obj,
            res: &deployment,
        })
        .unwrap();
        assert_eq!(
            direct,
            serde_json::to_string(&present(&obj, &deployment)).unwrap()
        );
        let event = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"},
                           "involvedObject": {"name": "x"}, "message": "hi"});
        let events_v1 = crate::resources::builtins()
            .into_iter()
            .find(|r| r.group == "events.k8s.io" && r.plural == "events")
            .map(|r| (*r).clone())
            .unwrap();
        let direct = serde_json::to_string(&Presented {
            obj: &event,
            res: &events_v1,
        })
        .unwrap();
        assert_eq!(
            direct,
            serde_json::to_string(&present(&event, &events_v1)).unwrap()
        );
    }

    #[test]
    fn borrows_only_what_needs_no_change() {
        let deployment = resource("Deployment");
        let stored = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {}});
        assert!(matches!(
            present_ref(&stored, &deployment),
            Cow::Borrowed(_)
        ));
        let old = json!({"apiVersion": "apps/v1beta1", "kind": "Deployment", "metadata": {}});
        assert_eq!(present_ref(&old, &deployment)["apiVersion"], "apps/v1");
    }
}

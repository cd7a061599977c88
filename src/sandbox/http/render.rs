//! Rendering stored objects the way the client asked: the object at the requested version,
//! a `Table`, or `PartialObjectMetadata`.

use std::sync::Arc;

use serde_json::{Value, json};

use super::route::Format;
use crate::sandbox::meta;
use crate::sandbox::objects::present;
use crate::sandbox::resources::ResourceInfo;
use crate::sandbox::table::{self, IncludeObject};

pub struct Renderer {
    pub res: Arc<ResourceInfo>,
    pub format: Format,
    pub include: IncludeObject,
}

fn partial_metadata(obj: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata").cloned().unwrap_or(json!({})),
    })
}

impl Renderer {
    /// A single object (get, create, update, delete responses, watch events). In a watch, only
    /// the first Table event carries column definitions, as on the real server.
    pub fn object(&self, obj: &Value, with_columns: bool) -> Value {
        let obj = present(obj, &self.res);
        match self.format {
            Format::Table => {
                let row = table::row(&self.res, &obj, self.include, jiff::Timestamp::now());
                let rv = meta::resource_version(&obj).unwrap_or_default();
                table::table(&self.res, vec![row], rv, with_columns)
            }
            Format::Metadata => partial_metadata(&obj),
            _ => obj,
        }
    }

    /// A list response; `list_meta` is the list's `metadata` (resourceVersion, continue).
    pub fn list(&self, objs: &[Arc<Value>], list_meta: Value) -> Value {
        let now = jiff::Timestamp::now();
        match self.format {
            Format::Table => {
                let rows = objs
                    .iter()
                    .map(|o| table::row(&self.res, &present(o, &self.res), self.include, now))
                    .collect();
                let mut t = table::table(&self.res, rows, "", true);
                t["metadata"] = list_meta;
                t
            }
            Format::Metadata => json!({
                "kind": "PartialObjectMetadataList",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": list_meta,
                "items": objs.iter().map(|o| partial_metadata(o)).collect::<Vec<_>>(),
            }),
            _ => json!({
                "apiVersion": self.res.api_version(),
                "kind": self.res.list_kind(),
                "metadata": list_meta,
                "items": objs.iter().map(|o| present(o, &self.res)).collect::<Vec<_>>(),
            }),
        }
    }

    /// The object of a BOOKMARK event: only the type and `metadata.resourceVersion`.
    pub fn bookmark(&self, rv: u64, initial_events_end: bool) -> Value {
        let mut m = json!({"resourceVersion": rv.to_string()});
        if initial_events_end {
            m["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        json!({"kind": self.res.kind, "apiVersion": self.res.api_version(), "metadata": m})
    }
}

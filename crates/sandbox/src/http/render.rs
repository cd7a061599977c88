//! Rendering stored objects the way the client asked: the object at the requested version,
//! a `Table`, or `PartialObjectMetadata`.
//!
//! Plain objects are encoded straight from the store ([`Presented`]): a watch event or a list
//! of large objects (CSVs fanned out to thousands of namespaces, docs/operator-groups.md §10) must not deep-copy
//! each of them first.

use std::sync::Arc;

use serde::Serialize;
use serde_json::{Value, json};

use super::route::Format;
use crate::meta;
use crate::objects::{Presented, present};
use crate::resources::ResourceInfo;
use crate::table::{self, IncludeObject};

pub struct Renderer {
    pub res: Arc<ResourceInfo>,
    pub format: Format,
    pub include: IncludeObject,
}

/// What a response or watch event carries: a stored object encoded in place, a list of them,
/// or a value built for the purpose (Table, PartialObjectMetadata).
#[derive(Serialize)]
#[serde(untagged)]
pub enum Rendered<'a> {
    Stored(Presented<'a>),
    List(ObjectList<'a>),
    Built(Value),
}

/// A list of stored objects as served.
#[derive(Serialize)]
pub struct ObjectList<'a> {
    #[serde(rename = "apiVersion")]
    api_version: String,
    kind: String,
    metadata: Value,
    items: Vec<Presented<'a>>,
}

/// Metadata is the same in the stored and the served form (`conversion` renames only
/// top-level fields), so it is taken from the stored object.
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
    pub fn object<'a>(&'a self, obj: &'a Value, with_columns: bool) -> Rendered<'a> {
        match self.format {
            Format::Table => {
                let obj = present(obj, &self.res);
                let row = table::row(&self.res, &obj, self.include, jiff::Timestamp::now());
                let rv = meta::resource_version(&obj).unwrap_or_default();
                Rendered::Built(table::table(&self.res, vec![row], rv, with_columns))
            }
            Format::Metadata => Rendered::Built(partial_metadata(obj)),
            _ => Rendered::Stored(Presented {
                obj,
                res: &self.res,
            }),
        }
    }

    /// A list response; `list_meta` is the list's `metadata` (resourceVersion, continue).
    pub fn list<'a>(&'a self, objs: &'a [Arc<Value>], list_meta: Value) -> Rendered<'a> {
        let now = jiff::Timestamp::now();
        match self.format {
            Format::Table => {
                let rows = objs
                    .iter()
                    .map(|o| table::row(&self.res, &present(o, &self.res), self.include, now))
                    .collect();
                let mut t = table::table(&self.res, rows, "", true);
                t["metadata"] = list_meta;
                Rendered::Built(t)
            }
            Format::Metadata => Rendered::Built(json!({
                "kind": "PartialObjectMetadataList",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": list_meta,
                "items": objs.iter().map(|o| partial_metadata(o)).collect::<Vec<_>>(),
            })),
            _ => Rendered::List(ObjectList {
                api_version: self.res.api_version(),
                kind: self.res.list_kind(),
                metadata: list_meta,
                items: objs
                    .iter()
                    .map(|o| Presented {
                        obj: o,
                        res: &self.res,
                    })
                    .collect(),
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

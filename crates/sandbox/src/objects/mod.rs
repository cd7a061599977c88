//! Object lifecycle rules shared by the HTTP handlers and the built-in controllers (garbage
//! collector, namespace and CRD cleanup, workload simulator): create, update, delete, and the
//! metadata the server owns (`uid`, `resourceVersion`, `generation`, timestamps).

pub mod create;
mod defaults;
pub mod delete;
mod presented;
pub mod update;
mod validate;

use std::sync::Arc;

use serde_json::Value;

use super::error::ApiError;
use super::meta;
use super::resources::ResourceInfo;
use super::state::State;

pub use create::create;
pub use delete::{DeleteOptions, Propagation, delete};
pub use presented::{Presented, present_ref};
pub use update::update;

/// Options every write accepts.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// `dryRun=All`: do everything but store.
    pub dry_run: bool,
}

/// Which part of an object a write addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The main resource: `status` is kept from the stored object if there is a status subresource.
    Main,
    /// `/status`: only `status` (and `managedFields`) change.
    Status,
    /// A Namespace's `/finalize`: only `spec.finalizers` change.
    Finalize,
}

/// The object as served at `res`'s version: stored once, `apiVersion` rewritten on read.
pub fn present(obj: &Value, res: &ResourceInfo) -> Value {
    let mut out = super::conversion::from_storage(obj, res);
    if let Value::Object(map) = &mut out {
        map.shift_remove("apiVersion");
        map.shift_remove("kind");
        let mut ordered = serde_json::Map::new();
        ordered.insert("apiVersion".into(), Value::String(res.api_version()));
        ordered.insert("kind".into(), Value::String(res.kind.clone()));
        ordered.append(map);
        *map = ordered;
    }
    out
}

/// Finalizers in `spec.finalizers` that keep a Namespace (only) from being removed.
fn spec_finalizers(obj: &Value) -> Vec<String> {
    obj.pointer("/spec/finalizers")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Deleting, and nothing holds it any more: the object goes away now.
fn ready_to_remove(obj: &Value, res: &ResourceInfo) -> bool {
    let namespace_held =
        res.group.is_empty() && res.kind == "Namespace" && !spec_finalizers(obj).is_empty();
    meta::is_deleting(obj) && meta::finalizers(obj).is_empty() && !namespace_held
}

/// Stores a written object (or removes it when deleting with no finalizers left) and returns
/// what the client sees. With `dry_run` nothing changes.
fn commit(state: &mut State, res: &ResourceInfo, obj: Value, opts: &WriteOptions) -> Arc<Value> {
    if opts.dry_run {
        return Arc::new(obj);
    }
    let gr = res.group_resource();
    let name = meta::name(&obj).unwrap_or_default().to_string();
    let stored = if ready_to_remove(&obj, res) {
        let ns = meta::namespace(&obj).unwrap_or_default().to_string();
        state
            .store
            .remove(&gr, &ns, &name)
            .unwrap_or_else(|| Arc::new(obj))
    } else {
        state.store.put(&gr, obj)
    };
    state.after_write(&gr, &name);
    stored
}

/// `apiVersion`/`kind` in a request body must name the resource it is sent to.
fn check_type(obj: &Value, res: &ResourceInfo) -> Result<(), ApiError> {
    if !obj.is_object() {
        return Err(ApiError::bad_request(format!(
            "the body of a {} request must be a JSON object",
            res.kind
        )));
    }
    if let Some(kind) = obj.get("kind").and_then(Value::as_str)
        && kind != res.kind
    {
        return Err(ApiError::bad_request(format!(
            "the kind of the object ({kind}) does not match the resource it is sent to ({}, kind {})",
            res.plural, res.kind
        )));
    }
    if let Some(av) = obj.get("apiVersion").and_then(Value::as_str) {
        let group = av.rsplit_once('/').map(|(g, _)| g).unwrap_or("");
        if group != res.group {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({av}) does not match the expected API group of {} ({})",
                res.plural,
                res.api_version()
            )));
        }
    }
    Ok(())
}

/// Whether anything that counts as spec for `metadata.generation` differs (everything but
/// type, metadata and a subresource status). Compared in place: objects can be large (CRDs).
fn spec_changed(a: &Value, b: &Value, res: &ResourceInfo) -> bool {
    let counts = |k: &str| {
        let server_side = matches!(k, "metadata" | "apiVersion" | "kind");
        let status = res.status_subresource && k == "status";
        !server_side && !status
    };
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return a != b;
    };
    let keys = a.keys().chain(b.keys()).filter(|k| counts(k));
    keys.into_iter().any(|k| a.get(k) != b.get(k))
}

/// Equal, or different only in `metadata.managedFields[].time`. Compared in place.
fn same_but_manager_times(a: &Value, b: &Value) -> bool {
    fn entry_eq(x: &Value, y: &Value) -> bool {
        match (x.as_object(), y.as_object()) {
            (Some(x), Some(y)) => {
                let keys = x.keys().chain(y.keys()).filter(|k| k.as_str() != "time");
                keys.into_iter().all(|k| x.get(k) == y.get(k))
            }
            _ => x == y,
        }
    }
    fn meta_eq(x: &Value, y: &Value) -> bool {
        let (Some(x), Some(y)) = (x.as_object(), y.as_object()) else {
            return x == y;
        };
        x.keys()
            .chain(y.keys())
            .all(|k| match (x.get(k), y.get(k)) {
                (Some(Value::Array(xs)), Some(Value::Array(ys))) if k == "managedFields" => {
                    xs.len() == ys.len() && xs.iter().zip(ys).all(|(p, q)| entry_eq(p, q))
                }
                (p, q) => p == q,
            })
    }
    if a == b {
        return true;
    }
    let (Some(x), Some(y)) = (a.as_object(), b.as_object()) else {
        return false;
    };
    x.keys()
        .chain(y.keys())
        .all(|k| match (x.get(k), y.get(k)) {
            (Some(p), Some(q)) if k == "metadata" => meta_eq(p, q),
            (p, q) => p == q,
        })
}

/// Applies the CRD's structural schema (prune + defaults) to a custom resource.
fn apply_schema(obj: &mut Value, res: &ResourceInfo) {
    if let Some(schema) = &res.schema {
        super::crd_schema::apply(obj, schema);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn present_puts_type_first_and_rewrites_version() {
        let res = crate::resources::builtins()
            .into_iter()
            .find(|r| r.kind == "Deployment")
            .unwrap();
        let out = present(
            &json!({"metadata": {"name": "x"}, "apiVersion": "apps/v1beta1"}),
            &res,
        );
        let keys: Vec<_> = out.as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys, ["apiVersion", "kind", "metadata"]);
        assert_eq!(out["apiVersion"], "apps/v1");
    }
}

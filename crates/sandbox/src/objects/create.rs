//! Create: the server assigns `uid`, `creationTimestamp`, `resourceVersion`, `generation`, picks
//! a name from `generateName`, and refuses objects in missing or terminating namespaces.

use std::sync::Arc;

use serde_json::Value;

use super::{WriteOptions, apply_schema, check_type, commit, defaults, validate};
use crate::crd_registry;
use crate::error::ApiError;
use crate::meta;
use crate::resources::ResourceInfo;
use crate::state::{State, namespaces_gr};

/// Metadata a client may not set on create.
const SERVER_OWNED: &[&str] = &[
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "selfLink",
];

pub fn create(
    state: &mut State,
    res: &ResourceInfo,
    path_ns: Option<&str>,
    obj: Value,
    opts: &WriteOptions,
) -> Result<Arc<Value>, ApiError> {
    check_type(&obj, res)?;
    let mut obj = crate::conversion::to_storage(obj, res);
    let ns = target_namespace(res, path_ns, &obj)?;
    let name = pick_name(state, res, &ns, &obj)?;
    validate::name(res, &name)?;
    if res.namespaced {
        namespace_accepts_content(state, &ns)?;
    }
    if res.custom
        && state
            .crds
            .get(&res.group_resource())
            .is_some_and(|c| c.terminating)
    {
        return Err(ApiError::method_not_allowed(format!(
            "create not allowed while custom resource definition is terminating ({}.{})",
            res.plural, res.group
        )));
    }
    if state.store.get(&res.group_resource(), &ns, &name).is_some() {
        return Err(ApiError::already_exists(res, &name));
    }

    let m = meta::metadata_mut(&mut obj);
    for field in SERVER_OWNED {
        m.shift_remove(*field);
    }
    m.insert("name".into(), Value::String(name.clone()));
    if res.namespaced {
        m.insert("namespace".into(), Value::String(ns));
    } else {
        m.shift_remove("namespace");
    }
    m.insert("uid".into(), Value::String(meta::new_uid()));
    m.insert(
        "creationTimestamp".into(),
        Value::String(meta::now_rfc3339()),
    );
    if res.tracks_generation {
        m.insert("generation".into(), Value::from(1));
    }
    if let Value::Object(root) = &mut obj {
        let (api_version, kind) = crate::conversion::storage_type(res);
        root.insert("apiVersion".into(), Value::String(api_version));
        root.insert("kind".into(), Value::String(kind));
        if res.status_subresource {
            root.shift_remove("status");
        }
    }
    defaults::on_create(res, &mut obj);
    defaults::apply(state, res, &mut obj, None);
    apply_schema(&mut obj, res);
    validate_kind(res, &obj, &name)?;
    Ok(commit(state, res, obj, opts))
}

/// Kind-specific validation the real server does and OLM would notice when it is missing.
pub(super) fn validate_kind(res: &ResourceInfo, obj: &Value, name: &str) -> Result<(), ApiError> {
    if res.group == "apiextensions.k8s.io" && res.kind == "CustomResourceDefinition" {
        crd_registry::validate(obj)
            .map_err(|(field, why)| ApiError::invalid(res, name, &field, &why))?;
    }
    Ok(())
}

fn target_namespace(
    res: &ResourceInfo,
    path_ns: Option<&str>,
    obj: &Value,
) -> Result<String, ApiError> {
    if !res.namespaced {
        return Ok(String::new());
    }
    let body_ns = meta::namespace(obj);
    match (path_ns, body_ns) {
        (Some(p), Some(b)) if p != b => Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        )),
        (Some(p), _) => Ok(p.to_string()),
        (None, Some(b)) => Ok(b.to_string()),
        (None, None) => Err(ApiError::bad_request(format!(
            "{} is namespaced: a namespace is required to create one",
            res.plural
        ))),
    }
}

/// `metadata.name`, or `generateName` plus five random characters (retried on collision).
fn pick_name(state: &State, res: &ResourceInfo, ns: &str, obj: &Value) -> Result<String, ApiError> {
    if let Some(name) = meta::name(obj) {
        return Ok(name.to_string());
    }
    let Some(prefix) = meta::str_field(obj, "generateName") else {
        return Err(ApiError::invalid(
            res,
            "",
            "metadata.name",
            "Required value: name or generateName is required",
        ));
    };
    let gr = res.group_resource();
    for _ in 0..16 {
        let candidate = format!("{prefix}{}", meta::random_suffix());
        if state.store.get(&gr, ns, &candidate).is_none() {
            return Ok(candidate);
        }
    }
    Err(ApiError::already_exists(res, prefix))
}

/// The NamespaceLifecycle rule: content may only be created in an existing, active namespace.
fn namespace_accepts_content(state: &State, ns: &str) -> Result<(), ApiError> {
    let Some(namespace) = state.store.get(&namespaces_gr(), "", ns) else {
        return Err(ApiError {
            code: 404,
            reason: "NotFound",
            message: format!("namespaces \"{ns}\" not found"),
            details: Some(crate::error::ErrorDetails {
                name: ns.to_string(),
                group: String::new(),
                kind: "namespaces".into(),
            }),
        });
    };
    if meta::is_deleting(namespace) {
        return Err(ApiError::forbidden(format!(
            "unable to create new content in namespace {ns} because it is being terminated"
        )));
    }
    Ok(())
}

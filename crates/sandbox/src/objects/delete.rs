//! Delete: objects held by finalizers get a `deletionTimestamp` and stay until the finalizers
//! are gone; `propagationPolicy` adds the garbage collector's `foregroundDeletion` or `orphan`
//! finalizer; Namespaces and CRDs are marked terminating and cleaned up by the controllers in
//! `namespaces` and `crd_controller`.

use std::sync::Arc;

use serde_json::Value;

use super::{WriteOptions, commit, defaults};
use crate::error::ApiError;
use crate::meta;
use crate::resources::ResourceInfo;
use crate::state::State;

pub const FOREGROUND_FINALIZER: &str = "foregroundDeletion";
pub const ORPHAN_FINALIZER: &str = "orphan";

const IMMORTAL_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    Background,
    Foreground,
    Orphan,
}

impl Propagation {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "Background" => Some(Self::Background),
            "Foreground" => Some(Self::Foreground),
            "Orphan" => Some(Self::Orphan),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    /// `None`: the default, background.
    pub propagation: Option<Propagation>,
    pub precondition_uid: Option<String>,
    pub precondition_resource_version: Option<String>,
    pub write: WriteOptions,
}

pub fn delete(
    state: &mut State,
    res: &ResourceInfo,
    path_ns: Option<&str>,
    name: &str,
    opts: &DeleteOptions,
) -> Result<Arc<Value>, ApiError> {
    let ns = if res.namespaced {
        path_ns.unwrap_or_default()
    } else {
        ""
    };
    let is_namespace = res.group.is_empty() && res.kind == "Namespace";
    if is_namespace && IMMORTAL_NAMESPACES.contains(&name) {
        // The NamespaceLifecycle admission plugin's rule.
        return Err(ApiError::forbidden(format!(
            "namespaces \"{name}\" is forbidden: this namespace may not be deleted"
        )));
    }
    let Some(current) = state.store.get(&res.group_resource(), ns, name).cloned() else {
        return Err(ApiError::not_found(res, name));
    };
    if let Some(uid) = &opts.precondition_uid
        && Some(uid.as_str()) != meta::uid(&current)
    {
        return Err(ApiError::conflict(
            res,
            name,
            &format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                meta::uid(&current).unwrap_or_default()
            ),
        ));
    }
    if let Some(rv) = &opts.precondition_resource_version
        && Some(rv.as_str()) != meta::resource_version(&current)
    {
        return Err(ApiError::conflict(
            res,
            name,
            &format!(
                "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                meta::resource_version(&current).unwrap_or_default()
            ),
        ));
    }

    let mut next = (*current).clone();
    let mut fins = meta::finalizers(&next);
    let policy_finalizer = match opts.propagation {
        Some(Propagation::Foreground) => Some(FOREGROUND_FINALIZER),
        Some(Propagation::Orphan) => Some(ORPHAN_FINALIZER),
        _ => None,
    };
    if let Some(f) = policy_finalizer
        && !fins.iter().any(|x| x == f)
    {
        fins.push(f.to_string());
    }
    meta::set_finalizers(&mut next, &fins);

    if meta::is_deleting(&current) {
        // Already terminating: only a newly requested policy finalizer changes anything.
        if next == *current {
            return Ok(current);
        }
        return Ok(commit(state, res, next, &opts.write));
    }

    if is_namespace {
        next["status"]["phase"] = Value::String("Terminating".into());
    }
    if res.group == "apiextensions.k8s.io" && res.kind == "CustomResourceDefinition" {
        defaults::on_crd_delete(&mut next);
    }
    let m = meta::metadata_mut(&mut next);
    m.insert(
        "deletionTimestamp".into(),
        Value::String(meta::now_rfc3339()),
    );
    m.insert("deletionGracePeriodSeconds".into(), Value::from(0));
    if res.tracks_generation
        && let Some(g) = m.get("generation").and_then(Value::as_i64)
    {
        m.insert("generation".into(), Value::from(g + 1));
    }
    // `commit` removes it right away when nothing holds it.
    Ok(commit(state, res, next, &opts.write))
}

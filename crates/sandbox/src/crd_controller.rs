//! What apiextensions-apiserver's controllers do for a CRD: accept its names and mark it
//! `Established` (recording `storedVersions`), and on deletion remove all its objects before
//! the CRD itself goes.

use std::sync::Arc;

use serde_json::{Value, json};

use super::conditions;
use super::crd_registry::CLEANUP_FINALIZER;
use super::meta;
use super::objects::{self, DeleteOptions, Part, WriteOptions};
use super::state::{State, crds_gr};

pub fn sweep(state: &mut State) {
    let crds: Vec<Arc<Value>> = state.store.list(&crds_gr(), None).cloned().collect();
    for crd in crds {
        if meta::is_deleting(&crd) {
            cleanup(state, &crd);
        } else if !established(&crd) {
            establish(state, (*crd).clone());
        }
    }
}

/// `spec.names` as accepted: singular and listKind filled in.
fn accepted_names(crd: &Value) -> Value {
    let names = crd.pointer("/spec/names").cloned().unwrap_or(json!({}));
    let mut accepted = names.clone();
    if let Some(kind) = names["kind"].as_str() {
        let singular = names["singular"].as_str().map(str::to_string);
        accepted["singular"] = json!(singular.unwrap_or_else(|| kind.to_ascii_lowercase()));
        let list_kind = names["listKind"].as_str().map(str::to_string);
        accepted["listKind"] = json!(list_kind.unwrap_or_else(|| format!("{kind}List")));
    }
    accepted
}

fn storage_version(crd: &Value) -> Option<&str> {
    crd.pointer("/spec/versions")?
        .as_array()?
        .iter()
        .find(|v| v["storage"].as_bool() == Some(true))?["name"]
        .as_str()
}

/// Nothing for the controller to do (checked without copying the CRD, which can be large).
fn established(crd: &Value) -> bool {
    let stored = crd
        .pointer("/status/storedVersions")
        .and_then(Value::as_array);
    let storage_recorded = storage_version(crd)
        .is_none_or(|s| stored.is_some_and(|vs| vs.iter().any(|v| v.as_str() == Some(s))));
    conditions::status_of(crd, "Established") == Some("True")
        && conditions::status_of(crd, "NamesAccepted") == Some("True")
        && crd.pointer("/status/acceptedNames") == Some(&accepted_names(crd))
        && storage_recorded
}

fn establish(state: &mut State, mut crd: Value) {
    let accepted = accepted_names(&crd);
    let storage = storage_version(&crd).map(str::to_string);
    if !crd.get("status").is_some_and(Value::is_object) {
        crd["status"] = json!({});
    }
    crd["status"]["acceptedNames"] = accepted;
    let mut stored: Vec<Value> = crd
        .pointer("/status/storedVersions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if let Some(s) = storage
        && !stored.iter().any(|v| v.as_str() == Some(&s))
    {
        stored.push(json!(s));
    }
    crd["status"]["storedVersions"] = json!(stored);
    conditions::set(
        &mut crd,
        "NamesAccepted",
        "True",
        "NoConflicts",
        "no conflicts found",
    );
    conditions::set(
        &mut crd,
        "Established",
        "True",
        "InitialNamesAccepted",
        "the initial names have been accepted",
    );
    write_status(state, crd);
}

fn write_status(state: &mut State, crd: Value) {
    let Some(res) = state.storage_info(&crds_gr()) else {
        return;
    };
    let name = meta::name(&crd).unwrap_or_default().to_string();
    if let Err(err) = objects::update(
        state,
        &res,
        None,
        &name,
        crd,
        Part::Status,
        &WriteOptions::default(),
    ) {
        tracing::debug!(%err, crd = %name, "sandbox: CRD status update failed");
    }
}

/// Deletes every object of the CRD's resource; drops the cleanup finalizer once none is left.
fn cleanup(state: &mut State, crd: &Value) {
    if !meta::finalizers(crd).iter().any(|f| f == CLEANUP_FINALIZER) {
        return;
    }
    let Some(gr) = super::crd_registry::served_versions(crd)
        .first()
        .map(|r| r.group_resource())
    else {
        return;
    };
    let targets: Vec<(String, String)> = state
        .store
        .list(&gr, None)
        .filter(|o| !meta::is_deleting(o))
        .map(|o| {
            (
                meta::namespace(o).unwrap_or_default().to_string(),
                meta::name(o).unwrap_or_default().to_string(),
            )
        })
        .collect();
    if let Some(res) = state.storage_info(&gr) {
        for (ns, name) in targets {
            let _ = objects::delete(state, &res, Some(&ns), &name, &DeleteOptions::default());
        }
    }
    if state.store.list(&gr, None).next().is_some() {
        let mut next = crd.clone();
        conditions::set(
            &mut next,
            "Terminating",
            "True",
            "InstanceDeletionInProgress",
            "CustomResource deletion is in progress",
        );
        if next != *crd {
            write_status(state, next);
        }
        return;
    }
    let Some(res) = state.storage_info(&crds_gr()) else {
        return;
    };
    let mut next = crd.clone();
    let fins: Vec<String> = meta::finalizers(crd)
        .into_iter()
        .filter(|f| f != CLEANUP_FINALIZER)
        .collect();
    meta::set_finalizers(&mut next, &fins);
    let name = meta::name(crd).unwrap_or_default().to_string();
    let _ = objects::update(
        state,
        &res,
        None,
        &name,
        next,
        Part::Main,
        &WriteOptions::default(),
    );
}

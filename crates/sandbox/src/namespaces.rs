//! The namespace controller: a terminating Namespace has all its content deleted (finalizers of
//! that content are honoured, so a stuck finalizer keeps the namespace Terminating, as on a real
//! cluster); once empty its `kubernetes` finalizer is removed and it goes. Active namespaces get
//! their `default` ServiceAccount, as the ServiceAccount controller does.
//!
//! Driven by changes: a namespace is looked at when it or something in it changed.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::meta;
use super::objects::{self, DeleteOptions, Part, WriteOptions};
use super::resources::GroupResource;
use super::state::{State, namespaces_gr};
use super::store::Pending;

fn serviceaccounts_gr() -> GroupResource {
    GroupResource {
        group: String::new(),
        resource: "serviceaccounts".into(),
    }
}

/// Looks at every namespace that `pending` touches (all of them for [`Pending::Everything`]).
pub fn reconcile(state: &mut State, pending: &Pending) {
    let names: BTreeSet<String> = match pending {
        Pending::Everything => state
            .store
            .list(&namespaces_gr(), None)
            .filter_map(|n| meta::name(n).map(str::to_string))
            .collect(),
        Pending::Changes(changes) => changes
            .iter()
            .filter_map(|(gr, ev)| {
                if *gr == namespaces_gr() {
                    meta::name(&ev.object)
                } else {
                    meta::namespace(&ev.object).filter(|ns| !ns.is_empty())
                }
            })
            .map(str::to_string)
            .collect(),
    };
    for name in names {
        let Some(ns) = state.store.get(&namespaces_gr(), "", &name).cloned() else {
            continue;
        };
        if meta::is_deleting(&ns) {
            empty_and_finalize(state, &ns, &name);
        } else {
            ensure_default_service_account(state, &name);
        }
    }
}

/// Namespaced resources that have objects in `ns`.
fn content(state: &State, ns: &str) -> Vec<(GroupResource, Vec<String>)> {
    state
        .store
        .resources()
        .into_iter()
        .filter(|gr| *gr != namespaces_gr())
        .filter_map(|gr| {
            let names: Vec<String> = state
                .store
                .list(&gr, Some(ns))
                .map(|o| meta::name(o).unwrap_or_default().to_string())
                .collect();
            (!names.is_empty()).then_some((gr, names))
        })
        .collect()
}

fn empty_and_finalize(state: &mut State, ns_obj: &Value, ns: &str) {
    for (gr, names) in content(state, ns) {
        let Some(res) = state.storage_info(&gr) else {
            // The resource is no longer served (its CRD is gone): nothing could finalize these.
            for name in names {
                state.store.remove(&gr, ns, &name);
            }
            continue;
        };
        for name in names {
            let deleting = state
                .store
                .get(&gr, ns, &name)
                .is_some_and(|o| meta::is_deleting(o));
            if !deleting {
                let _ = objects::delete(state, &res, Some(ns), &name, &DeleteOptions::default());
            }
        }
    }
    if !content(state, ns).is_empty() {
        return;
    }
    let Some(res) = state.storage_info(&namespaces_gr()) else {
        return;
    };
    let fins: Vec<Value> = ns_obj
        .pointer("/spec/finalizers")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter(|f| f.as_str() != Some("kubernetes"))
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    let next = json!({"metadata": {"name": ns}, "spec": {"finalizers": fins}});
    if let Err(err) = objects::update(
        state,
        &res,
        None,
        ns,
        next,
        Part::Finalize,
        &WriteOptions::default(),
    ) {
        tracing::debug!(%err, namespace = ns, "sandbox namespace controller: finalize failed");
    }
}

fn ensure_default_service_account(state: &mut State, ns: &str) {
    if state
        .store
        .get(&serviceaccounts_gr(), ns, "default")
        .is_some()
    {
        return;
    }
    let Some(res) = state.storage_info(&serviceaccounts_gr()) else {
        return;
    };
    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": ns}});
    if let Err(err) = objects::create(state, &res, Some(ns), sa, &WriteOptions::default()) {
        tracing::debug!(%err, namespace = ns, "sandbox: creating the default ServiceAccount failed");
    }
}

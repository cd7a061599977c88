//! The garbage collector: `metadata.ownerReferences` decide what goes when an owner goes.
//!
//! - background: a dependent whose owners are all gone is deleted; references to owners that
//!   are gone are dropped while another owner remains;
//! - foreground: an owner with the `foregroundDeletion` finalizer has its dependents deleted
//!   first and loses the finalizer once no dependent with `blockOwnerDeletion` is left;
//! - orphan: an owner with the `orphan` finalizer has its references removed from every
//!   dependent, then loses the finalizer.
//!
//! An owner counts as present only if it exists with the referenced uid and, for a namespaced
//! owner, in the dependent's namespace (like the real collector).

use std::collections::HashMap;

use serde_json::Value;

use super::meta;
use super::objects::delete::{FOREGROUND_FINALIZER, ORPHAN_FINALIZER};
use super::objects::{self, DeleteOptions, Part, Propagation, WriteOptions};
use super::resources::GroupResource;
use super::state::State;

/// Where an object lives.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Loc {
    gr: GroupResource,
    ns: String,
    name: String,
}

fn loc(gr: &GroupResource, obj: &Value) -> Loc {
    Loc {
        gr: gr.clone(),
        ns: meta::namespace(obj).unwrap_or_default().to_string(),
        name: meta::name(obj).unwrap_or_default().to_string(),
    }
}

enum Action {
    Delete(Loc, Propagation),
    DropOwnerRefs(Loc, Vec<String>),
    DropFinalizer(Loc, &'static str),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum OwnerState {
    Absent,
    /// Being deleted in the foreground: its dependents must go first.
    WaitingForDependents,
    Present,
}

pub fn sweep(state: &mut State) {
    let actions = plan(state);
    for action in actions {
        apply(state, action);
    }
}

fn owner_state(state: &State, dependent_ns: &str, uid: &str) -> OwnerState {
    let Some((gr, owner)) = state.store.by_uid(uid) else {
        return OwnerState::Absent;
    };
    let namespaced = state.storage_info(gr).is_some_and(|r| r.namespaced);
    if namespaced && meta::namespace(owner).unwrap_or_default() != dependent_ns {
        return OwnerState::Absent;
    }
    if meta::is_deleting(owner)
        && meta::finalizers(owner)
            .iter()
            .any(|f| f == FOREGROUND_FINALIZER)
    {
        OwnerState::WaitingForDependents
    } else {
        OwnerState::Present
    }
}

fn plan(state: &State) -> Vec<Action> {
    let mut actions = Vec::new();
    // owner uid → whether some dependent still blocks its deletion
    let mut blocking: HashMap<String, bool> = HashMap::new();
    let mut dependents: HashMap<String, Vec<Loc>> = HashMap::new();

    for gr in state.store.resources() {
        for obj in state.store.list(&gr, None) {
            let refs = meta::owner_refs(obj);
            if refs.is_empty() {
                continue;
            }
            let here = loc(&gr, obj);
            let mut solid = false;
            let mut waiting = false;
            let mut gone = Vec::new();
            for r in &refs {
                dependents
                    .entry(r.uid.clone())
                    .or_default()
                    .push(here.clone());
                if r.block_owner_deletion {
                    blocking.insert(r.uid.clone(), true);
                }
                match owner_state(state, &here.ns, &r.uid) {
                    OwnerState::Present => solid = true,
                    OwnerState::WaitingForDependents => waiting = true,
                    OwnerState::Absent => gone.push(r.uid.clone()),
                }
            }
            if solid {
                if !gone.is_empty() {
                    actions.push(Action::DropOwnerRefs(here, gone));
                }
            } else if !meta::is_deleting(obj) {
                let policy = if waiting {
                    Propagation::Foreground
                } else {
                    Propagation::Background
                };
                actions.push(Action::Delete(here, policy));
            }
        }
    }

    for gr in state.store.resources() {
        for obj in state.store.list(&gr, None).filter(|o| meta::is_deleting(o)) {
            let fins = meta::finalizers(obj);
            let uid = meta::uid(obj).unwrap_or_default().to_string();
            if fins.iter().any(|f| f == ORPHAN_FINALIZER) {
                for dep in dependents.get(&uid).into_iter().flatten() {
                    actions.push(Action::DropOwnerRefs(dep.clone(), vec![uid.clone()]));
                }
                actions.push(Action::DropFinalizer(loc(&gr, obj), ORPHAN_FINALIZER));
            } else if fins.iter().any(|f| f == FOREGROUND_FINALIZER) && !blocking.contains_key(&uid)
            {
                actions.push(Action::DropFinalizer(loc(&gr, obj), FOREGROUND_FINALIZER));
            }
        }
    }
    actions
}

fn apply(state: &mut State, action: Action) {
    let target = match &action {
        Action::Delete(l, _) | Action::DropOwnerRefs(l, _) | Action::DropFinalizer(l, _) => {
            l.clone()
        }
    };
    let Some(res) = state.storage_info(&target.gr) else {
        return;
    };
    let Some(current) = state
        .store
        .get(&target.gr, &target.ns, &target.name)
        .cloned()
    else {
        return;
    };
    let ns = Some(target.ns.as_str()).filter(|n| !n.is_empty());
    let result = match action {
        Action::Delete(_, policy) => {
            let opts = DeleteOptions {
                propagation: Some(policy),
                ..Default::default()
            };
            objects::delete(state, &res, ns, &target.name, &opts).map(|_| ())
        }
        Action::DropOwnerRefs(_, uids) => {
            let mut next = (*current).clone();
            let uids: Vec<&str> = uids.iter().map(String::as_str).collect();
            meta::remove_owner_refs(&mut next, &uids);
            objects::update(
                state,
                &res,
                ns,
                &target.name,
                next,
                Part::Main,
                &WriteOptions::default(),
            )
            .map(|_| ())
        }
        Action::DropFinalizer(_, finalizer) => {
            let mut next = (*current).clone();
            let fins: Vec<String> = meta::finalizers(&next)
                .into_iter()
                .filter(|f| f != finalizer)
                .collect();
            meta::set_finalizers(&mut next, &fins);
            objects::update(
                state,
                &res,
                ns,
                &target.name,
                next,
                Part::Main,
                &WriteOptions::default(),
            )
            .map(|_| ())
        }
    };
    if let Err(err) = result {
        tracing::debug!(%err, object = %target.name, "sandbox garbage collector: write failed");
    }
}

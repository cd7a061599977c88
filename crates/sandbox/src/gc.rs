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
//!
//! Driven by changes, with the store's owner index: a dependent is looked at when it changed
//! or one of its owners went or started deleting; a deleting owner when it changed or one of
//! its dependents did. Everything is looked at only at start (or after lost changes).

use std::collections::BTreeSet;

use serde_json::Value;

use super::meta;
use super::objects::delete::{FOREGROUND_FINALIZER, ORPHAN_FINALIZER};
use super::objects::{self, DeleteOptions, Part, Propagation, WriteOptions};
use super::resources::GroupResource;
use super::state::State;
use super::store::{EventKind, Location, Pending};

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

fn location(gr: &GroupResource, obj: &Value) -> Location {
    (
        gr.clone(),
        (
            meta::namespace(obj).unwrap_or_default().to_string(),
            meta::name(obj).unwrap_or_default().to_string(),
        ),
    )
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

/// Acts on what `pending` touches.
pub fn reconcile(state: &mut State, pending: &Pending) {
    let actions = plan(state, &touched(state, pending));
    for action in actions {
        apply(state, action);
    }
}

/// What one pass looks at.
#[derive(Default)]
struct Touched {
    /// Objects whose owner references are checked.
    dependents: BTreeSet<Location>,
    /// Objects checked as owners being deleted (orphan, foreground).
    owners: BTreeSet<Location>,
}

fn touched(state: &State, pending: &Pending) -> Touched {
    let mut t = Touched::default();
    let changes = match pending {
        Pending::Changes(changes) => changes,
        Pending::Everything => {
            for gr in state.store.resources() {
                for obj in state.store.list(&gr, None) {
                    if !meta::owner_refs(obj).is_empty() {
                        t.dependents.insert(location(&gr, obj));
                    }
                    if meta::is_deleting(obj) {
                        t.owners.insert(location(&gr, obj));
                    }
                }
            }
            return t;
        }
    };
    for (gr, ev) in changes {
        let obj = &ev.object;
        let removed = ev.kind == EventKind::Deleted;
        if !removed {
            t.dependents.insert(location(gr, obj));
            if meta::is_deleting(obj) {
                t.owners.insert(location(gr, obj));
            }
        }
        // An owner that went or is going: its dependents.
        if (removed || meta::is_deleting(obj))
            && let Some(uid) = meta::uid(obj)
        {
            t.dependents.extend(state.store.dependents_of(uid).cloned());
        }
        // A dependent that changed or went: the owners it names (or named) that are being
        // deleted may be waiting for it.
        let named = meta::owner_refs(obj).into_iter().chain(
            ev.previous
                .as_deref()
                .map(meta::owner_refs)
                .unwrap_or_default(),
        );
        for r in named {
            if let Some((owner_gr, owner)) = state.store.by_uid(&r.uid)
                && meta::is_deleting(owner)
            {
                t.owners.insert(location(owner_gr, owner));
            }
        }
    }
    t
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

fn get<'s>(state: &'s State, at: &Location) -> Option<&'s Value> {
    let (gr, (ns, name)) = at;
    state.store.get(gr, ns, name).map(|o| &**o)
}

/// Whether some object naming `uid` as owner blocks its deletion.
fn blocked(state: &State, uid: &str) -> bool {
    state.store.dependents_of(uid).any(|at| {
        get(state, at).is_some_and(|dep| {
            meta::owner_refs(dep)
                .iter()
                .any(|r| r.uid == uid && r.block_owner_deletion)
        })
    })
}

fn plan(state: &State, touched: &Touched) -> Vec<Action> {
    let mut actions = Vec::new();
    for at in &touched.dependents {
        let Some(obj) = get(state, at) else { continue };
        let refs = meta::owner_refs(obj);
        if refs.is_empty() {
            continue;
        }
        let here = loc(&at.0, obj);
        let mut solid = false;
        let mut waiting = false;
        let mut gone = Vec::new();
        for r in &refs {
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

    for at in &touched.owners {
        let Some(obj) = get(state, at).filter(|o| meta::is_deleting(o)) else {
            continue;
        };
        let fins = meta::finalizers(obj);
        let uid = meta::uid(obj).unwrap_or_default();
        if fins.iter().any(|f| f == ORPHAN_FINALIZER) {
            for dep in state.store.dependents_of(uid) {
                if let Some(d) = get(state, dep) {
                    actions.push(Action::DropOwnerRefs(loc(&dep.0, d), vec![uid.to_string()]));
                }
            }
            actions.push(Action::DropFinalizer(loc(&at.0, obj), ORPHAN_FINALIZER));
        } else if fins.iter().any(|f| f == FOREGROUND_FINALIZER) && !blocked(state, uid) {
            actions.push(Action::DropFinalizer(loc(&at.0, obj), FOREGROUND_FINALIZER));
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

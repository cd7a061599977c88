//! The in-memory object store: objects keyed by resource + namespace + name, one
//! `resourceVersion` counter for the whole store (like etcd's revision), and a bounded log of
//! changes per resource from which watches are served.
//!
//! Two things exist only for the built-in controllers (garbage collector, namespace and CRD
//! cleanup), so that their cost per write does not grow with the size of the store: the
//! changes they have not looked at yet ([`Store::take_pending`]), and an index from an owner's
//! uid to the objects whose `ownerReferences` name it ([`Store::dependents_of`]).

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::Arc;

use serde_json::Value;

use super::meta;
use super::resources::GroupResource;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    Added,
    Modified,
    Deleted,
}

/// One change, as a watch replays it. `previous` lets a watch with a selector turn a change
/// that moves an object out of the selection into a `DELETED` event, as the real server does.
#[derive(Debug)]
pub struct StoredEvent {
    pub rv: u64,
    pub kind: EventKind,
    pub object: Arc<Value>,
    pub previous: Option<Arc<Value>>,
}

/// Namespace ("" for cluster-scoped) and name.
pub type ObjectKey = (String, String);

/// Where an object lives.
pub type Location = (GroupResource, ObjectKey);

/// Changes the built-in controllers have not handled yet; past this many they are dropped and
/// the controllers look at everything once instead (as an informer re-lists).
const PENDING_CAPACITY: usize = 100_000;

/// What the built-in controllers must look at.
#[derive(Debug)]
pub enum Pending {
    /// These changes, oldest first.
    Changes(Vec<(GroupResource, Arc<StoredEvent>)>),
    /// Every object (at start, or after more changes than were kept).
    Everything,
}

impl Pending {
    pub fn is_empty(&self) -> bool {
        matches!(self, Pending::Changes(c) if c.is_empty())
    }
}

#[derive(Debug, Default)]
struct ChangeLog {
    events: VecDeque<Arc<StoredEvent>>,
    /// Highest resourceVersion dropped from the log; a watch must start at or after it.
    evicted_upto: u64,
}

/// A watch asked to resume from a version whose changes are no longer kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooOld {
    pub requested: u64,
    pub oldest_available: u64,
}

#[derive(Debug)]
pub struct Store {
    objects: BTreeMap<GroupResource, BTreeMap<ObjectKey, Arc<Value>>>,
    logs: HashMap<GroupResource, ChangeLog>,
    uids: HashMap<String, (GroupResource, ObjectKey)>,
    /// owner uid → objects whose `ownerReferences` name it (whether or not it exists).
    dependents: HashMap<String, BTreeSet<Location>>,
    pending: Vec<(GroupResource, Arc<StoredEvent>)>,
    pending_overflowed: bool,
    rv: u64,
    log_capacity: usize,
}

/// The uids an object's `ownerReferences` name.
fn owner_uids(obj: &Value) -> impl Iterator<Item = &str> {
    obj.get("metadata")
        .and_then(|m| m.get("ownerReferences"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| r.get("uid")?.as_str())
}

/// The key range of one namespace (all keys when `None`), as bounds for `BTreeMap::range`.
fn namespace_start(ns: Option<&str>) -> Bound<ObjectKey> {
    match ns {
        Some(ns) => Bound::Included((ns.to_string(), String::new())),
        None => Bound::Unbounded,
    }
}

impl Store {
    pub fn new(log_capacity: usize) -> Self {
        Store {
            objects: BTreeMap::new(),
            logs: HashMap::new(),
            uids: HashMap::new(),
            dependents: HashMap::new(),
            pending: Vec::new(),
            pending_overflowed: false,
            rv: 1,
            log_capacity: log_capacity.max(1),
        }
    }

    pub fn current_rv(&self) -> u64 {
        self.rv
    }

    pub fn get(&self, gr: &GroupResource, ns: &str, name: &str) -> Option<&Arc<Value>> {
        self.objects
            .get(gr)?
            .get(&(ns.to_string(), name.to_string()))
    }

    /// Objects of one resource in key order, all namespaces when `ns` is `None`. A namespace
    /// is a key range: listing it costs its own objects, not the resource's.
    pub fn list<'a>(
        &'a self,
        gr: &GroupResource,
        ns: Option<&'a str>,
    ) -> impl Iterator<Item = &'a Arc<Value>> + 'a {
        self.list_from(gr, ns, None).map(|(_, v)| v)
    }

    /// Objects of one resource (of one namespace when `ns` is set) after `after` (exclusive),
    /// in key order; for paged lists.
    pub fn list_from<'a>(
        &'a self,
        gr: &GroupResource,
        ns: Option<&'a str>,
        after: Option<ObjectKey>,
    ) -> impl Iterator<Item = (&'a ObjectKey, &'a Arc<Value>)> + 'a {
        let start = match after {
            Some(k) if ns.is_none_or(|n| k.0.as_str() >= n) => Bound::Excluded(k),
            _ => namespace_start(ns),
        };
        self.objects
            .get(gr)
            .into_iter()
            .flat_map(move |m| m.range((start.clone(), Bound::Unbounded)))
            .take_while(move |((o_ns, _), _)| ns.is_none_or(|n| n == o_ns))
    }

    /// Every resource that currently holds objects.
    pub fn resources(&self) -> Vec<GroupResource> {
        self.objects
            .iter()
            .filter(|(_, m)| !m.is_empty())
            .map(|(gr, _)| gr.clone())
            .collect()
    }

    pub fn by_uid(&self, uid: &str) -> Option<(&GroupResource, &Arc<Value>)> {
        let (gr, key) = self.uids.get(uid)?;
        Some((gr, self.objects.get(gr)?.get(key)?))
    }

    /// The objects whose `ownerReferences` name `uid`.
    pub fn dependents_of(&self, uid: &str) -> impl Iterator<Item = &Location> {
        self.dependents.get(uid).into_iter().flatten()
    }

    /// The changes since the last call, for the built-in controllers.
    pub fn take_pending(&mut self) -> Pending {
        if std::mem::take(&mut self.pending_overflowed) {
            self.pending.clear();
            return Pending::Everything;
        }
        Pending::Changes(std::mem::take(&mut self.pending))
    }

    /// Makes the next [`take_pending`](Self::take_pending) ask for a look at everything.
    pub fn mark_everything_pending(&mut self) {
        self.pending.clear();
        self.pending_overflowed = true;
    }

    fn next_rv(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    /// Keeps the owner index in step with a change from `previous` to `current`.
    fn index_owners(&mut self, at: &Location, previous: Option<&Value>, current: Option<&Value>) {
        let now: Vec<&str> = current.into_iter().flat_map(owner_uids).collect();
        for uid in previous.into_iter().flat_map(owner_uids) {
            if now.contains(&uid) {
                continue;
            }
            if let Some(set) = self.dependents.get_mut(uid) {
                set.remove(at);
                if set.is_empty() {
                    self.dependents.remove(uid);
                }
            }
        }
        for uid in now {
            self.dependents
                .entry(uid.to_string())
                .or_default()
                .insert(at.clone());
        }
    }

    fn record(&mut self, gr: &GroupResource, event: StoredEvent) {
        let event = Arc::new(event);
        if !self.pending_overflowed {
            if self.pending.len() >= PENDING_CAPACITY {
                self.mark_everything_pending();
            } else {
                self.pending.push((gr.clone(), event.clone()));
            }
        }
        let cap = self.log_capacity;
        let log = self.logs.entry(gr.clone()).or_default();
        log.events.push_back(event);
        while log.events.len() > cap {
            if let Some(old) = log.events.pop_front() {
                log.evicted_upto = old.rv;
            }
        }
    }

    /// Stores `obj` (created or replaced), stamping a fresh `resourceVersion`.
    pub fn put(&mut self, gr: &GroupResource, mut obj: Value) -> Arc<Value> {
        let rv = self.next_rv();
        meta::set_str(&mut obj, "resourceVersion", &rv.to_string());
        let key = (
            meta::namespace(&obj).unwrap_or_default().to_string(),
            meta::name(&obj).unwrap_or_default().to_string(),
        );
        let obj = Arc::new(obj);
        if let Some(uid) = meta::uid(&obj) {
            self.uids.insert(uid.to_string(), (gr.clone(), key.clone()));
        }
        let previous = self
            .objects
            .entry(gr.clone())
            .or_default()
            .insert(key.clone(), obj.clone());
        self.index_owners(&(gr.clone(), key), previous.as_deref(), Some(obj.as_ref()));
        let kind = if previous.is_some() {
            EventKind::Modified
        } else {
            EventKind::Added
        };
        self.record(
            gr,
            StoredEvent {
                rv,
                kind,
                object: obj.clone(),
                previous,
            },
        );
        obj
    }

    /// Removes an object; its last state, with the deletion's `resourceVersion`, is returned and
    /// sent to watches.
    pub fn remove(&mut self, gr: &GroupResource, ns: &str, name: &str) -> Option<Arc<Value>> {
        let previous = self
            .objects
            .get_mut(gr)?
            .remove(&(ns.to_string(), name.to_string()))?;
        if let Some(uid) = meta::uid(&previous) {
            self.uids.remove(uid);
        }
        let at = (gr.clone(), (ns.to_string(), name.to_string()));
        self.index_owners(&at, Some(previous.as_ref()), None);
        let rv = self.next_rv();
        let mut last = (*previous).clone();
        meta::set_str(&mut last, "resourceVersion", &rv.to_string());
        let last = Arc::new(last);
        self.record(
            gr,
            StoredEvent {
                rv,
                kind: EventKind::Deleted,
                object: last.clone(),
                previous: Some(previous),
            },
        );
        Some(last)
    }

    /// Forgets every kept change, as etcd compaction does: watches resuming from any earlier
    /// version get `410 Gone`.
    pub fn compact(&mut self) {
        let rv = self.rv;
        for log in self.logs.values_mut() {
            log.events.clear();
            log.evicted_upto = rv;
        }
        for gr in self.objects.keys() {
            self.logs.entry(gr.clone()).or_default().evicted_upto = rv;
        }
    }

    /// Changes of `gr` after `rv`, oldest first; `TooOld` when some were already dropped.
    pub fn events_after(
        &self,
        gr: &GroupResource,
        rv: u64,
    ) -> Result<Vec<Arc<StoredEvent>>, TooOld> {
        let Some(log) = self.logs.get(gr) else {
            return Ok(Vec::new());
        };
        if rv < log.evicted_upto {
            return Err(TooOld {
                requested: rv,
                oldest_available: log.evicted_upto,
            });
        }
        let start = log.events.partition_point(|e| e.rv <= rv);
        Ok(log.events.range(start..).cloned().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn gr() -> GroupResource {
        GroupResource {
            group: "".into(),
            resource: "configmaps".into(),
        }
    }

    fn cm(name: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")}})
    }

    #[test]
    fn resource_versions_increase_across_the_store() {
        let mut s = Store::new(10);
        let a = s.put(&gr(), cm("a"));
        let other = GroupResource {
            group: "".into(),
            resource: "secrets".into(),
        };
        let b = s.put(&other, cm("b"));
        let a2 = s.put(&gr(), cm("a"));
        let rv = |o: &Value| meta::resource_version(o).unwrap().parse::<u64>().unwrap();
        assert!(rv(&a) < rv(&b) && rv(&b) < rv(&a2));
        assert_eq!(s.current_rv(), rv(&a2));
    }

    #[test]
    fn log_replays_changes_after_a_version_and_expires_old_ones() {
        let mut s = Store::new(2);
        let first = s.put(&gr(), cm("a"));
        let start: u64 = meta::resource_version(&first).unwrap().parse().unwrap();
        s.put(&gr(), cm("b"));
        let kinds: Vec<_> = s
            .events_after(&gr(), start)
            .unwrap()
            .iter()
            .map(|e| e.kind)
            .collect();
        assert_eq!(kinds, [EventKind::Added]);
        s.put(&gr(), cm("a"));
        s.remove(&gr(), "default", "b");
        assert!(s.events_after(&gr(), start).is_err());
        let kinds: Vec<_> = s
            .events_after(&gr(), start + 1)
            .unwrap()
            .iter()
            .map(|e| e.kind)
            .collect();
        assert_eq!(kinds, [EventKind::Modified, EventKind::Deleted]);
    }

    fn cm_in(ns: &str, name: &str, owners: &[&str]) -> Value {
        let refs: Vec<Value> = owners
            .iter()
            .map(|uid| json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": uid}))
            .collect();
        json!({"metadata": {"name": name, "namespace": ns, "uid": format!("uid-{ns}-{name}"),
                            "ownerReferences": refs}})
    }

    #[test]
    fn a_namespace_lists_only_its_own_objects_in_order() {
        let mut s = Store::new(10);
        for (ns, name) in [("b", "2"), ("a", "1"), ("b", "1"), ("c", "1"), ("bb", "1")] {
            s.put(&gr(), cm_in(ns, name, &[]));
        }
        let names = |it: Vec<&Arc<Value>>| -> Vec<String> {
            it.iter()
                .map(|o| format!("{}/{}", meta::namespace(o).unwrap(), meta::name(o).unwrap()))
                .collect()
        };
        assert_eq!(names(s.list(&gr(), Some("b")).collect()), ["b/1", "b/2"]);
        assert_eq!(names(s.list(&gr(), None).collect()).len(), 5);
        let after = Some(("b".to_string(), "1".to_string()));
        let rest: Vec<_> = s
            .list_from(&gr(), Some("b"), after)
            .map(|(_, o)| o)
            .collect();
        assert_eq!(names(rest), ["b/2"]);
        assert_eq!(s.list(&gr(), Some("x")).count(), 0);
    }

    #[test]
    fn owner_index_follows_owner_references() {
        let mut s = Store::new(10);
        s.put(&gr(), cm_in("default", "d1", &["owner-a"]));
        s.put(&gr(), cm_in("default", "d2", &["owner-a", "owner-b"]));
        assert_eq!(s.dependents_of("owner-a").count(), 2);
        assert_eq!(s.dependents_of("owner-b").count(), 1);
        // d2 drops owner-a; d1 goes.
        s.put(&gr(), cm_in("default", "d2", &["owner-b"]));
        s.remove(&gr(), "default", "d1");
        assert_eq!(s.dependents_of("owner-a").count(), 0);
        let left: Vec<_> = s.dependents_of("owner-b").cloned().collect();
        assert_eq!(left, [(gr(), ("default".to_string(), "d2".to_string()))]);
    }

    #[test]
    fn pending_changes_are_handed_out_once() {
        let mut s = Store::new(2);
        assert!(matches!(s.take_pending(), Pending::Changes(c) if c.is_empty()));
        s.put(&gr(), cm("a"));
        s.put(&gr(), cm("b"));
        s.remove(&gr(), "default", "a");
        // Not bounded by the watch log (2): the controllers see every change.
        match s.take_pending() {
            Pending::Changes(c) => assert_eq!(
                c.iter().map(|(_, e)| e.kind).collect::<Vec<_>>(),
                [EventKind::Added, EventKind::Added, EventKind::Deleted]
            ),
            Pending::Everything => panic!("nothing was lost"),
        }
        assert!(s.take_pending().is_empty());
        s.mark_everything_pending();
        s.put(&gr(), cm("c"));
        assert!(matches!(s.take_pending(), Pending::Everything));
        assert!(s.take_pending().is_empty());
    }

    #[test]
    fn uid_index_follows_puts_and_removes() {
        let mut s = Store::new(10);
        s.put(&gr(), cm("a"));
        assert!(s.by_uid("uid-a").is_some());
        s.remove(&gr(), "default", "a");
        assert!(s.by_uid("uid-a").is_none());
    }
}

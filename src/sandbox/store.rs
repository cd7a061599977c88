//! The in-memory object store: objects keyed by resource + namespace + name, one
//! `resourceVersion` counter for the whole store (like etcd's revision), and a bounded log of
//! changes per resource from which watches are served.

use std::collections::{BTreeMap, HashMap, VecDeque};
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
    rv: u64,
    log_capacity: usize,
}

impl Store {
    pub fn new(log_capacity: usize) -> Self {
        Store {
            objects: BTreeMap::new(),
            logs: HashMap::new(),
            uids: HashMap::new(),
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

    /// Objects of one resource in key order, all namespaces when `ns` is `None`.
    pub fn list<'a>(
        &'a self,
        gr: &GroupResource,
        ns: Option<&'a str>,
    ) -> impl Iterator<Item = &'a Arc<Value>> + 'a {
        self.objects
            .get(gr)
            .into_iter()
            .flat_map(|m| m.iter())
            .filter(move |((o_ns, _), _)| ns.is_none_or(|n| n == o_ns))
            .map(|(_, v)| v)
    }

    /// Objects of one resource after `after` (exclusive), in key order; for paged lists.
    pub fn list_from<'a>(
        &'a self,
        gr: &GroupResource,
        after: Option<ObjectKey>,
    ) -> impl Iterator<Item = (&'a ObjectKey, &'a Arc<Value>)> + 'a {
        let start = match after {
            Some(k) => std::ops::Bound::Excluded(k),
            None => std::ops::Bound::Unbounded,
        };
        self.objects
            .get(gr)
            .into_iter()
            .flat_map(move |m| m.range((start.clone(), std::ops::Bound::Unbounded)))
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

    fn next_rv(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    fn record(&mut self, gr: &GroupResource, event: StoredEvent) {
        let cap = self.log_capacity;
        let log = self.logs.entry(gr.clone()).or_default();
        log.events.push_back(Arc::new(event));
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
            .insert(key, obj.clone());
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

    #[test]
    fn uid_index_follows_puts_and_removes() {
        let mut s = Store::new(10);
        s.put(&gr(), cm("a"));
        assert!(s.by_uid("uid-a").is_some());
        s.remove(&gr(), "default", "a");
        assert!(s.by_uid("uid-a").is_none());
    }
}

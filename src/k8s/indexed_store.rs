//! The kinds a kube `Controller` drives and other controllers read — CSVs, InstallPlans — kept
//! once, in kube's reflector store (what the `Controller` reads its objects from), with an
//! index by namespace so that a reader of one namespace never scans the cluster
//! (docs/controller-startup.md, "One reconciler shape").

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, RwLock};

use kube::Resource;
use kube::ResourceExt;
use kube_runtime::reflector::store::Writer;
use kube_runtime::reflector::{ObjectRef, Store};
use kube_runtime::watcher::Event;

use crate::k8s::store::{StoreStopped, WatchTask, same_version};

/// Names by namespace.
type Names = HashMap<String, BTreeSet<String>>;

/// A read-only view: kube's store of one kind and its namespace index; cheap to clone.
pub struct IndexedStore<K: Resource<DynamicType = ()> + 'static> {
    reader: Store<K>,
    index: Arc<RwLock<Names>>,
    /// The task keeping the store current (`k8s::shared`); it runs while any view exists.
    watch: Option<Arc<WatchTask>>,
}

impl<K: Resource<DynamicType = ()> + 'static> Clone for IndexedStore<K> {
    fn clone(&self) -> Self {
        Self {
            reader: self.reader.clone(),
            index: Arc::clone(&self.index),
            watch: self.watch.clone(),
        }
    }
}

impl<K> IndexedStore<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    /// kube's store, for a `Controller` and for cluster-wide scans.
    pub fn reader(&self) -> &Store<K> {
        &self.reader
    }

    /// The objects of `namespace`, ordered by name.
    pub fn in_namespace(&self, namespace: &str) -> Vec<Arc<K>> {
        let names: Vec<String> = self
            .index
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(namespace)
            .map(|names| names.iter().cloned().collect())
            .unwrap_or_default();
        names
            .iter()
            .filter_map(|name| self.get(namespace, name))
            .collect()
    }

    /// One object.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<K>> {
        self.reader.get(&ObjectRef::new(name).within(namespace))
    }

    /// Whether `namespace` holds any object.
    pub fn has_namespace(&self, namespace: &str) -> bool {
        self.index
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(namespace)
            .is_some_and(|names| !names.is_empty())
    }

    /// Every object.
    pub fn all(&self) -> Vec<Arc<K>> {
        self.reader.state()
    }

    /// How many objects the store holds.
    pub fn len(&self) -> usize {
        self.reader.len()
    }

    pub fn is_empty(&self) -> bool {
        self.reader.is_empty()
    }

    /// Waits until the first list completed.
    pub async fn wait_until_ready(&self) -> Result<(), StoreStopped> {
        self.reader
            .wait_until_ready()
            .await
            .map_err(|_| StoreStopped::of::<K>())
    }

    pub(crate) fn kept_by(mut self, task: Arc<WatchTask>) -> Self {
        self.watch = Some(task);
        self
    }
}

/// Fills an [`IndexedStore`] from watch events.
pub struct IndexedWriter<K: Resource<DynamicType = ()> + Clone + 'static> {
    writer: Writer<K>,
    index: Arc<RwLock<Names>>,
    /// A re-list in progress: its objects (kube's store shows them at `InitDone`) and names.
    relisting: Option<(Vec<Arc<K>>, Names)>,
    /// Whether a first list completed (readers may have read the store since).
    listed: bool,
}

/// A new empty store and its writer.
pub fn indexed_store<K>() -> (IndexedStore<K>, IndexedWriter<K>)
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    let writer = Writer::default();
    let index = Arc::new(RwLock::new(HashMap::new()));
    let store = IndexedStore {
        reader: writer.as_reader(),
        index: Arc::clone(&index),
        watch: None,
    };
    let writer = IndexedWriter {
        writer,
        index,
        relisting: None,
        listed: false,
    };
    (store, writer)
}

fn key<K: Resource>(obj: &K) -> (String, String) {
    (obj.namespace().unwrap_or_default(), obj.name_any())
}

impl<K> IndexedWriter<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    /// A view of the store this writer fills.
    pub fn reader(&self) -> IndexedStore<K> {
        IndexedStore {
            reader: self.writer.as_reader(),
            index: Arc::clone(&self.index),
            watch: None,
        }
    }

    fn write_index(&self) -> std::sync::RwLockWriteGuard<'_, Names> {
        self.index.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Applies one watch event and returns the objects it reported: the one it stored or
    /// deleted, or, at the end of a re-list, every object that vanished while the watch was
    /// away (a watch reports no deletion for those) and every object the re-list found new or
    /// changed (readers saw the old copy until now: docs/controller-startup.md, "Shared
    /// stores").
    pub fn apply_owned(&mut self, event: Event<K>) -> Vec<Arc<K>> {
        let before_relist =
            matches!(event, Event::InitDone).then(|| self.writer.as_reader().state());
        self.writer.apply_watcher_event(&event);
        match event {
            Event::Init => {
                self.relisting = Some(Default::default());
                Vec::new()
            }
            Event::InitApply(obj) => {
                let (namespace, name) = key(&obj);
                let obj = Arc::new(obj);
                let (objects, names) = self.relisting.get_or_insert_with(Default::default);
                names.entry(namespace).or_default().insert(name);
                objects.push(Arc::clone(&obj));
                vec![obj]
            }
            Event::InitDone => {
                let (relisted, names) = self.relisting.take().unwrap_or_default();
                let before = before_relist.unwrap_or_default();
                let old: HashMap<(String, String), &Arc<K>> =
                    before.iter().map(|o| (key(o.as_ref()), o)).collect();
                let vanished = before.iter().filter(|o| {
                    let (namespace, name) = key(o.as_ref());
                    !names.get(&namespace).is_some_and(|n| n.contains(&name))
                });
                let reader = self.writer.as_reader();
                let fresh = relisted
                    .iter()
                    .filter(|_| self.listed)
                    .filter(|o| {
                        old.get(&key(o.as_ref()))
                            .is_none_or(|b| !same_version(b.as_ref(), o.as_ref()))
                    })
                    .filter_map(|o| {
                        let (namespace, name) = key(o.as_ref());
                        reader.get(&ObjectRef::new(&name).within(&namespace))
                    });
                let reported = vanished.cloned().chain(fresh).collect();
                *self.write_index() = names;
                self.listed = true;
                reported
            }
            Event::Apply(obj) => {
                let (namespace, name) = key(&obj);
                self.write_index()
                    .entry(namespace.clone())
                    .or_default()
                    .insert(name.clone());
                // The store's own copy, not a second one.
                let stored = self
                    .writer
                    .as_reader()
                    .get(&ObjectRef::new(&name).within(&namespace));
                vec![stored.unwrap_or_else(|| Arc::new(obj))]
            }
            Event::Delete(obj) => {
                let (namespace, name) = key(&obj);
                let mut index = self.write_index();
                if let Some(names) = index.get_mut(&namespace) {
                    names.remove(&name);
                    if names.is_empty() {
                        index.remove(&namespace);
                    }
                }
                drop(index);
                vec![Arc::new(obj)]
            }
        }
    }

    /// Every object stored, and every object of a re-list in progress (some twice).
    pub fn snapshot(&self) -> Vec<Arc<K>> {
        let mut all = self.writer.as_reader().state();
        if let Some((relisted, _)) = &self.relisting {
            all.extend(relisted.iter().cloned());
        }
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k8s::store::config_map as object;
    use k8s_openapi::api::core::v1::ConfigMap;

    fn names(objects: &[Arc<ConfigMap>]) -> Vec<String> {
        objects.iter().map(|o| o.name_any()).collect()
    }

    #[tokio::test]
    async fn objects_are_found_by_namespace_and_a_relist_swaps_in_whole() {
        let (store, mut writer) = indexed_store::<ConfigMap>();
        writer.apply_owned(Event::Init);
        for (ns, name) in [("b", "z"), ("a", "y"), ("b", "x")] {
            let reported = writer.apply_owned(Event::InitApply(object(ns, name)));
            assert_eq!(reported.len(), 1);
        }
        assert!(
            store.in_namespace("b").is_empty(),
            "a list in progress is not visible"
        );
        assert_eq!(
            names(&writer.snapshot()).len(),
            3,
            "but a late subscriber hears of it"
        );
        writer.apply_owned(Event::InitDone);
        store.wait_until_ready().await.unwrap();
        assert_eq!(names(&store.in_namespace("b")), ["x", "z"]);
        assert!(store.has_namespace("a"));

        let applied = writer.apply_owned(Event::Apply(object("a", "w"))).remove(0);
        assert!(
            Arc::ptr_eq(&applied, &store.get("a", "w").unwrap()),
            "a change is reported with the stored object, not a copy"
        );
        writer.apply_owned(Event::Delete(object("a", "y")));
        assert_eq!(names(&store.in_namespace("a")), ["w"]);

        writer.apply_owned(Event::Init);
        writer.apply_owned(Event::InitApply(object("c", "v")));
        assert_eq!(
            names(&store.in_namespace("a")),
            ["w"],
            "the old view stays until InitDone"
        );
        let mut reported = names(&writer.apply_owned(Event::InitDone));
        reported.sort();
        assert_eq!(
            reported,
            ["v", "w", "x", "z"],
            "what went while the watch was away is reported, and what came"
        );
        assert!(store.in_namespace("a").is_empty());
        assert_eq!(names(&store.all()), ["v"]);
        assert_eq!(store.len(), 1);
    }
}

//! Reflector stores indexed by namespace (docs/controller-startup.md, "Shared stores").
//!
//! `kube_runtime`'s `Store` answers "all objects" and "one object"; a reconciler that works on one
//! namespace would copy the whole cluster's objects on every sync and filter them. This store
//! keeps each namespace's objects apart, so reading a namespace costs what it holds. Cluster-scoped
//! objects live under the namespace `""`.
//!
//! One writer fills the store from a watch; any number of readers share it read-only. A re-list
//! (the watch's `Init` … `InitDone`) is buffered and swapped in whole, so readers never see a
//! half-listed cluster, and the store is ready only after the first list completed.

use std::collections::HashMap;
use std::sync::{Arc, RwLock, RwLockReadGuard};

use futures::{Stream, StreamExt};
use kube::api::Api;
use kube::{Resource, ResourceExt};
use kube_runtime::WatchStreamExt;
use kube_runtime::watcher::{self, Event};
use serde::de::DeserializeOwned;

type Namespaces<K> = HashMap<String, ByName<K>>;

/// One namespace's objects, sorted by name. A sorted vector, not a map: most namespaces hold
/// one or two objects of a kind (their `default` ServiceAccount), where a map's nodes and a
/// second copy of every name would cost more than the objects' pointers.
struct ByName<K>(Vec<Arc<K>>);

impl<K> Default for ByName<K> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

fn name_of<K: Resource>(obj: &Arc<K>) -> &str {
    obj.meta().name.as_deref().unwrap_or_default()
}

impl<K: Resource> ByName<K> {
    fn position(&self, name: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|o| name_of(o).cmp(name))
    }

    fn get(&self, name: &str) -> Option<&Arc<K>> {
        self.position(name).ok().and_then(|i| self.0.get(i))
    }

    fn insert(&mut self, obj: Arc<K>) {
        match self.position(name_of(&obj)) {
            Ok(i) => self.0[i] = obj,
            Err(i) => self.0.insert(i, obj),
        }
    }

    fn remove(&mut self, name: &str) {
        if let Ok(i) = self.position(name) {
            self.0.remove(i);
        }
    }
}

/// A read-only, namespace-indexed view of one kind; cheap to clone and share.
pub struct NamespacedStore<K> {
    objects: Arc<RwLock<Namespaces<K>>>,
    ready: tokio::sync::watch::Receiver<bool>,
    /// The task keeping a shared store current (`k8s::shared`): it runs while any view of the
    /// store exists, and stops with the last one.
    watch: Option<Arc<WatchTask>>,
}

impl<K> Clone for NamespacedStore<K> {
    fn clone(&self) -> Self {
        Self {
            objects: Arc::clone(&self.objects),
            ready: self.ready.clone(),
            watch: self.watch.clone(),
        }
    }
}

/// A spawned watch task, aborted when dropped.
pub(crate) struct WatchTask(pub(crate) tokio::task::AbortHandle);

impl Drop for WatchTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A store stopped before its first list completed (its watch ended, which happens only at
/// shutdown).
#[derive(Debug, thiserror::Error)]
#[error("the watch of {kind} ended before its first list completed")]
pub struct StoreStopped {
    /// The kind the store holds.
    pub kind: String,
}

impl StoreStopped {
    pub(crate) fn of<K: Resource>() -> Self
    where
        K::DynamicType: Default,
    {
        Self {
            kind: K::kind(&K::DynamicType::default()).into_owned(),
        }
    }
}

impl<K: Resource> NamespacedStore<K> {
    fn read(&self) -> RwLockReadGuard<'_, Namespaces<K>> {
        // A writer that panicked mid-update leaves a whole map behind (every update replaces
        // one entry or the whole map), so the poisoned value is still consistent.
        self.objects.read().unwrap_or_else(|p| p.into_inner())
    }

    /// The objects of `namespace`, ordered by name.
    pub fn in_namespace(&self, namespace: &str) -> Vec<Arc<K>> {
        self.read()
            .get(namespace)
            .map(|objects| objects.0.clone())
            .unwrap_or_default()
    }

    /// One object.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<K>> {
        self.read()
            .get(namespace)
            .and_then(|objects| objects.get(name).cloned())
    }

    /// Whether `namespace` holds any object.
    pub fn has_namespace(&self, namespace: &str) -> bool {
        self.read().get(namespace).is_some_and(|o| !o.0.is_empty())
    }

    /// The namespaces that hold objects.
    pub fn namespaces(&self) -> Vec<String> {
        self.read().keys().cloned().collect()
    }

    /// Every object (cluster-wide views, counts).
    pub fn all(&self) -> Vec<Arc<K>> {
        self.read()
            .values()
            .flat_map(|objects| objects.0.iter().cloned())
            .collect()
    }

    /// How many objects the store holds.
    pub fn len(&self) -> usize {
        self.read().values().map(|o| o.0.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the first list completed.
    pub fn is_ready(&self) -> bool {
        *self.ready.borrow()
    }

    /// Waits until the first list completed.
    pub async fn wait_until_ready(&self) -> Result<(), StoreStopped>
    where
        K::DynamicType: Default,
    {
        let mut ready = self.ready.clone();
        ready
            .wait_for(|ready| *ready)
            .await
            .map(|_| ())
            .map_err(|_| StoreStopped::of::<K>())
    }

    /// This view, keeping `task` running for as long as it or a clone of it exists.
    pub(crate) fn kept_by(mut self, task: Arc<WatchTask>) -> Self {
        self.watch = Some(task);
        self
    }
}

/// Fills a [`NamespacedStore`] from watch events.
pub struct StoreWriter<K> {
    objects: Arc<RwLock<Namespaces<K>>>,
    ready: tokio::sync::watch::Sender<bool>,
    /// A re-list in progress: swapped in whole at `InitDone`.
    relisting: Option<Namespaces<K>>,
}

/// A new empty store and its writer.
pub fn namespaced_store<K>() -> (NamespacedStore<K>, StoreWriter<K>) {
    let objects = Arc::new(RwLock::new(HashMap::new()));
    let (ready_tx, ready_rx) = tokio::sync::watch::channel(false);
    (
        NamespacedStore {
            objects: Arc::clone(&objects),
            ready: ready_rx,
            watch: None,
        },
        StoreWriter {
            objects,
            ready: ready_tx,
            relisting: None,
        },
    )
}

fn insert<K: Resource>(namespaces: &mut Namespaces<K>, obj: Arc<K>) {
    let namespace = obj.meta().namespace.clone().unwrap_or_default();
    namespaces.entry(namespace).or_default().insert(obj);
}

/// Whether two copies of an object are the same version of it (same uid and resourceVersion).
pub(crate) fn same_version<K: Resource>(a: &K, b: &K) -> bool {
    a.meta().uid == b.meta().uid && a.meta().resource_version == b.meta().resource_version
}

impl<K: Resource + Clone> StoreWriter<K> {
    /// A view of the store this writer fills.
    pub fn reader(&self) -> NamespacedStore<K> {
        NamespacedStore {
            objects: Arc::clone(&self.objects),
            ready: self.ready.subscribe(),
            watch: None,
        }
    }

    /// Applies one watch event and returns the objects it reported: the one it stored or
    /// deleted, or, at the end of a re-list, every object that vanished while the watch was
    /// away (a watch reports no deletion for those) and every object the re-list found new or
    /// changed (readers saw the old copy until now).
    pub fn apply_owned(&mut self, event: Event<K>) -> Vec<Arc<K>> {
        match event {
            Event::Init => {
                self.relisting = Some(HashMap::new());
                Vec::new()
            }
            Event::InitApply(obj) => {
                let obj = Arc::new(obj);
                let buffer = self.relisting.get_or_insert_with(HashMap::new);
                insert(buffer, Arc::clone(&obj));
                vec![obj]
            }
            Event::InitDone => {
                let listed = self.relisting.take().unwrap_or_default();
                // Readers read the old store until the swap: an object the re-list reported as
                // new or changed was not yet what a reader found. Reported again now, it is
                // (docs/controller-startup.md, "Shared stores"). Before the first list nobody
                // read the store, so nothing is reported twice.
                let was_ready = *self.ready.borrow();
                let old = std::mem::replace(
                    &mut *self.objects.write().unwrap_or_else(|p| p.into_inner()),
                    listed,
                );
                self.ready.send_replace(true);
                let current = self.objects.read().unwrap_or_else(|p| p.into_inner());
                let fresh = current
                    .iter()
                    .filter(|_| was_ready)
                    .flat_map(|(namespace, objects)| {
                        let before = old.get(namespace);
                        objects.0.iter().filter(move |o| {
                            before
                                .and_then(|b| b.get(name_of(o)))
                                .is_none_or(|b| !same_version(b.as_ref(), o.as_ref()))
                        })
                    })
                    .cloned()
                    .collect::<Vec<_>>();
                let vanished = old.into_iter().flat_map(|(namespace, objects)| {
                    let kept = current.get(&namespace);
                    objects
                        .0
                        .into_iter()
                        .filter(move |o| kept.and_then(|k| k.get(name_of(o))).is_none())
                });
                vanished.chain(fresh).collect()
            }
            Event::Apply(obj) => {
                let obj = Arc::new(obj);
                let mut objects = self.objects.write().unwrap_or_else(|p| p.into_inner());
                insert(&mut objects, Arc::clone(&obj));
                vec![obj]
            }
            Event::Delete(obj) => {
                let namespace = obj.meta().namespace.clone().unwrap_or_default();
                let mut objects = self.objects.write().unwrap_or_else(|p| p.into_inner());
                if let Some(in_namespace) = objects.get_mut(&namespace) {
                    in_namespace.remove(&obj.name_any());
                    if in_namespace.0.is_empty() {
                        objects.remove(&namespace);
                    }
                }
                vec![Arc::new(obj)]
            }
        }
    }

    /// Every object stored, and every object of a re-list in progress (some twice): what a
    /// subscriber joining now must hear of to know everything the watch has reported.
    pub fn snapshot(&self) -> Vec<Arc<K>> {
        let stored = self.objects.read().unwrap_or_else(|p| p.into_inner());
        let relisted = self.relisting.iter().flat_map(|n| n.values());
        stored
            .values()
            .chain(relisted)
            .flat_map(|objects| objects.0.iter().cloned())
            .collect()
    }
}

/// Every object a watch reported as changed or deleted (or, at the end of a re-list, as
/// vanished, new or changed), after its store took the change in: the stored object itself,
/// not a copy.
pub type Changes<K> = std::pin::Pin<Box<dyn Stream<Item = Arc<K>> + Send>>;

/// A watch's parameters: all namespaces, `labels` if given, initial lists in pages of
/// `page_size` objects (one unpaged list of a big cluster would be the start-up memory peak).
pub fn watch_config(labels: Option<&str>, page_size: u32) -> watcher::Config {
    let config = watcher::Config::default().page_size(page_size);
    match labels {
        Some(labels) => config.labels(labels),
        None => config,
    }
}

/// Passes the object of a watch event through `slim`.
pub(crate) fn slim_event<K>(event: &mut Event<K>, slim: fn(&mut K)) {
    match event {
        Event::Apply(o) | Event::Delete(o) | Event::InitApply(o) => slim(o),
        Event::Init | Event::InitDone => {}
    }
}

/// Watches `api` (restarting on errors with back-off), passes each object through `slim`, keeps
/// a [`NamespacedStore`] current and yields every object that changed or went. The watch runs
/// as the returned stream is polled: for a kind one controller alone reads (several read a
/// shared one, `k8s::shared`).
pub fn reflect_namespaced<K>(
    api: Api<K>,
    config: watcher::Config,
    slim: fn(&mut K),
) -> (NamespacedStore<K>, Changes<K>)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    let (store, mut writer) = namespaced_store();
    let changes = watcher::watcher(api, config)
        .backoff(crate::k8s::watch_backoff::WatchBackoff::default())
        .flat_map(move |event| {
            let changed = match event {
                Ok(mut event) => {
                    slim_event(&mut event, slim);
                    writer.apply_owned(event)
                }
                Err(error) => {
                    tracing::debug!(%error, kind = %K::kind(&K::DynamicType::default()), "watch error; the watch restarts");
                    Vec::new()
                }
            };
            futures::stream::iter(changed)
        });
    (store, Box::pin(changes))
}

/// Keeps every field (for [`reflect_namespaced`] callers that slim nothing).
pub fn keep_all<K>(_: &mut K) {}

/// A ConfigMap `namespace/name`: the object the stores' tests keep.
#[cfg(test)]
pub(crate) fn config_map(namespace: &str, name: &str) -> k8s_openapi::api::core::v1::ConfigMap {
    let mut cm = k8s_openapi::api::core::v1::ConfigMap::default();
    cm.metadata.namespace = Some(namespace.to_owned());
    cm.metadata.name = Some(name.to_owned());
    cm
}

#[cfg(test)]
mod tests {
    use super::config_map as cm;
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    #[test]
    fn objects_are_kept_per_namespace_in_name_order() {
        let (store, mut writer) = namespaced_store::<ConfigMap>();
        writer.apply_owned(Event::Init);
        for (ns, name) in [("b", "z"), ("a", "y"), ("b", "x")] {
            writer.apply_owned(Event::InitApply(cm(ns, name)));
        }
        assert!(store.is_empty(), "a list in progress is not visible");
        writer.apply_owned(Event::InitDone);
        let names: Vec<String> = store
            .in_namespace("b")
            .iter()
            .map(|o| o.name_any())
            .collect();
        assert_eq!(names, ["x", "z"]);
        assert_eq!(store.len(), 3);
        assert!(store.get("a", "y").is_some());
        assert!(store.in_namespace("c").is_empty());
    }

    #[test]
    fn a_delete_empties_its_namespace_and_a_relist_replaces_everything() {
        let (store, mut writer) = namespaced_store::<ConfigMap>();
        writer.apply_owned(Event::Init);
        writer.apply_owned(Event::InitDone);
        writer.apply_owned(Event::Apply(cm("a", "one")));
        writer.apply_owned(Event::Apply(cm("b", "two")));
        writer.apply_owned(Event::Delete(cm("a", "one")));
        assert!(!store.has_namespace("a"));
        assert_eq!(store.namespaces(), ["b"]);
        writer.apply_owned(Event::Init);
        writer.apply_owned(Event::InitApply(cm("c", "three")));
        assert_eq!(
            store.namespaces(),
            ["b"],
            "the old view stays until InitDone"
        );
        let reported = writer.apply_owned(Event::InitDone);
        assert_eq!(store.namespaces(), ["c"]);
        assert_eq!(
            reported.iter().map(|o| o.name_any()).collect::<Vec<_>>(),
            ["two", "three"],
            "what went while the watch was away is reported, and what came"
        );
    }

    fn versioned(name: &str, version: &str) -> ConfigMap {
        let mut o = cm("a", name);
        o.metadata.uid = Some(format!("uid-{name}"));
        o.metadata.resource_version = Some(version.to_owned());
        o
    }

    /// A reader woken by an `InitApply` may read the store before the swap and miss the
    /// object: whatever the re-list changed is reported again once the store holds it.
    #[test]
    fn a_relist_reports_again_what_it_changed_once_readers_can_see_it() {
        let (store, mut writer) = namespaced_store::<ConfigMap>();
        writer.apply_owned(Event::Init);
        writer.apply_owned(Event::InitApply(versioned("same", "1")));
        writer.apply_owned(Event::InitApply(versioned("edited", "1")));
        let first = writer.apply_owned(Event::InitDone);
        assert!(
            first.is_empty(),
            "the first list is reported once, as listed"
        );
        writer.apply_owned(Event::Init);
        for o in [
            versioned("same", "1"),
            versioned("edited", "7"),
            versioned("created", "8"),
        ] {
            let reported = writer.apply_owned(Event::InitApply(o.clone()));
            assert_eq!(reported.len(), 1);
            if o.name_any() == "created" {
                assert!(store.get("a", "created").is_none(), "not visible mid-list");
            }
        }
        let mut again: Vec<String> = writer
            .apply_owned(Event::InitDone)
            .iter()
            .map(|o| o.name_any())
            .collect();
        again.sort();
        assert_eq!(again, ["created", "edited"]);
        assert!(store.get("a", "created").is_some());
    }

    #[tokio::test]
    async fn ready_after_the_first_list() {
        let (store, mut writer) = namespaced_store::<ConfigMap>();
        let waiting = tokio::spawn({
            let store = store.clone();
            async move { store.wait_until_ready().await.is_ok() }
        });
        writer.apply_owned(Event::Init);
        writer.apply_owned(Event::InitDone);
        assert!(waiting.await.unwrap());
        drop(writer);
        assert!(store.wait_until_ready().await.is_ok(), "ready stays ready");
    }
}

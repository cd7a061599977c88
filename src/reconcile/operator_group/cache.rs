//! The watches the OperatorGroup side reads from, one per kind, shared by all its loops.
//!
//! Memory is the point here (docs/operator-groups.md §10 cost figures): CSVs are watched twice with opposite
//! label selectors — originals in full, copies reduced on arrival to a [`CopyRecord`] of a few
//! strings and two hashes — and namespaces as metadata only, without managed fields or
//! annotations.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{Api, PartialObjectMeta};
use kube::{Client, Resource, ResourceExt};
use kube_runtime::WatchStreamExt;
use kube_runtime::reflector::{self, Store, store::Writer};
use kube_runtime::watcher::{self, Event};
use serde::de::DeserializeOwned;
use tokio::sync::watch;

use crate::api::keys::{COPIED_FROM_LABEL, OWNER_KIND_LABEL};
use crate::api::{ClusterServiceVersion, OlmConfig, OperatorGroup};
use crate::operator_group::cluster_roles::OPERATOR_GROUP_OWNER_KIND;
use crate::operator_group::copied_csv::{CopyHashes, CopyRecord, copy_record};

use super::ObjectKey;

/// Objects per page of an initial list: copies are whole CSVs on the wire, so big pages would
/// make the start-up list the memory peak.
const LIST_PAGE_SIZE: u32 = 50;

/// Read access to everything the loops need.
#[derive(Clone)]
pub struct Caches {
    pub groups: Store<OperatorGroup>,
    /// CSVs without `olm.copiedFrom`.
    pub csvs: Store<ClusterServiceVersion>,
    pub namespaces: Store<PartialObjectMeta<Namespace>>,
    /// ClusterRoles labelled `olm.owner.kind=OperatorGroup`.
    pub group_roles: Store<ClusterRole>,
    pub olm_configs: Store<OlmConfig>,
    pub copies: CopyCache,
    /// The hashes each original's copies should have, as last computed by the copy loop; lets
    /// a copy event requeue its original only when the copy is actually stale.
    pub desired_copies: Arc<RwLock<HashMap<ObjectKey, CopyHashes>>>,
}

impl Caches {
    /// Every OperatorGroup in `namespace`.
    pub fn groups_in(&self, namespace: &str) -> Vec<Arc<OperatorGroup>> {
        let mut groups = self
            .groups
            .state_filter(|og| og.metadata.namespace.as_deref() == Some(namespace));
        groups.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        groups
    }

    /// Every original CSV in `namespace`.
    pub fn csvs_in(&self, namespace: &str) -> Vec<Arc<ClusterServiceVersion>> {
        self.csvs
            .state_filter(|csv| csv.metadata.namespace.as_deref() == Some(namespace))
    }

    /// Names of namespaces that exist and are not being deleted, with their labels.
    pub fn live_namespaces(&self) -> Vec<Arc<PartialObjectMeta<Namespace>>> {
        self.namespaces
            .state_filter(|ns| ns.metadata.deletion_timestamp.is_none())
    }

    pub fn olm_config(&self) -> Option<Arc<OlmConfig>> {
        self.olm_configs
            .find(|c| c.metadata.name.as_deref() == Some(crate::api::olm_config::OLM_CONFIG_NAME))
    }

    pub async fn wait_until_ready(&self) {
        // A dropped writer means the watch task ended, which only happens at shutdown.
        let _ = self.groups.wait_until_ready().await;
        let _ = self.csvs.wait_until_ready().await;
        let _ = self.namespaces.wait_until_ready().await;
        let _ = self.group_roles.wait_until_ready().await;
        let _ = self.olm_configs.wait_until_ready().await;
        self.copies.wait_until_ready().await;
    }
}

/// Copies by original, reduced to [`CopyRecord`]s.
#[derive(Clone)]
pub struct CopyCache {
    state: Arc<RwLock<CopyState>>,
    ready: watch::Sender<bool>,
}

#[derive(Default)]
struct CopyState {
    /// original → (copy namespace → record)
    by_original: HashMap<ObjectKey, BTreeMap<String, CopyRecord>>,
    /// copy → its original
    location: HashMap<ObjectKey, ObjectKey>,
    /// Records gathered during a re-list, swapped in at its end.
    relist: Option<Vec<CopyRecord>>,
}

/// What a copy event changed, for routing.
#[derive(Debug, Clone)]
pub enum CopyChange {
    Upserted(CopyRecord),
    Removed { original: ObjectKey },
    Relisted(Vec<ObjectKey>),
}

impl Default for CopyCache {
    fn default() -> Self {
        Self {
            state: Arc::default(),
            ready: watch::channel(false).0,
        }
    }
}

impl CopyCache {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, CopyState> {
        // Every write below leaves the maps consistent before anything can panic.
        self.state.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, CopyState> {
        self.state.write().unwrap_or_else(|p| p.into_inner())
    }

    /// The copies of the original `original`.
    pub fn of(&self, original: &ObjectKey) -> Vec<CopyRecord> {
        self.read()
            .by_original
            .get(original)
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default()
    }

    /// The copy of `original` in `namespace`.
    pub fn get(&self, original: &ObjectKey, namespace: &str) -> Option<CopyRecord> {
        self.read()
            .by_original
            .get(original)?
            .get(namespace)
            .cloned()
    }

    /// Every original that has copies.
    pub fn originals(&self) -> Vec<ObjectKey> {
        self.read().by_original.keys().cloned().collect()
    }

    /// Number of copies known.
    pub fn len(&self) -> usize {
        self.read().location.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub async fn wait_until_ready(&self) {
        let mut ready = self.ready.subscribe();
        let _ = ready.wait_for(|r| *r).await;
    }

    fn insert(state: &mut CopyState, record: CopyRecord) {
        let copy = ObjectKey::new(&record.namespace, &record.name);
        let original = ObjectKey::new(&record.copied_from, &record.name);
        Self::remove(state, &copy);
        state.location.insert(copy, original.clone());
        state
            .by_original
            .entry(original)
            .or_default()
            .insert(record.namespace.clone(), record);
    }

    fn remove(state: &mut CopyState, copy: &ObjectKey) -> Option<ObjectKey> {
        let original = state.location.remove(copy)?;
        if let Some(copies) = state.by_original.get_mut(&original) {
            copies.remove(&copy.namespace);
            if copies.is_empty() {
                state.by_original.remove(&original);
            }
        }
        Some(original)
    }

    /// Applies one watch event (a full copied CSV, reduced here and dropped).
    pub fn apply(&self, event: Event<ClusterServiceVersion>) -> Option<CopyChange> {
        match event {
            Event::Apply(csv) => {
                let Some(record) = copy_record(&csv) else {
                    return self.forget(&csv);
                };
                Self::insert(&mut self.write(), record.clone());
                Some(CopyChange::Upserted(record))
            }
            Event::Delete(csv) => self.forget(&csv),
            Event::Init => {
                self.write().relist = Some(Vec::new());
                None
            }
            Event::InitApply(csv) => {
                if let Some(record) = copy_record(&csv) {
                    self.write()
                        .relist
                        .get_or_insert_with(Vec::new)
                        .push(record);
                }
                None
            }
            Event::InitDone => {
                let mut state = self.write();
                let records = state.relist.take().unwrap_or_default();
                let mut before: Vec<ObjectKey> = state.by_original.keys().cloned().collect();
                state.by_original.clear();
                state.location.clear();
                for record in records {
                    Self::insert(&mut state, record);
                }
                before.extend(state.by_original.keys().cloned());
                drop(state);
                self.ready.send_replace(true);
                before.sort();
                before.dedup();
                Some(CopyChange::Relisted(before))
            }
        }
    }

    fn forget(&self, csv: &ClusterServiceVersion) -> Option<CopyChange> {
        let copy = ObjectKey::new(
            csv.metadata.namespace.as_deref().unwrap_or_default(),
            &csv.name_any(),
        );
        let original = Self::remove(&mut self.write(), &copy)?;
        Some(CopyChange::Removed { original })
    }
}

/// A stream of applied store events for `api`, keeping the store in `writer` current.
fn reflected<K>(
    writer: Writer<K>,
    api: Api<K>,
    config: watcher::Config,
    strip: impl FnMut(&mut K) + Send + 'static,
) -> impl Stream<Item = Event<K>> + Send
where
    K: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let kind = K::kind(&()).to_string();
    reflector::reflector(
        writer,
        watcher::watcher(api, config)
            .default_backoff()
            .modify(strip),
    )
    .filter_map(move |event| {
        let kind = kind.clone();
        async move {
            match event {
                Ok(event) => Some(event),
                Err(err) => {
                    tracing::warn!(%kind, error = %err, "watch failed; retrying");
                    None
                }
            }
        }
    })
}

fn strip_managed_fields<K: Resource>(obj: &mut K) {
    obj.meta_mut().managed_fields = None;
}

/// The event streams feeding [`Caches`]; each must be driven for the caches to fill.
pub struct Feeds {
    pub groups: futures::stream::BoxStream<'static, Event<OperatorGroup>>,
    pub csvs: futures::stream::BoxStream<'static, Event<ClusterServiceVersion>>,
    pub copies: futures::stream::BoxStream<'static, Event<ClusterServiceVersion>>,
    pub namespaces: futures::stream::BoxStream<'static, Event<PartialObjectMeta<Namespace>>>,
    pub group_roles: futures::stream::BoxStream<'static, Event<ClusterRole>>,
    pub olm_configs: futures::stream::BoxStream<'static, Event<OlmConfig>>,
}

/// Opens the watches.
pub fn watch_all(client: &Client) -> (Caches, Feeds) {
    let paged = || watcher::Config::default().page_size(LIST_PAGE_SIZE);
    let (groups, groups_w) = reflector::store();
    let (csvs, csvs_w) = reflector::store();
    let (namespaces, namespaces_w) = reflector::store();
    let (group_roles, group_roles_w) = reflector::store();
    let (olm_configs, olm_configs_w) = reflector::store();

    let namespace_feed = reflector::reflector(
        namespaces_w,
        watcher::watcher(
            Api::<PartialObjectMeta<Namespace>>::all(client.clone()),
            paged(),
        )
        .default_backoff()
        .modify(|ns: &mut PartialObjectMeta<Namespace>| {
            ns.metadata.managed_fields = None;
            ns.metadata.annotations = None;
        }),
    )
    .filter_map(|event| async move {
        event
            .inspect_err(|err| tracing::warn!(error = %err, "namespace watch failed; retrying"))
            .ok()
    });

    let copies = CopyCache::default();
    let copy_feed = watcher::watcher(
        Api::<ClusterServiceVersion>::all(client.clone()),
        paged().labels(COPIED_FROM_LABEL),
    )
    .default_backoff()
    .filter_map(|event| async move {
        event
            .inspect_err(|err| tracing::warn!(error = %err, "copied CSV watch failed; retrying"))
            .ok()
    });

    let caches = Caches {
        groups,
        csvs,
        namespaces,
        group_roles,
        olm_configs,
        copies,
        desired_copies: Arc::default(),
    };
    let feeds = Feeds {
        groups: reflected(
            groups_w,
            Api::all(client.clone()),
            paged(),
            strip_managed_fields,
        )
        .boxed(),
        csvs: reflected(
            csvs_w,
            Api::all(client.clone()),
            paged().labels(&format!("!{COPIED_FROM_LABEL}")),
            strip_managed_fields,
        )
        .boxed(),
        copies: copy_feed.boxed(),
        namespaces: namespace_feed.boxed(),
        group_roles: reflected(
            group_roles_w,
            Api::all(client.clone()),
            paged().labels(&format!("{OWNER_KIND_LABEL}={OPERATOR_GROUP_OWNER_KIND}")),
            strip_managed_fields,
        )
        .boxed(),
        olm_configs: reflected(
            olm_configs_w,
            Api::all(client.clone()),
            paged(),
            strip_managed_fields,
        )
        .boxed(),
    };
    (caches, feeds)
}

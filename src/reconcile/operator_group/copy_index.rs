//! The copied CSVs, indexed by their original: copies are whole CSVs on the wire, reduced on
//! arrival to a [`CopyRecord`] of a few strings and two hashes (docs/operator-groups.md, cost
//! figures), so 2,000 copies of one operator cost kilobytes, not its CSV 2,000 times.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use kube::ResourceExt;
use kube_runtime::watcher::Event;
use tokio::sync::watch;

use crate::api::ClusterServiceVersion;
use crate::operator_group::copied_csv::{CopyRecord, copy_record};

use super::namespaced_name::NamespacedName;

/// Copies by original, reduced to [`CopyRecord`]s.
#[derive(Clone)]
pub struct CopyIndex {
    state: Arc<RwLock<CopyState>>,
    ready: watch::Sender<bool>,
}

#[derive(Default)]
struct CopyState {
    /// original → (copy namespace → record)
    by_original: HashMap<NamespacedName, BTreeMap<String, CopyRecord>>,
    /// copy → its original
    location: HashMap<NamespacedName, NamespacedName>,
    /// Records gathered during a re-list, swapped in at its end.
    relist: Option<Vec<CopyRecord>>,
}

/// What a copy event changed, for routing.
#[derive(Debug, Clone)]
pub enum CopyChange {
    Upserted(CopyRecord),
    Removed { original: NamespacedName },
    Relisted(Vec<NamespacedName>),
}

impl Default for CopyIndex {
    fn default() -> Self {
        Self {
            state: Arc::default(),
            ready: watch::channel(false).0,
        }
    }
}

impl CopyIndex {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, CopyState> {
        // Every write below leaves the maps consistent before anything can panic.
        self.state.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, CopyState> {
        self.state.write().unwrap_or_else(|p| p.into_inner())
    }

    /// The copies of the original `original`.
    pub fn of(&self, original: &NamespacedName) -> Vec<CopyRecord> {
        self.read()
            .by_original
            .get(original)
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default()
    }

    /// The copy of `original` in `namespace`.
    pub fn get(&self, original: &NamespacedName, namespace: &str) -> Option<CopyRecord> {
        self.read()
            .by_original
            .get(original)?
            .get(namespace)
            .cloned()
    }

    /// Every original that has copies.
    pub fn originals(&self) -> Vec<NamespacedName> {
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
        let copy = NamespacedName::new(&record.namespace, &record.name);
        let original = NamespacedName::new(&record.copied_from, &record.name);
        Self::remove(state, &copy);
        state.location.insert(copy, original.clone());
        state
            .by_original
            .entry(original)
            .or_default()
            .insert(record.namespace.clone(), record);
    }

    fn remove(state: &mut CopyState, copy: &NamespacedName) -> Option<NamespacedName> {
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
                let mut before: Vec<NamespacedName> = state.by_original.keys().cloned().collect();
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
        let copy = NamespacedName::new(
            csv.metadata.namespace.as_deref().unwrap_or_default(),
            &csv.name_any(),
        );
        let original = Self::remove(&mut self.write(), &copy)?;
        Some(CopyChange::Removed { original })
    }
}

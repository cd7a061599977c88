//! `CatalogCache`: every CatalogSource's loaded catalog and health, shared by the controller
//! (the only writer) and every reader (Subscription resolution, status reporting).
//!
//! Readers get cheap snapshots: an `Arc<CatalogIndex>` pointer clone, never a copy of the
//! catalog. A catalog that cannot be reached or is invalid keeps its own entry with
//! `healthy: false` and a reason in plain words; it never hides or blocks other catalogs
//! (the README's "failure belongs to the object that caused it").

pub mod image_catalogs;

use crate::api::CatalogRef;
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use jiff::Timestamp;
use tokio::sync::{broadcast, watch};

use crate::catalog::CatalogIndex;
use crate::metrics::Metrics;

/// Why a catalog is (un)healthy, for conditions and `kubectl describe`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HealthReason {
    /// Content loaded and current.
    Ready,
    /// Known, content not loaded yet.
    Loading,
    /// The registry cannot be reached (or stopped answering).
    Unreachable,
    /// The content failed validation (or could not be parsed).
    Invalid,
    /// The CatalogSource itself is wrong (`SpecInvalidError`, missing ConfigMap, …).
    SpecInvalid,
}

impl HealthReason {
    pub fn as_str(self) -> &'static str {
        match self {
            HealthReason::Ready => "Ready",
            HealthReason::Loading => "Loading",
            HealthReason::Unreachable => "Unreachable",
            HealthReason::Invalid => "Invalid",
            HealthReason::SpecInvalid => "SpecInvalid",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogHealth {
    pub healthy: bool,
    pub reason: HealthReason,
    /// Plain words: what is wrong and with which address/object, empty when healthy.
    pub message: String,
    /// When the health last changed.
    pub last_updated: Timestamp,
}

impl CatalogHealth {
    pub fn ready(now: Timestamp) -> CatalogHealth {
        CatalogHealth {
            healthy: true,
            reason: HealthReason::Ready,
            message: String::new(),
            last_updated: now,
        }
    }

    pub fn unhealthy(
        reason: HealthReason,
        message: impl Into<String>,
        now: Timestamp,
    ) -> CatalogHealth {
        CatalogHealth {
            healthy: false,
            reason,
            message: message.into(),
            last_updated: now,
        }
    }

    fn same_as(&self, other: &CatalogHealth) -> bool {
        self.healthy == other.healthy
            && self.reason == other.reason
            && self.message == other.message
    }
}

/// What a reader sees of one catalog.
#[derive(Debug, Clone)]
pub struct CatalogSnapshot {
    pub key: CatalogRef,
    /// The CatalogSource's UID (so a deleted-and-recreated catalog is told apart).
    pub uid: Option<String>,
    /// `spec.priority`: higher is preferred when several catalogs provide a dependency.
    pub priority: i64,
    /// The last successfully loaded content; may be stale when `health` is not healthy
    /// (e.g. the registry went away after a load). `None` until the first load.
    pub index: Option<Arc<CatalogIndex>>,
    pub health: CatalogHealth,
}

/// A change to one catalog (content, health, existence).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogChange {
    pub key: CatalogRef,
    /// The catalog is gone.
    pub removed: bool,
}

/// The shared cache. Cheap to share (`Arc<CatalogCache>`); all methods take `&self`.
#[derive(Debug)]
pub struct CatalogCache {
    entries: RwLock<HashMap<CatalogRef, CatalogSnapshot>>,
    version: watch::Sender<u64>,
    events: broadcast::Sender<CatalogChange>,
    /// Counts each catalog's new content (`catalog_source_snapshots_total`), whatever loaded it.
    metrics: Option<Arc<Metrics>>,
}

impl Default for CatalogCache {
    fn default() -> Self {
        CatalogCache::new()
    }
}

impl CatalogCache {
    pub fn new() -> CatalogCache {
        let (version, _) = watch::channel(0);
        let (events, _) = broadcast::channel(256);
        CatalogCache {
            entries: RwLock::new(HashMap::new()),
            version,
            events,
            metrics: None,
        }
    }

    /// A cache that counts every catalog content it is given in `metrics`
    /// (`catalog_source_snapshots_total{namespace,name}`: each full read of a catalog, from a
    /// registry, an image or a ConfigMap, ends here).
    pub fn with_metrics(metrics: Arc<Metrics>) -> CatalogCache {
        CatalogCache {
            metrics: Some(metrics),
            ..CatalogCache::new()
        }
    }

    /// Catalogs a Subscription in `namespace` may use: those in `namespace` plus those in the
    /// global catalog namespace, sorted by namespace then name.
    pub fn visible_from(&self, namespace: &str, global_namespace: &str) -> Vec<CatalogSnapshot> {
        let mut out: Vec<CatalogSnapshot> = self
            .read()
            .values()
            .filter(|s| s.key.namespace == namespace || s.key.namespace == global_namespace)
            .cloned()
            .collect();
        out.sort_by(|a, b| a.key.cmp(&b.key));
        out
    }

    pub fn get(&self, key: &CatalogRef) -> Option<CatalogSnapshot> {
        self.read().get(key).cloned()
    }

    /// Every catalog, sorted by namespace then name.
    pub fn all(&self) -> Vec<CatalogSnapshot> {
        let mut out: Vec<CatalogSnapshot> = self.read().values().cloned().collect();
        out.sort_by(|a, b| a.key.cmp(&b.key));
        out
    }

    /// A counter bumped on every change; `changed().await` wakes readers that re-resolve.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.version.subscribe()
    }

    /// Which catalog changed, for readers that requeue selectively. A lagging receiver gets
    /// `RecvError::Lagged` and should treat every catalog as changed.
    pub fn events(&self) -> broadcast::Receiver<CatalogChange> {
        self.events.subscribe()
    }

    // ---- writes: the CatalogSource controller only -----------------------------------------

    /// Registers a catalog (or updates its uid/priority). A new one starts `Loading`; a catalog
    /// whose uid changed starts over.
    pub fn register(&self, key: &CatalogRef, uid: Option<&str>, priority: i64, now: Timestamp) {
        let changed = {
            let mut entries = self.write();
            match entries.get_mut(key) {
                Some(s) if s.uid.as_deref() == uid => {
                    let changed = s.priority != priority;
                    s.priority = priority;
                    changed
                }
                _ => {
                    entries.insert(
                        key.clone(),
                        CatalogSnapshot {
                            key: key.clone(),
                            uid: uid.map(str::to_owned),
                            priority,
                            index: None,
                            health: CatalogHealth::unhealthy(
                                HealthReason::Loading,
                                "catalog content not loaded yet",
                                now,
                            ),
                        },
                    );
                    true
                }
            }
        };
        if changed {
            self.notify(key, false);
        }
    }

    /// New content for a catalog, which is then healthy.
    pub fn set_index(&self, key: &CatalogRef, index: Arc<CatalogIndex>, now: Timestamp) {
        let changed = {
            let mut entries = self.write();
            let Some(s) = entries.get_mut(key) else {
                return; // removed meanwhile: a late load must not resurrect it
            };
            s.index = Some(index);
            if let Some(metrics) = &self.metrics {
                metrics.catalog_source_snapshot(&key.namespace, &key.name);
            }
            let ready = CatalogHealth::ready(now);
            if !s.health.same_as(&ready) {
                s.health = ready;
            }
            true
        };
        if changed {
            self.notify(key, false);
        }
    }

    /// Records health; notifies only when it changed (not on every identical report).
    /// `drop_index` forgets loaded content (invalid content must not be resolved against).
    pub fn set_health(&self, key: &CatalogRef, health: CatalogHealth, drop_index: bool) {
        let changed = {
            let mut entries = self.write();
            let Some(s) = entries.get_mut(key) else {
                return;
            };
            let mut changed = false;
            if drop_index && s.index.is_some() {
                s.index = None;
                changed = true;
            }
            if !s.health.same_as(&health) {
                s.health = health;
                changed = true;
            }
            changed
        };
        if changed {
            self.notify(key, false);
        }
    }

    pub fn remove(&self, key: &CatalogRef) {
        let removed = self.write().remove(key).is_some();
        if removed {
            self.notify(key, true);
        }
    }

    fn notify(&self, key: &CatalogRef, removed: bool) {
        self.version.send_modify(|v| *v += 1);
        // No receivers is fine: nobody is interested yet.
        let _ = self.events.send(CatalogChange {
            key: key.clone(),
            removed,
        });
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<CatalogRef, CatalogSnapshot>> {
        // A panic while holding the lock leaves plain data behind; keep serving it.
        self.entries.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<CatalogRef, CatalogSnapshot>> {
        self.entries.write().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Timestamp {
        "2026-01-01T00:00:00Z".parse().unwrap()
    }

    #[test]
    fn global_catalogs_are_visible_everywhere_others_only_at_home() {
        let cache = CatalogCache::new();
        for (ns, name) in [
            ("olm", "community"),
            ("team-a", "private"),
            ("team-b", "other"),
        ] {
            cache.register(&CatalogRef::new(ns, name), Some("u"), 0, now());
        }
        let names = |ns: &str| -> Vec<String> {
            cache
                .visible_from(ns, "olm")
                .iter()
                .map(|s| s.key.to_string())
                .collect()
        };
        assert_eq!(names("team-a"), ["olm/community", "team-a/private"]);
        assert_eq!(names("team-b"), ["olm/community", "team-b/other"]);
        assert_eq!(names("olm"), ["olm/community"]);
        assert_eq!(names("elsewhere"), ["olm/community"]);
    }

    #[test]
    fn every_new_content_counts_as_a_snapshot_of_its_catalog() {
        let metrics = Arc::new(Metrics::new());
        let cache = CatalogCache::with_metrics(Arc::clone(&metrics));
        let (a, b) = (CatalogRef::new("olm", "a"), CatalogRef::new("team", "b"));
        cache.register(&a, Some("1"), 0, now());
        cache.register(&b, Some("2"), 0, now());
        cache.set_index(&a, Arc::new(CatalogIndex::default()), now());
        cache.set_index(&a, Arc::new(CatalogIndex::default()), now());
        cache.set_index(&b, Arc::new(CatalogIndex::default()), now());
        // A load that ends after its catalog was removed is not published, so not counted.
        cache.remove(&b);
        cache.set_index(&b, Arc::new(CatalogIndex::default()), now());
        let text = metrics.encode();
        let mut samples: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("catalog_source_snapshots_total{"))
            .collect();
        samples.sort_unstable();
        assert_eq!(
            samples,
            [
                r#"catalog_source_snapshots_total{namespace="olm",name="a"} 2"#,
                r#"catalog_source_snapshots_total{namespace="team",name="b"} 1"#,
            ],
            "{text}"
        );
    }

    #[test]
    fn readers_share_the_index_and_see_health_per_catalog() {
        let cache = CatalogCache::new();
        let good = CatalogRef::new("olm", "good");
        let bad = CatalogRef::new("olm", "bad");
        cache.register(&good, Some("1"), 10, now());
        cache.register(&bad, Some("2"), 0, now());
        let index = Arc::new(CatalogIndex::default());
        cache.set_index(&good, Arc::clone(&index), now());
        cache.set_health(
            &bad,
            CatalogHealth::unhealthy(HealthReason::Unreachable, "cannot connect to x:1", now()),
            false,
        );
        let snap = cache.get(&good).unwrap();
        assert!(snap.health.healthy);
        assert_eq!(snap.priority, 10);
        assert!(
            Arc::ptr_eq(snap.index.as_ref().unwrap(), &index),
            "pointer clone, not a copy"
        );
        let bad_snap = cache.get(&bad).unwrap();
        assert!(!bad_snap.health.healthy);
        assert_eq!(bad_snap.health.reason, HealthReason::Unreachable);
        assert!(bad_snap.index.is_none());
        // The bad one changes nothing about the good one.
        assert!(cache.get(&good).unwrap().health.healthy);
    }

    #[tokio::test]
    async fn changes_are_announced_only_when_something_changed() {
        let cache = CatalogCache::new();
        let key = CatalogRef::new("ns", "c");
        let mut version = cache.changes();
        let mut events = cache.events();
        cache.register(&key, Some("1"), 0, now());
        assert!(version.has_changed().unwrap());
        version.borrow_and_update();
        assert_eq!(
            events.recv().await.unwrap(),
            CatalogChange {
                key: key.clone(),
                removed: false
            }
        );

        let down = CatalogHealth::unhealthy(HealthReason::Unreachable, "down", now());
        cache.set_health(&key, down.clone(), false);
        version.borrow_and_update();
        let later = CatalogHealth {
            last_updated: "2026-01-02T00:00:00Z".parse().unwrap(),
            ..down
        };
        cache.set_health(&key, later, false);
        assert!(
            !version.has_changed().unwrap(),
            "same health again is not a change"
        );

        cache.register(&key, Some("1"), 0, now());
        assert!(
            !version.has_changed().unwrap(),
            "re-registering unchanged is not a change"
        );
        cache.register(&key, Some("2"), 0, now());
        assert!(
            version.has_changed().unwrap(),
            "recreated catalog starts over"
        );
        assert_eq!(
            cache.get(&key).unwrap().health.reason,
            HealthReason::Loading
        );

        cache.remove(&key);
        assert!(cache.get(&key).is_none());
        cache.set_index(&key, Arc::new(CatalogIndex::default()), now());
        assert!(
            cache.get(&key).is_none(),
            "late load does not resurrect a removed catalog"
        );
    }
}

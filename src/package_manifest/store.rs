//! `ManifestStore`: the PackageManifests of every catalog, built once per catalog content and
//! answered from memory (docs/packagemanifests.md §5). A request only filters and copies; it
//! never reads a catalog.
//!
//! `sync` is handed every catalog's current metadata and index; it rebuilds a catalog's list
//! only when its metadata changed or its index is a different `Arc` (new content), and forgets
//! catalogs that are gone.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use crate::api::CatalogRef;
use crate::catalog::CatalogIndex;

use super::build::{BuiltPackage, CatalogMeta, ElidedPackage, PackageIcon, build_catalog};
use super::selector::LabelSelector;
use super::types::PackageManifest;

/// One catalog's PackageManifests, sorted by package name.
#[derive(Debug)]
pub struct CatalogManifests {
    pub meta: CatalogMeta,
    index: Arc<CatalogIndex>,
    pub packages: Vec<BuiltPackage>,
}

impl CatalogManifests {
    fn package(&self, name: &str) -> Option<&BuiltPackage> {
        self.packages
            .binary_search_by(|p| p.manifest.metadata.name.as_str().cmp(name))
            .ok()
            .map(|i| &self.packages[i])
    }
}

/// Which namespaces a request reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope<'a> {
    /// `kubectl get packagemanifests -A`: every catalog, each shown in its own namespace.
    AllNamespaces,
    /// `-n X`: X's catalogs and the global catalog namespace's, all shown in X.
    Namespace(&'a str),
}

/// What changed in a `sync`, for logs.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SyncReport {
    pub rebuilt: Vec<CatalogRef>,
    pub removed: Vec<CatalogRef>,
    pub elided: Vec<ElidedPackage>,
}

#[derive(Debug)]
pub struct ManifestStore {
    global_namespace: String,
    catalogs: RwLock<HashMap<CatalogRef, Arc<CatalogManifests>>>,
}

impl ManifestStore {
    pub fn new(global_namespace: impl Into<String>) -> ManifestStore {
        ManifestStore {
            global_namespace: global_namespace.into(),
            catalogs: RwLock::default(),
        }
    }

    pub fn global_namespace(&self) -> &str {
        &self.global_namespace
    }

    /// Makes the store hold exactly `current` (catalogs with loaded content), rebuilding only
    /// what changed. Building happens outside the lock, so readers are never held up by it.
    pub fn sync(&self, current: Vec<(CatalogMeta, Arc<CatalogIndex>)>) -> SyncReport {
        let before: HashMap<CatalogRef, Arc<CatalogManifests>> = self.read().clone();
        let mut report = SyncReport::default();
        let mut next = HashMap::with_capacity(current.len());
        for (meta, index) in current {
            let key = CatalogRef::new(&meta.namespace, &meta.name);
            let entry = match before.get(&key) {
                Some(old) if old.meta == meta && Arc::ptr_eq(&old.index, &index) => Arc::clone(old),
                _ => {
                    let (packages, elided) = build_catalog(&meta, &index);
                    report.elided.extend(elided);
                    report.rebuilt.push(key.clone());
                    Arc::new(CatalogManifests {
                        meta,
                        index,
                        packages,
                    })
                }
            };
            next.insert(key, entry);
        }
        report.removed = before
            .keys()
            .filter(|k| !next.contains_key(*k))
            .cloned()
            .collect();
        report.rebuilt.sort();
        report.removed.sort();
        *self.write() = next;
        report
    }

    /// Catalogs a scope reads, own namespace first, each group sorted by catalog name.
    fn catalogs_in(&self, scope: Scope<'_>) -> Vec<Arc<CatalogManifests>> {
        let all = self.read();
        let mut out: Vec<Arc<CatalogManifests>> = match scope {
            Scope::AllNamespaces => all.values().cloned().collect(),
            Scope::Namespace(ns) => all
                .values()
                .filter(|c| c.meta.namespace == ns || c.meta.namespace == self.global_namespace)
                .cloned()
                .collect(),
        };
        let home = match scope {
            Scope::Namespace(ns) => ns,
            Scope::AllNamespaces => "",
        };
        out.sort_by(|a, b| {
            (a.meta.namespace != home, &a.meta.namespace, &a.meta.name).cmp(&(
                b.meta.namespace != home,
                &b.meta.namespace,
                &b.meta.name,
            ))
        });
        out
    }

    /// A list: matching packages, sorted by name, then own-namespace catalogs before global
    /// ones; in a namespace scope every item carries the requested namespace (as OLM does, so
    /// clients do not complain of a namespace mismatch).
    pub fn list(
        &self,
        scope: Scope<'_>,
        labels: &LabelSelector,
        name: Option<&str>,
    ) -> Vec<PackageManifest> {
        let catalogs = self.catalogs_in(scope);
        let mut out: Vec<(usize, PackageManifest)> = Vec::new();
        for (rank, catalog) in catalogs.iter().enumerate() {
            let candidates: Box<dyn Iterator<Item = &BuiltPackage>> = match name {
                Some(n) => Box::new(catalog.package(n).into_iter()),
                None => Box::new(catalog.packages.iter()),
            };
            for p in candidates.filter(|p| labels.matches_map(&p.manifest.metadata.labels)) {
                let mut manifest = p.manifest.clone();
                if let Scope::Namespace(ns) = scope {
                    manifest.metadata.namespace = ns.to_owned();
                }
                out.push((rank, manifest));
            }
        }
        out.sort_by(|(ra, a), (rb, b)| {
            a.metadata
                .name
                .cmp(&b.metadata.name)
                .then_with(|| ra.cmp(rb))
        });
        out.into_iter().map(|(_, m)| m).collect()
    }

    /// A get in `namespace`: the namespace's own catalogs are preferred over global ones.
    pub fn get(
        &self,
        namespace: &str,
        name: &str,
    ) -> Option<(PackageManifest, Option<PackageIcon>)> {
        self.catalogs_in(Scope::Namespace(namespace))
            .iter()
            .find_map(|c| c.package(name))
            .map(|p| {
                let mut manifest = p.manifest.clone();
                manifest.metadata.namespace = namespace.to_owned();
                (manifest, p.icon.clone())
            })
    }

    /// How many PackageManifests the store holds (every catalog).
    pub fn len(&self) -> usize {
        self.read().values().map(|c| c.packages.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<CatalogRef, Arc<CatalogManifests>>> {
        // A panic while holding the lock leaves plain data behind; keep serving it.
        self.catalogs.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<CatalogRef, Arc<CatalogManifests>>> {
        self.catalogs.write().unwrap_or_else(|p| p.into_inner())
    }
}

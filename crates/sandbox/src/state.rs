//! Everything the server holds behind its one lock: the store, the CRD-served resources and the
//! small allocators (Service cluster IPs).

use std::sync::Arc;

use serde_json::json;

use super::crd_registry::CrdRegistry;
use super::resources::{self, GroupResource, ResourceInfo};
use super::store::Store;

pub struct State {
    pub store: Store,
    pub crds: CrdRegistry,
    builtins: Vec<Arc<ResourceInfo>>,
    next_cluster_ip: u32,
}

pub fn namespaces_gr() -> GroupResource {
    GroupResource {
        group: String::new(),
        resource: "namespaces".into(),
    }
}

pub fn crds_gr() -> GroupResource {
    GroupResource {
        group: "apiextensions.k8s.io".into(),
        resource: "customresourcedefinitions".into(),
    }
}

/// Namespaces every cluster starts with.
const INITIAL_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public", "kube-node-lease"];

impl State {
    #[cfg(test)]
    pub fn new(watch_log_capacity: usize) -> Self {
        Self::with_crd_establish_delay(watch_log_capacity, std::time::Duration::ZERO)
    }

    /// A state whose new CRDs answer only `delay` after they are stored (see
    /// [`super::ApiServerOptions::crd_establish_delay`]).
    pub fn with_crd_establish_delay(watch_log_capacity: usize, delay: std::time::Duration) -> Self {
        let mut state = State {
            store: Store::new(watch_log_capacity),
            crds: CrdRegistry::with_establish_delay(delay),
            builtins: resources::builtins(),
            next_cluster_ip: 1,
        };
        for ns in INITIAL_NAMESPACES {
            let obj = json!({
                "apiVersion": "v1", "kind": "Namespace",
                "metadata": {
                    "name": ns,
                    "uid": super::meta::new_uid(),
                    "creationTimestamp": super::meta::now_rfc3339(),
                    "labels": {"kubernetes.io/metadata.name": ns},
                },
                "spec": {"finalizers": ["kubernetes"]},
                "status": {"phase": "Active"},
            });
            state.store.put(&namespaces_gr(), obj);
        }
        state
    }

    /// The resource served at `group/version/plural`, built-in or from a CRD.
    pub fn resolve(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceInfo>> {
        self.builtins
            .iter()
            .find(|r| r.group == group && r.version == version && r.plural == plural)
            .cloned()
            .or_else(|| self.crds.find(group, version, plural))
    }

    /// Every served resource version (the group list of discovery).
    pub fn all_resources(&self) -> Vec<Arc<ResourceInfo>> {
        self.builtins
            .iter()
            .chain(self.crds.resources())
            .cloned()
            .collect()
    }

    /// The resource versions that answer requests: [`Self::all_resources`] less the CRDs still
    /// being established (a version's own discovery document is one of those requests).
    pub fn established_resources(&self) -> Vec<Arc<ResourceInfo>> {
        self.builtins
            .iter()
            .chain(self.crds.established_resources())
            .cloned()
            .collect()
    }

    /// The version whose rules apply to stored objects of `gr` (built-in, or the CRD's storage
    /// version); `None` once the resource is no longer served.
    pub fn storage_info(&self, gr: &GroupResource) -> Option<Arc<ResourceInfo>> {
        if let Some(b) = self
            .builtins
            .iter()
            .find(|r| r.group == gr.group && r.plural == gr.resource)
        {
            return Some(b.clone());
        }
        let served = self.crds.get(gr)?;
        served
            .versions
            .iter()
            .find(|r| r.version == served.storage_version)
            .or_else(|| served.versions.first())
            .cloned()
    }

    /// Called after every write so that CRD changes are served at once.
    pub fn after_write(&mut self, gr: &GroupResource, name: &str) {
        if *gr == crds_gr() {
            let crd = self.store.get(gr, "", name).cloned();
            self.crds.update(name, crd.as_deref());
        }
    }

    /// A fresh ClusterIP from 10.96.0.0/16 (never reused; the sandbox has no kube-proxy anyway).
    pub fn allocate_cluster_ip(&mut self) -> String {
        let n = self.next_cluster_ip;
        self.next_cluster_ip = self.next_cluster_ip.wrapping_add(1).max(1);
        format!("10.96.{}.{}", (n >> 8) & 0xff, n & 0xff)
    }
}

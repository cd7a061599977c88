//! What queues a CatalogSource's sync (docs/catalog.md §1): a change of the catalog itself
//! (deletions included, so a deleted catalog's sync forgets it), of its registry connection, of
//! a registry object it owns, or of a ConfigMap it reads.

use std::sync::Arc;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{Api, PartialObjectMeta};
use kube::{Client, Resource, ResourceExt};
use kube_runtime::WatchStreamExt;
use kube_runtime::watcher;
use tokio::sync::mpsc::UnboundedReceiver;

use crate::api::CatalogRef;
use crate::api::CatalogSource;
use crate::k8s::store::Changes;
use crate::k8s::watch_backoff::WatchBackoff;
use crate::metrics::CountedKind;
use crate::reconcile::work_queue::WorkQueue;

use super::{Reconciler, catalog_of, key_of};

/// The change streams the controller's queue is fed from.
pub(super) struct Triggers {
    pub catalogs: Changes<CatalogSource>,
    /// The key of each catalog whose registry connection changed state.
    pub connections: UnboundedReceiver<CatalogRef>,
    pub pods: Changes<Pod>,
    pub services: Changes<Service>,
    pub service_accounts: Changes<ServiceAccount>,
    pub network_policies: Changes<NetworkPolicy>,
    pub namespaces: Changes<PartialObjectMeta<Namespace>>,
    pub config_maps: std::pin::Pin<Box<dyn Stream<Item = PartialObjectMeta<ConfigMap>> + Send>>,
}

/// Every ConfigMap of the cluster that changed or went, by its metadata only (its content is
/// read by name when a catalog syncs: docs/catalog.md §4).
pub(super) fn config_map_changes(
    client: &Client,
) -> std::pin::Pin<Box<dyn Stream<Item = PartialObjectMeta<ConfigMap>> + Send>> {
    let changes = watcher::watcher(
        Api::<PartialObjectMeta<ConfigMap>>::all(client.clone()),
        watcher::Config::default(),
    )
    .backoff(WatchBackoff::default())
    .touched_objects()
    .filter_map(|change| futures::future::ready(change.ok()));
    Box::pin(changes)
}

/// Feeds `queue` from `triggers` until the watches end (only at shutdown).
pub(super) async fn drive(r: Arc<Reconciler>, queue: WorkQueue<CatalogRef>, triggers: Triggers) {
    let catalogs = {
        let (r, queue) = (Arc::clone(&r), queue.clone());
        triggers.catalogs.for_each(move |cs| {
            r.ctx
                .metrics
                .set_count(CountedKind::CatalogSource, r.catalogs.len());
            queue.add(key_of(&cs));
            futures::future::ready(())
        })
    };
    let connections = {
        let queue = queue.clone();
        tokio_stream::wrappers::UnboundedReceiverStream::new(triggers.connections).for_each(
            move |key| {
                queue.add(key);
                futures::future::ready(())
            },
        )
    };
    // A registry object queues the catalog owning it.
    let registry = {
        let queue = queue.clone();
        futures::stream::select_all([
            triggers.pods.map(|o| catalog_of(o.meta())).boxed(),
            triggers.services.map(|o| catalog_of(o.meta())).boxed(),
            triggers
                .service_accounts
                .map(|o| catalog_of(o.meta()))
                .boxed(),
            triggers
                .network_policies
                .map(|o| catalog_of(o.meta()))
                .boxed(),
            // Keeps the namespace store current; a label change waits for the next sync.
            triggers.namespaces.map(|_| None).boxed(),
        ])
        .for_each(move |key| {
            if let Some(key) = key {
                queue.add(key);
            }
            futures::future::ready(())
        })
    };
    // A ConfigMap queues the catalogs reading it.
    let config_maps = {
        let (r, queue) = (Arc::clone(&r), queue.clone());
        triggers.config_maps.for_each(move |cm| {
            let namespace = cm.namespace().unwrap_or_default();
            let name = cm.name_any();
            queue.add_all(
                r.catalogs
                    .in_namespace(&namespace)
                    .iter()
                    .filter(|cs| cs.spec.config_map.as_deref() == Some(name.as_str()))
                    .map(|cs| key_of(cs)),
            );
            futures::future::ready(())
        })
    };
    tokio::select! {
        () = catalogs => {}
        () = connections => {}
        () = registry => {}
        () = config_maps => {}
    }
}

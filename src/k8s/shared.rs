//! Watches shared by every controller of the process (docs/controller-startup.md, "One
//! reconciler shape"). A kind that several controllers read — Namespaces, OperatorGroups,
//! Subscriptions, ServiceAccounts, RBAC, CRDs, APIServices, OLM's Services, Deployments and
//! Secrets, webhook configurations, OperatorConditions, CSVs, InstallPlans and CatalogSources —
//! is watched once and kept once, reduced to what all its readers need (`k8s::slim`); each
//! controller subscribes to its changes.
//!
//! The first subscriber starts the watch in a task of its own. The task runs while any view of
//! the store exists (the process's [`SharedWatches`] keeps one) and stops with the last.
//! A subscriber joining late first hears of every object already reported, then of every
//! change, so it misses nothing a watch of its own would have told it.

use std::sync::{Arc, Mutex, OnceLock};

use futures::StreamExt;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Secret, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::{Api, PartialObjectMeta};
use kube::{Client, Resource};
use kube_runtime::WatchStreamExt;
use kube_runtime::watcher::{self, Event};
use serde::de::DeserializeOwned;
use tokio::sync::mpsc::UnboundedSender;

use crate::api::keys::{COPIED_FROM_LABEL, MANAGED_LABEL, MANAGED_LABEL_VALUE};
use crate::api::{
    CatalogSource, ClusterServiceVersion, InstallPlan, Operator, OperatorCondition, OperatorGroup,
    Subscription,
};
use crate::k8s::indexed_store::{IndexedStore, IndexedWriter, indexed_store};
use crate::k8s::slim::{slim, slim_crd};
use crate::k8s::store::{
    NamespacedStore, StoreWriter, WatchTask, namespaced_store, slim_event, watch_config,
};
use crate::k8s::watch_backoff::WatchBackoff;

pub use crate::k8s::store::Changes;

/// Objects per page of an initial list, so a cluster's thousands of namespaces or
/// ServiceAccounts never arrive in one response.
const LIST_PAGE_SIZE: u32 = 100;

/// Objects per page for CSVs, InstallPlans and CRDs, which can be hundreds of kilobytes each
/// (icons, examples, a bundle's manifests, OpenAPI schemas on the wire): big pages would make
/// the start-up list the memory peak.
const LARGE_OBJECTS_PAGE_SIZE: u32 = 25;

/// The shared watches of one process (one per API server it talks to), started on first use.
pub struct SharedWatches {
    client: Client,
    namespaces: OnceLock<Kept<PartialObjectMeta<Namespace>>>,
    operator_groups: OnceLock<Kept<OperatorGroup>>,
    subscriptions: OnceLock<Kept<Subscription>>,
    service_accounts: OnceLock<Kept<ServiceAccount>>,
    roles: OnceLock<Kept<Role>>,
    role_bindings: OnceLock<Kept<RoleBinding>>,
    cluster_roles: OnceLock<Kept<ClusterRole>>,
    cluster_role_bindings: OnceLock<Kept<ClusterRoleBinding>>,
    managed_deployments: OnceLock<Kept<Deployment>>,
    managed_secrets: OnceLock<Kept<Secret>>,
    operator_conditions: OnceLock<Kept<OperatorCondition>>,
    operators: OnceLock<Kept<Operator>>,
    crds: OnceLock<Kept<CustomResourceDefinition>>,
    api_services: OnceLock<Kept<APIService>>,
    managed_services: OnceLock<Kept<Service>>,
    managed_validating_webhooks: OnceLock<Kept<ValidatingWebhookConfiguration>>,
    managed_mutating_webhooks: OnceLock<Kept<MutatingWebhookConfiguration>>,
    catalog_sources: OnceLock<Kept<CatalogSource>>,
    csvs: OnceLock<Driven<ClusterServiceVersion>>,
    install_plans: OnceLock<Driven<InstallPlan>>,
}

/// A shared kind kept in a namespace-indexed store.
type Kept<K> = SharedWatch<K, StoreWriter<K>>;
/// A shared kind a kube `Controller` drives, kept in kube's store with a namespace index.
type Driven<K> = SharedWatch<K, IndexedWriter<K>>;

/// A subscription to a shared kind: its store and its changes.
pub type Subscribed<K> = (NamespacedStore<K>, Changes<K>);

impl SharedWatches {
    pub fn new(client: Client) -> Self {
        Self {
            client,
            namespaces: OnceLock::new(),
            operator_groups: OnceLock::new(),
            subscriptions: OnceLock::new(),
            service_accounts: OnceLock::new(),
            roles: OnceLock::new(),
            role_bindings: OnceLock::new(),
            cluster_roles: OnceLock::new(),
            cluster_role_bindings: OnceLock::new(),
            managed_deployments: OnceLock::new(),
            managed_secrets: OnceLock::new(),
            operator_conditions: OnceLock::new(),
            operators: OnceLock::new(),
            crds: OnceLock::new(),
            api_services: OnceLock::new(),
            managed_services: OnceLock::new(),
            managed_validating_webhooks: OnceLock::new(),
            managed_mutating_webhooks: OnceLock::new(),
            catalog_sources: OnceLock::new(),
            csvs: OnceLock::new(),
            install_plans: OnceLock::new(),
        }
    }

    fn subscribe<K, W>(
        &self,
        watch: &OnceLock<SharedWatch<K, W>>,
        (labels, page_size): (Option<&str>, u32),
        slim: fn(&mut K),
        keeper: fn() -> W,
    ) -> (W::View, Changes<K>)
    where
        W: Keeper<K>,
        K: Resource<DynamicType = ()>
            + Clone
            + DeserializeOwned
            + std::fmt::Debug
            + Send
            + Sync
            + 'static,
    {
        watch
            .get_or_init(|| {
                let config = watch_config(labels, page_size);
                SharedWatch::start(Api::all(self.client.clone()), config, slim, keeper())
            })
            .subscribe()
    }

    /// Namespaces (cluster-scoped: under `""`), reduced to [`namespace_essentials`].
    pub fn namespaces(&self) -> Subscribed<PartialObjectMeta<Namespace>> {
        self.subscribe(
            &self.namespaces,
            (None, LIST_PAGE_SIZE),
            namespace_essentials,
            kept,
        )
    }

    pub fn operator_groups(&self) -> Subscribed<OperatorGroup> {
        self.subscribe(&self.operator_groups, (None, LIST_PAGE_SIZE), slim, kept)
    }

    pub fn subscriptions(&self) -> Subscribed<Subscription> {
        self.subscribe(&self.subscriptions, (None, LIST_PAGE_SIZE), slim, kept)
    }

    /// Every ServiceAccount: operators', OperatorGroups' and catalog pods'.
    pub fn service_accounts(&self) -> Subscribed<ServiceAccount> {
        self.subscribe(&self.service_accounts, (None, LIST_PAGE_SIZE), slim, kept)
    }

    pub fn roles(&self) -> Subscribed<Role> {
        self.subscribe(&self.roles, (None, LIST_PAGE_SIZE), slim, kept)
    }

    pub fn role_bindings(&self) -> Subscribed<RoleBinding> {
        self.subscribe(&self.role_bindings, (None, LIST_PAGE_SIZE), slim, kept)
    }

    pub fn cluster_roles(&self) -> Subscribed<ClusterRole> {
        self.subscribe(&self.cluster_roles, (None, LIST_PAGE_SIZE), slim, kept)
    }

    pub fn cluster_role_bindings(&self) -> Subscribed<ClusterRoleBinding> {
        self.subscribe(
            &self.cluster_role_bindings,
            (None, LIST_PAGE_SIZE),
            slim,
            kept,
        )
    }

    /// Deployments labelled `olm.managed=true`: the operators' own (install strategies).
    pub fn managed_deployments(&self) -> Subscribed<Deployment> {
        let labels = format!("{MANAGED_LABEL}={MANAGED_LABEL_VALUE}");
        self.subscribe(
            &self.managed_deployments,
            (Some(&labels), LIST_PAGE_SIZE),
            slim,
            kept,
        )
    }

    /// Secrets labelled `olm.managed=true`: webhook and APIService serving certificates.
    pub fn managed_secrets(&self) -> Subscribed<Secret> {
        let labels = format!("{MANAGED_LABEL}={MANAGED_LABEL_VALUE}");
        self.subscribe(
            &self.managed_secrets,
            (Some(&labels), LIST_PAGE_SIZE),
            slim,
            kept,
        )
    }

    pub fn operator_conditions(&self) -> Subscribed<OperatorCondition> {
        self.subscribe(
            &self.operator_conditions,
            (None, LIST_PAGE_SIZE),
            slim,
            kept,
        )
    }

    /// Operators (`operators.coreos.com/v1`, cluster-scoped: under `""`).
    pub fn operators(&self) -> Subscribed<Operator> {
        self.subscribe(&self.operators, (None, LIST_PAGE_SIZE), slim, kept)
    }

    /// CRDs without their schemas ([`slim_crd`]).
    pub fn crds(&self) -> Subscribed<CustomResourceDefinition> {
        self.subscribe(&self.crds, (None, LARGE_OBJECTS_PAGE_SIZE), slim_crd, kept)
    }

    pub fn api_services(&self) -> Subscribed<APIService> {
        self.subscribe(&self.api_services, (None, LIST_PAGE_SIZE), slim, kept)
    }

    /// CSVs that are not copies, in full but for their managed fields (all their annotations
    /// reach the Deployments' pod templates): the CSV controller drives them, the OperatorGroup
    /// side copies them and resolution reads what is installed.
    pub fn csvs(
        &self,
    ) -> (
        IndexedStore<ClusterServiceVersion>,
        Changes<ClusterServiceVersion>,
    ) {
        let originals = format!("!{COPIED_FROM_LABEL}");
        self.subscribe(
            &self.csvs,
            (Some(&originals), LARGE_OBJECTS_PAGE_SIZE),
            without_managed_fields,
            driven,
        )
    }

    /// InstallPlans in full but for their managed fields: the InstallPlan controller drives
    /// them, the Subscription controller reads them.
    pub fn install_plans(&self) -> (IndexedStore<InstallPlan>, Changes<InstallPlan>) {
        self.subscribe(
            &self.install_plans,
            (None, LARGE_OBJECTS_PAGE_SIZE),
            without_managed_fields,
            driven,
        )
    }

    /// CatalogSources: the CatalogSource controller drives them, the PackageManifest API (on
    /// every replica) shows their labels, display name and publisher.
    pub fn catalog_sources(&self) -> Subscribed<CatalogSource> {
        self.subscribe(&self.catalog_sources, (None, LIST_PAGE_SIZE), slim, kept)
    }

    /// Services labelled `olm.managed=true`: catalog pods' and webhook or APIService backends.
    pub fn managed_services(&self) -> Subscribed<Service> {
        let labels = format!("{MANAGED_LABEL}={MANAGED_LABEL_VALUE}");
        self.subscribe(
            &self.managed_services,
            (Some(&labels), LIST_PAGE_SIZE),
            slim,
            kept,
        )
    }

    /// ValidatingWebhookConfigurations labelled `olm.managed=true`: those CSVs' webhook
    /// definitions made (docs/certificates.md); the CSV and Operator controllers read them.
    pub fn managed_validating_webhooks(&self) -> Subscribed<ValidatingWebhookConfiguration> {
        let labels = format!("{MANAGED_LABEL}={MANAGED_LABEL_VALUE}");
        self.subscribe(
            &self.managed_validating_webhooks,
            (Some(&labels), LIST_PAGE_SIZE),
            slim,
            kept,
        )
    }

    /// MutatingWebhookConfigurations labelled `olm.managed=true` (as above).
    pub fn managed_mutating_webhooks(&self) -> Subscribed<MutatingWebhookConfiguration> {
        let labels = format!("{MANAGED_LABEL}={MANAGED_LABEL_VALUE}");
        self.subscribe(
            &self.managed_mutating_webhooks,
            (Some(&labels), LIST_PAGE_SIZE),
            slim,
            kept,
        )
    }
}

fn kept<K: Resource + Clone>() -> StoreWriter<K> {
    namespaced_store().1
}

fn driven<K: Resource<DynamicType = ()> + Clone>() -> IndexedWriter<K> {
    indexed_store().1
}

fn without_managed_fields<K: Resource>(obj: &mut K) {
    obj.meta_mut().managed_fields = None;
}

/// What the controllers read of a Namespace: its name and uid (events), labels (OperatorGroup
/// selectors, the pod security level of catalog pods) and whether it is being deleted. Every
/// namespace of the cluster is held, so the rest goes.
fn namespace_essentials(namespace: &mut PartialObjectMeta<Namespace>) {
    let meta = &mut namespace.metadata;
    *meta = ObjectMeta {
        name: meta.name.take(),
        uid: meta.uid.take(),
        resource_version: meta.resource_version.take(),
        labels: meta.labels.take(),
        deletion_timestamp: meta.deletion_timestamp.take(),
        ..ObjectMeta::default()
    };
}

/// What keeps a shared kind current: applies each watch event, reporting the objects it
/// concerned (at the end of a re-list, those that vanished meanwhile), and says what a
/// subscriber joining now must hear of.
trait Keeper<K>: Send + 'static {
    /// The read-only view handed to subscribers.
    type View: Clone;
    fn view(&self, task: Arc<WatchTask>) -> Self::View;
    fn apply(&mut self, event: Event<K>) -> Vec<Arc<K>>;
    fn snapshot(&self) -> Vec<Arc<K>>;
}

impl<K: Resource + Clone + Send + Sync + 'static> Keeper<K> for StoreWriter<K> {
    type View = NamespacedStore<K>;
    fn view(&self, task: Arc<WatchTask>) -> NamespacedStore<K> {
        self.reader().kept_by(task)
    }
    fn apply(&mut self, event: Event<K>) -> Vec<Arc<K>> {
        self.apply_owned(event)
    }
    fn snapshot(&self) -> Vec<Arc<K>> {
        StoreWriter::snapshot(self)
    }
}

impl<K> Keeper<K> for IndexedWriter<K>
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    type View = IndexedStore<K>;
    fn view(&self, task: Arc<WatchTask>) -> IndexedStore<K> {
        self.reader().kept_by(task)
    }
    fn apply(&mut self, event: Event<K>) -> Vec<Arc<K>> {
        self.apply_owned(event)
    }
    fn snapshot(&self) -> Vec<Arc<K>> {
        IndexedWriter::snapshot(self)
    }
}

/// One watch, its store, and the channels of its subscribers.
struct SharedWatch<K, W: Keeper<K>> {
    view: W::View,
    hub: Arc<Mutex<Hub<K, W>>>,
}

/// The store's writer and the subscribers, behind one lock: a subscriber joins between two
/// events, so its snapshot and the changes it then hears fit together without a gap.
struct Hub<K, W> {
    keeper: W,
    subscribers: Vec<UnboundedSender<Arc<K>>>,
}

impl<K, W: Keeper<K>> Hub<K, W> {
    fn publish(&mut self, event: Event<K>) {
        for changed in self.keeper.apply(event) {
            self.subscribers
                .retain(|subscriber| subscriber.send(Arc::clone(&changed)).is_ok());
        }
    }
}

fn lock<K, W>(hub: &Mutex<Hub<K, W>>) -> std::sync::MutexGuard<'_, Hub<K, W>> {
    // Every update completes under the lock or not at all; a poisoned hub is still whole.
    hub.lock().unwrap_or_else(|p| p.into_inner())
}

impl<K, W> SharedWatch<K, W>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
    W: Keeper<K>,
{
    /// Starts the watch task; it must be called within a Tokio runtime.
    fn start(api: Api<K>, config: watcher::Config, slim: fn(&mut K), keeper: W) -> Self {
        let hub = Arc::new(Mutex::new(Hub {
            keeper,
            subscribers: Vec::new(),
        }));
        let events = watcher::watcher(api, config).backoff(WatchBackoff::default());
        let task = tokio::spawn({
            let hub = Arc::clone(&hub);
            async move {
                futures::pin_mut!(events);
                while let Some(event) = events.next().await {
                    match event {
                        Ok(mut event) => {
                            slim_event(&mut event, slim);
                            lock(&hub).publish(event);
                        }
                        Err(error) => {
                            tracing::debug!(%error, kind = %K::kind(&K::DynamicType::default()), "shared watch error; the watch restarts");
                        }
                    }
                }
            }
        });
        let view = lock(&hub)
            .keeper
            .view(Arc::new(WatchTask(task.abort_handle())));
        Self { view, hub }
    }

    fn subscribe(&self) -> (W::View, Changes<K>) {
        let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
        let mut hub = lock(&self.hub);
        for known in hub.keeper.snapshot() {
            // The receiver is in hand: the send cannot fail.
            let _ = sender.send(known);
        }
        hub.subscribers.push(sender);
        let changes = tokio_stream::wrappers::UnboundedReceiverStream::new(receiver);
        (self.view.clone(), changes.boxed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k8s::store::config_map as cm;
    use k8s_openapi::api::core::v1::ConfigMap;

    fn names(objects: &[Arc<ConfigMap>]) -> Vec<String> {
        let mut names: Vec<String> = objects
            .iter()
            .map(|o| o.metadata.name.clone().unwrap_or_default())
            .collect();
        names.sort();
        names
    }

    fn drain(changes: &mut Changes<ConfigMap>) -> Vec<Arc<ConfigMap>> {
        let mut out = Vec::new();
        while let Some(Some(o)) = changes.next().now_or_never() {
            out.push(o);
        }
        out
    }

    use futures::FutureExt;

    fn watch_without_task() -> Kept<ConfigMap> {
        let (store, keeper) = namespaced_store();
        SharedWatch {
            view: store,
            hub: Arc::new(Mutex::new(Hub {
                keeper,
                subscribers: Vec::new(),
            })),
        }
    }

    #[tokio::test]
    async fn a_late_subscriber_hears_of_everything_already_reported_then_of_changes() {
        let watch = watch_without_task();
        let (_, mut early) = watch.subscribe();
        {
            let mut hub = lock(&watch.hub);
            hub.publish(Event::Init);
            hub.publish(Event::InitApply(cm("a", "one")));
        }
        // Mid-list: "one" is not in the store yet, but was reported.
        let (store, mut late) = watch.subscribe();
        {
            let mut hub = lock(&watch.hub);
            hub.publish(Event::InitApply(cm("b", "two")));
            hub.publish(Event::InitDone);
            hub.publish(Event::Delete(cm("a", "one")));
        }
        assert_eq!(names(&drain(&mut early)), ["one", "one", "two"]);
        assert_eq!(names(&drain(&mut late)), ["one", "one", "two"]);
        assert!(store.is_ready());
        assert_eq!(names(&store.all()), ["two"]);
    }

    #[tokio::test]
    async fn a_dropped_subscriber_is_forgotten() {
        let watch = watch_without_task();
        let (_, gone) = watch.subscribe();
        let (_, mut kept) = watch.subscribe();
        drop(gone);
        lock(&watch.hub).publish(Event::Apply(cm("a", "one")));
        assert_eq!(lock(&watch.hub).subscribers.len(), 1);
        assert_eq!(names(&drain(&mut kept)), ["one"]);
    }

    #[tokio::test]
    async fn the_watch_task_stops_with_the_last_view_of_its_store() {
        let task = tokio::spawn(std::future::pending::<()>());
        let abort = task.abort_handle();
        let (store, _writer) = namespaced_store::<ConfigMap>();
        let store = store.kept_by(Arc::new(WatchTask(abort)));
        let view = store.clone();
        drop(store);
        tokio::task::yield_now().await;
        assert!(!task.is_finished(), "a view is left");
        drop(view);
        let ended = task.await;
        assert!(ended.is_err_and(|e| e.is_cancelled()));
    }
}

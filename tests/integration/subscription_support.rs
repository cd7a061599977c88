//! Shared set-up for the Subscription and InstallPlan flow tests (included with `#[path]`): the
//! embedded API server with OLM's CRDs, a namespace with an OperatorGroup, catalogs with inline
//! bundles, and helpers that drive the two reconcilers step by step.

use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use olm_rs::api::CatalogRef;
use olm_rs::api::{InstallPlan, InstallPlanPhase, OperatorGroup, Subscription};
use olm_rs::catalog::CatalogIndex;
use olm_rs::catalog::model::{
    Bundle, Channel, ChannelEntry, DeclarativeConfig, Deprecations, Package, Property,
};
use olm_rs::k8s::clock::ManualClock;
use olm_rs::reconcile::install_plan::{Synced, sync_install_plan};
use olm_rs::reconcile::subscription::{
    CatalogSnapshots, NamespaceSynced, SubscriptionStores, sync_namespace,
};
use olm_rs::reconcile::{Context, ControllerOptions};
use olm_rs::resolve::{CatalogContent, CatalogInput};
use olm_rs::sandbox::ApiServer;

pub const NS: &str = "operators";

pub struct Env {
    pub server: ApiServer,
    pub clock: ManualClock,
    pub ctx: Arc<Context>,
    pub catalogs: StaticCatalogs,
    /// The Subscription controller's stores, kept current by `watches` (as `subscription::run`
    /// keeps them); a restart starts new ones.
    pub stores: SubscriptionStores,
    watches: tokio::task::JoinHandle<()>,
}

impl Drop for Env {
    fn drop(&mut self) {
        self.watches.abort();
    }
}

/// Starts the Subscription controller's stores against `client`, their watches running until
/// the handle is aborted.
pub fn start_stores(client: &kube::Client) -> (SubscriptionStores, tokio::task::JoinHandle<()>) {
    use futures::StreamExt;
    let shared = olm_rs::k8s::shared::SharedWatches::new(client.clone());
    let (stores, touched) = SubscriptionStores::start(&shared);
    (stores, tokio::spawn(touched.for_each(|_| async {})))
}

impl Env {
    /// The API server with OLM's CRDs, namespace [`NS`] and one OperatorGroup managing it.
    pub async fn new() -> Env {
        Env::with_options(ControllerOptions::default()).await
    }

    /// [`Env::new`] with controller settings of the test's choosing.
    pub async fn with_options(options: ControllerOptions) -> Env {
        let server = ApiServer::new();
        let client = server.client();
        install_olm_crds(&client).await;
        let namespaces: Api<Namespace> = Api::all(client.clone());
        namespaces
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap(),
            )
            .await
            .expect("namespace");
        let clock = ManualClock::new(Timestamp::from_second(1_800_000_000).unwrap());
        let (stores, watches) = start_stores(&client);
        let ctx = Arc::new(Context::new(client, Arc::new(clock.clone()), options));
        let env = Env {
            server,
            clock,
            ctx,
            catalogs: StaticCatalogs::default(),
            stores,
            watches,
        };
        env.operator_group("og").await;
        env
    }

    /// A new controller process against the same API server (a restart).
    pub fn restart(&mut self) {
        self.ctx = Arc::new(Context::new(
            self.server.client(),
            Arc::new(self.clock.clone()),
            ControllerOptions::default(),
        ));
        self.watches.abort();
        (self.stores, self.watches) = start_stores(&self.ctx.client);
    }

    pub fn client(&self) -> kube::Client {
        self.ctx.client.clone()
    }

    /// An OperatorGroup in [`NS`] whose status says it manages [`NS`] (as the OperatorGroup
    /// controller would write it).
    pub async fn operator_group(&self, name: &str) {
        let api: Api<OperatorGroup> = Api::namespaced(self.client(), NS);
        let og: OperatorGroup = serde_json::from_value(json!({
            "apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
            "metadata": {"name": name, "namespace": NS}, "spec": {"targetNamespaces": [NS]}
        }))
        .unwrap();
        api.create(&PostParams::default(), &og)
            .await
            .expect("operator group");
        let status = json!({"status": {"namespaces": [NS], "lastUpdated": "2027-01-01T00:00:00Z"}});
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .expect("og status");
    }

    pub fn add_catalog(&mut self, name: &str, config: DeclarativeConfig) {
        let catalogs = std::mem::take(&mut self.catalogs);
        self.catalogs = catalogs.with_index(
            CatalogRef::new("olm", name),
            Arc::new(CatalogIndex::new(config)),
        );
    }

    pub async fn subscribe(
        &self,
        name: &str,
        package: &str,
        catalog: &str,
        extra: Value,
    ) -> Subscription {
        let mut spec = json!({"source": catalog, "sourceNamespace": "olm", "name": package});
        if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
            spec.extend(extra.clone());
        }
        let sub: Subscription = serde_json::from_value(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
            "metadata": {"name": name, "namespace": NS}, "spec": spec
        }))
        .unwrap();
        Api::<Subscription>::namespaced(self.client(), NS)
            .create(&PostParams::default(), &sub)
            .await
            .expect("subscription")
    }

    /// The Subscription most tests make: `widget` to the widget package of catalog `community`,
    /// channel `stable`, with `extra` fields on top (`startingCSV`, `installPlanApproval`, …).
    pub async fn subscribe_widget(&self, extra: Value) -> Subscription {
        let mut spec = json!({"channel": "stable"});
        if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
            spec.extend(extra.clone());
        }
        self.subscribe("widget", "widget", "community", spec).await
    }

    /// One sync of [`NS`] once the stores show what the API server has (each test step acts
    /// on what the previous one wrote, as a controller does once the watches caught up).
    pub async fn sync_subscriptions(&self) -> NamespaceSynced {
        self.stores_caught_up().await;
        sync_namespace(&self.ctx, &self.stores, &self.catalogs, NS)
            .await
            .expect("subscription sync")
    }

    /// Waits until the stores hold every Subscription, InstallPlan, installed CSV and
    /// OperatorGroup of [`NS`] at the version the API server has, and the Namespace.
    pub async fn stores_caught_up(&self) {
        use kube::ResourceExt;
        fn versions<K: kube::Resource>(objects: &[K]) -> Vec<(String, String)> {
            let mut v: Vec<(String, String)> = objects
                .iter()
                .map(|o| (o.name_any(), o.resource_version().unwrap_or_default()))
                .collect();
            v.sort();
            v
        }
        fn stored<K: kube::Resource + Clone>(objects: Vec<Arc<K>>) -> Vec<(String, String)> {
            let owned: Vec<K> = objects.iter().map(|o| K::clone(o)).collect();
            versions(&owned)
        }
        let client = self.client();
        let list = ListParams::default();
        let not_copies = ListParams::default().labels("!olm.copiedFrom");
        for _ in 0..500 {
            let subs = Api::<Subscription>::namespaced(client.clone(), NS)
                .list(&list)
                .await
                .expect("subscriptions")
                .items;
            let plans = Api::<InstallPlan>::namespaced(client.clone(), NS)
                .list(&list)
                .await
                .expect("plans")
                .items;
            let csvs = Api::<olm_rs::api::ClusterServiceVersion>::namespaced(client.clone(), NS)
                .list_metadata(&not_copies)
                .await
                .expect("csvs")
                .items;
            let groups = Api::<OperatorGroup>::namespaced(client.clone(), NS)
                .list_metadata(&list)
                .await
                .expect("groups")
                .items;
            if versions(&subs) == stored(self.stores.subscriptions.in_namespace(NS))
                && versions(&plans) == stored(self.stores.plans.in_namespace(NS))
                && versions(&csvs) == stored(self.stores.csvs.in_namespace(NS))
                && versions(&groups) == stored(self.stores.operator_groups.in_namespace(NS))
                && self.stores.namespaces.get("", NS).is_some()
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the Subscription controller's stores did not catch up with the API server");
    }

    /// One sync of plan `name`, observing the plan and the namespace's OperatorGroups and
    /// Subscriptions as they are now (the controller reads them from its stores).
    pub async fn sync_plan(&self, name: &str) -> Synced {
        let Some(plan) = Api::<InstallPlan>::namespaced(self.client(), NS)
            .get_opt(name)
            .await
            .expect("read plan")
        else {
            return Synced::Idle;
        };
        let groups = Api::<OperatorGroup>::namespaced(self.client(), NS)
            .list(&ListParams::default())
            .await
            .expect("operator groups")
            .items;
        let subscriptions: Vec<_> = Api::<Subscription>::namespaced(self.client(), NS)
            .list(&ListParams::default())
            .await
            .expect("subscriptions")
            .items
            .into_iter()
            .map(Arc::new)
            .collect();
        sync_install_plan(&self.ctx, &plan, &groups, &subscriptions)
            .await
            .expect("install plan sync")
    }

    /// Syncs the plan until it is terminal or waits for approval (CRDs are Established by the
    /// API server's own controller a moment after creation, in real time).
    pub async fn run_plan(&self, name: &str) -> InstallPlan {
        for _ in 0..200 {
            self.sync_plan(name).await;
            let plan = self.plan(name).await;
            let phase = plan.status.as_ref().map(|s| s.phase.clone());
            if matches!(
                phase,
                Some(
                    InstallPlanPhase::Complete
                        | InstallPlanPhase::Failed
                        | InstallPlanPhase::RequiresApproval
                )
            ) {
                return plan;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            // A plan waiting out a transient failure passes again once its back-off is over
            // by the controllers' clock (docs/install-plans.md §6.2): 20 s of it at most here.
            self.clock.advance(SignedDuration::from_millis(100));
        }
        panic!(
            "install plan {name} did not settle: {:?}",
            self.plan(name).await.status
        );
    }

    /// One sync of the plan, then the plan as stored.
    pub async fn run_plan_once(&self, name: &str) -> InstallPlan {
        self.sync_plan(name).await;
        self.plan(name).await
    }

    /// Alternates Subscription syncs and plan executions until nothing new happens; returns the
    /// plans created along the way, in order.
    pub async fn converge(&self) -> Vec<String> {
        let mut created = Vec::new();
        for _ in 0..20 {
            let report = self.sync_subscriptions().await;
            created.extend(report.created_plans.clone());
            let mut progressed = !report.created_plans.is_empty();
            for plan in self.plans().await {
                let name = plan.metadata.name.clone().unwrap_or_default();
                let phase = plan.status.as_ref().map(|s| s.phase.clone());
                if phase == Some(InstallPlanPhase::Installing) {
                    self.run_plan(&name).await;
                    progressed = true;
                }
            }
            if !progressed && report.updated.is_empty() {
                return created;
            }
        }
        panic!("the namespace did not converge");
    }

    pub async fn plan(&self, name: &str) -> InstallPlan {
        Api::<InstallPlan>::namespaced(self.client(), NS)
            .get(name)
            .await
            .expect("plan exists")
    }

    pub async fn plans(&self) -> Vec<InstallPlan> {
        let mut plans = Api::<InstallPlan>::namespaced(self.client(), NS)
            .list(&ListParams::default())
            .await
            .expect("plans")
            .items;
        plans.sort_by_key(|p| p.spec.generation);
        plans
    }

    pub async fn subscription(&self, name: &str) -> Subscription {
        Api::<Subscription>::namespaced(self.client(), NS)
            .get(name)
            .await
            .expect("subscription exists")
    }

    pub async fn approve(&self, plan: &str) {
        Api::<InstallPlan>::namespaced(self.client(), NS)
            .patch(
                plan,
                &PatchParams::default(),
                &Patch::Merge(&json!({"spec": {"approved": true}})),
            )
            .await
            .expect("approve");
    }

    pub fn advance(&self, seconds: i64) {
        self.clock.advance(SignedDuration::from_secs(seconds));
    }

    /// Names of the objects of a kind in [`NS`] (or cluster-wide for cluster-scoped kinds).
    pub async fn names(
        &self,
        api_version: &str,
        kind: &str,
        plural: &str,
        namespaced: bool,
    ) -> Vec<String> {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let gvk = kube::core::GroupVersionKind::gvk(group, version, kind);
        let resource = kube::core::ApiResource::from_gvk_with_plural(&gvk, plural);
        let api: Api<kube::api::DynamicObject> = if namespaced {
            Api::namespaced_with(self.client(), NS, &resource)
        } else {
            Api::all_with(self.client(), &resource)
        };
        let mut names: Vec<String> = api
            .list(&ListParams::default())
            .await
            .expect("list")
            .items
            .into_iter()
            .filter_map(|o| o.metadata.name)
            .collect();
        names.sort();
        names
    }

    pub async fn get(
        &self,
        api_version: &str,
        kind: &str,
        plural: &str,
        name: &str,
        namespaced: bool,
    ) -> Option<Value> {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let gvk = kube::core::GroupVersionKind::gvk(group, version, kind);
        let resource = kube::core::ApiResource::from_gvk_with_plural(&gvk, plural);
        let api: Api<kube::api::DynamicObject> = if namespaced {
            Api::namespaced_with(self.client(), NS, &resource)
        } else {
            Api::all_with(self.client(), &resource)
        };
        api.get_opt(name)
            .await
            .expect("get")
            .map(|o| serde_json::to_value(o).unwrap())
    }
}

pub fn condition<'a>(
    sub: &'a Subscription,
    kind: &str,
) -> Option<&'a olm_rs::api::SubscriptionCondition> {
    sub.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_.as_str() == kind)
}

// ---- catalogs -----------------------------------------------------------------------------

/// The `widgets.example.com` CRD with the given versions (`(name, storage)`), each with a
/// schema whose `spec.size` has `size_type`.
pub fn widget_crd(versions: &[(&str, bool)], size_type: &str) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|(name, storage)| {
            json!({"name": name, "served": true, "storage": storage, "schema": {"openAPIV3Schema": {
                "type": "object", "properties": {"spec": {"type": "object", "properties": {"size": {"type": size_type}}}}}}})
        })
        .collect();
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
                 "versions": versions}
    })
}

/// The CSV of `widget-operator.v<version>` with namespaced and cluster permissions.
pub fn widget_csv(version: &str) -> Value {
    json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": format!("widget-operator.v{version}")},
        "spec": {
            "displayName": "Widget Operator", "version": version,
            "customresourcedefinitions": {"owned": [{"name": "widgets.example.com", "version": "v1", "kind": "Widget"}]},
            "installModes": [{"type": "OwnNamespace", "supported": true}, {"type": "SingleNamespace", "supported": true},
                             {"type": "MultiNamespace", "supported": false}, {"type": "AllNamespaces", "supported": true}],
            "install": {"strategy": "deployment", "spec": {
                "deployments": [{"name": "widget-operator", "spec": {
                    "selector": {"matchLabels": {"app": "widget-operator"}},
                    "template": {"metadata": {"labels": {"app": "widget-operator"}},
                                 "spec": {"serviceAccountName": "widget-operator", "containers": [{"name": "manager", "image": "example.com/widget:latest"}]}}}}],
                "permissions": [{"serviceAccountName": "widget-operator", "rules": [
                    {"apiGroups": ["example.com"], "resources": ["widgets", "widgets/status"], "verbs": ["*"]},
                    {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}]}],
                "clusterPermissions": [{"serviceAccountName": "widget-operator", "rules": [
                    {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch"]}]}]
            }}
        }
    })
}

/// A bundle of `widget` at `version` with its CSV, the CRD and a ConfigMap.
pub fn widget_bundle(version: &str, crd: Value) -> Bundle {
    let config_map = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "widget-defaults"}, "data": {"size": "3"}});
    let objects = [widget_csv(version), crd, config_map]
        .iter()
        .map(|o| serde_json::value::to_raw_value(o).unwrap())
        .collect();
    Bundle {
        package: "widget".into(),
        name: format!("widget-operator.v{version}"),
        image: format!("example.com/widget-bundle:v{version}"),
        properties: vec![
            Property::from_value(
                "olm.package",
                &json!({"packageName": "widget", "version": version}),
            )
            .unwrap(),
            Property::from_value(
                "olm.gvk",
                &json!({"group": "example.com", "kind": "Widget", "version": "v1"}),
            )
            .unwrap(),
        ],
        objects,
        ..Bundle::default()
    }
}

pub fn entry(name: &str, replaces: Option<&str>, skip_range: Option<&str>) -> ChannelEntry {
    ChannelEntry {
        name: name.into(),
        replaces: replaces.map(Into::into),
        skips: vec![],
        skip_range: skip_range.map(Into::into),
    }
}

/// `widget`: channel `stable` 1.0.0 ← 1.1.0 ← 1.2.0 (replaces); channel `fast` with 2.0.0 whose
/// skipRange covers every 1.x; both ship the same v1 CRD.
pub fn widget_catalog() -> DeclarativeConfig {
    let crd = || widget_crd(&[("v1", true)], "integer");
    DeclarativeConfig {
        packages: vec![Package {
            name: "widget".into(),
            default_channel: Some("stable".into()),
            ..Package::default()
        }],
        channels: vec![
            Channel {
                package: "widget".into(),
                name: "stable".into(),
                entries: vec![
                    entry("widget-operator.v1.0.0", None, None),
                    entry(
                        "widget-operator.v1.1.0",
                        Some("widget-operator.v1.0.0"),
                        None,
                    ),
                    entry(
                        "widget-operator.v1.2.0",
                        Some("widget-operator.v1.1.0"),
                        None,
                    ),
                ],
                ..Channel::default()
            },
            Channel {
                package: "widget".into(),
                name: "fast".into(),
                entries: vec![entry(
                    "widget-operator.v2.0.0",
                    None,
                    Some(">=1.0.0 <2.0.0"),
                )],
                ..Channel::default()
            },
        ],
        bundles: ["1.0.0", "1.1.0", "1.2.0", "2.0.0"]
            .iter()
            .map(|v| widget_bundle(v, crd()))
            .collect(),
        deprecations: vec![],
        others: vec![],
    }
}

/// A second, unrelated package `gadget` (one bundle) so two Subscriptions can share a namespace.
pub fn gadget_catalog() -> DeclarativeConfig {
    let csv = json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": "gadget.v1.0.0"},
        "spec": {"displayName": "Gadget", "version": "1.0.0", "install": {"strategy": "deployment", "spec": {"deployments": []}}}
    });
    DeclarativeConfig {
        packages: vec![Package {
            name: "gadget".into(),
            default_channel: Some("stable".into()),
            ..Package::default()
        }],
        channels: vec![Channel {
            package: "gadget".into(),
            name: "stable".into(),
            entries: vec![entry("gadget.v1.0.0", None, None)],
            ..Channel::default()
        }],
        bundles: vec![Bundle {
            package: "gadget".into(),
            name: "gadget.v1.0.0".into(),
            properties: vec![
                Property::from_value(
                    "olm.package",
                    &json!({"packageName": "gadget", "version": "1.0.0"}),
                )
                .unwrap(),
            ],
            objects: vec![serde_json::value::to_raw_value(&csv).unwrap()],
            ..Bundle::default()
        }],
        deprecations: Vec::<Deprecations>::new(),
        others: vec![],
    }
}

pub fn merged(mut a: DeclarativeConfig, b: DeclarativeConfig) -> DeclarativeConfig {
    a.merge(b);
    a
}

/// A fixed set of catalogs, handed to the Subscription sync in place of the controller's
/// catalog cache.
#[derive(Debug, Clone, Default)]
pub struct StaticCatalogs {
    catalogs: Vec<CatalogInput>,
}

impl StaticCatalogs {
    /// Adds (or replaces) a readable catalog.
    pub fn with_index(mut self, key: CatalogRef, index: Arc<CatalogIndex>) -> Self {
        self.catalogs.retain(|c| c.key != key);
        self.catalogs.push(CatalogInput {
            uid: Some(format!("static-{key}")),
            key,
            priority: 0,
            content: CatalogContent::Ready(index),
            healthy: true,
        });
        self
    }

    /// Adds (or replaces) a catalog that cannot be read.
    pub fn with_unavailable(mut self, key: CatalogRef, reason: impl Into<String>) -> Self {
        self.catalogs.retain(|c| c.key != key);
        self.catalogs.push(CatalogInput {
            uid: Some(format!("static-{key}")),
            key,
            priority: 0,
            content: CatalogContent::Unavailable(reason.into()),
            healthy: false,
        });
        self
    }
}

impl CatalogSnapshots for StaticCatalogs {
    fn visible_from(&self, namespace: &str, global_namespace: &str) -> Vec<CatalogInput> {
        self.catalogs
            .iter()
            .filter(|c| c.key.namespace == namespace || c.key.namespace == global_namespace)
            .cloned()
            .collect()
    }
}

/// olm-rs's CRDs (`operators.coreos.com`), created in a fresh API server.
pub async fn install_olm_crds(client: &kube::Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in olm_rs::api::crd::all().expect("CRDs generate") {
        crds.create(&PostParams::default(), &crd)
            .await
            .expect("CRD accepted");
    }
}

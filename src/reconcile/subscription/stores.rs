//! The stores the Subscription sync reads, each filled by one watch whose changes queue the
//! namespace (docs/resolution.md §1): Subscriptions, InstallPlans, installed (not copied) CSVs,
//! OperatorGroups, and Namespaces for the uid of the namespace's events.
//!
//! Subscriptions, OperatorGroups and Namespaces are the process's shared stores (`k8s::shared`).
//! The controller's own kinds are slimmed to what a decision reads before they are stored: a
//! plan's step manifests (most of its size) go, a CSV keeps only what `resolve::installed_csv`
//! reads.

use std::borrow::Cow;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PartialObjectMeta};
use kube::core::NamespaceResourceScope;
use kube::{Client, Resource, ResourceExt};
use kube_runtime::watcher;
use serde::{Deserialize, Serialize};

use crate::api::keys::{COPIED_FROM_LABEL, PROPERTIES_ANNOTATION};
use crate::api::{InstallPlan, OperatorGroup, Subscription};
use crate::k8s::shared::SharedWatches;
use crate::k8s::store::{NamespacedStore, StoreStopped, reflect_namespaced};

/// The annotation of an OperatorGroup that keeps its namespace's resolution to local catalogs.
pub const EXCLUDE_GLOBAL: &str = "olm.operatorframework.io/exclude-global-namespace-resolution";

/// Read-only views shared by every namespace sync.
#[derive(Clone)]
pub struct SubscriptionStores {
    /// Also the set of namespaces the controller follows (`has_namespace`).
    pub subscriptions: NamespacedStore<Subscription>,
    pub plans: NamespacedStore<InstallPlan>,
    pub csvs: NamespacedStore<CsvSummary>,
    pub operator_groups: NamespacedStore<OperatorGroup>,
    /// Cluster-scoped: every Namespace under `""`.
    pub namespaces: NamespacedStore<PartialObjectMeta<Namespace>>,
}

/// A namespace whose objects changed, and whether the change was to a Subscription (which
/// also brings a namespace into the followed set).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Touched {
    Subscription(String),
    Other(String),
}

impl SubscriptionStores {
    /// Starts the watches (Subscriptions, OperatorGroups and Namespaces are the process's shared
    /// ones, `shared`). The stream yields a namespace for each change; it must be polled for the
    /// plan and CSV stores to stay current.
    pub fn start(
        client: &Client,
        shared: &SharedWatches,
    ) -> (Self, impl Stream<Item = Touched> + Send + 'static) {
        let (subscriptions, sub_changes) = shared.subscriptions();
        let (plans, plan_changes) = reflect_namespaced(
            Api::<InstallPlan>::all(client.clone()),
            watcher::Config::default(),
            slim_plan,
        );
        // Copies are not installed here (docs/resolution.md §3): an all-namespaces operator has
        // one in every namespace, and the selector spares their transfer and their memory
        // (`installed_csv` still drops a copy that lost its label).
        let (csvs, csv_changes) = reflect_namespaced(
            Api::<CsvSummary>::all(client.clone()),
            watcher::Config::default().labels(&format!("!{COPIED_FROM_LABEL}")),
            slim_csv,
        );
        let (operator_groups, group_changes) = shared.operator_groups();
        let (namespaces, namespace_changes) = shared.namespaces();
        let touched = futures::stream::select_all([
            sub_changes
                .filter_map(|s| async move { s.namespace().map(Touched::Subscription) })
                .boxed(),
            plan_changes
                .filter_map(|o| async move { o.namespace().map(Touched::Other) })
                .boxed(),
            csv_changes
                .filter_map(|o| async move { o.namespace().map(Touched::Other) })
                .boxed(),
            group_changes
                .filter_map(|o| async move { o.namespace().map(Touched::Other) })
                .boxed(),
            // A Namespace only matters for its uid: its changes queue nothing.
            namespace_changes.filter_map(|_| async { None }).boxed(),
        ]);
        let stores = Self {
            subscriptions,
            plans,
            csvs,
            operator_groups,
            namespaces,
        };
        (stores, touched)
    }

    /// Waits until every store has listed once: a sync on a half-listed store would take
    /// missing plans for deleted ones.
    pub async fn ready(&self) -> Result<(), StoreStopped> {
        self.subscriptions.wait_until_ready().await?;
        self.plans.wait_until_ready().await?;
        self.csvs.wait_until_ready().await?;
        self.operator_groups.wait_until_ready().await?;
        self.namespaces.wait_until_ready().await
    }
}

/// What resolution reads of a CSV (`resolve::installed_csv`): name, labels, the properties
/// annotation, `spec.version`, the owned and required APIs and `status.phase`/`reason`. Read
/// leniently (any JSON in those fields), so a CSV someone else wrote never stops the watch.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct CsvSummary {
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: CsvSummarySpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<CsvSummaryStatus>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct CsvSummarySpec {
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub version: serde_json::Value,
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub customresourcedefinitions: serde_json::Value,
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub apiservicedefinitions: serde_json::Value,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct CsvSummaryStatus {
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub phase: serde_json::Value,
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub reason: serde_json::Value,
}

impl Resource for CsvSummary {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        "ClusterServiceVersion".into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        "operators.coreos.com".into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        "v1alpha1".into()
    }
    fn api_version(_: &()) -> Cow<'_, str> {
        crate::api::V1ALPHA1.into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        "clusterserviceversions".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

fn slim_meta<K: Resource>(obj: &mut K) {
    obj.meta_mut().managed_fields = None;
}

/// Step manifests go (a plan carries its bundle's whole objects): a decision reads the steps'
/// presence, never their content, and never writes a stored plan back.
fn slim_plan(plan: &mut InstallPlan) {
    slim_meta(plan);
    plan.metadata.annotations = None;
    for step in plan
        .status
        .iter_mut()
        .flat_map(|s| s.plan.iter_mut().flatten())
    {
        step.resource.manifest = None;
    }
}

fn slim_csv(csv: &mut CsvSummary) {
    slim_meta(csv);
    if let Some(annotations) = csv.metadata.annotations.as_mut() {
        annotations.retain(|k, _| k == PROPERTIES_ANNOTATION);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resolve::installed_csv;
    use serde_json::json;

    #[test]
    fn a_csv_summary_keeps_what_resolution_reads_and_tolerates_odd_fields() {
        let whole = json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": "etcd.v1", "namespace": "ns", "annotations": {
                PROPERTIES_ANNOTATION: r#"{"properties":[{"type":"olm.package","value":{"packageName":"etcd","version":"1.0.0"}}]}"#,
                "alm-examples": "[... a large text ...]"}},
            "spec": {"version": "1.0.0", "displayName": "etcd", "icon": [{"base64data": "AAAA"}],
                     "customresourcedefinitions": {"owned": [{"name": "etcdclusters.etcd.io", "kind": "EtcdCluster", "version": "v1"}]},
                     "install": {"strategy": "deployment", "spec": {"deployments": []}}},
            "status": {"phase": "Succeeded", "reason": "InstallSucceeded", "conditions": []}
        });
        let mut summary: CsvSummary = serde_json::from_value(whole.clone()).unwrap();
        slim_csv(&mut summary);
        assert_eq!(
            installed_csv(&serde_json::to_value(&summary).unwrap()),
            installed_csv(&whole),
            "resolution sees the same installed CSV"
        );
        assert_eq!(summary.metadata.annotations.as_ref().unwrap().len(), 1);
        let odd = json!({"metadata": {"name": "x"}, "spec": {"version": 3, "customresourcedefinitions": "none"},
                         "status": {"phase": 7}});
        assert!(serde_json::from_value::<CsvSummary>(odd).is_ok());
    }
}

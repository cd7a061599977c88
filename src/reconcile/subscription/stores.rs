//! The stores the Subscription sync reads, each of whose changes queue the namespace
//! (docs/resolution.md §1): Subscriptions, InstallPlans, installed (not copied) CSVs,
//! OperatorGroups, Namespaces for the uid of the namespace's events, and CRDs for the downgrade
//! rule (whose changes queue only the namespaces with a refusal naming them). All are the
//! process's shared stores (`k8s::shared`): the plans are the InstallPlan controller's, the CSVs
//! the CSV controller's, so nothing is kept twice.

use std::collections::BTreeMap;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::PartialObjectMeta;
use serde_json::{Value, json};

use crate::api::keys::PROPERTIES_ANNOTATION;
use crate::api::{ClusterServiceVersion, InstallPlan, OperatorGroup, Subscription};
use crate::k8s::indexed_store::IndexedStore;
use crate::k8s::shared::SharedWatches;
use crate::k8s::store::{NamespacedStore, StoreStopped};
use crate::resolve::refusal_recheck::namespaces_to_recheck;

/// The annotation of an OperatorGroup that keeps its namespace's resolution to local catalogs.
pub const EXCLUDE_GLOBAL: &str = "olm.operatorframework.io/exclude-global-namespace-resolution";

/// Read-only views shared by every namespace sync.
#[derive(Clone)]
pub struct SubscriptionStores {
    /// Also the set of namespaces the controller follows (`has_namespace`).
    pub subscriptions: NamespacedStore<Subscription>,
    pub plans: IndexedStore<InstallPlan>,
    pub csvs: IndexedStore<ClusterServiceVersion>,
    pub operator_groups: NamespacedStore<OperatorGroup>,
    /// Cluster-scoped: every Namespace under `""`.
    pub namespaces: NamespacedStore<PartialObjectMeta<Namespace>>,
    /// Cluster-scoped CRDs (the shared, schema-less copy), for the downgrade check
    /// (docs/upgrades.md).
    pub crds: NamespacedStore<CustomResourceDefinition>,
}

/// A namespace whose objects changed, and whether the change was to a Subscription (which
/// also brings a namespace into the followed set).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Touched {
    Subscription(String),
    Other(String),
}

impl SubscriptionStores {
    /// Subscribes to the shared stores. The stream yields a namespace for each change.
    pub fn start(shared: &SharedWatches) -> (Self, impl Stream<Item = Touched> + Send + 'static) {
        let (subscriptions, sub_changes) = shared.subscriptions();
        let (plans, plan_changes) = shared.install_plans();
        let (csvs, csv_changes) = shared.csvs();
        let (operator_groups, group_changes) = shared.operator_groups();
        let (namespaces, namespace_changes) = shared.namespaces();
        let (crds, crd_changes) = shared.crds();
        let refused = subscriptions.clone();
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
            // Read when a Subscription asks for a downgrade or a rollback; a change queues the
            // namespaces whose refusal names the CRD, to be decided again (docs/upgrades.md §2).
            crd_changes
                .flat_map(move |crd| {
                    let subs = refused.all();
                    let namespaces =
                        namespaces_to_recheck(subs.iter().map(|s| s.as_ref()), &crd.name_any());
                    futures::stream::iter(namespaces.into_iter().map(Touched::Other))
                })
                .boxed(),
        ]);
        let stores = Self {
            subscriptions,
            plans,
            csvs,
            operator_groups,
            namespaces,
            crds,
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
        self.crds.wait_until_ready().await?;
        self.namespaces.wait_until_ready().await
    }
}

/// What resolution reads of an installed CSV (`resolve::installed_csv`), as JSON: name,
/// labels, the properties annotation, `spec.version`, the owned and required APIs and
/// `status.phase`/`reason` — not the CSV's whole text (icons, examples), which a sync would
/// otherwise encode for every CSV of its namespace.
pub fn installed_view(csv: &ClusterServiceVersion) -> Value {
    let meta = &csv.metadata;
    let annotations: BTreeMap<&str, &str> = meta
        .annotations
        .iter()
        .flatten()
        .filter(|(k, _)| k.as_str() == PROPERTIES_ANNOTATION)
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let status = csv.status.as_ref();
    json!({
        "metadata": {
            "name": meta.name,
            "namespace": meta.namespace,
            "labels": meta.labels,
            "annotations": annotations,
        },
        "spec": {
            "version": csv.spec.version,
            "customresourcedefinitions": csv.spec.custom_resource_definitions,
            "apiservicedefinitions": csv.spec.api_service_definitions,
        },
        "status": {
            "phase": status.and_then(|s| s.phase.as_ref()),
            "reason": status.and_then(|s| s.reason.as_ref()),
        },
    })
}

/// What the downgrade check reads of a CRD (docs/upgrades.md).
pub fn cluster_crd(crd: &CustomResourceDefinition) -> crate::plan::downgrade_safety::ClusterCrd {
    crate::plan::downgrade_safety::ClusterCrd {
        name: crd.metadata.name.clone().unwrap_or_default(),
        group: crd.spec.group.clone(),
        kind: crd.spec.names.kind.clone(),
        served: crd
            .spec
            .versions
            .iter()
            .filter(|v| v.served)
            .map(|v| v.name.clone())
            .collect(),
        stored: crd
            .status
            .as_ref()
            .and_then(|s| s.stored_versions.clone())
            .unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resolve::installed_csv;

    #[test]
    fn the_installed_view_keeps_what_resolution_reads() {
        let whole = json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": "etcd.v1", "namespace": "ns", "annotations": {
                PROPERTIES_ANNOTATION: r#"{"properties":[{"type":"olm.package","value":{"packageName":"etcd","version":"1.0.0"}},{"type":"olm.gvk","value":{"group":"etcd.io","kind":"EtcdCluster","version":"v1"}}]}"#,
                "alm-examples": "[... a large text ...]"}},
            "spec": {"version": "1.0.0", "displayName": "etcd", "icon": [{"base64data": "AAAA", "mediatype": "image/png"}],
                     "customresourcedefinitions": {"owned": [{"name": "etcdclusters.etcd.io", "kind": "EtcdCluster", "version": "v1"}]},
                     "install": {"strategy": "deployment", "spec": {"deployments": []}}},
            "status": {"phase": "Succeeded", "reason": "InstallSucceeded", "conditions": []}
        });
        let csv: ClusterServiceVersion = serde_json::from_value(whole.clone()).unwrap();
        let view = installed_view(&csv);
        assert!(installed_csv(&whole).is_some());
        assert_eq!(
            installed_csv(&view),
            installed_csv(&whole),
            "resolution sees the same installed CSV"
        );
        assert_eq!(
            view["metadata"]["annotations"].as_object().unwrap().len(),
            1
        );
        assert!(view["spec"].get("icon").is_none());
    }
}

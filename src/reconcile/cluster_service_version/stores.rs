//! The reflector stores the CSV reconciler reads, and the trigger streams that fill them: every
//! watched kind is watched once, its stream both updates the store and queues the keys of the
//! CSVs it concerns (docs/csv-phases.md §1.1).

use std::sync::Arc;

use futures::{Stream, StreamExt};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Secret, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::{Resource, ResourceExt};
use kube_runtime::watcher;

use crate::api::keys::{
    OWNER_KIND_LABEL, OWNER_LABEL, OWNER_NAMESPACE_LABEL, PROVIDED_APIS_ANNOTATION,
};
use crate::api::{
    ClusterServiceVersion, CsvReason, OperatorCondition, OperatorGroup, Subscription,
};
use crate::csv::identity::CSV_KIND;
use crate::k8s::indexed_store::IndexedStore;
use crate::k8s::shared::Subscribed;
use crate::k8s::store::{NamespacedStore, StoreStopped};
use crate::operator_group::{csv_provided_apis, is_copied, parse_provided_apis};
use crate::reconcile::keys::NamespacedName;

/// Read-only views of the cluster, shared by every reconcile. Every kind but the CSVs is kept
/// per namespace (cluster-scoped kinds under `""`), so observing one CSV reads its namespace,
/// not the cluster (docs/controller-startup.md, "One reconciler shape"). The CSVs themselves
/// are kube's store the controller reads, with a namespace index (`k8s::indexed_store`).
#[derive(Clone)]
pub struct Stores {
    pub csvs: IndexedStore<ClusterServiceVersion>,
    pub operator_groups: NamespacedStore<OperatorGroup>,
    pub subscriptions: NamespacedStore<Subscription>,
    pub crds: NamespacedStore<CustomResourceDefinition>,
    pub api_services: NamespacedStore<APIService>,
    pub deployments: NamespacedStore<Deployment>,
    pub service_accounts: NamespacedStore<ServiceAccount>,
    pub roles: NamespacedStore<Role>,
    pub role_bindings: NamespacedStore<RoleBinding>,
    pub cluster_roles: NamespacedStore<ClusterRole>,
    pub cluster_role_bindings: NamespacedStore<ClusterRoleBinding>,
    /// `olm.managed` Secrets, Services and webhook configurations (docs/certificates.md).
    pub secrets: NamespacedStore<Secret>,
    pub services: NamespacedStore<Service>,
    pub validating_webhooks: NamespacedStore<ValidatingWebhookConfiguration>,
    pub mutating_webhooks: NamespacedStore<MutatingWebhookConfiguration>,
    pub operator_conditions: NamespacedStore<OperatorCondition>,
}

impl Stores {
    /// Waits until every store has listed once (reconciling on a half-filled cache would see
    /// requirements as missing).
    pub async fn ready(&self) -> Result<(), StoreStopped> {
        self.csvs.wait_until_ready().await?;
        self.operator_groups.wait_until_ready().await?;
        self.subscriptions.wait_until_ready().await?;
        self.crds.wait_until_ready().await?;
        self.api_services.wait_until_ready().await?;
        self.deployments.wait_until_ready().await?;
        self.service_accounts.wait_until_ready().await?;
        self.roles.wait_until_ready().await?;
        self.role_bindings.wait_until_ready().await?;
        self.cluster_roles.wait_until_ready().await?;
        self.cluster_role_bindings.wait_until_ready().await?;
        self.secrets.wait_until_ready().await?;
        self.services.wait_until_ready().await?;
        self.validating_webhooks.wait_until_ready().await?;
        self.mutating_webhooks.wait_until_ready().await?;
        self.operator_conditions.wait_until_ready().await?;
        Ok(())
    }
}

/// A trigger stream: watches `K`, keeps `store` current, yields every touched object.
pub type Trigger<K> = std::pin::Pin<Box<dyn Stream<Item = Result<K, watcher::Error>> + Send>>;

/// A store, and its changes as a trigger stream.
pub fn trigger_of<K: Clone + Send + Sync + 'static>(
    (store, changes): Subscribed<K>,
) -> (NamespacedStore<K>, Trigger<K>) {
    (store, changes.map(|o| Ok(Arc::unwrap_or_clone(o))).boxed())
}

fn csv_ref(name: &str, namespace: &str) -> NamespacedName {
    NamespacedName::new(namespace, name)
}

/// The queue key of a CSV: its namespace and name.
pub fn key_of(csv: &ClusterServiceVersion) -> NamespacedName {
    NamespacedName::new(
        csv.metadata.namespace.as_deref().unwrap_or_default(),
        csv.metadata.name.as_deref().unwrap_or_default(),
    )
}

/// The CSV named by an object's owner labels (`olm.owner*`), or its CSV ownerReferences.
pub fn owners<K: Resource>(obj: &K) -> Vec<NamespacedName> {
    let labels = obj.labels();
    let mut out = Vec::new();
    if labels.get(OWNER_KIND_LABEL).map(String::as_str) == Some(CSV_KIND)
        && let (Some(name), Some(ns)) = (labels.get(OWNER_LABEL), labels.get(OWNER_NAMESPACE_LABEL))
    {
        out.push(csv_ref(name, ns));
    }
    if let Some(ns) = obj.namespace() {
        for owner in obj.owner_references().iter().filter(|o| o.kind == CSV_KIND) {
            out.push(csv_ref(&owner.name, &ns));
        }
    }
    out
}

/// The CSVs an OperatorGroup event concerns: those of its namespace (membership, targets), and,
/// cluster-wide, those providing an API its `olm.providedAPIs` lists or failed for a conflict
/// between groups (docs/operator-groups.md §2 step 6: a group that takes, drops or stops reserving an
/// API lets providers in intersecting groups re-evaluate; a deleted group is seen with its last
/// annotations).
pub fn csvs_concerned_by_group(
    store: &IndexedStore<ClusterServiceVersion>,
    group: &OperatorGroup,
) -> Vec<NamespacedName> {
    let namespace = group.namespace().unwrap_or_default();
    let claimed = group
        .annotations()
        .get(PROVIDED_APIS_ANNOTATION)
        .map(|v| parse_provided_apis(v))
        .unwrap_or_default();
    store
        .all()
        .iter()
        .filter(|c| !is_copied(c))
        .filter(|c| {
            c.namespace().as_deref() == Some(namespace.as_str())
                || c.status.as_ref().and_then(|s| s.reason.as_ref())
                    == Some(&CsvReason::InterOperatorGroupOwnerConflict)
                || csv_provided_apis(c).is_ok_and(|apis| !apis.is_disjoint(&claimed))
        })
        .map(|c| key_of(c))
        .collect()
}

/// Every non-copied CSV in `namespace`.
pub fn csvs_in(
    store: &IndexedStore<ClusterServiceVersion>,
    namespace: &str,
) -> Vec<NamespacedName> {
    store
        .in_namespace(namespace)
        .iter()
        .filter(|c| !is_copied(c))
        .map(|c| key_of(c))
        .collect()
}

/// CSVs that own or require the CRD `name` (an in-memory index instead of the `olm.api.*`
/// labels OLM never stores, docs/csv-phases.md §1.1).
pub fn csvs_using_crd(
    store: &IndexedStore<ClusterServiceVersion>,
    name: &str,
) -> Vec<NamespacedName> {
    store
        .all()
        .iter()
        .filter(|c| {
            let crds = c.spec.custom_resource_definitions.as_ref();
            let listed = |list: Option<&Vec<crate::api::CrdDescription>>| {
                list.into_iter().flatten().any(|d| d.name == name)
            };
            crds.is_some_and(|d| listed(d.owned.as_ref()) || listed(d.required.as_ref()))
        })
        .map(|c| key_of(c))
        .collect()
}

/// CSVs that own or require the APIService `name` (`<version>.<group>`), plus its owner.
pub fn csvs_using_api_service(
    store: &IndexedStore<ClusterServiceVersion>,
    api: &APIService,
) -> Vec<NamespacedName> {
    let name = api.name_any();
    let mut out: Vec<_> = store
        .all()
        .iter()
        .filter(|c| {
            c.spec.api_service_definitions.as_ref().is_some_and(|d| {
                d.owned
                    .iter()
                    .chain(d.required.iter())
                    .flatten()
                    .any(|a| a.api_service_name() == name)
            })
        })
        .map(|c| key_of(c))
        .collect();
    out.extend(owners(api));
    out
}

/// CSVs a ClusterRoleBinding may concern: its owner, and the CSVs of the namespaces of its
/// ServiceAccount subjects.
pub fn csvs_for_cluster_binding(
    store: &IndexedStore<ClusterServiceVersion>,
    binding: &ClusterRoleBinding,
) -> Vec<NamespacedName> {
    let mut out = owners(binding);
    for subject in binding.subjects.iter().flatten() {
        if subject.kind == "ServiceAccount"
            && let Some(ns) = &subject.namespace
        {
            out.extend(csvs_in(store, ns));
        }
    }
    out
}

/// The CSVs an OperatorCondition concerns: the CSV of the same name (it keeps the object, its
/// RBAC and status) and the CSVs replacing that one (its `Upgradeable` condition gates them).
pub fn csvs_of_operator_condition(
    store: &IndexedStore<ClusterServiceVersion>,
    condition: &OperatorCondition,
) -> Vec<NamespacedName> {
    let ns = condition.namespace().unwrap_or_default();
    let name = condition.name_any();
    let mut out = vec![csv_ref(&name, &ns)];
    out.extend(
        store
            .in_namespace(&ns)
            .iter()
            .filter(|c| !is_copied(c) && crate::csv::identity::replaces(c) == Some(name.as_str()))
            .map(|c| key_of(c)),
    );
    out
}

/// The CSV a Subscription installed.
pub fn csv_of_subscription(sub: &Subscription) -> Vec<NamespacedName> {
    let ns = sub.namespace().unwrap_or_default();
    sub.status
        .as_ref()
        .and_then(|s| s.installed_csv.as_deref())
        .map(|name| vec![csv_ref(name, &ns)])
        .unwrap_or_default()
}

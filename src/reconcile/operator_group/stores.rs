//! What the OperatorGroup side observes: one watch per kind, each kept in a namespace-indexed
//! store (`k8s::store`) shared by all its loops, so a sync reads its namespace and never lists.
//!
//! Memory is the point here (docs/operator-groups.md, cost figures): OperatorGroups,
//! Namespaces, ServiceAccounts, RBAC, CRDs and APIServices are the process's shared stores
//! (`k8s::shared`), which the CSV controller reads too, and so are the original CSVs; copies
//! are watched on their own, reduced on arrival to a record in the [`CopyIndex`].

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::{Api, PartialObjectMeta};
use kube::{Client, Resource, ResourceExt};
use kube_runtime::WatchStreamExt;
use kube_runtime::watcher::{self, Event};

use crate::api::keys::{COPIED_FROM_LABEL, MANAGED_LABEL, MANAGED_LABEL_VALUE, OWNER_KIND_LABEL};
use crate::api::{ClusterServiceVersion, OlmConfig, OperatorGroup};
use crate::k8s::indexed_store::IndexedStore;
use crate::k8s::shared::{Changes, SharedWatches};
use crate::k8s::store::{NamespacedStore, reflect_namespaced};
use crate::k8s::watch_backoff::WatchBackoff;
use crate::operator_group::cluster_roles::OPERATOR_GROUP_OWNER_KIND;
use crate::operator_group::copied_csv::CopyHashes;
use crate::operator_group::group_decision::ServiceAccountSeen;
use crate::operator_group::member_rbac::CSV_OWNER_KIND;

use super::copy_index::CopyIndex;
use super::namespaced_name::NamespacedName;

/// Objects per page of an initial list: copies are whole CSVs on the wire, so big pages would
/// make the start-up list the memory peak.
const LIST_PAGE_SIZE: u32 = 50;

/// Cluster-scoped objects live under this namespace in a [`NamespacedStore`].
pub const CLUSTER: &str = "";

/// Read access to everything the loops observe.
#[derive(Clone)]
pub struct Stores {
    pub groups: NamespacedStore<OperatorGroup>,
    /// CSVs without `olm.copiedFrom` (the process's shared store, which the CSV controller
    /// drives).
    pub csvs: IndexedStore<ClusterServiceVersion>,
    /// Namespaces (cluster-scoped: under [`CLUSTER`]), labels kept.
    pub namespaces: NamespacedStore<PartialObjectMeta<Namespace>>,
    /// ServiceAccounts (a group's `spec.serviceAccountName`).
    pub service_accounts: NamespacedStore<ServiceAccount>,
    /// Every ClusterRole; [`Stores::group_roles`] are the OperatorGroups' own.
    pub cluster_roles: NamespacedStore<ClusterRole>,
    /// Every Role and RoleBinding; [`Stores::csv_roles_in`] and [`Stores::csv_bindings_in`] are
    /// the sources of a CSV's RBAC outside its namespace.
    pub roles: NamespacedStore<Role>,
    pub role_bindings: NamespacedStore<RoleBinding>,
    /// CRDs and APIServices (the owners of per-API ClusterRoles).
    pub crds: NamespacedStore<CustomResourceDefinition>,
    pub api_services: NamespacedStore<APIService>,
    pub olm_configs: NamespacedStore<OlmConfig>,
    pub copies: CopyIndex,
    /// The hashes each original's copies should have, as last decided by the copy loop; lets
    /// a copy event requeue its original only when the copy is actually stale.
    pub desired_copies: Arc<RwLock<HashMap<NamespacedName, CopyHashes>>>,
}

impl Stores {
    /// Every OperatorGroup in `namespace`, by name.
    pub fn groups_in(&self, namespace: &str) -> Vec<Arc<OperatorGroup>> {
        self.groups.in_namespace(namespace)
    }

    /// Every original CSV in `namespace`.
    pub fn csvs_in(&self, namespace: &str) -> Vec<Arc<ClusterServiceVersion>> {
        self.csvs.in_namespace(namespace)
    }

    /// Every namespace.
    pub fn all_namespaces(&self) -> Vec<Arc<PartialObjectMeta<Namespace>>> {
        self.namespaces.in_namespace(CLUSTER)
    }

    pub fn olm_config(&self) -> Option<Arc<OlmConfig>> {
        self.olm_configs
            .get(CLUSTER, crate::api::olm_config::OLM_CONFIG_NAME)
    }

    /// The ServiceAccount `namespace/name`, as a group sync reads it.
    pub fn service_account(&self, namespace: &str, name: &str) -> Option<ServiceAccountSeen> {
        let account = self.service_accounts.get(namespace, name)?;
        Some(ServiceAccountSeen {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            uid: account.metadata.uid.clone().unwrap_or_default(),
            resource_version: account
                .metadata
                .resource_version
                .clone()
                .unwrap_or_default(),
            managed: account.labels().get(MANAGED_LABEL).map(String::as_str)
                == Some(MANAGED_LABEL_VALUE),
        })
    }

    /// Every ClusterRole labelled `olm.owner.kind=OperatorGroup`.
    pub fn group_roles(&self) -> Vec<Arc<ClusterRole>> {
        let mut roles = self.cluster_roles.in_namespace(CLUSTER);
        roles.retain(|role| is_group_role(role.meta()));
        roles
    }

    /// The OperatorGroup ClusterRole `name`.
    pub fn group_role(&self, name: &str) -> Option<Arc<ClusterRole>> {
        self.cluster_roles
            .get(CLUSTER, name)
            .filter(|role| is_group_role(role.meta()))
    }

    /// The Roles CSVs of `namespace` own there (not those of copies).
    pub fn csv_roles_in(&self, namespace: &str) -> Vec<Arc<Role>> {
        let mut roles = self.roles.in_namespace(namespace);
        roles.retain(|role| is_csv_source_rbac(role.meta()));
        roles
    }

    /// The RoleBindings CSVs of `namespace` own there (not those of copies).
    pub fn csv_bindings_in(&self, namespace: &str) -> Vec<Arc<RoleBinding>> {
        let mut bindings = self.role_bindings.in_namespace(namespace);
        bindings.retain(|binding| is_csv_source_rbac(binding.meta()));
        bindings
    }
}

fn label<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.labels.as_ref()?.get(key).map(String::as_str)
}

/// A ClusterRole an OperatorGroup owns.
pub fn is_group_role(meta: &ObjectMeta) -> bool {
    label(meta, OWNER_KIND_LABEL) == Some(OPERATOR_GROUP_OWNER_KIND)
}

/// A Role or RoleBinding a CSV owns in its own namespace: `olm.owner.kind=
/// ClusterServiceVersion`, and not made for a copy (`olm.copiedFrom`).
pub fn is_csv_source_rbac(meta: &ObjectMeta) -> bool {
    label(meta, OWNER_KIND_LABEL) == Some(CSV_OWNER_KIND)
        && label(meta, COPIED_FROM_LABEL).is_none()
}

/// The change streams feeding [`Stores`]; each must be driven for its store to fill.
pub struct Feeds {
    pub groups: Changes<OperatorGroup>,
    pub csvs: Changes<ClusterServiceVersion>,
    pub copies: futures::stream::BoxStream<'static, Event<ClusterServiceVersion>>,
    pub namespaces: Changes<PartialObjectMeta<Namespace>>,
    pub service_accounts: Changes<ServiceAccount>,
    pub cluster_roles: Changes<ClusterRole>,
    pub roles: Changes<Role>,
    pub role_bindings: Changes<RoleBinding>,
    pub crds: Changes<CustomResourceDefinition>,
    pub api_services: Changes<APIService>,
    pub olm_configs: Changes<OlmConfig>,
}

fn strip_managed_fields<K: Resource>(obj: &mut K) {
    obj.meta_mut().managed_fields = None;
}

/// Opens the watches (all but the CSVs' and the OLMConfig's are the process's shared ones).
pub fn watch_all(client: &Client, shared: &SharedWatches) -> (Stores, Feeds) {
    let paged = || watcher::Config::default().page_size(LIST_PAGE_SIZE);
    let (groups, group_feed) = shared.operator_groups();
    let (csvs, csv_feed) = shared.csvs();
    let (namespaces, namespace_feed) = shared.namespaces();
    let (service_accounts, account_feed) = shared.service_accounts();
    let (cluster_roles, cluster_role_feed) = shared.cluster_roles();
    let (roles, role_feed) = shared.roles();
    let (role_bindings, binding_feed) = shared.role_bindings();
    let (crds, crd_feed) = shared.crds();
    let (api_services, api_service_feed) = shared.api_services();
    let (olm_configs, olm_config_feed) =
        reflect_namespaced(Api::all(client.clone()), paged(), strip_managed_fields);
    let copy_feed = watcher::watcher(
        Api::<ClusterServiceVersion>::all(client.clone()),
        paged().labels(COPIED_FROM_LABEL),
    )
    .backoff(WatchBackoff::default())
    .filter_map(|event| async move {
        event
            .inspect_err(|err| tracing::warn!(error = %err, "copied CSV watch failed; retrying"))
            .ok()
    });

    let stores = Stores {
        groups,
        csvs,
        namespaces,
        service_accounts,
        cluster_roles,
        roles,
        role_bindings,
        crds,
        api_services,
        olm_configs,
        copies: CopyIndex::default(),
        desired_copies: Arc::default(),
    };
    let feeds = Feeds {
        groups: group_feed,
        csvs: csv_feed,
        copies: copy_feed.boxed(),
        namespaces: namespace_feed,
        service_accounts: account_feed,
        cluster_roles: cluster_role_feed,
        roles: role_feed,
        role_bindings: binding_feed,
        crds: crd_feed,
        api_services: api_service_feed,
        olm_configs: olm_config_feed,
    };
    (stores, feeds)
}

#[cfg(test)]
impl Stores {
    /// Empty stores that no watch fills, and the writer of the groups' store.
    pub fn for_tests() -> (Self, crate::k8s::store::StoreWriter<OperatorGroup>) {
        use crate::k8s::store::namespaced_store;
        let (groups, writer) = namespaced_store();
        let stores = Stores {
            groups,
            csvs: crate::k8s::indexed_store::indexed_store().0,
            namespaces: namespaced_store().0,
            service_accounts: namespaced_store().0,
            cluster_roles: namespaced_store().0,
            roles: namespaced_store().0,
            role_bindings: namespaced_store().0,
            crds: namespaced_store().0,
            api_services: namespaced_store().0,
            olm_configs: namespaced_store().0,
            copies: CopyIndex::default(),
            desired_copies: Arc::default(),
        };
        (stores, writer)
    }
}

//! What the OperatorGroup side observes: one watch per kind, each kept in a namespace-indexed
//! store (`k8s::store`) shared by all its loops, so a sync reads its namespace and never lists.
//!
//! Memory is the point here (docs/operator-groups.md, cost figures): OperatorGroups and
//! Namespaces are the process's shared stores (`k8s::shared`), CSVs are watched twice with
//! opposite label selectors — originals in full, copies reduced on arrival to a record in the
//! [`CopyIndex`] — ServiceAccounts reduced to a record each ([`AccountIndex`]), and CRDs and
//! APIServices as metadata only, without managed fields or annotations.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::{Api, PartialObjectMeta};
use kube::{Client, Resource};
use kube_runtime::WatchStreamExt;
use kube_runtime::watcher::{self, Event};

use crate::api::keys::{COPIED_FROM_LABEL, OWNER_KIND_LABEL};
use crate::api::{ClusterServiceVersion, OlmConfig, OperatorGroup};
use crate::k8s::shared::{Changes, SharedWatches};
use crate::k8s::store::{Changed, NamespacedStore, reflect_namespaced};
use crate::operator_group::cluster_roles::OPERATOR_GROUP_OWNER_KIND;
use crate::operator_group::copied_csv::CopyHashes;
use crate::operator_group::member_rbac::CSV_OWNER_KIND;

use super::account_index::AccountIndex;
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
    /// CSVs without `olm.copiedFrom`.
    pub csvs: NamespacedStore<ClusterServiceVersion>,
    /// Namespaces (cluster-scoped: under [`CLUSTER`]), labels kept.
    pub namespaces: NamespacedStore<PartialObjectMeta<Namespace>>,
    /// ServiceAccounts, reduced (a group's `spec.serviceAccountName`).
    pub service_accounts: AccountIndex,
    /// ClusterRoles labelled `olm.owner.kind=OperatorGroup`.
    pub group_roles: NamespacedStore<ClusterRole>,
    /// Roles and RoleBindings a CSV owns in its own namespace (`olm.owner.kind=
    /// ClusterServiceVersion`, not copies): the sources of its RBAC outside that namespace.
    pub csv_roles: NamespacedStore<Role>,
    pub csv_role_bindings: NamespacedStore<RoleBinding>,
    /// CRDs and APIServices, name and uid (the owners of per-API ClusterRoles).
    pub crds: NamespacedStore<PartialObjectMeta<CustomResourceDefinition>>,
    pub api_services: NamespacedStore<PartialObjectMeta<APIService>>,
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
}

/// The change streams feeding [`Stores`]; each must be driven for its store to fill.
pub struct Feeds {
    pub groups: Changes<OperatorGroup>,
    pub csvs: Changed<ClusterServiceVersion>,
    pub copies: futures::stream::BoxStream<'static, Event<ClusterServiceVersion>>,
    pub namespaces: Changes<PartialObjectMeta<Namespace>>,
    pub service_accounts:
        futures::stream::BoxStream<'static, Event<PartialObjectMeta<ServiceAccount>>>,
    pub group_roles: Changed<ClusterRole>,
    pub csv_roles: Changed<Role>,
    pub csv_role_bindings: Changed<RoleBinding>,
    pub crds: Changed<PartialObjectMeta<CustomResourceDefinition>>,
    pub api_services: Changed<PartialObjectMeta<APIService>>,
    pub olm_configs: Changed<OlmConfig>,
}

fn strip_managed_fields<K: Resource>(obj: &mut K) {
    obj.meta_mut().managed_fields = None;
}

/// Keeps name, namespace, uid, resourceVersion, labels, owners and the deletion mark (the
/// watches through `Api<PartialObjectMeta<_>>` receive nothing else).
fn slim_metadata<K: Resource>(obj: &mut K) {
    let meta = obj.meta_mut();
    meta.managed_fields = None;
    meta.annotations = None;
}

/// Opens the watches (OperatorGroups and Namespaces are the process's shared ones).
pub fn watch_all(client: &Client, shared: &SharedWatches) -> (Stores, Feeds) {
    let paged = || watcher::Config::default().page_size(LIST_PAGE_SIZE);
    let (groups, group_feed) = shared.operator_groups();
    let (csvs, csv_feed) = reflect_namespaced(
        Api::all(client.clone()),
        paged().labels(&format!("!{COPIED_FROM_LABEL}")),
        strip_managed_fields,
    );
    let (namespaces, namespace_feed) = shared.namespaces();
    let account_feed = watcher::watcher(
        Api::<PartialObjectMeta<ServiceAccount>>::all(client.clone()),
        paged(),
    )
    .default_backoff()
    .filter_map(|event| async move {
        event
            .inspect_err(
                |err| tracing::warn!(error = %err, "ServiceAccount watch failed; retrying"),
            )
            .ok()
    });
    let (group_roles, role_feed) = reflect_namespaced(
        Api::all(client.clone()),
        paged().labels(&format!("{OWNER_KIND_LABEL}={OPERATOR_GROUP_OWNER_KIND}")),
        strip_managed_fields,
    );
    let owned_by_csvs = || {
        paged().labels(&format!(
            "{OWNER_KIND_LABEL}={CSV_OWNER_KIND},!{COPIED_FROM_LABEL}"
        ))
    };
    let (csv_roles, csv_role_feed) = reflect_namespaced(
        Api::all(client.clone()),
        owned_by_csvs(),
        strip_managed_fields,
    );
    let (csv_role_bindings, csv_binding_feed) = reflect_namespaced(
        Api::all(client.clone()),
        owned_by_csvs(),
        strip_managed_fields,
    );
    let (crds, crd_feed) = reflect_namespaced(
        Api::<PartialObjectMeta<CustomResourceDefinition>>::all(client.clone()),
        paged(),
        slim_metadata,
    );
    let (api_services, api_service_feed) = reflect_namespaced(
        Api::<PartialObjectMeta<APIService>>::all(client.clone()),
        paged(),
        slim_metadata,
    );
    let (olm_configs, olm_config_feed) =
        reflect_namespaced(Api::all(client.clone()), paged(), strip_managed_fields);
    let copy_feed = watcher::watcher(
        Api::<ClusterServiceVersion>::all(client.clone()),
        paged().labels(COPIED_FROM_LABEL),
    )
    .default_backoff()
    .filter_map(|event| async move {
        event
            .inspect_err(|err| tracing::warn!(error = %err, "copied CSV watch failed; retrying"))
            .ok()
    });

    let stores = Stores {
        groups,
        csvs,
        namespaces,
        service_accounts: AccountIndex::default(),
        group_roles,
        csv_roles,
        csv_role_bindings,
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
        service_accounts: account_feed.boxed(),
        group_roles: role_feed,
        csv_roles: csv_role_feed,
        csv_role_bindings: csv_binding_feed,
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
            csvs: namespaced_store().0,
            namespaces: namespaced_store().0,
            service_accounts: AccountIndex::default(),
            group_roles: namespaced_store().0,
            csv_roles: namespaced_store().0,
            csv_role_bindings: namespaced_store().0,
            crds: namespaced_store().0,
            api_services: namespaced_store().0,
            olm_configs: namespaced_store().0,
            copies: CopyIndex::default(),
            desired_copies: Arc::default(),
        };
        (stores, writer)
    }
}

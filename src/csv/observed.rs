//! What the CSV controller sees of the cluster when it syncs one CSV: the input of every
//! decision in this module. The reconciler fills it from its reflector stores (plus discovery
//! and the server version); tests build it by hand.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;

use crate::api::{
    ClusterServiceVersion, OperatorCondition, OperatorGroup, Subscription, SubscriptionConfig,
};

use super::certs::CertObjects;
use super::rbac_eval::RbacIndex;

/// A snapshot of the cluster as far as one CSV's sync is concerned.
#[derive(Clone, Debug, Default)]
pub struct Observed {
    /// Every CSV in the CSV's namespace, copies included (functions skip them where OLM does).
    pub csvs: Vec<Arc<ClusterServiceVersion>>,
    /// OperatorGroups in the CSV's namespace.
    pub operator_groups: Vec<Arc<OperatorGroup>>,
    /// OperatorGroups of the whole cluster (provided-API intersection, docs/operator-groups.md §6.2).
    pub all_operator_groups: Vec<Arc<OperatorGroup>>,
    pub crds: Vec<Arc<CustomResourceDefinition>>,
    pub api_services: Vec<Arc<APIService>>,
    /// Which kinds the API server serves, for the group-versions the CSV names.
    pub discovery: Discovery,
    /// The server's `gitVersion`, or why it could not be read.
    pub server_version: ServerVersion,
    /// ServiceAccounts in the CSV's namespace.
    pub service_accounts: Vec<Arc<ServiceAccount>>,
    pub roles: Vec<Arc<Role>>,
    pub role_bindings: Vec<Arc<RoleBinding>>,
    pub cluster_roles: Vec<Arc<ClusterRole>>,
    pub cluster_role_bindings: Vec<Arc<ClusterRoleBinding>>,
    /// Deployments in the CSV's namespace.
    pub deployments: Vec<Arc<Deployment>>,
    /// Subscriptions in the CSV's namespace.
    pub subscriptions: Vec<Arc<Subscription>>,
    /// OperatorConditions in the CSV's namespace: its own, and the replaced CSV's (docs/csv-phases.md §3.1
    /// Pending step 1).
    pub operator_conditions: Vec<Arc<OperatorCondition>>,
    /// Cert Secrets, Services, webhook configurations and `kube-system` auth-reader bindings
    /// (docs/certificates.md).
    pub certs: CertObjects,
}

/// The API server's version as `/version` reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServerVersion {
    Known(String),
    Unavailable(String),
}

impl Default for ServerVersion {
    fn default() -> Self {
        Self::Unavailable("not read".to_owned())
    }
}

/// Discovery answers per group-version (`"v1"` for the core group, else `"group/version"`).
/// A group-version that is not listed is not served; one whose lookup failed is unknown.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Discovery {
    pub group_versions: BTreeMap<String, Result<BTreeSet<String>, DiscoveryFailed>>,
}

/// A discovery lookup that failed: the group-version is neither served nor absent. The pure
/// core keeps the API server's answer as text (observed data is compared and cloned, which a
/// `kube::Error` is not).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct DiscoveryFailed {
    pub message: String,
}

impl DiscoveryFailed {
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }
}

/// Whether a kind is served.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Served {
    Yes,
    No,
    /// Discovery failed: neither present nor absent (docs/csv-phases.md §11 item 3).
    Unknown(String),
}

impl Discovery {
    /// The discovery key of a group-version.
    pub fn key(group: &str, version: &str) -> String {
        if group.is_empty() {
            version.to_owned()
        } else {
            format!("{group}/{version}")
        }
    }

    pub fn kind_served(&self, group: &str, version: &str, kind: &str) -> Served {
        match self.group_versions.get(&Self::key(group, version)) {
            None => Served::No,
            Some(Err(err)) => Served::Unknown(err.message.clone()),
            Some(Ok(kinds)) if kinds.contains(kind) => Served::Yes,
            Some(Ok(_)) => Served::No,
        }
    }
}

impl Observed {
    pub fn csv(&self, name: &str) -> Option<&ClusterServiceVersion> {
        self.csvs
            .iter()
            .map(Arc::as_ref)
            .find(|c| c.metadata.name.as_deref() == Some(name))
    }

    pub fn crd(&self, name: &str) -> Option<&CustomResourceDefinition> {
        self.crds
            .iter()
            .map(Arc::as_ref)
            .find(|c| c.metadata.name.as_deref() == Some(name))
    }

    pub fn api_service(&self, name: &str) -> Option<&APIService> {
        self.api_services
            .iter()
            .map(Arc::as_ref)
            .find(|a| a.metadata.name.as_deref() == Some(name))
    }

    pub fn service_account(&self, name: &str) -> Option<&ServiceAccount> {
        self.service_accounts
            .iter()
            .map(Arc::as_ref)
            .find(|s| s.metadata.name.as_deref() == Some(name))
    }

    pub fn deployment(&self, name: &str) -> Option<&Deployment> {
        self.deployments
            .iter()
            .map(Arc::as_ref)
            .find(|d| d.metadata.name.as_deref() == Some(name))
    }

    pub fn operator_condition(&self, name: &str) -> Option<&OperatorCondition> {
        self.operator_conditions
            .iter()
            .map(Arc::as_ref)
            .find(|o| o.metadata.name.as_deref() == Some(name))
    }

    /// A Role of the CSV's namespace.
    pub fn role(&self, name: &str) -> Option<&Role> {
        self.roles
            .iter()
            .map(Arc::as_ref)
            .find(|r| r.metadata.name.as_deref() == Some(name))
    }

    /// A RoleBinding of the CSV's namespace.
    pub fn role_binding(&self, name: &str) -> Option<&RoleBinding> {
        self.role_bindings
            .iter()
            .map(Arc::as_ref)
            .find(|r| r.metadata.name.as_deref() == Some(name))
    }

    /// The RBAC objects, indexed for evaluation.
    pub fn rbac(&self) -> RbacIndex<'_> {
        RbacIndex::new(
            self.roles.iter().map(Arc::as_ref),
            self.role_bindings.iter().map(Arc::as_ref),
            self.cluster_roles.iter().map(Arc::as_ref),
            self.cluster_role_bindings.iter().map(Arc::as_ref),
        )
    }

    /// The Subscription that installed `csv_name` (`status.installedCSV`).
    pub fn subscription_installing(&self, csv_name: &str) -> Option<&Subscription> {
        self.subscriptions.iter().map(Arc::as_ref).find(|s| {
            s.status.as_ref().and_then(|st| st.installed_csv.as_deref()) == Some(csv_name)
        })
    }

    /// `spec.config` of the Subscription that installed `csv_name` (docs/install-plans.md
    /// §4), if any.
    pub fn subscription_config(&self, csv_name: &str) -> Option<&SubscriptionConfig> {
        self.subscription_installing(csv_name)
            .and_then(|s| s.spec.config.as_ref())
    }
}

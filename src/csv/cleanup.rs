//! What the CSV finalizer removes (docs/csv-phases.md §10): cluster-scoped objects labelled for the CSV and
//! the APIServices it owns. Namespaced objects go with the CSV through ownerReferences; CRDs and
//! custom resources are never deleted.

use crate::api::keys::{OWNER_KIND_LABEL, OWNER_LABEL, OWNER_NAMESPACE_LABEL};
use crate::api::{CSV_FINALIZER, ClusterServiceVersion};

use super::identity::{CSV_KIND, has_owner_labels, name, namespace};
use super::observed::Observed;

/// What the finalizer still has to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cleanup {
    /// Label selector of the CSV's cluster-scoped objects: ClusterRoles, ClusterRoleBindings,
    /// Mutating/ValidatingWebhookConfigurations are deleted by collection.
    pub owner_selector: String,
    /// Owned APIServices to delete (their owner labels name this CSV).
    pub api_services: Vec<String>,
    /// ClusterRoles / ClusterRoleBindings still seen with the owner labels.
    pub remaining: Vec<String>,
    /// CRDs whose conversion webhook is reset to `strategy: None` (docs/certificates.md §4.3).
    pub conversion_resets: Vec<String>,
}

impl Cleanup {
    /// The finalizer may go once nothing labelled for the CSV remains.
    pub fn done(&self) -> bool {
        self.api_services.is_empty() && self.remaining.is_empty()
    }
}

/// Whether the CSV carries OLM's finalizer (and so needs [`cleanup`] before it goes).
pub fn has_finalizer(csv: &ClusterServiceVersion) -> bool {
    csv.metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == CSV_FINALIZER)
}

/// `olm.owner=<csv>,olm.owner.namespace=<ns>,olm.owner.kind=ClusterServiceVersion`.
pub fn owner_selector(csv: &ClusterServiceVersion) -> String {
    format!(
        "{OWNER_LABEL}={},{OWNER_NAMESPACE_LABEL}={},{OWNER_KIND_LABEL}={CSV_KIND}",
        name(csv),
        namespace(csv)
    )
}

pub fn cleanup(csv: &ClusterServiceVersion, seen: &Observed) -> Cleanup {
    let api_services = seen
        .api_services
        .iter()
        .filter(|a| has_owner_labels(csv, a.metadata.labels.as_ref()))
        .filter_map(|a| a.metadata.name.clone())
        .collect();
    let roles = seen
        .cluster_roles
        .iter()
        .filter(|r| has_owner_labels(csv, r.metadata.labels.as_ref()))
        .filter_map(|r| r.metadata.name.as_ref().map(|n| format!("ClusterRole {n}")));
    let bindings = seen
        .cluster_role_bindings
        .iter()
        .filter(|r| has_owner_labels(csv, r.metadata.labels.as_ref()))
        .filter_map(|r| {
            r.metadata
                .name
                .as_ref()
                .map(|n| format!("ClusterRoleBinding {n}"))
        });
    Cleanup {
        owner_selector: owner_selector(csv),
        api_services,
        remaining: roles.chain(bindings).collect(),
        conversion_resets: super::certs::check::conversion_resets(csv, seen),
    }
}

//! The shell side of docs/certificates.md: reads the cert objects a CSV's decisions need from the
//! stores, and the uninstall clean-ups. What an install writes for certificates is decided in
//! `csv::writes`; key material is passed through to the API server and never logged.

use k8s_openapi::api::rbac::v1::RoleBinding;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::Api;
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::certs::{CertSecretData, OLM_CA_HASH_ANNOTATION};
use crate::csv::certs::resources::KUBE_SYSTEM;
use crate::csv::certs::{CertObjects, SeenSecret};
use crate::k8s::errors::AbsentOk;
use crate::k8s::write::{self, ObjectKey};

use super::ReconcileError;
use super::stores::Stores;

/// The cert objects of namespace `ns` (and the cluster's webhook configurations and
/// `kube-system` bindings) from the stores.
pub fn observe_certs(stores: &Stores, ns: &str) -> CertObjects {
    CertObjects {
        secrets: stores
            .secrets
            .in_namespace(ns)
            .iter()
            .map(|s| SeenSecret {
                name: s.name_any(),
                ca_hash_annotation: s.annotations().get(OLM_CA_HASH_ANNOTATION).cloned(),
                data: s
                    .data
                    .as_ref()
                    .map(CertSecretData::from_secret_data)
                    .unwrap_or_default(),
            })
            .collect(),
        services: stores.services.in_namespace(ns),
        validating_webhooks: stores.validating_webhooks.all(),
        mutating_webhooks: stores.mutating_webhooks.all(),
        auth_reader_bindings: stores.role_bindings.in_namespace(KUBE_SYSTEM),
    }
}

/// Uninstall: the `kube-system` auth-reader RoleBindings olm-rs labelled for the CSV (OLM
/// leaks them, docs/certificates.md §3.5).
pub async fn delete_auth_readers(client: &Client, selector: &str) -> Result<(), ReconcileError> {
    let api: Api<RoleBinding> = Api::namespaced(client.clone(), KUBE_SYSTEM);
    Ok(write::delete_collection(&api, selector).await?)
}

/// Uninstall: CRDs converted by the CSV's webhook go back to `strategy: None`, so their
/// objects stay readable once the operator is gone (docs/csv-phases.md §10).
pub async fn reset_conversions(client: &Client, crds: &[String]) -> Result<(), ReconcileError> {
    let patch = json!({"spec": {"conversion": {"strategy": "None", "webhook": null}}});
    for crd in crds {
        let key = ObjectKey::new::<CustomResourceDefinition>(None, crd);
        // A CRD already gone has nothing left to convert.
        write::merge_patch(client, &key, &patch, None)
            .await
            .absent_ok()?;
    }
    Ok(())
}

//! The shell side of docs/certificates.md: reads the cert objects a CSV's decisions need from the
//! stores. What an install writes for certificates, and what the finalizer deletes, is decided
//! in the core (`csv::writes`, `csv::cleanup`); key material is passed through to the API server
//! and never logged.

use kube::ResourceExt;

use crate::certs::SeenSecret;
use crate::certs::objects::KUBE_SYSTEM;
use crate::certs::{CertSecretData, OLM_CA_HASH_ANNOTATION};
use crate::csv::certs::CertObjects;

use super::created::CreatedWebhooks;
use super::stores::Stores;

/// The cert objects of namespace `ns` (and the cluster's webhook configurations, with those
/// just created that the stores have not seen yet, and `kube-system` bindings) from the stores.
pub fn observe_certs(stores: &Stores, created: &CreatedWebhooks, ns: &str) -> CertObjects {
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
        validating_webhooks: created.validating(stores.validating_webhooks.all()),
        mutating_webhooks: created.mutating(stores.mutating_webhooks.all()),
        auth_reader_bindings: stores.role_bindings.in_namespace(KUBE_SYSTEM),
    }
}

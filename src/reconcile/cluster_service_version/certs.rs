//! The shell side of docs/certificates.md: reads the cert objects a CSV's decisions need from the stores,
//! and writes what [`crate::csv::certs::plan_cert_install`] planned. Key material is passed
//! through to the API server and never logged.

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::Api;
use kube::{Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::certs::{CertSecretData, OLM_CA_HASH_ANNOTATION};
use crate::csv::InstallFailure;
use crate::csv::certs::check::WebhookKind;
use crate::csv::certs::resources::KUBE_SYSTEM;
use crate::csv::certs::{CertInstall, CertObjects, SeenSecret, WebhookConfiguration};
use crate::k8s::errors::ApiFailure;
use crate::k8s::write::{self, ApiError, DeleteOptions, ObjectKey, Ownership};

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

fn failure(err: ApiError, forbidden_is_final: bool) -> InstallFailure {
    let text = err.to_string();
    if forbidden_is_final && err.failure() == ApiFailure::Forbidden {
        InstallFailure::Forbidden(text)
    } else {
        InstallFailure::Other(text)
    }
}

async fn apply_ns<K>(client: &Client, obj: &K) -> Result<(), InstallFailure>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + Serialize
        + DeserializeOwned
        + std::fmt::Debug,
{
    let ns = obj.namespace().unwrap_or_default();
    let api: Api<K> = Api::namespaced(client.clone(), &ns);
    write::apply(&api, obj, Ownership::Force)
        .await
        .map(|_| ())
        // docs/csv-phases.md §3.1 InstallReady: Forbidden on the Service, Secret or cert RBAC is retried.
        .map_err(|e| failure(e, false))
}

async fn apply_cluster<K>(
    client: &Client,
    obj: &K,
    forbidden_is_final: bool,
) -> Result<(), InstallFailure>
where
    K: Resource<Scope = k8s_openapi::ClusterResourceScope, DynamicType = ()>
        + Clone
        + Serialize
        + DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = Api::all(client.clone());
    write::apply(&api, obj, Ownership::Force)
        .await
        .map(|_| ())
        .map_err(|e| failure(e, forbidden_is_final))
}

/// docs/certificates.md §6.3 steps 2–3: Service, Secret and RBAC of every cert deployment, before the
/// Deployments that mount the Secrets.
pub async fn write_cert_objects(
    client: &Client,
    certs: &CertInstall,
) -> Result<(), InstallFailure> {
    for d in &certs.deployments {
        apply_ns::<Service>(client, &d.service).await?;
        apply_ns::<Secret>(client, &d.secret).await?;
        apply_ns::<Role>(client, &d.role).await?;
        apply_ns::<RoleBinding>(client, &d.role_binding).await?;
        apply_cluster::<ClusterRoleBinding>(client, &d.cluster_role_binding, false).await?;
        apply_ns::<RoleBinding>(client, &d.auth_reader_binding).await?;
        if !d.certs.reused {
            tracing::info!(deployment = %d.deployment, ca_hash = %d.certs.ca_hash, "issued serving certificates");
        }
    }
    Ok(())
}

/// docs/certificates.md §4: APIServices, webhook configurations and CRD conversions with the CA bundle.
/// Forbidden here is final (docs/csv-phases.md §3.1 InstallReady).
pub async fn inject_ca(client: &Client, certs: &CertInstall) -> Result<(), InstallFailure> {
    for api in &certs.api_services {
        apply_cluster::<APIService>(client, api, true).await?;
    }
    for config in &certs.webhooks {
        match config {
            WebhookConfiguration::Validating(obj) => write_webhook(client, obj).await?,
            WebhookConfiguration::Mutating(obj) => write_webhook(client, obj).await?,
        }
    }
    for conversion in &certs.conversions {
        // A merge patch of `spec.conversion` only: the CRD itself is applied by the
        // InstallPlan with the same field manager, and an apply of just this field would
        // drop the rest of that manager's fields.
        let patch = json!({"spec": {"conversion": conversion.conversion}});
        let key = ObjectKey::new::<CustomResourceDefinition>(None, &conversion.crd);
        write::merge_patch(client, &key, &patch, None)
            .await
            .map_err(|e| failure(e, true))?;
    }
    Ok(())
}

/// An existing configuration (named) is applied; a new one is created from `generateName`.
async fn write_webhook<K>(client: &Client, obj: &K) -> Result<(), InstallFailure>
where
    K: Resource<Scope = k8s_openapi::ClusterResourceScope, DynamicType = ()>
        + Clone
        + Serialize
        + DeserializeOwned
        + std::fmt::Debug,
{
    if obj.meta().name.is_some() {
        return apply_cluster(client, obj, true).await;
    }
    let api: Api<K> = Api::all(client.clone());
    write::create(&api, obj)
        .await
        .map(|_| ())
        .map_err(|e| failure(e, true))
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
        match write::merge_patch(client, &key, &patch, None).await {
            Ok(_) => {}
            Err(err) if err.is_not_found() => {}
            Err(err) => return Err(err.into()),
        }
    }
    Ok(())
}

/// Deletes webhook configurations no definition asks for any more (absent is fine).
pub async fn delete_webhooks(
    client: &Client,
    stale: &[(WebhookKind, String)],
) -> Result<(), ReconcileError> {
    for (kind, name) in stale {
        let key = match kind {
            WebhookKind::Validating => ObjectKey::new::<ValidatingWebhookConfiguration>(None, name),
            WebhookKind::Mutating => ObjectKey::new::<MutatingWebhookConfiguration>(None, name),
        };
        write::delete(client, &key, &DeleteOptions::default()).await?;
    }
    Ok(())
}

//! The CSV finalizer (docs/csv-phases.md §10): delete what the CSV labelled as its own outside its
//! namespace, wait until it is gone, then let the CSV go.

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::Api;
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::api::{CSV_FINALIZER, ClusterServiceVersion};
use crate::csv::cleanup::Cleanup;
use crate::csv::identity::{name, namespace};
use crate::k8s::errors::AbsentOk;
use crate::k8s::write::{self, DeleteOptions, ObjectKey};

use super::ReconcileError;

async fn delete_labelled<K>(client: &Client, selector: &str) -> Result<(), ReconcileError>
where
    K: Resource<Scope = k8s_openapi::ClusterResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = Api::all(client.clone());
    Ok(write::delete_collection(&api, selector).await?)
}

/// One finalizer pass. Returns `true` once the finalizer was removed.
pub async fn finalize(
    client: &Client,
    csv: &ClusterServiceVersion,
    cleanup: &Cleanup,
) -> Result<bool, ReconcileError> {
    let selector = &cleanup.owner_selector;
    delete_labelled::<ClusterRoleBinding>(client, selector).await?;
    delete_labelled::<ClusterRole>(client, selector).await?;
    delete_labelled::<MutatingWebhookConfiguration>(client, selector).await?;
    delete_labelled::<ValidatingWebhookConfiguration>(client, selector).await?;
    super::certs::delete_auth_readers(client, selector).await?;
    super::certs::reset_conversions(client, &cleanup.conversion_resets).await?;
    for api in &cleanup.api_services {
        let key = ObjectKey::new::<APIService>(None, api);
        write::delete(client, &key, &DeleteOptions::default()).await?;
    }
    if !cleanup.remaining.is_empty() {
        // Deleted above; the cache has not seen it yet. The deletion events requeue the CSV.
        return Ok(false);
    }
    let finalizers: Vec<String> = csv
        .finalizers()
        .iter()
        .filter(|f| *f != CSV_FINALIZER)
        .cloned()
        .collect();
    let patch = json!({"metadata": {"finalizers": finalizers}});
    let key = ObjectKey::new::<ClusterServiceVersion>(Some(namespace(csv)), name(csv));
    // A CSV already gone is finalized.
    write::merge_patch(client, &key, &patch, csv.resource_version().as_deref())
        .await
        .absent_ok()?;
    Ok(true)
}

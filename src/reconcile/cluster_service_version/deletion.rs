//! The CSV finalizer (docs/csv-phases.md §10): delete what the CSV labelled as its own outside its
//! namespace, wait until it is gone, then let the CSV go.

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::{Api, DeleteParams, ListParams, Patch};
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::api::{CSV_FINALIZER, ClusterServiceVersion};
use crate::csv::cleanup::Cleanup;
use crate::csv::identity::{name, namespace};
use crate::k8s::errors::is_not_found;

use super::ReconcileError;

async fn delete_labelled<K>(client: &Client, selector: &str) -> Result<(), ReconcileError>
where
    K: Resource<Scope = k8s_openapi::ClusterResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = Api::all(client.clone());
    api.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().labels(selector),
    )
    .await
    .map(|_| ())
    .map_err(|source| ReconcileError::Kube {
        what: format!("delete {} labelled {selector}", K::kind(&())),
        source,
    })
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
    let api_services: Api<APIService> = Api::all(client.clone());
    for api in &cleanup.api_services {
        match api_services.delete(api, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(err) if is_not_found(&err) => {}
            Err(source) => {
                return Err(ReconcileError::Kube {
                    what: format!("delete APIService {api}"),
                    source,
                });
            }
        }
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
    let patch =
        json!({"metadata": {"finalizers": finalizers, "resourceVersion": csv.resource_version()}});
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), namespace(csv));
    match csvs
        .patch(
            name(csv),
            &crate::k8s::patch_params(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => Ok(true),
        Err(err) if is_not_found(&err) => Ok(true),
        Err(source) => Err(ReconcileError::Kube {
            what: format!("remove the finalizer of CSV {}", name(csv)),
            source,
        }),
    }
}

//! Admission, for real: a catalog from an image in a namespace that enforces the `restricted`
//! Pod Security level (the chart labels `olm` so when it creates it) gets its registry pod past
//! the API server's PodSecurity admission, and the pod runs (on the node simulator).

use anyhow::Context as _;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use serde_json::{Value, json};

use super::checks::wait;
use crate::cluster;
use crate::real_control_plane::ControlPlane;

pub async fn run(plane: &ControlPlane) -> anyhow::Result<()> {
    let client = &plane.client;
    let ns = "e2e-real-restricted";
    let namespaces: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &cluster::core("", "v1", "Namespace", "namespaces"),
    );
    let namespace: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": ns, "labels": {"pod-security.kubernetes.io/enforce": "restricted"}},
    }))?;
    namespaces
        .create(&PostParams::default(), &namespace)
        .await?;
    let catalog: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "CatalogSource",
        // The registry pod is what this check is about (in-process serving is the default).
        "metadata": {"name": "restricted-catalog", "namespace": ns,
                     "annotations": {"olm-rs.io/catalog-serving": "pod"}},
        "spec": {"sourceType": "grpc", "image": "example.invalid/olm-rs-e2e-catalog:1",
                 "displayName": "restricted", "publisher": "olm-rs"},
    }))?;
    let catalogs = Api::namespaced_with(client.clone(), ns, &cluster::catalog_sources());
    catalogs.create(&PostParams::default(), &catalog).await?;
    let pods: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), ns, &cluster::core("", "v1", "Pod", "pods"));
    let events: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        ns,
        &cluster::core("", "v1", "Event", "events"),
    );
    let result = wait(
        format!("the registry pod of CatalogSource {ns}/restricted-catalog to run"),
        || async {
            let list = pods
                .list(&ListParams::default().labels("olm.catalogSource=restricted-catalog"))
                .await?;
            if let Some(pod) = list.items.first() {
                let phase = pod.data.pointer("/status/phase").and_then(Value::as_str);
                return Ok((phase == Some("Running"))
                    .then_some(())
                    .ok_or(format!("pod phase {phase:?}")));
            }
            let catalog = catalogs.get("restricted-catalog").await?;
            let said: Vec<String> = events
                .list(&ListParams::default())
                .await?
                .items
                .iter()
                .filter_map(|e| e.data.get("message").and_then(Value::as_str))
                .map(str::to_owned)
                .collect();
            Ok(Err(format!(
                "no registry pod; status {}; events {said:?}",
                catalog.data.get("status").cloned().unwrap_or(Value::Null)
            )))
        },
    )
    .await
    .context("PodSecurity admission");
    namespaces.delete(ns, &DeleteParams::background()).await?;
    result
}

//! Which replica the package API's Service sends requests to (docs/packagemanifests.md §8).
//!
//! Catalog content is loaded by the CatalogSource controller, which runs only on the replica
//! that leads; a standby's PackageManifests would be an empty list. So the replica that runs
//! the reconcilers labels its own Pod `olm-rs.dev/package-api=serving`, the chart's Service
//! selects that label, and every replica removes the label from its Pod when it starts (a
//! container restarted after losing the Lease keeps its Pod's labels).

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use serde_json::{Value, json};

use crate::k8s::write::{self, ObjectKey};

/// The label the chart's `olm-rs-packageserver` Service selects.
pub const SERVING_LABEL: &str = "olm-rs.dev/package-api";
pub const SERVING_VALUE: &str = "serving";

/// This replica's Pod (`POD_NAMESPACE`, `POD_NAME`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
}

/// The merge patch that sets (or removes) the label.
pub fn label_patch(serving: bool) -> Value {
    let value = if serving {
        json!(SERVING_VALUE)
    } else {
        Value::Null
    };
    json!({"metadata": {"labels": {SERVING_LABEL: value}}})
}

/// Labels (or unlabels) the Pod; a failure is logged, never fatal: the API stays served on the
/// port, only the Service's choice of replica is affected.
pub async fn mark(client: &Client, pod: &PodRef, serving: bool) {
    let key = ObjectKey::new::<Pod>(Some(&pod.namespace), &pod.name);
    match write::merge_patch(client, &key, &label_patch(serving), None).await {
        Ok(_) => tracing::info!(pod = %pod.name, serving, "package API Service selection updated"),
        Err(error) => tracing::warn!(
            %error,
            serving,
            "cannot label this replica's Pod for the package API's Service; requests may reach a replica without catalogs"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_patch_sets_or_removes_the_label() {
        assert_eq!(
            label_patch(true),
            json!({"metadata": {"labels": {"olm-rs.dev/package-api": "serving"}}})
        );
        assert_eq!(
            label_patch(false),
            json!({"metadata": {"labels": {"olm-rs.dev/package-api": null}}})
        );
    }
}

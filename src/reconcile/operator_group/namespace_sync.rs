//! Namespace labels (docs/operator-groups.md §4): one `olm.operatorgroup.uid/<uid>` per explicit-target
//! group that targets the namespace, stale ones removed.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Namespace;
use kube::ResourceExt;
use kube::api::{Api, Patch};

use crate::k8s::errors::is_not_found;
use crate::operator_group::namespace_labels::{desired_group_labels, namespace_label_patch};
use crate::operator_group::targets::TargetNamespaces;

use super::{Shared, merge_params};
use crate::reconcile::work_queue::Next;

#[derive(Debug, thiserror::Error)]
#[error("Namespace {namespace}: cannot update OperatorGroup labels: {source}")]
pub struct NamespaceSyncError {
    namespace: String,
    #[source]
    source: kube::Error,
}

pub async fn sync(shared: &Shared, name: &str) -> Result<Next, NamespaceSyncError> {
    let Some(ns) = shared.caches.namespaces.find(|ns| ns.name_any() == name) else {
        return Ok(Next::Done);
    };
    if ns.metadata.deletion_timestamp.is_some() {
        return Ok(Next::Done);
    }
    let groups: Vec<(String, TargetNamespaces)> = shared
        .caches
        .groups
        .state()
        .iter()
        .filter_map(|og: &Arc<_>| {
            let uid = og.metadata.uid.clone()?;
            let targets =
                TargetNamespaces::from_status(og.status.as_ref()?.namespaces.as_deref()).ok()?;
            Some((uid, targets))
        })
        .collect();
    let desired = desired_group_labels(name, groups.iter().map(|(uid, t)| (uid.as_str(), t)));
    let Some(patch) = namespace_label_patch(ns.metadata.labels.as_ref(), &desired) else {
        return Ok(Next::Done);
    };
    let api: Api<Namespace> = Api::all(shared.ctx.client.clone());
    match api
        .patch(name, &merge_params(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(Next::Done),
        Err(err) if is_not_found(&err) => Ok(Next::Done),
        Err(source) => Err(NamespaceSyncError {
            namespace: name.to_owned(),
            source,
        }),
    }
}

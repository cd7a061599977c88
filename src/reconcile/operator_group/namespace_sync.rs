//! Namespace labels (docs/operator-groups.md §4): one `olm.operatorgroup.uid/<uid>` per
//! explicit-target group that targets the namespace, stale ones removed.

use crate::k8s::effects::execute;
use crate::k8s::write::ApiError;
use crate::operator_group::namespace_labels::decide_namespace_labels;

use super::shared::{RACE_RETRY, Shared};
use super::stores::CLUSTER;
use crate::reconcile::work_queue::Next;

#[derive(Debug, thiserror::Error)]
#[error("Namespace {namespace}: cannot update OperatorGroup labels: {source}")]
pub struct NamespaceSyncError {
    namespace: String,
    #[source]
    source: ApiError,
}

impl crate::k8s::errors::ReconcileFailure for NamespaceSyncError {
    fn error_label(&self) -> &'static str {
        self.source.metric_label()
    }
}

pub async fn sync(shared: &Shared, name: &str) -> Result<Next, NamespaceSyncError> {
    let Some(ns) = shared.stores.namespaces.get(CLUSTER, name) else {
        return Ok(Next::Done);
    };
    let effects = decide_namespace_labels(&ns, &shared.stores.groups.all());
    match execute(&shared.ctx.client, &shared.ctx.events, &effects).await {
        Ok(_) => Ok(Next::Done),
        // Deleted meanwhile: nothing to label.
        Err(err) if err.is_not_found() => Ok(Next::Done),
        Err(err) if err.is_conflict() => Ok(Next::After(RACE_RETRY)),
        Err(source) => Err(NamespaceSyncError {
            namespace: name.to_owned(),
            source,
        }),
    }
}

//! What one run of the copied-CSV loop does for one original CSV (docs/operator-groups.md,
//! "Copied CSVs"), decided from what the stores hold: the copies to create, update (content,
//! status or both) and delete, whether the original's RBAC outside its namespace is to be
//! ensured, and whether the "copies disabled" Warning belongs on it.
//!
//! A copy's create is followed by a status write at the version the create returned, which no
//! decision can know in advance; so the decision's writes are a [`FanOut`], the executor's
//! batch capability (`k8s::effects::execute_fan_out`), rather than plain `Effects`.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Namespace;
use kube::ResourceExt;
use kube::api::PartialObjectMeta;

use crate::api::keys::TARGET_NAMESPACES_ANNOTATION;
use crate::api::{ClusterServiceVersion, OperatorGroup};
use crate::k8s::effects::{Body, FanOut, FanOutWrite};

use super::copied_csv::{
    CopyDelete, CopyHashes, CopyPlan, CopyRecord, CopySettings, CopyWrite, Original, copy_hashes,
    copy_prototype, is_uncopiable, plan_copies,
};
use super::membership::{is_active_member, is_copied};
use super::targets::TargetNamespaces;

/// What a copy run reads.
#[derive(Debug, Clone, Copy)]
pub struct CopyObserved<'a> {
    /// The original, when it exists.
    pub original: Option<&'a ClusterServiceVersion>,
    /// The OperatorGroups of the original's namespace.
    pub groups_in_namespace: &'a [Arc<OperatorGroup>],
    /// The original's copies as recorded.
    pub copies: &'a [CopyRecord],
    /// Every namespace (metadata); those being deleted get no copy.
    pub namespaces: &'a [Arc<PartialObjectMeta<Namespace>>],
    pub settings: &'a CopySettings,
}

/// A copy run's decision.
#[derive(Debug, Clone)]
pub struct CopyDecision {
    /// The body every copy is written from; `None` without an original.
    pub prototype: Option<ClusterServiceVersion>,
    /// The hashes of `prototype`, which every up-to-date copy has.
    pub desired: Option<CopyHashes>,
    pub plan: CopyPlan,
    /// Ensure the original's Roles and RoleBindings outside its namespace (it is an active
    /// member of its one group and not being deleted: a CSV being deleted has its finalizer
    /// removing the lifted roles, which a lift now would re-create).
    pub member_rbac: bool,
    /// `Some(true)`: the original should carry the `DisabledCopiedCSVs` Warning (copying is
    /// off and it targets all namespaces); `Some(false)`: it should not; `None`: no original.
    pub copies_disabled_warning: Option<bool>,
}

impl CopyDecision {
    /// The plan's writes as the executor's fan-out: deletes first, then creates and updates,
    /// all from the one prototype. `None` when there is nothing to write.
    pub fn fan_out(&self) -> Option<FanOut> {
        if self.plan.is_empty() {
            return None;
        }
        let deletes = self
            .plan
            .deletes
            .iter()
            .map(|d: &CopyDelete| FanOutWrite::Delete {
                namespace: d.namespace.clone(),
                name: d.name.clone(),
                uid: d.uid.clone(),
            });
        let writes = self.plan.writes.iter().map(|w| match w {
            CopyWrite::Create { namespace } => FanOutWrite::Create {
                namespace: namespace.clone(),
            },
            CopyWrite::Update {
                namespace,
                resource_version,
                content,
                status,
            } => FanOutWrite::Update {
                namespace: namespace.clone(),
                resource_version: resource_version.clone(),
                content: *content,
                status: *status,
            },
        });
        let name = self
            .prototype
            .as_ref()
            .map(|p| p.name_any())
            .or_else(|| self.plan.deletes.first().map(|d| d.name.clone()))
            .unwrap_or_default();
        Some(FanOut {
            resource: kube::core::ApiResource::erase::<ClusterServiceVersion>(&()),
            name,
            status: self
                .prototype
                .as_ref()
                .and_then(|p| p.status.clone())
                .map(Body::new),
            prototype: self.prototype.clone().map(Body::new),
            writes: deletes.chain(writes).collect(),
        })
    }
}

/// Decides one run for the copies of `seen.original` (or of a gone original).
pub fn decide_copies(seen: &CopyObserved<'_>) -> CopyDecision {
    let original = seen.original.filter(|csv| !is_copied(csv));
    let prototype = original.map(copy_prototype);
    let desired = prototype.as_ref().map(copy_hashes);
    let live = seen
        .namespaces
        .iter()
        .filter(|ns| ns.metadata.deletion_timestamp.is_none())
        .filter_map(|ns| ns.metadata.name.as_deref());
    let copies: Vec<&CopyRecord> = seen.copies.iter().collect();
    let view = original.zip(desired).map(|(csv, desired)| Original {
        csv,
        copyable: is_copyable(csv, seen.groups_in_namespace),
        desired,
    });
    let plan = plan_copies(view, &copies, live, seen.settings);
    CopyDecision {
        member_rbac: original.is_some_and(|csv| {
            csv.metadata.deletion_timestamp.is_none()
                && is_member_of_its_group(csv, seen.groups_in_namespace)
        }),
        copies_disabled_warning: original.map(|csv| seen.settings.disabled && targets_all(csv)),
        prototype,
        desired,
        plan,
    }
}

/// Whether copies of `csv` may be created and updated: not being deleted, not uncopiable, an
/// active member of the one group of its namespace (`groups`), which targets more than that
/// namespace (docs/csv-phases.md, docs/operator-groups.md "Copied CSVs").
pub fn is_copyable(csv: &ClusterServiceVersion, groups: &[Arc<OperatorGroup>]) -> bool {
    let namespace = csv.metadata.namespace.as_deref().unwrap_or_default();
    let own_namespace_only = targets_of(csv).is_none_or(|t| t.is_only(namespace));
    csv.metadata.deletion_timestamp.is_none()
        && !is_uncopiable(csv.status.as_ref())
        && is_member_of_its_group(csv, groups)
        && !own_namespace_only
}

fn is_member_of_its_group(csv: &ClusterServiceVersion, groups: &[Arc<OperatorGroup>]) -> bool {
    matches!(groups, [group] if is_active_member(csv, group))
}

fn targets_of(csv: &ClusterServiceVersion) -> Option<TargetNamespaces> {
    csv.annotations()
        .get(TARGET_NAMESPACES_ANNOTATION)
        .and_then(|t| TargetNamespaces::from_annotation(t).ok())
}

/// Whether `csv` targets all namespaces.
pub fn targets_all(csv: &ClusterServiceVersion) -> bool {
    targets_of(csv).is_some_and(|t| t.is_all())
}

#[cfg(test)]
mod tests;

//! The CSV finalizer as one decision (docs/csv-phases.md §10): the cluster-scoped objects found
//! in the stores with the CSV's owner labels are orphans of an owner that wants nothing any more
//! (`k8s::owned_set`), deleted as they were observed; once none is seen, the finalizer goes.
//! Namespaced objects go with the CSV through ownerReferences; CRDs and custom resources are
//! never deleted.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::api::{CSV_FINALIZER, ClusterServiceVersion};
use crate::k8s::effects::{Body, Effects, Write};
use crate::k8s::owned_set::OwnedSet;
use crate::k8s::write::ObjectKey;

use super::identity::has_owner_labels;
use super::observed::Observed;

/// How soon a pass that deleted something looks again: the stores have not seen the deletes
/// yet, and the finalizer waits until they have.
pub const CLEANUP_POLL: Duration = Duration::from_secs(1);

/// One finalizer pass.
#[derive(Clone, Debug, PartialEq)]
pub struct FinalizerPass {
    /// The orphans' deletes and the conversion resets, or the finalizer's removal; then a
    /// requeue while anything is still seen.
    pub effects: Effects,
    /// Whether this pass removes the finalizer (the CSV then goes).
    pub releases: bool,
}

/// Whether the CSV carries OLM's finalizer (and so needs [`finalize`] before it goes).
pub fn has_finalizer(csv: &ClusterServiceVersion) -> bool {
    csv.metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == CSV_FINALIZER)
}

/// One pass of the finalizer of a CSV being deleted, from what the stores hold.
pub fn finalize(csv: &ClusterServiceVersion, seen: &Observed) -> FinalizerPass {
    // Nothing is wanted: everything found with the owner labels is an orphan. The
    // `kube-system` auth-reader bindings carry them in olm-rs (OLM leaks them,
    // docs/certificates.md §3.5).
    let mut orphans = OwnedSet::new();
    orphans
        .found(labelled(csv, &seen.cluster_role_bindings))
        .found(labelled(csv, &seen.cluster_roles))
        .found(labelled(csv, &seen.certs.mutating_webhooks))
        .found(labelled(csv, &seen.certs.validating_webhooks))
        .found(labelled(csv, &seen.certs.auth_reader_bindings))
        .found(labelled(csv, &seen.api_services));
    let waiting = orphans.orphans().next().is_some();
    let mut effects = Effects::default();
    orphans.into_effects(&mut effects);
    // CRDs converted by the CSV's webhook go back to `strategy: None`, so their objects stay
    // readable once the operator is gone.
    for crd in super::certs::check::conversion_resets(csv, seen) {
        effects.write(Write::MergePatch {
            key: ObjectKey::new::<CustomResourceDefinition>(None, &crd),
            patch: Body::new(
                json!({"spec": {"conversion": {"strategy": "None", "webhook": null}}}),
            ),
            resource_version: None,
        });
    }
    if waiting {
        effects.requeue_after(CLEANUP_POLL);
    } else {
        effects.write(release(csv));
    }
    FinalizerPass {
        effects,
        releases: !waiting,
    }
}

/// The objects of `objects` that carry the CSV's owner labels.
fn labelled<'a, K: Resource>(
    csv: &'a ClusterServiceVersion,
    objects: &'a [Arc<K>],
) -> impl Iterator<Item = &'a K> + 'a {
    objects
        .iter()
        .map(|o| o.as_ref())
        .filter(move |o| has_owner_labels(csv, o.meta().labels.as_ref()))
}

/// The finalizer's removal, only from the CSV as observed.
fn release(csv: &ClusterServiceVersion) -> Write {
    let finalizers: Vec<&String> = csv
        .finalizers()
        .iter()
        .filter(|f| *f != CSV_FINALIZER)
        .collect();
    Write::MergePatch {
        key: ObjectKey::of(csv),
        patch: Body::new(json!({"metadata": {"finalizers": finalizers}})),
        resource_version: csv.resource_version(),
    }
}

#[cfg(test)]
#[path = "cleanup_tests.rs"]
mod tests;

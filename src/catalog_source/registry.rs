//! The registry objects of a pod-mode image catalog (docs/catalog.md §3): which writes bring
//! its ServiceAccount, Service, NetworkPolicy and pods to what its spec asks, from what the
//! stores hold; and, for a catalog now served in-process, the objects pod mode left. Pure.
//!
//! The pods go through the owned-set applier (`k8s::owned_set`): the pod plan
//! (`pod_plan::plan_pods`) names the pods kept and the pod to create; every other live pod of
//! the catalog is deleted as it was observed.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{Resource, ResourceExt};

use super::registry_objects::{
    self, CREATED_AT_ANNOTATION, IMAGE_DIGEST_ANNOTATION, REGISTRY_PORT, RegistryObjects,
};
use crate::api::keys::{POD_SPEC_HASH_LABEL, SERVICE_SPEC_HASH_LABEL};
use crate::api::{CatalogSource, RegistryServiceStatus};
use crate::k8s::effects::Write;
use crate::k8s::owned_set::OwnedSet;
use crate::k8s::write::{DeleteOptions, ObjectKey, Ownership};

use super::pod_plan::{DesiredPod, PodPlan, PodView};

/// A catalog's registry objects as the stores hold them.
#[derive(Debug, Clone, Default)]
pub struct RegistryObserved {
    pub service_account: Option<Arc<ServiceAccount>>,
    pub network_policy: Option<Arc<NetworkPolicy>>,
    pub service: Option<Arc<Service>>,
    /// Every pod labelled for the catalog, terminating ones included.
    pub pods: Vec<Arc<Pod>>,
}

/// The writes that bring a catalog's registry objects to what its spec asks, in order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RegistryWrites {
    /// ServiceAccount (created once), Service and NetworkPolicy, then the new pod.
    pub objects: Vec<Write>,
    /// The deletions of the pods not kept, after the new pod: the shell records the pod it
    /// created before any of them can fail.
    pub orphans: Vec<Write>,
}

impl RegistryWrites {
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty() && self.orphans.is_empty()
    }

    /// Whether any pod is created or deleted.
    pub fn touches_pods(&self) -> bool {
        !self.orphans.is_empty()
            || self
                .objects
                .iter()
                .any(|w| matches!(w, Write::Create { .. }))
    }

    pub fn into_writes(self) -> Vec<Write> {
        let mut writes = self.objects;
        writes.extend(self.orphans);
        writes
    }
}

/// Deletes what pod mode left for a catalog served in-process: its registry pods, Service,
/// NetworkPolicy and ServiceAccount.
pub fn decide_leftovers(seen: &RegistryObserved) -> Vec<Write> {
    fn delete<K>(object: &K) -> Write
    where
        K: Resource<DynamicType = ()>,
    {
        Write::Delete {
            key: ObjectKey::new::<K>(object.meta().namespace.as_deref(), &object.name_any()),
            options: DeleteOptions::default(),
        }
    }
    let mut writes: Vec<Write> = seen.pods.iter().map(|p| delete(p.as_ref())).collect();
    writes.extend(seen.service.iter().map(|s| delete(s.as_ref())));
    writes.extend(seen.network_policy.iter().map(|n| delete(n.as_ref())));
    writes.extend(seen.service_account.iter().map(|a| delete(a.as_ref())));
    writes
}

/// Decides the registry writes from what is observed and the pod plan. `network_policies` says
/// whether the server serves NetworkPolicies: a cluster that does not still runs registries,
/// without their policy. `pods_held` leaves the pods alone (a pod just created is not in the
/// store yet).
pub fn decide_registry(
    objects: &RegistryObjects,
    seen: &RegistryObserved,
    plan: &PodPlan,
    network_policies: bool,
    pods_held: bool,
    now: jiff::Timestamp,
) -> RegistryWrites {
    let mut writes = RegistryWrites::default();
    if seen.service_account.is_none() {
        // Created once, as OLM does: the cluster may add pull secrets to it afterwards.
        writes.objects.push(Write::apply(
            objects.service_account.clone(),
            Ownership::Shared,
        ));
    }
    let service_current = seen.service.as_ref().is_some_and(|s| {
        s.labels().get(SERVICE_SPEC_HASH_LABEL) == Some(&objects.service_spec_hash)
    });
    if !service_current {
        // In place (OLM deletes and recreates): ports and selector are mutable, no outage.
        writes
            .objects
            .push(Write::apply(objects.service.clone(), Ownership::Shared));
    }
    if network_policies
        && !network_policy_matches(seen.network_policy.as_deref(), &objects.network_policy)
    {
        writes.objects.push(Write::apply(
            objects.network_policy.clone(),
            Ownership::Shared,
        ));
    }
    if pods_held {
        return writes;
    }
    let mut pods = OwnedSet::new();
    for name in &plan.keep {
        pods.keep(ObjectKey::new::<Pod>(
            objects.pod.namespace().as_deref(),
            name,
        ));
    }
    if let Some(pod_digest) = &plan.create {
        let mut new_pod = objects.pod.clone();
        let annotations = new_pod.metadata.annotations.get_or_insert_default();
        annotations.insert(CREATED_AT_ANNOTATION.to_owned(), now.to_string());
        if let Some(d) = pod_digest {
            annotations.insert(IMAGE_DIGEST_ANNOTATION.to_owned(), d.clone());
        }
        pods.want(Write::create(new_pod));
    }
    // Terminating pods are going already.
    let live = seen
        .pods
        .iter()
        .filter(|p| p.meta().deletion_timestamp.is_none());
    pods.found_with(live.map(|p| p.as_ref()), |p| DeleteOptions {
        grace_period_seconds: Some(if plan.force.contains(&p.name_any()) {
            0
        } else {
            1
        }),
        ..DeleteOptions::default()
    });
    let (orphans, wanted): (Vec<Write>, Vec<Write>) = pods
        .into_writes()
        .into_iter()
        .partition(|w| matches!(w, Write::Delete { .. }));
    writes.objects.extend(wanted);
    writes.orphans = orphans;
    writes
}

/// The `status.registryService` OLM writes for an image catalog; `createdAt` is kept unless
/// the Service changed or the registry was recreated.
pub fn registry_service(
    cs: &CatalogSource,
    previous: Option<&RegistryServiceStatus>,
    now: jiff::Timestamp,
    recreated: bool,
) -> RegistryServiceStatus {
    let desired = RegistryServiceStatus {
        protocol: Some("grpc".to_owned()),
        service_name: Some(registry_objects::service_name(&cs.name_any())),
        service_namespace: cs.namespace(),
        port: Some(REGISTRY_PORT.to_string()),
        created_at: None,
    };
    let same = previous.is_some_and(|p| {
        p.protocol == desired.protocol
            && p.service_name == desired.service_name
            && p.service_namespace == desired.service_namespace
            && p.port == desired.port
    });
    let created_at = match previous {
        Some(p) if same && !recreated => p.created_at.clone(),
        _ => Some(Time(now)),
    };
    RegistryServiceStatus {
        created_at,
        ..desired
    }
}

/// What the pod plan compares live pods with.
pub fn desired_pod(objects: &RegistryObjects) -> DesiredPod {
    DesiredPod {
        images: pod_images(&objects.pod),
        spec_hash: objects.pod_spec_hash.clone(),
    }
}

fn pod_images(pod: &Pod) -> Vec<String> {
    let Some(spec) = pod.spec.as_ref() else {
        return Vec::new();
    };
    spec.init_containers
        .iter()
        .flatten()
        .chain(spec.containers.iter())
        .map(|c| c.image.clone().unwrap_or_default())
        .collect()
}

/// What the pod plan needs to know of a live pod.
pub fn pod_view(p: &Pod) -> PodView {
    let status = p.status.as_ref();
    let condition = |type_: &str| {
        status
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == type_ && c.status == "True"))
    };
    let phase = status.and_then(|s| s.phase.as_deref());
    let crash_looping = status.is_some_and(|s| {
        s.container_statuses
            .iter()
            .flatten()
            .chain(s.init_container_statuses.iter().flatten())
            .any(|c| {
                c.state
                    .as_ref()
                    .and_then(|st| st.waiting.as_ref())
                    .and_then(|w| w.reason.as_deref())
                    == Some("CrashLoopBackOff")
            })
    });
    PodView {
        name: p.name_any(),
        // Our own precise stamp first; `creationTimestamp` (seconds) for pods made before it.
        created: p
            .annotations()
            .get(CREATED_AT_ANNOTATION)
            .and_then(|t| t.parse().ok())
            .or_else(|| p.meta().creation_timestamp.as_ref().map(|t| t.0)),
        images: pod_images(p),
        spec_hash: p.labels().get(POD_SPEC_HASH_LABEL).cloned(),
        digest: p.annotations().get(IMAGE_DIGEST_ANNOTATION).cloned(),
        ready: condition("Ready"),
        disrupted: condition("DisruptionTarget"),
        failing: matches!(phase, Some("Failed" | "Unknown")) || crash_looping,
        deleting: p.meta().deletion_timestamp.is_some(),
    }
}

/// The live policy still says what we want (spec and our labels).
fn network_policy_matches(live: Option<&NetworkPolicy>, desired: &NetworkPolicy) -> bool {
    let Some(live) = live else {
        return false;
    };
    let labels_ok = desired
        .labels()
        .iter()
        .all(|(k, v)| live.labels().get(k) == Some(v));
    let as_value = |np: &NetworkPolicy| serde_json::to_value(&np.spec).unwrap_or_default();
    labels_ok && as_value(live) == as_value(desired)
}

#[cfg(test)]
#[path = "registry_tests.rs"]
mod tests;

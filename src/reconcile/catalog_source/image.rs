//! Stage 3 for `grpc` + `image` catalogs: the registry ServiceAccount, NetworkPolicy, Service
//! and Pod (docs/catalog.md §3), and digest-based polling of the catalog image (docs/catalog.md §3.4, done
//! better: see `pod_plan`).

use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Pod, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use std::sync::Arc;

use kube::api::PartialObjectMeta;
use kube::{Resource, ResourceExt};

use crate::api::CatalogSource;
use crate::api::keys::{
    CATALOG_SOURCE_LABEL, MANAGED_LABEL, MANAGED_LABEL_VALUE, POD_SPEC_HASH_LABEL,
};
use crate::k8s::effects::{Write, perform};
use crate::k8s::store::{NamespacedStore, StoreStopped};
use crate::k8s::write::{DeleteOptions, ObjectKey, Ownership};
use crate::registry::pod::{
    self, CREATED_AT_ANNOTATION, IMAGE_DIGEST_ANNOTATION, REGISTRY_PORT, RegistryObjects,
};

use super::Reconciler;
use super::pod_plan::{self, DesiredPod, PodView};

/// How soon to look again while pods for two digests coexist.
const ROLLOUT_RECHECK: Duration = Duration::from_secs(10);

/// What stage 3 did for an image catalog.
#[derive(Debug, Default)]
pub(super) struct ImageOutcome {
    /// A registry pod was created because none served the current spec.
    pub recreated: bool,
    /// All objects exist and some pod serves the current spec.
    pub healthy: bool,
    /// Set when a poll ran this sync.
    pub polled_at: Option<jiff::Timestamp>,
    /// Something to tell the user that does not stop the catalog (poll failure, failed update).
    pub warning: Option<String>,
    /// A new pod was started for a new image digest.
    pub rolled_to: Option<String>,
    /// Other pods than those the connection was last made for serve now, and no older pod is
    /// left, not even terminating: reconnect to read the new content.
    pub switched: bool,
    pub requeue: Option<Duration>,
}

/// Polling settings of this catalog, when it polls.
#[derive(Debug, Clone, Copy)]
pub(super) struct Poll {
    pub interval: Duration,
    pub last: Option<jiff::Timestamp>,
}

/// The stores of registry objects (labelled `olm.managed=true`; the ServiceAccounts are the
/// process's shared store of all of them, read through that label) and namespace labels; a
/// sync reads them instead of the API server.
#[derive(Clone)]
pub(super) struct RegistryStores {
    pub namespaces: NamespacedStore<PartialObjectMeta<Namespace>>,
    pub service_accounts: NamespacedStore<ServiceAccount>,
    pub network_policies: NamespacedStore<NetworkPolicy>,
    pub services: NamespacedStore<Service>,
    pub pods: NamespacedStore<Pod>,
}

impl RegistryStores {
    pub async fn ready(&self) -> Result<(), StoreStopped> {
        self.namespaces.wait_until_ready().await?;
        self.service_accounts.wait_until_ready().await?;
        // Not the NetworkPolicies: a cluster may not serve their API, and then their store
        // never fills. Until it has, the policy is applied on every sync (an idempotent apply).
        self.services.wait_until_ready().await?;
        self.pods.wait_until_ready().await
    }

    /// The registry ServiceAccount and pods of `cs` (the ServiceAccount's pull secrets shape the
    /// desired objects, whose names then find the rest: [`Self::observe_named`]).
    fn observe(&self, cs: &CatalogSource) -> RegistryObserved {
        let ns = cs.namespace().unwrap_or_default();
        let name = cs.name_any();
        RegistryObserved {
            // The shared store holds every ServiceAccount; the registry's is one olm-rs made.
            service_account: self.service_accounts.get(&ns, &name).filter(|sa| {
                sa.labels().get(MANAGED_LABEL).map(String::as_str) == Some(MANAGED_LABEL_VALUE)
            }),
            network_policy: None,
            service: None,
            pods: self
                .pods
                .in_namespace(&ns)
                .into_iter()
                .filter(|p| p.labels().get(CATALOG_SOURCE_LABEL) == Some(&name))
                .collect(),
        }
    }

    /// The NetworkPolicy and Service named as `objects` names them.
    fn observe_named(&self, seen: &mut RegistryObserved, objects: &RegistryObjects) {
        let ns = objects.service.namespace().unwrap_or_default();
        seen.network_policy = self
            .network_policies
            .is_ready()
            .then(|| {
                self.network_policies
                    .get(&ns, &objects.network_policy.name_any())
            })
            .flatten();
        seen.service = self.services.get(&ns, &objects.service.name_any());
    }

    /// The registry objects of `cs` left from pod mode (owned by it), for a catalog now served
    /// in-process.
    pub(super) fn observe_leftovers(&self, cs: &CatalogSource) -> RegistryObserved {
        let ns = cs.namespace().unwrap_or_default();
        let name = cs.name_any();
        let owned =
            |meta: &kube::api::ObjectMeta| super::catalog_of(meta).is_some_and(|r| r.name == name);
        let mut seen = self.observe(cs);
        seen.service_account = seen.service_account.filter(|sa| owned(sa.meta()));
        seen.pods.retain(|p| owned(p.meta()));
        seen.service = self
            .services
            .get(&ns, &pod::service_name(&name))
            .filter(|s| owned(s.meta()));
        seen.network_policy = self
            .network_policies
            .get(&ns, &format!("{name}-grpc-server"))
            .filter(|n| owned(n.meta()));
        seen
    }

    fn namespace_labels(&self, ns: &str) -> std::collections::BTreeMap<String, String> {
        self.namespaces
            .get("", ns)
            .map(|n| n.labels().clone())
            .unwrap_or_default()
    }
}

/// A catalog's registry objects as the stores hold them.
pub(super) struct RegistryObserved {
    pub service_account: Option<Arc<ServiceAccount>>,
    pub network_policy: Option<Arc<NetworkPolicy>>,
    pub service: Option<Arc<Service>>,
    pub pods: Vec<Arc<Pod>>,
}

/// The writes that bring a catalog's registry objects to what its spec asks, in order.
#[derive(Debug, Default, PartialEq)]
pub(super) struct RegistryWrites {
    /// ServiceAccount (created once) and Service, before any pod.
    pub objects: Vec<Write>,
    /// The NetworkPolicy, apart: a cluster that does not serve its API still runs the registry.
    pub network_policy: Option<Write>,
    /// Pod deletions, then the new pod.
    pub pods: Vec<Write>,
}

/// Deletes what pod mode left for a catalog served in-process (pure): its registry pods,
/// Service, NetworkPolicy and ServiceAccount.
pub(super) fn decide_leftovers(seen: &RegistryObserved) -> Vec<Write> {
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

/// Decides the registry writes from what is observed and the pod plan (pure).
pub(super) fn decide_registry(
    objects: &RegistryObjects,
    seen: &RegistryObserved,
    plan: &pod_plan::PodPlan,
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
        s.labels().get(crate::api::keys::SERVICE_SPEC_HASH_LABEL)
            == Some(&objects.service_spec_hash)
    });
    if !service_current {
        // In place (OLM deletes and recreates): ports and selector are mutable, no outage.
        writes
            .objects
            .push(Write::apply(objects.service.clone(), Ownership::Shared));
    }
    if !network_policy_matches(seen.network_policy.as_deref(), &objects.network_policy) {
        writes.network_policy = Some(Write::apply(
            objects.network_policy.clone(),
            Ownership::Shared,
        ));
    }
    let ns = objects.pod.namespace();
    let delete_pod = |name: &String, grace: u32| Write::Delete {
        key: ObjectKey::new::<Pod>(ns.as_deref(), name),
        options: DeleteOptions {
            grace_period_seconds: Some(grace),
            ..DeleteOptions::default()
        },
    };
    writes
        .pods
        .extend(plan.force_delete.iter().map(|name| delete_pod(name, 0)));
    writes
        .pods
        .extend(plan.delete.iter().map(|name| delete_pod(name, 1)));
    if let Some(pod_digest) = &plan.create {
        let mut new_pod = objects.pod.clone();
        let annotations = new_pod.metadata.annotations.get_or_insert_default();
        annotations.insert(CREATED_AT_ANNOTATION.to_owned(), now.to_string());
        if let Some(d) = pod_digest {
            annotations.insert(IMAGE_DIGEST_ANNOTATION.to_owned(), d.clone());
        }
        writes.pods.push(Write::create(new_pod));
    }
    writes
}

/// Why the registry objects of a pod-mode catalog could not be brought to its spec.
#[derive(Debug, thiserror::Error)]
pub(super) enum RegistryServerError {
    #[error(transparent)]
    Objects(#[from] pod::RegistryObjectsError),
    #[error(transparent)]
    Write(#[from] crate::k8s::write::ApiError),
}

/// Stage 3 of an image catalog: observe its registry objects from the stores, check the image
/// digest when a poll is due, decide, write.
pub(super) async fn ensure(
    r: &Reconciler,
    cs: &CatalogSource,
    poll: Option<Poll>,
) -> Result<ImageOutcome, RegistryServerError> {
    let ns = cs.namespace().unwrap_or_default();
    let name = cs.name_any();
    let client = &r.ctx.client;
    let now = r.ctx.clock.now();
    let stores = &r.registry_stores;
    let namespace_labels = stores.namespace_labels(&ns);
    let mut seen = stores.observe(cs);
    let objects = pod::registry_objects(
        cs,
        &namespace_labels,
        seen.service_account
            .as_ref()
            .and_then(|sa| sa.image_pull_secrets.as_deref()),
        &r.ctx.options.catalog_sources.registry_pod,
    )?;
    stores.observe_named(&mut seen, &objects);
    let views: Vec<PodView> = seen.pods.iter().map(|p| pod_view(p)).collect();
    let desired = desired_pod(&objects);

    let mut outcome = ImageOutcome::default();
    let mut digest = None;
    if let Some(poll) = poll {
        let created = cs.meta().creation_timestamp.as_ref().map(|t| t.0);
        let serving = views.iter().any(|v| {
            !v.deleting
                && v.images == desired.images
                && v.spec_hash.as_deref() == Some(&desired.spec_hash)
        });
        let due = pod_plan::poll_due(poll.last, created, poll.interval, now);
        if due || !serving {
            let image = cs.spec.image.clone().unwrap_or_default();
            let secrets = cs.spec.secrets.clone().unwrap_or_default();
            let read = r
                .ctx
                .bundle_images
                .read_credentials(client, &ns, &secrets)
                .await;
            let unread: Vec<String> = read.problems.iter().map(ToString::to_string).collect();
            let unread = if unread.is_empty() {
                String::new()
            } else {
                format!(" ({})", unread.join("; "))
            };
            let resolved = match r.ctx.bundle_images.puller() {
                Ok(puller) => puller
                    .digest(&image, &read.credentials)
                    .await
                    .map_err(UpdateCheckError::Pull),
                Err(e) => Err(UpdateCheckError::NoClient(e)),
            };
            match resolved {
                Ok(d) => digest = Some(d),
                Err(e) => {
                    outcome.warning = Some(format!(
                        "could not check catalog image for updates: {e}{unread}"
                    ))
                }
            }
            if due {
                outcome.polled_at = Some(now);
            }
        }
        let last = outcome.polled_at.or(poll.last);
        let wait = pod_plan::until_next_poll(last, created, poll.interval, now);
        outcome.requeue = Some(wait.min(Duration::from_secs(15 * 60)));
    }

    let plan = pod_plan::plan_pods(&views, &desired, digest.as_deref());
    let writes = decide_registry(&objects, &seen, &plan, now);
    for write in &writes.objects {
        perform(client, write).await?;
    }
    if let Some(write) = &writes.network_policy {
        match perform(client, write).await {
            Ok(_) => {}
            // A cluster that does not serve networking.k8s.io (some test API servers): the
            // registry works without its policy; say so and carry on.
            Err(err) if err.is_not_found() => {
                tracing::warn!(catalog = %name, namespace = %ns, "NetworkPolicy API not served; registry pod runs without its network policy");
            }
            Err(e) => return Err(e.into()),
        }
    }
    // A pod this controller created may not be in the store yet; deciding pods again before
    // it is would start a second one (pods are created from `generateName`, so a create never
    // conflicts). Until the store shows it, or a short while passed, pods are left alone.
    let key = super::key_of(cs);
    if r.awaiting_pod(&key, &seen.pods) {
        outcome.requeue = Some(Duration::from_secs(1));
        return Ok(outcome);
    }
    for write in &writes.pods {
        let written = perform(client, write).await?;
        if let (Write::Create { .. }, Some(pod)) = (write, written) {
            r.expect_pod(&key, pod.name_any());
        }
    }
    // Reconnecting right when older pods are deleted could reach one of them, still
    // terminating, through the Service, and keep its content for ever: wait until they are gone
    // from the store (their deletion triggers a sync).
    outcome.switched = match pod_plan::settled_pods(&views, &desired) {
        Some(names) if writes.pods.is_empty() => r.serving_pods_changed(&key, names),
        _ => {
            if pod_plan::mixed_pods(&views, &desired) {
                r.serving_pods_mixed(&key);
            }
            false
        }
    };
    if let Some(pod_digest) = &plan.create
        && !plan.recreating
    {
        outcome.rolled_to = pod_digest.clone();
    }
    if plan.failed_update.is_some() {
        outcome.warning = plan.failed_update;
    }
    outcome.recreated = plan.recreating;
    outcome.healthy = !plan.recreating;
    if plan.rolling {
        outcome.requeue = Some(
            outcome
                .requeue
                .map_or(ROLLOUT_RECHECK, |d| d.min(ROLLOUT_RECHECK)),
        );
    }
    Ok(outcome)
}

/// The `status.registryService` OLM writes for an image catalog.
pub(super) fn registry_service(
    cs: &CatalogSource,
    previous: Option<&crate::api::RegistryServiceStatus>,
    now: jiff::Timestamp,
    recreated: bool,
) -> crate::api::RegistryServiceStatus {
    let desired = crate::api::RegistryServiceStatus {
        protocol: Some("grpc".to_owned()),
        service_name: Some(pod::service_name(&cs.name_any())),
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
    crate::api::RegistryServiceStatus {
        created_at,
        ..desired
    }
}

fn desired_pod(objects: &RegistryObjects) -> DesiredPod {
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

fn pod_view(p: &Pod) -> PodView {
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

/// Why a catalog image could not be checked for a new digest (the catalog keeps serving).
#[derive(Debug, thiserror::Error)]
enum UpdateCheckError {
    #[error(transparent)]
    Pull(crate::bundle_image::PullError),
    #[error(transparent)]
    NoClient(crate::reconcile::bundle_images::NoImageClient),
}

#[cfg(test)]
#[path = "image_tests.rs"]
mod tests;

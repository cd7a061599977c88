//! Observing a pod-mode image catalog (docs/catalog.md §3): its registry objects from the
//! stores, whether the server serves NetworkPolicies, and — when the core asks for it
//! (`catalog_source::decision::digest_check`) — the image's digest from the image registry.
//! What to write is decided in `catalog_source::decision` and `catalog_source::registry`.

use k8s_openapi::api::core::v1::{Namespace, Pod, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::PartialObjectMeta;
use kube::core::GroupVersionKind;
use kube::{Resource, ResourceExt};

use crate::api::CatalogSource;
use crate::api::keys::{CATALOG_SOURCE_LABEL, MANAGED_LABEL, MANAGED_LABEL_VALUE};
use crate::catalog_source::decision::{self, DigestAnswer, DigestSeen, Poll, RegistrySeen};
use crate::catalog_source::pod_plan::PodView;
use crate::catalog_source::registry::{RegistryObserved, pod_view};
use crate::catalog_source::registry_objects::{self, RegistryObjects, RegistryObjectsError};
use crate::k8s::store::{NamespacedStore, StoreStopped};

use super::Reconciler;

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
            .get(&ns, &registry_objects::service_name(&name))
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

/// Everything observed of a pod-mode image catalog's registry, owned; [`Self::seen`] lends it
/// to the decision.
pub(super) struct RegistryObservation {
    objects: Result<RegistryObjects, RegistryObjectsError>,
    found: RegistryObserved,
    network_policies: bool,
    digest: Option<DigestSeen>,
}

impl RegistryObservation {
    pub(super) fn seen(&self) -> RegistrySeen<'_> {
        RegistrySeen {
            objects: self.objects.as_ref(),
            found: &self.found,
            network_policies: self.network_policies,
            digest: self.digest.clone(),
        }
    }
}

/// Observes the registry of `cs`: its objects from the stores, and the image's digest when a
/// check is due.
pub(super) async fn observe(
    r: &Reconciler,
    cs: &CatalogSource,
    poll: Option<Poll>,
    now: jiff::Timestamp,
) -> RegistryObservation {
    let ns = cs.namespace().unwrap_or_default();
    let stores = &r.registry_stores;
    let namespace_labels = stores.namespace_labels(&ns);
    let mut found = stores.observe(cs);
    let objects = registry_objects::registry_objects(
        cs,
        &namespace_labels,
        found
            .service_account
            .as_ref()
            .and_then(|sa| sa.image_pull_secrets.as_deref()),
        &r.ctx.options.catalog_sources.registry_pod,
    );
    let mut observation = RegistryObservation {
        objects,
        found: RegistryObserved::default(),
        network_policies: true,
        digest: None,
    };
    let Ok(objects) = &observation.objects else {
        observation.found = found;
        return observation;
    };
    stores.observe_named(&mut found, objects);
    let views: Vec<PodView> = found.pods.iter().map(|p| pod_view(p)).collect();
    if let Some(due) = decision::digest_check(cs, poll, &views, objects, now) {
        observation.digest = Some(DigestSeen {
            due,
            answer: check_digest(r, cs, &ns).await,
        });
    }
    observation.network_policies = network_policies_served(r).await;
    observation.found = found;
    observation
}

/// Asks the image registry for the digest of the catalog's image, with its pull secrets.
async fn check_digest(r: &Reconciler, cs: &CatalogSource, ns: &str) -> DigestAnswer {
    let image = cs.spec.image.clone().unwrap_or_default();
    let secrets = cs.spec.secrets.clone().unwrap_or_default();
    let read = r
        .ctx
        .bundle_images
        .read_credentials(&r.ctx.client, ns, &secrets)
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
        Ok(d) => DigestAnswer::Digest(d),
        Err(e) => DigestAnswer::Failed(format!(
            "could not check catalog image for updates: {e}{unread}"
        )),
    }
}

/// Whether the server serves NetworkPolicies (discovery, cached in the `Context`). A cluster
/// that does not (some test API servers) still runs registries, without their policy; when
/// discovery cannot tell, the policy is written.
async fn network_policies_served(r: &Reconciler) -> bool {
    let gvk = GroupVersionKind::gvk("networking.k8s.io", "v1", "NetworkPolicy");
    match r.ctx.served_apis.resource_of(&r.ctx.client, &gvk).await {
        Ok(Some(_)) => true,
        Ok(None) => {
            tracing::warn!(
                "NetworkPolicy API not served; registry pods run without their network policy"
            );
            false
        }
        Err(error) => {
            tracing::debug!(%error, "discovery of NetworkPolicies failed; writing the policy anyway");
            true
        }
    }
}

/// Why a catalog image could not be checked for a new digest (the catalog keeps serving).
#[derive(Debug, thiserror::Error)]
enum UpdateCheckError {
    #[error(transparent)]
    Pull(crate::oci::PullError),
    #[error(transparent)]
    NoClient(crate::reconcile::bundle_images::NoImageClient),
}

#[cfg(test)]
#[path = "pod_mode_tests.rs"]
mod tests;

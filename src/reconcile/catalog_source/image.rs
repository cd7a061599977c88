//! Stage 3 for `grpc` + `image` catalogs: the registry ServiceAccount, NetworkPolicy, Service
//! and Pod (docs/catalog.md §3), and digest-based polling of the catalog image (docs/catalog.md §3.4, done
//! better: see `pod_plan`).

use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Pod, Secret, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams, ListParams};
use kube::{Resource, ResourceExt};

use crate::api::CatalogSource;
use crate::api::keys::{
    CATALOG_SOURCE_LABEL, MANAGED_LABEL, MANAGED_LABEL_VALUE, POD_SPEC_HASH_LABEL,
};
use crate::k8s::apply::apply;
use crate::k8s::errors::is_not_found;
use crate::registry::image_digest::{RegistryCredentials, parse_docker_config};
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
    /// Old pods were deleted after a rollout: reconnect to read the new content.
    pub switched: bool,
    pub requeue: Option<Duration>,
}

/// Polling settings of this catalog, when it polls.
#[derive(Debug, Clone, Copy)]
pub(super) struct Poll {
    pub interval: Duration,
    pub last: Option<jiff::Timestamp>,
}

pub(super) async fn ensure(
    r: &Reconciler,
    cs: &CatalogSource,
    poll: Option<Poll>,
) -> Result<ImageOutcome, String> {
    let ns = cs.namespace().unwrap_or_default();
    let name = cs.name_any();
    let client = r.ctx.client.clone();
    let now = r.ctx.clock.now();
    let err = |what: &str, e: kube::Error| format!("{what}: {e}");

    let namespace_labels = Api::<Namespace>::all(client.clone())
        .get_opt(&ns)
        .await
        .ok()
        .flatten()
        .map(|n| n.labels().clone())
        .unwrap_or_default();

    let sa_api: Api<ServiceAccount> = Api::namespaced(client.clone(), &ns);
    let live_sa = sa_api
        .get_opt(&name)
        .await
        .map_err(|e| err("reading the registry service account", e))?;
    let objects = pod::registry_objects(
        cs,
        &namespace_labels,
        live_sa
            .as_ref()
            .and_then(|sa| sa.image_pull_secrets.as_deref()),
        &r.ctx.options.catalog_sources.registry_pod,
    )
    .map_err(|e| e.to_string())?;
    if live_sa.is_none() {
        // Created once, as OLM does: the cluster may add pull secrets to it afterwards.
        apply(&sa_api, &objects.service_account)
            .await
            .map_err(|e| err("creating the registry service account", e))?;
    }

    let np_api: Api<NetworkPolicy> = Api::namespaced(client.clone(), &ns);
    let np_name = objects.network_policy.name_any();
    // A failed read is treated as "absent": the apply below then reports the real problem.
    let live_np = np_api.get_opt(&np_name).await.unwrap_or(None);
    if !network_policy_matches(live_np.as_ref(), &objects.network_policy) {
        match apply(&np_api, &objects.network_policy).await {
            Ok(_) => {}
            // A cluster that does not serve networking.k8s.io (some test API servers): the
            // registry works without its policy; say so and carry on.
            Err(err) if is_not_found(&err) => {
                tracing::warn!(catalog = %name, namespace = %ns, "NetworkPolicy API not served; registry pod runs without its network policy");
            }
            Err(e) => return Err(err("applying the registry network policy", e)),
        }
    }

    let svc_api: Api<Service> = Api::namespaced(client.clone(), &ns);
    let svc_name = objects.service.name_any();
    let live_svc = svc_api
        .get_opt(&svc_name)
        .await
        .map_err(|e| err("reading the registry service", e))?;
    let svc_current = live_svc.as_ref().is_some_and(|s| {
        s.labels().get(crate::api::keys::SERVICE_SPEC_HASH_LABEL)
            == Some(&objects.service_spec_hash)
    });
    if !svc_current {
        // In place (OLM deletes and recreates): ports and selector are mutable, no outage.
        apply(&svc_api, &objects.service)
            .await
            .map_err(|e| err("applying the registry service", e))?;
    }

    let pod_api: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let selector = format!("{CATALOG_SOURCE_LABEL}={name},{MANAGED_LABEL}={MANAGED_LABEL_VALUE}");
    let pods = pod_api
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|e| err("listing registry pods", e))?;
    let views: Vec<PodView> = pods.items.iter().map(pod_view).collect();
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
            let credentials = pull_credentials(r, cs).await;
            match r.ctx.image_digests.resolve(&image, &credentials).await {
                Ok(d) => digest = Some(d),
                Err(e) => {
                    outcome.warning =
                        Some(format!("could not check catalog image for updates: {e}"))
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
    for victim in &plan.force_delete {
        delete_pod(&pod_api, victim, 0).await?;
    }
    for victim in &plan.delete {
        delete_pod(&pod_api, victim, 1).await?;
    }
    outcome.switched = !plan.delete.is_empty() && !plan.recreating;
    if let Some(pod_digest) = &plan.create {
        let mut new_pod = objects.pod.clone();
        let annotations = new_pod.metadata.annotations.get_or_insert_default();
        annotations.insert(CREATED_AT_ANNOTATION.to_owned(), now.to_string());
        if let Some(d) = pod_digest {
            annotations.insert(IMAGE_DIGEST_ANNOTATION.to_owned(), d.clone());
        }
        pod_api
            .create(&crate::k8s::post_params(), &new_pod)
            .await
            .map_err(|e| err("creating the registry pod", e))?;
        if !plan.recreating {
            outcome.rolled_to = pod_digest.clone();
        }
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

async fn delete_pod(api: &Api<Pod>, name: &str, grace: u32) -> Result<(), String> {
    let params = DeleteParams {
        grace_period_seconds: Some(grace),
        ..DeleteParams::default()
    };
    match api.delete(name, &params).await {
        Ok(_) => Ok(()),
        Err(err) if is_not_found(&err) => Ok(()),
        Err(e) => Err(format!("deleting registry pod {name}: {e}")),
    }
}

/// Pull-secret credentials for the digest check: `kubernetes.io/dockerconfigjson` secrets
/// named in `spec.secrets`. Unreadable secrets are skipped (anonymous access may still work).
async fn pull_credentials(r: &Reconciler, cs: &CatalogSource) -> RegistryCredentials {
    let mut out = RegistryCredentials::new();
    let Some(secrets) = cs.spec.secrets.as_ref() else {
        return out;
    };
    let api: Api<Secret> =
        Api::namespaced(r.ctx.client.clone(), &cs.namespace().unwrap_or_default());
    for name in secrets.iter().filter(|s| !s.is_empty()) {
        let Ok(Some(secret)) = api.get_opt(name).await else {
            continue;
        };
        if let Some(data) = secret
            .data
            .as_ref()
            .and_then(|d| d.get(".dockerconfigjson"))
        {
            for (host, credential) in parse_docker_config(&data.0) {
                out.entry(host).or_insert(credential);
            }
        }
    }
    out
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

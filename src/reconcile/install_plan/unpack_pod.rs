//! Bundle lookups the node unpacks (shell; docs/bundle-images.md, "When only the node can
//! pull"): the unpack pod of `bundle_unpack::unpack_pod` is created in the CatalogSource's
//! namespace, looked at on each sync, and — once it succeeded — its log is read, checked and
//! unpacked by `bundle_unpack::handback` with the pull's limits, the bundle cached as a pull's,
//! and the pod deleted. What each outcome does to the lookup is `plan::lookups`'s.

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, LogParams};
use sha2::{Digest as _, Sha256};

use crate::api::CatalogRef;
use crate::api::CatalogSource;
use crate::api::install_plan::bundle_lookup_reason as reason;
use crate::bundle_unpack::handback::{self, MAX_LOG_BYTES};
use crate::bundle_unpack::unpack_pod::{
    BUNDLE_CONTAINER, CAUSE_ANNOTATION, PodStep, UnpackPodOptions, UnpackPodRequest, pod_mode,
    pod_step, unpack_pod, unpack_pod_name,
};
use crate::k8s::write::{self, DeleteOptions, ObjectKey};
use crate::oci::PulledBundle;
use crate::plan::image_bundle::pinned_image;
use crate::plan::lookups::{LookupsWorked, Pull, PulledContent};
use crate::plan::unpack::PullFailure;
use crate::reconcile::Context;

/// The unpack pod settings when a pod may stand in for the controller's pull of `image`:
/// configured (`--bundle-unpack-image`), and the image policy accepts the image without a
/// signature — the kubelet checks none, so an image the policy wants verified is never handed
/// to it (docs/image-signatures.md).
pub fn enabled<'c>(ctx: &'c Context, image: &str) -> Option<&'c UnpackPodOptions> {
    let options = &ctx.bundle_images.options;
    options
        .unpack_pod
        .as_ref()
        .filter(|_| options.image_policy.accepts_unverified(image))
}

/// Works `pull` through its unpack pod: creates it (with `cause`, why the controller could not
/// pull the image, when it just failed), or reads where it stands, and records the outcome in
/// `worked`.
#[allow(clippy::too_many_arguments)]
pub async fn work(
    ctx: &Context,
    options: &UnpackPodOptions,
    pull: Pull,
    catalog: &CatalogRef,
    cause: Option<&str>,
    namespace: &str,
    now: Timestamp,
    worked: &mut LookupsWorked,
) {
    let image = pull.lookup.path.clone();
    let started = attempt_started(&pull);
    match drive(ctx, options, &image, catalog, cause, pull.within, started).await {
        Driven::Waiting(message) => worked.unpacking_in_pod(pull, &message, now),
        Driven::Unpacked { bundle, how } => {
            let content = PulledContent {
                manifests: bundle.manifests(),
                digest: bundle.digest.clone(),
            };
            worked.pulled_by_pod(pull, content, &how, namespace, now)
        }
        Driven::Failed(failure) => worked.pulled(pull, Err(failure), namespace, now),
    }
}

/// The bundle of a plan's step, pinned to the digest the plan was made with (`image` is
/// `repository@digest`), when the cache lost it and the controller cannot pull it itself (a
/// restart, another replica leading): unpacked again by a pod. Until the pod is done, a
/// transient failure saying so (the pass is retried).
pub async fn refetch(
    ctx: &Context,
    options: &UnpackPodOptions,
    image: &str,
    catalog: &CatalogRef,
    cause: &str,
) -> Result<Arc<PulledBundle>, PullFailure> {
    match drive(ctx, options, image, catalog, Some(cause), None, None).await {
        Driven::Waiting(message) => Err(PullFailure {
            reason: reason::JOB_INCOMPLETE,
            message,
            transient: true,
        }),
        Driven::Unpacked { bundle, .. } => Ok(bundle),
        Driven::Failed(failure) => Err(failure),
    }
}

/// Where an unpack stands after one look at its pod.
enum Driven {
    /// Not done: the pending condition's message.
    Waiting(String),
    /// Handed back (or found in the cache): the bundle, and how, in the event's words.
    Unpacked {
        bundle: Arc<PulledBundle>,
        how: String,
    },
    Failed(PullFailure),
}

/// One look at the unpack pod of `image` (decided by `unpack_pod::pod_step`): created, waited
/// for, read (then deleted), or failed (then deleted). `deadline` becomes the pod's; `started`
/// is when the lookup's attempt began, to tell a failed pod of an earlier attempt.
async fn drive(
    ctx: &Context,
    options: &UnpackPodOptions,
    image: &str,
    catalog: &CatalogRef,
    cause: Option<&str>,
    deadline: Option<Duration>,
    started: Option<i64>,
) -> Driven {
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &catalog.namespace);
    let name = unpack_pod_name(image);
    let where_ = format!("{}/{name}", catalog.namespace);
    let found = match pods.get_opt(&name).await {
        Ok(found) => found,
        Err(e) => {
            return Driven::Waiting(format!(
                "unpack job not completed: cannot read unpack pod {where_}: {e}"
            ));
        }
    };
    let step = pod_step(found.as_ref(), started);
    if step == PodStep::Replace {
        delete(&ctx.client, &catalog.namespace, &name).await;
    }
    if matches!(step, PodStep::Create | PodStep::Replace) {
        // Another plan's pod unpacked the same image a moment ago (the pod is shared, as OLM's
        // Job is, and deleted once read), or it was pulled earlier: the cache has it, as OLM
        // reuses the unpack ConfigMap of the same image reference.
        if let Some(bundle) = ctx.bundle_images.cached(image) {
            let how = format!(
                "took the bundle image {image} from the cache (unpacked or pulled earlier), as olm-rs cannot pull it now ({})",
                cause.unwrap_or("an earlier pull failed")
            );
            return Driven::Unpacked { bundle, how };
        }
        let cause = cause.unwrap_or("an earlier pull failed");
        return create(ctx, options, image, catalog, &pods, cause, deadline).await;
    }
    let cause = found
        .as_ref()
        .and_then(|pod| pod.metadata.annotations.as_ref()?.get(CAUSE_ANNOTATION))
        .map(String::as_str)
        .or(cause)
        .unwrap_or("an earlier pull failed")
        .to_owned();
    let mode = pod_mode(image, &cause, &where_);
    match step {
        // Returned above.
        PodStep::Create | PodStep::Replace => Driven::Waiting(String::new()),
        PodStep::Wait { detail } => {
            let detail = if detail.is_empty() {
                String::new()
            } else {
                format!(": {detail}")
            };
            Driven::Waiting(format!("unpack job not completed: {mode}{detail}"))
        }
        PodStep::Fail {
            reason,
            why,
            message,
        } => {
            delete(&ctx.client, &catalog.namespace, &name).await;
            Driven::Failed(PullFailure {
                reason,
                message: format!("unpack pod {where_} failed ({mode}): {why}: {message}"),
                transient: false,
            })
        }
        PodStep::Read { digest } => {
            let log = pods
                .logs(
                    &name,
                    &LogParams {
                        container: Some(BUNDLE_CONTAINER.to_owned()),
                        limit_bytes: Some(MAX_LOG_BYTES),
                        ..LogParams::default()
                    },
                )
                .await;
            let log = match log {
                Ok(log) => log,
                Err(e) => {
                    return Driven::Waiting(format!(
                        "unpack job not completed: cannot read the log of unpack pod {where_}: {e}"
                    ));
                }
            };
            let taken = take_in(ctx, image, digest, &log);
            delete(&ctx.client, &catalog.namespace, &name).await;
            match taken {
                Ok(bundle) => Driven::Unpacked {
                    bundle,
                    how: format!(
                        "unpacked the bundle image {image} in pod {where_}, as olm-rs could not pull it itself ({cause})"
                    ),
                },
                Err(why) => Driven::Failed(PullFailure {
                    reason: reason::INVALID_BUNDLE_CONTENT,
                    message: format!(
                        "bundle image {image}, as handed back by unpack pod {where_}: {why}"
                    ),
                    transient: false,
                }),
            }
        }
    }
}

/// Creates the unpack pod of `image` in `catalog`'s namespace.
async fn create(
    ctx: &Context,
    options: &UnpackPodOptions,
    image: &str,
    catalog: &CatalogRef,
    pods: &Api<Pod>,
    cause: &str,
    deadline: Option<Duration>,
) -> Driven {
    let catalogs: Api<CatalogSource> = Api::namespaced(ctx.client.clone(), &catalog.namespace);
    let source = match catalogs.get_opt(&catalog.name).await {
        Ok(Some(source)) => source,
        Ok(None) => {
            return Driven::Failed(PullFailure {
                reason: reason::CATALOG_SOURCE_MISSING,
                message: format!(
                    "referenced catalogsource not found: {catalog} (needed to unpack {image} in a pod)"
                ),
                transient: true,
            });
        }
        Err(e) => {
            return Driven::Waiting(format!(
                "unpack job not completed: cannot read catalog {catalog}: {e}"
            ));
        }
    };
    let secrets = source.spec.secrets.clone().unwrap_or_default();
    let uid = source.metadata.uid.clone().unwrap_or_default();
    let pod = unpack_pod(
        &UnpackPodRequest {
            namespace: &catalog.namespace,
            image,
            catalog_name: &catalog.name,
            catalog_uid: &uid,
            pull_secrets: &secrets,
            deadline,
            cause,
        },
        options,
    );
    let name = unpack_pod_name(image);
    let where_ = format!("{}/{name}", catalog.namespace);
    let mode = pod_mode(image, cause, &where_);
    Driven::Waiting(match write::create(pods, &pod).await {
        Ok(_) => {
            tracing::info!(%image, pod = %where_, %cause, "bundle image unpacked by a pod");
            format!("unpack job not completed: {mode}")
        }
        // Created by an earlier sync (a pod's name is the image's): it is being waited for.
        Err(e) if e.is_conflict() => format!("unpack job not completed: {mode}"),
        Err(e) => format!("unpack job not completed: cannot create unpack pod {where_}: {e}"),
    })
}

/// Why a bundle a pod handed back is not taken in.
#[derive(Debug, thiserror::Error)]
enum TakeInError {
    #[error(transparent)]
    NoImageClient(#[from] crate::reconcile::bundle_images::NoImageClient),
    #[error(transparent)]
    Refused(#[from] handback::HandbackRefused),
    #[error(transparent)]
    Cache(#[from] crate::oci::PullError),
}

/// The bundle a pod handed back in `log`, checked, rendered and cached.
fn take_in(
    ctx: &Context,
    image: &str,
    digest: Option<String>,
    log: &str,
) -> Result<Arc<PulledBundle>, TakeInError> {
    let puller = ctx.bundle_images.puller()?;
    let files = handback::unpack_handed_back(log, &puller.config().limits)?;
    // The runtime names the manifest digest it pulled; else the reference's own, else one of
    // the content (a cache key only).
    let digest = digest
        .or_else(|| image.split_once('@').map(|(_, d)| d.to_owned()))
        .unwrap_or_else(|| format!("sha256:{:x}", Sha256::digest(log.as_bytes())));
    let pinned = pinned_image(image, &digest);
    Ok(puller.adopt_unpacked(&[image, &pinned], &digest, &files)?)
}

/// When the lookup's current attempt began (its pending condition's transition), in seconds.
fn attempt_started(pull: &Pull) -> Option<i64> {
    pull.lookup
        .conditions
        .iter()
        .flatten()
        .filter_map(|c| c.last_transition_time.as_ref())
        .map(|t| t.0.as_second())
        .max()
}

async fn delete(client: &kube::Client, namespace: &str, name: &str) {
    let key = ObjectKey::new::<Pod>(Some(namespace), name);
    // An unpack pod already gone is fine (`write::delete` answers Ok(false)).
    if let Err(e) = write::delete(client, &key, &DeleteOptions::default()).await {
        tracing::warn!(pod = %name, error = %e, "cannot delete unpack pod");
    }
}

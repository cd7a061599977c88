//! The shell of in-process image catalogs (docs/catalog-images.md): observe what is served,
//! ask the core (`catalog_source::in_process`) what to do, run the check it asks for — pull secrets,
//! the manifest digest, the content by digest from the shared store — publish the new index,
//! and hand back the status the core decides.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::Resource;

use crate::api::CatalogRef;
use crate::api::CatalogSource;
use crate::api::event::ObjectEvent;
use crate::catalog::CatalogIndex;
use crate::catalog_cache::image_catalogs::{ImageCatalogError, ImageCatalogs};
use crate::catalog_source::in_process::{
    self as pure, CheckOutcome, Decision, Observed, Served, Step,
};
use crate::catalog_source::spec;
use crate::k8s::effects::execute;
use crate::reconcile::bundle_images::NoImageClient;
use crate::reconcile::work_queue::Next;

use super::Reconciler;

/// What the controller serves (and last failed at) for each in-process image catalog, and the
/// digests replaced whose content is still to be removed.
#[derive(Default)]
pub(super) struct ServedImages {
    by_catalog: Mutex<HashMap<CatalogRef, ServedState>>,
    retired: Mutex<Vec<String>>,
}

#[derive(Default, Clone)]
struct ServedState {
    served: Option<Served>,
    failing_since: Option<jiff::Timestamp>,
}

impl ServedImages {
    fn get(&self, key: &CatalogRef) -> ServedState {
        self.lock().get(key).cloned().unwrap_or_default()
    }

    fn set(&self, key: &CatalogRef, state: ServedState) {
        self.lock().insert(key.clone(), state);
    }

    pub(super) fn forget(&self, key: &CatalogRef) {
        if let Some(served) = self.lock().remove(key).and_then(|s| s.served) {
            self.retired().push(served.digest);
        }
    }

    /// Digests some catalog serves now.
    fn digests(&self) -> Vec<String> {
        self.lock()
            .values()
            .filter_map(|s| Some(s.served.as_ref()?.digest.clone()))
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<CatalogRef, ServedState>> {
        self.by_catalog.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn retired(&self) -> std::sync::MutexGuard<'_, Vec<String>> {
        self.retired.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// How long an unused digest stays on disk before it is collected.
const COLLECT_GRACE: Duration = Duration::from_secs(60 * 60);

/// One sync of an in-process image catalog, in the one controller shape: observe (stores, what
/// is served, the registry when the core asks for a check), decide (`catalog_source::in_process`),
/// and hand the effects to the one executor.
/// Returns what the check (if one ran) found, and whether content is served in-process.
pub(super) async fn reconcile(
    r: &Reconciler,
    cs: &CatalogSource,
    key: &CatalogRef,
    notes: Vec<ObjectEvent>,
) -> Result<(Next, Option<CheckOutcome>, bool), super::Error> {
    // Nothing to dial: the content is served from this process (docs/catalog-images.md).
    r.connections.close(key);
    let source = spec::Source::Image(cs.spec.image.clone().unwrap_or_default());
    let (poll, interval_problem) = match spec::poll_interval(&cs.spec, &source) {
        None => (None, None),
        Some(Ok(interval)) => (Some(interval), None),
        Some(Err((fallback, message))) => (Some(fallback), Some(message)),
    };
    let leftovers =
        crate::catalog_source::registry::decide_leftovers(&r.registry_stores.observe_leftovers(cs));
    let (decision, outcome) = sync(r, cs, key, poll).await;
    let served = r.served_images.get(key).served.is_some();
    let ready = decision
        .status
        .connection_state
        .as_ref()
        .is_some_and(|c| c.last_observed_state == crate::api::ConnectionState::Ready);
    let effects = pure::effects(cs, decision, leftovers, interval_problem, notes);
    if let Err(err) = execute(&r.ctx.client, &r.ctx.events, &effects).await {
        return super::executed_failure(key, err).map(|next| (next, outcome, served));
    }
    r.ctx
        .metrics
        .catalog_source_ready(&key.namespace, &key.name, ready);
    Ok((
        Next::After(effects.requeue.unwrap_or(pure::RESYNC)),
        outcome,
        served,
    ))
}

/// Whether the controller can pull the catalog's image now: one digest request with the
/// catalog's credentials, nothing served or cached (docs/catalog-images.md §7). `Err` carries
/// the failure as a check outcome.
pub(super) async fn probe(
    r: &Reconciler,
    cs: &CatalogSource,
    key: &CatalogRef,
) -> Result<(), CheckOutcome> {
    let image_ref = cs.spec.image.clone().unwrap_or_default();
    let failed = |e: &dyn CauseKind| CheckOutcome::Failed {
        kind: e.kind().to_owned(),
        message: e.to_string(),
        transient: e.transient(),
    };
    let puller = r.ctx.bundle_images.puller().map_err(|e| failed(&e))?;
    let secrets = cs.spec.secrets.clone().unwrap_or_default();
    let read = r
        .ctx
        .bundle_images
        .read_credentials(&r.ctx.client, &key.namespace, &secrets)
        .await;
    puller
        .digest(&image_ref, &read.credentials)
        .await
        .map(|_| ())
        .map_err(|e| failed(&ImageCatalogError::from(e)))
}

/// Observes what is served, runs the check the core asks for, and returns its decision.
async fn sync(
    r: &Reconciler,
    cs: &CatalogSource,
    key: &CatalogRef,
    poll_interval: Option<Duration>,
) -> (Decision, Option<CheckOutcome>) {
    let now = r.ctx.clock.now();
    let image_ref = cs.spec.image.clone().unwrap_or_default();
    let state = r.served_images.get(key);
    let observed_status = cs.status.clone().unwrap_or_default();
    let observed = Observed {
        image: &image_ref,
        poll_interval,
        created: cs.meta().creation_timestamp.as_ref().map(|t| t.0),
        last_poll: observed_status
            .latest_image_registry_poll
            .as_ref()
            .map(|t| t.0),
        served: state.served.as_ref(),
        failing_since: state.failing_since,
        now,
    };
    let step = pure::next_step(&observed);
    let mut warnings = Vec::new();
    let mut content = None;
    let (outcome, served) = match step {
        Step::Wait { .. } => (None, state.served.clone()),
        Step::Check { .. } => {
            let (outcome, served, loaded) = check(r, cs, key, &state, &mut warnings).await;
            content = loaded;
            let failing = matches!(outcome, CheckOutcome::Failed { .. });
            r.served_images.set(
                key,
                ServedState {
                    served: served.clone(),
                    failing_since: failing.then(|| state.failing_since.unwrap_or(now)),
                },
            );
            if outcome == CheckOutcome::Swapped
                && let Some(old) = &state.served
            {
                r.served_images.retired().push(old.digest.clone());
            }
            (Some(outcome), served)
        }
    };
    // The new content is served (and the old released) before unused content is collected.
    let updates = pure::cache_updates(cs, outcome.as_ref(), served.as_ref(), content);
    r.update_cache(key, now, &updates);
    collect(r);
    let mut decision = pure::decide_status(
        &observed_status,
        &observed,
        step,
        outcome.as_ref(),
        served.as_ref(),
        cs.meta().generation,
    );
    decision.events.extend(warnings);
    (decision, outcome)
}

/// Asks the registry for the digest and serves its content when it is new.
async fn check(
    r: &Reconciler,
    cs: &CatalogSource,
    key: &CatalogRef,
    state: &ServedState,
    warnings: &mut Vec<ObjectEvent>,
) -> (CheckOutcome, Option<Served>, Option<Arc<CatalogIndex>>) {
    let image_ref = cs.spec.image.clone().unwrap_or_default();
    let failed = |e: &dyn CauseKind| CheckOutcome::Failed {
        kind: e.kind().to_owned(),
        message: e.to_string(),
        transient: e.transient(),
    };
    let (store, puller) = match (r.image_catalogs(), r.ctx.bundle_images.puller()) {
        (Ok(store), Ok(puller)) => (store, puller),
        (Err(e), _) => return (failed(e), state.served.clone(), None),
        (_, Err(e)) => return (failed(&e), state.served.clone(), None),
    };
    let secrets = cs.spec.secrets.clone().unwrap_or_default();
    let read = r
        .ctx
        .bundle_images
        .read_credentials(&r.ctx.client, &key.namespace, &secrets)
        .await;
    for problem in &read.problems {
        warnings.push(ObjectEvent::warning(
            "PullSecretNotUsed",
            format!("catalog image {image_ref}: {problem}"),
        ));
    }
    let with_secrets = |e: &dyn CauseKind| {
        let mut outcome = failed(e);
        if let CheckOutcome::Failed { message, .. } = &mut outcome
            && !read.problems.is_empty()
        {
            let problems: Vec<String> = read.problems.iter().map(ToString::to_string).collect();
            message.push_str(&format!(" ({})", problems.join("; ")));
        }
        outcome
    };
    let digest = match puller.digest(&image_ref, &read.credentials).await {
        Ok(d) => d,
        Err(e) => {
            return (
                with_secrets(&ImageCatalogError::from(e)),
                state.served.clone(),
                None,
            );
        }
    };
    if let Some(s) = &state.served
        && s.digest == digest
        && s.image == image_ref
        && r.ctx.catalogs.get(key).is_some_and(|c| c.index.is_some())
    {
        return (CheckOutcome::Unchanged, state.served.clone(), None);
    }
    // A new digest (or the first) is checked against the image policy before its content is
    // used from anywhere, the disk cache included; refused, the last good content keeps
    // serving (docs/image-signatures.md §6).
    if let Err(e) = puller.verify(&image_ref, &digest, &read.credentials).await {
        return (
            with_secrets(&ImageCatalogError::from(e)),
            state.served.clone(),
            None,
        );
    }
    let started = std::time::Instant::now();
    match store
        .content(puller, &image_ref, &digest, &read.credentials)
        .await
    {
        Ok(content) => {
            let now = r.ctx.clock.now();
            let packages = content.index.packages().len();
            tracing::info!(catalog = %key, image = %image_ref, digest = %digest, origin = ?content.origin, packages, elapsed_ms = started.elapsed().as_millis() as u64, "catalog image served in-process");
            let served = Served {
                image: image_ref,
                digest,
                packages,
                since: now,
            };
            (CheckOutcome::Swapped, Some(served), Some(content.index))
        }
        Err(e) => (with_secrets(&e), state.served.clone(), None),
    }
}

/// Removes content no catalog serves: replaced digests as soon as nothing reads their index
/// any more, unknown ones after a grace period (a restarted controller reloads its catalogs
/// one by one).
fn collect(r: &Reconciler) {
    let Some(Ok(store)) = r.image_catalogs.get() else {
        return;
    };
    let serving = r.served_images.digests();
    let mut removed = Vec::new();
    r.served_images.retired().retain(|old| {
        if serving.contains(old) {
            return false;
        }
        if store.release(old, &serving) {
            removed.push(old.clone());
            return false;
        }
        // Still read somewhere: tried again on a later sync.
        store.on_disk(old)
    });
    removed.extend(store.collect(&serving, COLLECT_GRACE));
    if !removed.is_empty() {
        tracing::info!(?removed, "unused catalog image content removed");
    }
}

/// An error as the core's outcome wants it.
trait CauseKind: std::fmt::Display {
    fn kind(&self) -> &str;
    fn transient(&self) -> bool;
}

impl CauseKind for ImageCatalogError {
    fn kind(&self) -> &str {
        match self {
            ImageCatalogError::Pull(e) => e.kind(),
            ImageCatalogError::Invalid { .. } => "InvalidCatalog",
            ImageCatalogError::Disk { .. } => "CacheError",
        }
    }
    fn transient(&self) -> bool {
        self.is_transient()
    }
}

impl CauseKind for NoImageClient {
    fn kind(&self) -> &str {
        "ClientSetupError"
    }
    fn transient(&self) -> bool {
        false
    }
}

/// The store of catalog image content under `dir`.
pub(super) fn open_store(dir: &std::path::Path) -> Result<Arc<ImageCatalogs>, ImageCatalogError> {
    ImageCatalogs::new(dir).map(Arc::new)
}

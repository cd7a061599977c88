//! The I/O of in-process image catalogs (docs/catalog-images.md): the check the catalog's memo
//! asks for — pull secrets, the manifest digest, the content by digest from the shared store —
//! as an observation for the decision (`catalog_source::decision::decide`), and the collection
//! of content no catalog serves any more.

use std::sync::Arc;
use std::time::Duration;

use crate::api::CatalogRef;
use crate::api::CatalogSource;
use crate::api::event::ObjectEvent;
use crate::catalog::CatalogIndex;
use crate::catalog_cache::image_catalogs::{ImageCatalogError, ImageCatalogs};
use crate::catalog_source::decision::CheckSeen;
use crate::catalog_source::in_process::{CheckOutcome, Served};
use crate::catalog_source::memo::Memo;
use crate::reconcile::bundle_images::NoImageClient;

use super::Reconciler;

/// How long an unused digest stays on disk before it is collected.
const COLLECT_GRACE: Duration = Duration::from_secs(60 * 60);

/// Runs the check: asks the registry for the digest and loads its content when it is new (the
/// memo says what is served). Nothing is served or remembered here: the decision says so.
pub(super) async fn check(
    r: &Reconciler,
    cs: &CatalogSource,
    key: &CatalogRef,
    memo: &Memo,
) -> CheckSeen {
    let mut warnings = Vec::new();
    let (outcome, served, content) = load(r, cs, key, memo.served.as_ref(), &mut warnings).await;
    CheckSeen {
        outcome,
        served,
        content,
        warnings,
    }
}

/// Asks the registry for the digest and loads its content when it differs from `served`.
async fn load(
    r: &Reconciler,
    cs: &CatalogSource,
    key: &CatalogRef,
    served: Option<&Served>,
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
        (Err(e), _) => return (failed(e), served.cloned(), None),
        (_, Err(e)) => return (failed(&e), served.cloned(), None),
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
                served.cloned(),
                None,
            );
        }
    };
    if let Some(s) = served
        && s.digest == digest
        && s.image == image_ref
        && r.ctx.catalogs.get(key).is_some_and(|c| c.index.is_some())
    {
        return (CheckOutcome::Unchanged, served.cloned(), None);
    }
    // A new digest (or the first) is checked against the image policy before its content is
    // used from anywhere, the disk cache included; refused, the last good content keeps
    // serving (docs/image-signatures.md §6).
    if let Err(e) = puller.verify(&image_ref, &digest, &read.credentials).await {
        return (
            with_secrets(&ImageCatalogError::from(e)),
            served.cloned(),
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
        Err(e) => (with_secrets(&e), served.cloned(), None),
    }
}

/// Removes content no catalog serves: replaced digests as soon as nothing reads their index
/// any more, unknown ones after a grace period (a restarted controller reloads its catalogs
/// one by one).
pub(super) fn collect(r: &Reconciler) {
    let Some(Ok(store)) = r.image_catalogs.get() else {
        return;
    };
    let serving: Vec<String> = r
        .memos()
        .values()
        .filter_map(|m| Some(m.served.as_ref()?.digest.clone()))
        .collect();
    let mut removed = Vec::new();
    r.retired().retain(|old| {
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

//! Steps that reference a pulled bundle image (`plan::image_bundle`): before a pass, each is
//! given the object it stands for, taken from the puller's cache by digest (pulled again if the
//! cache lost it; by an unpack pod when only the node can pull it). Every referenced bundle is
//! fetched before anything is applied, so a bundle that cannot be fetched fails the pass with
//! nothing written.

use std::collections::HashMap;

use super::unpack_pod;
use crate::api::Step;
use crate::plan::image_bundle::MissingStepObject;
use crate::plan::lookups::node_may_pull;
use crate::plan::unpack::PullFailure;
use crate::plan::{BundleReference, PlanError, PulledObjects};
use crate::reconcile::Context;

/// Why the objects of a plan's bundle references cannot be had; the pass fails with this text.
#[derive(Debug, thiserror::Error)]
pub enum BundleObjectsError {
    #[error(
        "the bundle of {bundle} could not be fetched again from its image: {}",
        .failure.message
    )]
    Refetch {
        bundle: String,
        failure: PullFailure,
    },
    #[error("bundle image {image}: {source}")]
    Objects {
        image: String,
        #[source]
        source: PlanError,
    },
    #[error("bundle image {image} was not fetched")]
    NotFetched { image: String },
    #[error(transparent)]
    MissingObject(#[from] MissingStepObject),
}

/// `steps` with every bundle reference replaced by its object (the statuses are the same), or
/// why a referenced bundle cannot be had. `None` when no step references a bundle.
pub async fn with_bundle_objects(
    ctx: &Context,
    namespace: &str,
    steps: &[Step],
) -> Result<Option<Vec<Step>>, BundleObjectsError> {
    let references: Vec<Option<BundleReference>> = steps
        .iter()
        .map(|s| {
            s.resource
                .manifest
                .as_deref()
                .and_then(BundleReference::of_manifest)
        })
        .collect();
    if references.iter().all(Option::is_none) {
        return Ok(None);
    }
    // One fetch per bundle (its CSV step carries the properties the plan used).
    let mut bundles: HashMap<(String, String), PulledObjects> = HashMap::new();
    for (step, reference) in steps.iter().zip(&references) {
        let Some(reference) = reference else { continue };
        let key = (reference.pinned_image(), step.resolving.clone());
        if bundles.contains_key(&key) {
            continue;
        }
        let properties = steps
            .iter()
            .zip(&references)
            .filter(|(s, _)| s.resolving == step.resolving)
            .filter_map(|(_, r)| r.as_ref())
            .find(|r| r.digest == reference.digest && !r.properties.is_empty())
            .map(|r| r.properties.clone())
            .unwrap_or_default();
        let bundle = match ctx.bundle_images.cached(&key.0) {
            Some(bundle) => bundle,
            None => {
                let credentials = ctx
                    .bundle_images
                    .credentials(&ctx.client, &reference.catalog())
                    .await;
                let pulled = match ctx.bundle_images.pull(&key.0, &credentials, None).await {
                    // The controller cannot pull it: a pod unpacks it again (docs/bundle-images.md).
                    Err(failure) if node_may_pull(&failure) => {
                        match unpack_pod::enabled(ctx, &key.0) {
                            Some(options) => {
                                unpack_pod::refetch(
                                    ctx,
                                    options,
                                    &key.0,
                                    &reference.catalog(),
                                    &failure.message,
                                )
                                .await
                            }
                            None => Err(failure),
                        }
                    }
                    pulled => pulled,
                };
                pulled.map_err(|failure| BundleObjectsError::Refetch {
                    bundle: step.resolving.clone(),
                    failure,
                })?
            }
        };
        let objects = PulledObjects::new(
            reference,
            &properties,
            bundle.manifests(),
            &step.resolving,
            namespace,
        )
        .map_err(|source| BundleObjectsError::Objects {
            image: key.0.clone(),
            source,
        })?;
        bundles.insert(key, objects);
    }
    let mut expanded = steps.to_vec();
    for (step, reference) in expanded.iter_mut().zip(&references) {
        let Some(reference) = reference else { continue };
        let key = (reference.pinned_image(), step.resolving.clone());
        let Some(objects) = bundles.get(&key) else {
            // Every key was inserted by the loop above.
            return Err(BundleObjectsError::NotFetched { image: key.0 });
        };
        let object = objects.object_for(step)?;
        step.resource.manifest = Some(object.to_string());
    }
    Ok(Some(expanded))
}

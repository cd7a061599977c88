//! Where a catalog bundle's manifests come from: inline `olm.bundle.object` properties (or
//! `csvJson` + `object` over gRPC), or the bundle image, which the controller pulls itself
//! (`plan::image_bundle`; no unpack Jobs).

use serde_json::{Value, json};

use super::steps::BundleContent;
use crate::api::CatalogRef;
use crate::catalog::index::IndexedBundle;
use crate::catalog::properties::{BUNDLE_OBJECT, CSV_METADATA};

/// Why a bundle's manifests are not available.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContentError {
    #[error("bundle {bundle} in catalog {catalog} has neither manifests nor an image")]
    Empty { bundle: String, catalog: CatalogRef },
    #[error("bundle {bundle} in catalog {catalog}: manifest #{index} is not valid JSON: {reason}")]
    BadManifest {
        bundle: String,
        catalog: CatalogRef,
        index: usize,
        reason: String,
    },
}

/// How a bundle's manifests are obtained.
#[derive(Debug, Clone)]
pub enum BundleSource {
    /// The catalog carries them.
    Inline(BundleContent),
    /// Only the bundle image has them: it must be pulled first.
    Image {
        image: String,
        /// The properties projected onto the CSV (`{type, value}`).
        properties: Vec<Value>,
    },
}

/// Where the manifests of `bundle` from `catalog` come from.
pub fn bundle_source(
    bundle: &IndexedBundle,
    catalog: &CatalogRef,
) -> Result<BundleSource, ContentError> {
    if bundle.objects().next().is_none() && !bundle.image().is_empty() {
        return Ok(BundleSource::Image {
            image: bundle.image().to_owned(),
            properties: csv_properties(bundle),
        });
    }
    bundle_content(bundle, catalog).map(BundleSource::Inline)
}

/// The inline manifests and properties of `bundle` from `catalog`.
pub fn bundle_content(
    bundle: &IndexedBundle,
    catalog: &CatalogRef,
) -> Result<BundleContent, ContentError> {
    let manifests = bundle
        .objects()
        .enumerate()
        .map(|(index, text)| {
            serde_json::from_str::<Value>(text).map_err(|e| ContentError::BadManifest {
                bundle: bundle.name().to_owned(),
                catalog: catalog.clone(),
                index,
                reason: e.to_string(),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    if manifests.is_empty() {
        return Err(ContentError::Empty {
            bundle: bundle.name().to_owned(),
            catalog: catalog.clone(),
        });
    }
    Ok(BundleContent {
        name: bundle.name().to_owned(),
        manifests,
        properties: csv_properties(bundle),
        catalog: catalog.clone(),
    })
}

/// The properties projected onto the CSV: all but `olm.bundle.object` and `olm.csv.metadata`,
/// which the registry leaves out to keep CSVs small (operator-registry `model_to_api.go`).
fn csv_properties(bundle: &IndexedBundle) -> Vec<Value> {
    bundle
        .properties()
        .iter()
        .filter(|p| p.type_ != BUNDLE_OBJECT && p.type_ != CSV_METADATA)
        .map(|p| {
            let value: Value = serde_json::from_str(p.json().get()).unwrap_or(Value::Null);
            json!({"type": p.type_, "value": value})
        })
        .collect()
}

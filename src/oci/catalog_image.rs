//! Catalog images: the image config's label names the directory of the file-based catalog
//! (`operators.operatorframework.io.index.configs.v1`, `/configs` by convention); only that
//! directory is unpacked, with the checks bundle files get (docs/catalog-images.md §2).

use oci_client::errors::OciDistributionError;
use oci_client::secrets::RegistryAuth;

use super::classify::{Failure, classify};
use super::download::{download_layers, layer_blobs};
use super::error::PullError;
use super::layers::{Limits, UnpackedFiles, label_dir, unpack_layers_under};
use super::registries_conf::PullSource;

/// The label `opm` writes on catalog images: where the file-based catalog is.
pub const CATALOG_CONFIGS_LABEL: &str = "operators.operatorframework.io.index.configs.v1";

/// A catalog image's file-based catalog, unpacked in memory.
#[derive(Debug, Clone)]
pub struct PulledCatalog {
    /// The reference as the CatalogSource gives it.
    pub image: String,
    /// The digest the content was pulled by (what a tag pointed at when polled).
    pub digest: String,
    /// The labelled directory, relative (`configs`).
    pub dir: String,
    /// The files under `dir`, by path relative to it (`etcd/catalog.json`).
    pub files: UnpackedFiles,
}

/// The FBC directory an image config (JSON) names, relative, or why there is none. Pure.
pub fn catalog_dir_of(image: &str, config_json: &str) -> Result<String, PullError> {
    let not_catalog = |reason: String| PullError::NotACatalog {
        image: image.to_string(),
        reason,
    };
    let config: serde_json::Value =
        serde_json::from_str(config_json).map_err(|e| PullError::InvalidContent {
            image: image.to_string(),
            file: "image config".into(),
            reason: format!("not JSON: {e}"),
        })?;
    let label = config
        .get("config")
        .and_then(|c| c.get("Labels"))
        .and_then(|l| l.get(CATALOG_CONFIGS_LABEL))
        .and_then(serde_json::Value::as_str);
    let Some(dir) = label else {
        return Err(not_catalog(format!(
            "it has no label {CATALOG_CONFIGS_LABEL} (a SQLite index image needs the registry pod: annotate the CatalogSource olm-rs.io/catalog-serving: pod)"
        )));
    };
    label_dir(dir).map_err(|reason| {
        not_catalog(format!(
            "its label {CATALOG_CONFIGS_LABEL}={dir:?} {reason}"
        ))
    })
}

/// Pulls the manifest and config of `source` (pinned to a digest), reads the label, downloads
/// the layers and keeps only the labelled directory.
pub(super) async fn fetch_catalog(
    image: &str,
    source: &PullSource,
    client: &oci_client::Client,
    auth: &RegistryAuth,
    limits: &Limits,
) -> Result<PulledCatalog, Failure> {
    let reference = source.image.reference();
    let registry = source.image.registry().to_string();
    let (manifest, _manifest_digest, config, _) = client
        .pull_manifest_and_config_and_list_digest(reference, auth)
        .await
        .map_err(|e: OciDistributionError| classify(image, &registry, "image manifest", e))?;
    let dir = catalog_dir_of(image, &config).map_err(Failure::Other)?;
    let blobs = download_layers(image, &registry, client, reference, &manifest, limits).await?;
    let digest = source
        .image
        .digest()
        .map(str::to_string)
        .unwrap_or_default();
    let image_owned = image.to_string();
    let limits = *limits;
    tokio::task::spawn_blocking(move || {
        let layers = layer_blobs(&blobs);
        let files = unpack_layers_under(&layers, &limits, &[dir.as_str()]).map_err(|e| {
            PullError::InvalidContent {
                image: image_owned.clone(),
                file: e.file,
                reason: e.reason,
            }
        })?;
        let prefix = format!("{dir}/");
        let files: UnpackedFiles = files
            .into_iter()
            .filter_map(|(path, data)| Some((path.strip_prefix(&prefix)?.to_string(), data)))
            .collect();
        if files.is_empty() {
            return Err(PullError::NotACatalog {
                image: image_owned,
                reason: format!(
                    "its label {CATALOG_CONFIGS_LABEL} names /{dir}, which holds no files in the image"
                ),
            });
        }
        Ok(PulledCatalog {
            image: image_owned,
            digest,
            dir,
            files,
        })
    })
    .await
    .map_err(|e| {
        Failure::Other(PullError::InvalidContent {
            image: image.to_string(),
            file: "catalog".into(),
            reason: format!("unpacking failed: {e}"),
        })
    })?
    .map_err(Failure::Other)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_label_names_the_catalog_directory() {
        let with = |labels: serde_json::Value| {
            serde_json::json!({"architecture": "amd64", "config": {"Labels": labels}}).to_string()
        };
        let cases = [
            (
                with(serde_json::json!({CATALOG_CONFIGS_LABEL: "/configs"})),
                Ok("configs"),
            ),
            (
                with(serde_json::json!({CATALOG_CONFIGS_LABEL: "/srv/fbc/"})),
                Ok("srv/fbc"),
            ),
            (
                with(serde_json::json!({CATALOG_CONFIGS_LABEL: "/"})),
                Err("NotACatalog"),
            ),
            (
                with(serde_json::json!({CATALOG_CONFIGS_LABEL: "/../etc"})),
                Err("NotACatalog"),
            ),
            (with(serde_json::json!({"other": "x"})), Err("NotACatalog")),
            (
                serde_json::json!({"architecture": "amd64"}).to_string(),
                Err("NotACatalog"),
            ),
            ("not json".to_string(), Err("InvalidContent")),
        ];
        for (config, expected) in cases {
            let got = catalog_dir_of("r/c:1", &config);
            match expected {
                Ok(dir) => assert_eq!(got.unwrap(), dir, "{config}"),
                Err(kind) => assert_eq!(got.unwrap_err().kind(), kind, "{config}"),
            }
        }
        let e = catalog_dir_of("r/c:1", &with(serde_json::json!({}))).unwrap_err();
        assert!(
            e.to_string().contains("r/c:1") && e.to_string().contains(CATALOG_CONFIGS_LABEL),
            "{e}"
        );
    }
}

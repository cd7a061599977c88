//! Stage 2 for `configmap` / `internal` catalogs: read the ConfigMap straight into the catalog
//! cache (docs/catalog.md §4) — no registry pod. Parsed again only when its resourceVersion
//! changes.
//!
//! Unlike OLM, olm-rs puts no ownerReference on the user's ConfigMap: OLM's makes deleting the
//! CatalogSource garbage-collect the user's data (a known pain, docs/catalog.md §4).

use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::Api;
use kube::{Resource, ResourceExt};

use crate::api::{CatalogSource, ConfigMapResourceReference};
use crate::catalog::{self, CatalogIndex};
use crate::registry::cache::{CatalogHealth, CatalogRef, HealthReason};
use crate::registry::configmap_catalog::{self, ConfigMapCatalogError};
use crate::registry::connection::InvalidCatalog;

use super::Reconciler;

/// What was last loaded from a catalog's ConfigMap.
#[derive(Debug, Clone)]
pub(super) struct LoadedConfigMap {
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    /// `Err` when the content was refused.
    pub outcome: Result<(), InvalidConfigMap>,
}

/// Why a catalog's ConfigMap could not be read or loaded; the text is the status message
/// (reason `ConfigMapError`).
#[derive(Debug, thiserror::Error)]
pub(super) enum ConfigMapError {
    #[error("failed to get catalog config map {name}: configmaps \"{name}\" not found")]
    NotFound { name: String },
    #[error("failed to get catalog config map {name}: {source}")]
    Unreadable {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("loading config map {name} stopped: {source}")]
    Stopped {
        name: String,
        #[source]
        source: tokio::task::JoinError,
    },
}

/// A catalog ConfigMap whose content is refused; the text is the status message (reason
/// `ConfigMapError`).
#[derive(Debug, Clone, thiserror::Error)]
#[error("catalog config map {name} is invalid: {problem}")]
pub(super) struct InvalidConfigMap {
    name: String,
    problem: InvalidContent,
}

#[derive(Debug, Clone, thiserror::Error)]
enum InvalidContent {
    /// Not a package-manifests catalog.
    #[error(transparent)]
    Format(#[from] ConfigMapCatalogError),
    /// A catalog that does not validate.
    #[error(transparent)]
    Problems(#[from] InvalidCatalog),
}

/// Loads the ConfigMap when it changed. Returns the `configMapReference` to record with the
/// outcome of loading its content, or (outer `Err`) why the ConfigMap could not be read.
pub(super) async fn sync(
    r: &Reconciler,
    cs: &CatalogSource,
    key: &CatalogRef,
    config_map: &str,
) -> Result<(ConfigMapResourceReference, Result<(), InvalidConfigMap>), ConfigMapError> {
    let ns = cs.namespace().unwrap_or_default();
    let api: Api<ConfigMap> = Api::namespaced(r.ctx.client.clone(), &ns);
    let now = r.ctx.clock.now();
    let name = config_map.to_owned();
    let cm = match api.get_opt(config_map).await {
        Ok(Some(cm)) => cm,
        Ok(None) => {
            let err = ConfigMapError::NotFound { name };
            forget(r, key, &err.to_string(), HealthReason::SpecInvalid);
            return Err(err);
        }
        Err(source) => {
            let err = ConfigMapError::Unreadable { name, source };
            forget(r, key, &err.to_string(), HealthReason::SpecInvalid);
            return Err(err);
        }
    };
    let uid = cm.meta().uid.clone();
    let resource_version = cm.resource_version();

    let previous = cs
        .status
        .as_ref()
        .and_then(|s| s.config_map_reference.as_ref())
        .filter(|p| p.name == config_map && p.uid == uid && p.resource_version == resource_version);
    let reference = ConfigMapResourceReference {
        name: config_map.to_owned(),
        namespace: ns,
        uid: uid.clone(),
        resource_version: resource_version.clone(),
        last_update_time: previous
            .and_then(|p| p.last_update_time.clone())
            .or(Some(Time(now))),
    };

    let loaded = r.loaded_configmaps().get(key).cloned();
    let already = loaded.as_ref().filter(|l| {
        l.uid == uid
            && l.resource_version == resource_version
            && r.ctx
                .catalogs
                .get(key)
                .is_some_and(|s| s.index.is_some() || l.outcome.is_err())
    });
    let outcome = match already {
        Some(l) => l.outcome.clone(),
        None => {
            let data = cm.data.clone().unwrap_or_default();
            let built = tokio::task::spawn_blocking(move || {
                let config = configmap_catalog::declarative_config(&data)?;
                let problems = catalog::validate::validate(&config);
                if !problems.is_empty() {
                    return Err(InvalidCatalog { problems }.into());
                }
                Ok(CatalogIndex::new(config))
            })
            .await
            .map_err(|source| ConfigMapError::Stopped {
                name: name.clone(),
                source,
            })?;
            let outcome = match built {
                Ok(index) => {
                    r.ctx.catalogs.set_index(key, Arc::new(index), now);
                    Ok(())
                }
                Err(problem) => {
                    let invalid = InvalidConfigMap { name, problem };
                    r.ctx.catalogs.set_health(
                        key,
                        CatalogHealth::unhealthy(HealthReason::Invalid, invalid.to_string(), now),
                        true,
                    );
                    Err(invalid)
                }
            };
            r.loaded_configmaps().insert(
                key.clone(),
                LoadedConfigMap {
                    uid,
                    resource_version,
                    outcome: outcome.clone(),
                },
            );
            outcome
        }
    };
    Ok((reference, outcome))
}

fn forget(r: &Reconciler, key: &CatalogRef, message: &str, reason: HealthReason) {
    r.loaded_configmaps().remove(key);
    r.ctx.catalogs.set_health(
        key,
        CatalogHealth::unhealthy(reason, message, r.ctx.clock.now()),
        true,
    );
}

//! Observing a `configmap` / `internal` catalog (docs/catalog.md §4): its ConfigMap, read by
//! name at each sync and parsed again only when its resourceVersion differs from the version
//! the catalog's memo says was loaded — no registry pod. The decision
//! (`catalog_source::decision`) puts the content in the catalog cache and says what to
//! remember.
//!
//! Unlike OLM, olm-rs puts no ownerReference on the user's ConfigMap: OLM's makes deleting the
//! CatalogSource garbage-collect the user's data (a known pain, docs/catalog.md §4).

use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use kube::{Resource, ResourceExt};

use crate::api::CatalogRef;
use crate::api::CatalogSource;
use crate::catalog::configmap_catalog::{self, ConfigMapCatalogError};
use crate::catalog::{self, CatalogIndex};
use crate::catalog_source::decision::{ConfigMapContent, ConfigMapSeen};
use crate::catalog_source::memo::LoadedConfigMap;
use crate::registry::connection::InvalidCatalog;

use super::Reconciler;

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
#[derive(Debug, thiserror::Error)]
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

/// Reads the catalog's ConfigMap, and loads its content when it changed since the load
/// `loaded` remembers (the load is the observation: what the content is; the cache and the
/// memo are updated as the decision says).
pub(super) async fn observe(
    r: &Reconciler,
    cs: &CatalogSource,
    key: &CatalogRef,
    config_map: &str,
    loaded: Option<&LoadedConfigMap>,
) -> ConfigMapSeen {
    let ns = cs.namespace().unwrap_or_default();
    let api: Api<ConfigMap> = Api::namespaced(r.ctx.client.clone(), &ns);
    let name = config_map.to_owned();
    let cm = match api.get_opt(config_map).await {
        Ok(Some(cm)) => cm,
        Ok(None) => {
            return ConfigMapSeen::Unreadable(ConfigMapError::NotFound { name }.to_string());
        }
        Err(source) => {
            return ConfigMapSeen::Unreadable(
                ConfigMapError::Unreadable { name, source }.to_string(),
            );
        }
    };
    let uid = cm.meta().uid.clone();
    let resource_version = cm.resource_version();
    let already = loaded.filter(|l| {
        l.uid == uid
            && l.resource_version == resource_version
            && r.ctx
                .catalogs
                .get(key)
                .is_some_and(|s| s.index.is_some() || l.refused.is_some())
    });
    let content = match already {
        Some(l) => ConfigMapContent::Unchanged {
            refused: l.refused.clone(),
        },
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
            .await;
            let built = match built {
                Ok(built) => built,
                Err(source) => {
                    return ConfigMapSeen::Stopped(
                        ConfigMapError::Stopped { name, source }.to_string(),
                    );
                }
            };
            match built {
                Ok(index) => ConfigMapContent::Loaded(Arc::new(index)),
                Err(problem) => {
                    ConfigMapContent::Refused(InvalidConfigMap { name, problem }.to_string())
                }
            }
        }
    };
    ConfigMapSeen::Read {
        uid,
        resource_version,
        content,
    }
}

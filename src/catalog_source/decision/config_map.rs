//! Stage 2 of a sync, for a `configmap` catalog (docs/catalog.md §4): the ConfigMap's
//! reference in the status, its content in the cache, and the version loaded in the memo.
//! Part of `decision`.

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;

use crate::api::{CatalogSource, CatalogSourceReason, ConfigMapResourceReference};
use crate::catalog_source::cache_update::{CacheUpdate, Unhealthy};
use crate::catalog_source::memo::{LoadedConfigMap, Memo};

use super::{ConfigMapContent, ConfigMapSeen, Sync};

/// Stage 2 (docs/catalog.md §4): the ConfigMap's reference in the status, its content in the
/// cache.
pub(super) fn config_map(
    sync: &mut Sync,
    cs: &CatalogSource,
    name: &str,
    cm: &ConfigMapSeen,
    now: Timestamp,
) {
    let (uid, resource_version, content) = match cm {
        ConfigMapSeen::Unreadable(message) => {
            sync.cache.push(CacheUpdate::Unhealthy {
                reason: Unhealthy::SpecInvalid,
                message: message.clone(),
                drop_index: true,
            });
            sync.problem = Some((CatalogSourceReason::ConfigMapError, message.clone()));
            return;
        }
        ConfigMapSeen::Stopped(message) => {
            sync.problem = Some((CatalogSourceReason::ConfigMapError, message.clone()));
            return;
        }
        ConfigMapSeen::Read {
            uid,
            resource_version,
            content,
        } => (uid, resource_version, content),
    };
    let previous = cs
        .status
        .as_ref()
        .and_then(|s| s.config_map_reference.as_ref())
        .filter(|p| p.name == name && &p.uid == uid && &p.resource_version == resource_version);
    sync.status.config_map_reference = Some(ConfigMapResourceReference {
        name: name.to_owned(),
        namespace: cs.namespace().unwrap_or_default(),
        uid: uid.clone(),
        resource_version: resource_version.clone(),
        last_update_time: previous
            .and_then(|p| p.last_update_time.clone())
            .or(Some(Time(now))),
    });
    let refused = match content {
        ConfigMapContent::Unchanged { refused } => refused.clone(),
        ConfigMapContent::Loaded(index) => {
            sync.cache.push(CacheUpdate::Index(Arc::clone(index)));
            None
        }
        ConfigMapContent::Refused(message) => {
            sync.cache.push(CacheUpdate::Unhealthy {
                reason: Unhealthy::Invalid,
                message: message.clone(),
                drop_index: true,
            });
            Some(message.clone())
        }
    };
    if let Some(message) = refused {
        sync.problem = Some((CatalogSourceReason::ConfigMapError, message));
    }
}

/// What a ConfigMap read leaves remembered: the version loaded (and why it was refused), so
/// the next sync parses it again only when it changes (docs/catalog.md §4).
pub(super) fn remember_config_map(memo: &mut Memo, cm: &ConfigMapSeen) {
    let ConfigMapSeen::Read {
        uid,
        resource_version,
        content,
    } = cm
    else {
        if let ConfigMapSeen::Unreadable(_) = cm {
            memo.config_map = None;
        }
        return;
    };
    let refused = match content {
        ConfigMapContent::Unchanged { .. } => return,
        ConfigMapContent::Loaded(_) => None,
        ConfigMapContent::Refused(message) => Some(message.clone()),
    };
    memo.config_map = Some(LoadedConfigMap {
        uid: uid.clone(),
        resource_version: resource_version.clone(),
        refused,
    });
}

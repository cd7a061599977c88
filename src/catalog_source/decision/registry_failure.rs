//! The decision a sync makes beforehand for registry writes that fail (docs/architecture.md
//! §2): the shell only picks it, with the refusal's text. Part of `decision`.

use crate::api::event::ObjectEvent;
use crate::api::{CatalogSource, CatalogSourceReason, CatalogSourceStatus};
use crate::catalog_source::cache_update::{CacheUpdate, Unhealthy};
use crate::catalog_source::memo::Memo;

use super::{Link, Observed, Outcome, Sync, key, source_to_observe};

/// The decision to carry out instead when the registry writes fail: the catalog is unhealthy
/// and its status says why (the error's text, known only then).
#[derive(Debug, Clone)]
pub struct RegistryFailure {
    status: CatalogSourceStatus,
    notes: Vec<ObjectEvent>,
    /// The memos without what only a carried-out registry write makes true.
    pub memo: Memo,
}

impl RegistryFailure {
    pub(super) fn new(seen: &Observed<'_>, memo: Memo) -> RegistryFailure {
        let observed = seen.catalog.status.clone().unwrap_or_default();
        let mut status = CatalogSourceStatus {
            message: None,
            reason: None,
            ..observed.clone()
        };
        if observed.reason == Some(CatalogSourceReason::SpecInvalidError) {
            status = CatalogSourceStatus {
                conditions: observed.conditions.clone(),
                ..CatalogSourceStatus::default()
            };
        }
        status.config_map_reference = None;
        RegistryFailure {
            status,
            notes: source_to_observe(seen.catalog, seen.serving_default).1,
            memo,
        }
    }

    /// The outcome of a sync whose registry objects could not be written (or built).
    pub fn outcome(&self, cs: &CatalogSource, error: &dyn std::fmt::Display) -> Outcome {
        let sync = Sync {
            status: self.status.clone(),
            problem: Some((
                CatalogSourceReason::RegistryServerError,
                format!("couldn't ensure registry server - {error}"),
            )),
            notes: self.notes.clone(),
            requeue: None,
            link: Link::Leave,
            cache: vec![CacheUpdate::Unhealthy {
                reason: Unhealthy::Unreachable,
                message: format!("catalog {}: registry server not ensured: {error}", key(cs)),
                drop_index: false,
            }],
            serving_pods: None,
        };
        sync.finish(cs).0
    }
}

//! Copied CSVs (docs/operator-groups.md §10) and the RBAC a member CSV gets outside its namespace
//! (docs/operator-groups.md §9): the fan-out loop keyed by original CSV, and the OLMConfig status.
//!
//! One run decides every namespace of one original from the stores (pure,
//! `operator_group::copy_decision`), skips the copies whose hashes already match, and writes
//! the rest concurrently through the executor's fan-out (`k8s::effects::execute_fan_out`). A new namespace, a
//! changed original, a copy edited or deleted by hand and the OLMConfig switch each queue the
//! original again (`reconcile::operator_group::routes`).

mod olm_config;
mod rbac;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use super::shared::{NamespacedName, RACE_RETRY, Shared};
use crate::api::ClusterServiceVersion;
use crate::k8s::effects::execute_fan_out;
use crate::k8s::write::ApiError;
use crate::operator_group::copied_csv::CopySettings;
use crate::operator_group::copy_decision::{CopyDecision, CopyObserved, decide_copies};
use crate::operator_group::membership::is_copied;
use crate::reconcile::work_queue::Next;

pub use olm_config::sync_olm_config;

/// What the copy loop remembers between runs (all of it rebuildable; the RBAC memos are cleared
/// on every resync, so RBAC someone removed is put back then).
#[derive(Default)]
pub struct CopyLoopState {
    /// Originals whose "copying disabled" warning event is published.
    warned: Mutex<HashSet<NamespacedName>>,
    /// Originals known to carry no such event.
    events_cleared: Mutex<HashSet<NamespacedName>>,
    /// Per original: the hash of the RBAC last ensured for it, and where.
    rbac: Mutex<HashMap<NamespacedName, rbac::RbacMemo>>,
}

impl CopyLoopState {
    /// Forgets what was ensured so the next runs re-check against the cluster.
    pub fn clear_memos(&self) {
        lock(&self.rbac).clear();
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Plain maps, each update a single insert/remove: a poisoned lock is still consistent.
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// Why a copy run failed; the original is retried with back-off.
#[derive(Debug, thiserror::Error)]
pub enum CopySyncError {
    #[error("CSV {original}: cannot encode its copy: {source}")]
    Encode {
        original: NamespacedName,
        #[source]
        source: ApiError,
    },
    #[error("CSV {original}: {failed} of {total} copy writes failed; first: {first}")]
    Writes {
        original: NamespacedName,
        failed: usize,
        total: usize,
        #[source]
        first: ApiError,
    },
    #[error("CSV {original}: {source}")]
    Api {
        original: NamespacedName,
        #[source]
        source: ApiError,
    },
}

impl crate::k8s::errors::ReconcileFailure for CopySyncError {
    fn error_label(&self) -> &'static str {
        match self {
            // A copy that cannot be encoded is a bug, not a refusal of the object.
            CopySyncError::Encode { .. } => crate::k8s::errors::ApiFailure::Other.metric_label(),
            CopySyncError::Writes { first, .. } => first.metric_label(),
            CopySyncError::Api { source, .. } => source.metric_label(),
        }
    }
}

/// The settings in force: OLMConfig `cluster` and the protected namespaces.
pub fn copy_settings(shared: &Shared) -> CopySettings {
    CopySettings {
        disabled: shared
            .stores
            .olm_config()
            .is_some_and(|c| c.spec.copied_csvs_disabled()),
        protected_namespaces: shared.options.protected_copied_csv_namespaces.clone(),
    }
}

/// The original `key` as the store holds it, when it is one (not a copy by any of OLM's tests).
fn original(shared: &Shared, key: &NamespacedName) -> Option<Arc<ClusterServiceVersion>> {
    shared
        .stores
        .csvs
        .get(&key.namespace, &key.name)
        .filter(|c| !is_copied(c))
}

/// The decision for `key` (whose original, if any, is `original_csv`) on what the stores hold.
pub fn decide_for(
    shared: &Shared,
    key: &NamespacedName,
    original_csv: Option<&ClusterServiceVersion>,
    settings: &CopySettings,
) -> CopyDecision {
    let stores = &shared.stores;
    let groups = stores.groups_in(&key.namespace);
    let copies = stores.copies.of(key);
    let namespaces = stores.all_namespaces();
    decide_copies(&CopyObserved {
        original: original_csv,
        groups_in_namespace: &groups,
        copies: &copies,
        namespaces: &namespaces,
        settings,
    })
}

/// One run of the fan-out for the original `key`.
pub async fn sync(
    shared: &Shared,
    state: &CopyLoopState,
    key: &NamespacedName,
) -> Result<Next, CopySyncError> {
    let settings = copy_settings(shared);
    let original_csv = original(shared, key);
    let decision = decide_for(shared, key, original_csv.as_deref(), &settings);
    {
        let mut wanted = shared
            .stores
            .desired_copies
            .write()
            .unwrap_or_else(|p| p.into_inner());
        match decision.desired {
            Some(hashes) => wanted.insert(key.clone(), hashes),
            None => wanted.remove(key),
        };
    }
    let raced = write_copies(shared, key, &decision).await?;

    match (&original_csv, decision.copies_disabled_warning) {
        (Some(csv), Some(warn)) => {
            if decision.member_rbac {
                rbac::ensure_member_rbac(shared, state, key, csv).await?;
            }
            olm_config::note_disabled(shared, state, key, csv, warn).await;
        }
        _ => {
            lock(&state.rbac).remove(key);
            lock(&state.warned).remove(key);
            lock(&state.events_cleared).remove(key);
        }
    }
    shared.queues.olm_config.add(super::routes::TheOlmConfig);
    Ok(if raced {
        Next::After(RACE_RETRY)
    } else {
        Next::Done
    })
}

/// Carries out the decision's copy writes through the executor's fan-out, at most
/// `copy_write_concurrency` at a time. Returns whether some write raced (the caller decides
/// again shortly).
async fn write_copies(
    shared: &Shared,
    key: &NamespacedName,
    decision: &CopyDecision,
) -> Result<bool, CopySyncError> {
    let Some(fan_out) = decision.fan_out() else {
        return Ok(false);
    };
    let report = execute_fan_out(
        &shared.ctx.client,
        &fan_out,
        shared.options.copy_write_concurrency,
    )
    .await
    .map_err(|source| CopySyncError::Encode {
        original: key.clone(),
        source,
    })?;
    let failed = report.failures.len();
    match report.failures.into_iter().next() {
        Some(first) => Err(CopySyncError::Writes {
            original: key.clone(),
            failed,
            total: report.total,
            first,
        }),
        None => Ok(report.raced),
    }
}

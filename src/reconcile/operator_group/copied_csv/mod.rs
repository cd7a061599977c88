//! Copied CSVs (docs/operator-groups.md §10) and the RBAC a member CSV gets outside its namespace
//! (docs/operator-groups.md §9): the fan-out loop keyed by original CSV, and the OLMConfig status.
//!
//! One run plans every namespace of one original from the caches (pure, `plan_copies`), skips
//! the copies whose hashes already match, and writes the rest concurrently. A new namespace, a
//! changed original, a copy edited or deleted by hand and the OLMConfig switch each queue the
//! original again (`reconcile::operator_group::routes`).

mod olm_config;
mod rbac;
mod writes;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use kube::ResourceExt;

use super::{ObjectKey, Shared};
use crate::api::ClusterServiceVersion;
use crate::api::keys::TARGET_NAMESPACES_ANNOTATION;
use crate::operator_group::copied_csv::{
    CopyHashes, CopyPlan, CopyRecord, CopySettings, CopyWrite, Original, copy_hashes,
    copy_prototype, is_uncopiable, plan_copies,
};
use crate::operator_group::membership::{is_active_member, is_copied};
use crate::operator_group::targets::TargetNamespaces;
use crate::reconcile::work_queue::Next;

pub use olm_config::sync_olm_config;
pub use writes::{CopyWriter, Outcome, WriteError};

/// Delay before planning again after a write raced with another writer.
const RACE_RETRY: Duration = Duration::from_millis(500);

/// What the copy loop remembers between runs (all of it rebuildable; cleared on resync).
#[derive(Default)]
pub struct CopyLoopState {
    /// Originals whose "copying disabled" warning event is published.
    warned: Mutex<HashSet<ObjectKey>>,
    /// Originals known to carry no such event.
    events_cleared: Mutex<HashSet<ObjectKey>>,
    /// Per original: the hash of the RBAC last ensured for it, and where.
    rbac: Mutex<HashMap<ObjectKey, rbac::RbacMemo>>,
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
        original: ObjectKey,
        #[source]
        source: serde_json::Error,
    },
    #[error("CSV {original}: {failed} of {total} copy writes failed; first: {first}")]
    Writes {
        original: ObjectKey,
        failed: usize,
        total: usize,
        first: WriteError,
    },
    #[error("CSV {original}: cannot {action}: {source}")]
    Api {
        original: ObjectKey,
        action: String,
        #[source]
        source: kube::Error,
    },
}

/// The settings in force: OLMConfig `cluster` and the protected namespaces.
pub fn copy_settings(shared: &Shared) -> CopySettings {
    CopySettings {
        disabled: shared
            .caches
            .olm_config()
            .is_some_and(|c| c.spec.copied_csvs_disabled()),
        protected_namespaces: shared.options.protected_copied_csv_namespaces.clone(),
    }
}

/// The original `key` from the cache, when it is one (not a copy by any of OLM's tests).
fn original(shared: &Shared, key: &ObjectKey) -> Option<std::sync::Arc<ClusterServiceVersion>> {
    shared
        .caches
        .csvs
        .find(|c| {
            c.metadata.namespace.as_deref() == Some(&key.namespace) && c.name_any() == key.name
        })
        .filter(|c| !is_copied(c))
}

/// Whether copies of `csv` may be created and updated (docs/csv-phases.md §2 tail, docs/operator-groups.md §10 "When").
fn copyable(shared: &Shared, csv: &ClusterServiceVersion) -> bool {
    let namespace = csv.metadata.namespace.as_deref().unwrap_or_default();
    let groups = shared.caches.groups_in(namespace);
    let [group] = groups.as_slice() else {
        return false;
    };
    let own_namespace_only = csv
        .annotations()
        .get(TARGET_NAMESPACES_ANNOTATION)
        .and_then(|t| TargetNamespaces::from_annotation(t).ok())
        .is_none_or(|t| t.is_only(namespace));
    csv.metadata.deletion_timestamp.is_none()
        && !is_uncopiable(csv.status.as_ref())
        && is_active_member(csv, group)
        && !own_namespace_only
}

/// The plan for `key` (whose original, if any, is `original_csv`) against the caches.
pub fn plan_for(
    shared: &Shared,
    key: &ObjectKey,
    original_csv: Option<&ClusterServiceVersion>,
    desired: Option<CopyHashes>,
    settings: &CopySettings,
) -> CopyPlan {
    let records: Vec<CopyRecord> = shared.caches.copies.of(key);
    let refs: Vec<&CopyRecord> = records.iter().collect();
    let namespaces = shared.caches.live_namespaces();
    let names = namespaces
        .iter()
        .filter_map(|ns| ns.metadata.name.as_deref());
    let view = original_csv.zip(desired).map(|(csv, desired)| Original {
        csv,
        copyable: copyable(shared, csv),
        desired,
    });
    plan_copies(view, &refs, names, settings)
}

/// One run of the fan-out for the original `key`.
pub async fn sync(shared: &Shared, key: &ObjectKey) -> Result<Next, CopySyncError> {
    let settings = copy_settings(shared);
    let original_csv = original(shared, key);
    let prototype = original_csv.as_deref().map(copy_prototype);
    let desired = prototype.as_ref().map(copy_hashes);
    {
        let mut wanted = shared
            .caches
            .desired_copies
            .write()
            .unwrap_or_else(|p| p.into_inner());
        match desired {
            Some(hashes) => wanted.insert(key.clone(), hashes),
            None => wanted.remove(key),
        };
    }
    let plan = plan_for(shared, key, original_csv.as_deref(), desired, &settings);
    let raced = execute(shared, key, prototype, plan).await?;

    match &original_csv {
        Some(csv) => {
            // Not for a CSV being deleted: its finalizer is removing the lifted ClusterRoles,
            // and the Roles listed live may already be half garbage-collected while this cache
            // still holds the CSV, so a lift now would re-create what the cleanup removed.
            if csv.metadata.deletion_timestamp.is_none() && is_member_of_group(shared, csv) {
                rbac::ensure_member_rbac(shared, key, csv).await?;
            }
            olm_config::note_disabled(shared, key, csv, &settings).await;
        }
        None => {
            lock(&shared.copy_state.rbac).remove(key);
            lock(&shared.copy_state.warned).remove(key);
            lock(&shared.copy_state.events_cleared).remove(key);
        }
    }
    shared.queues.olm_config.add(());
    Ok(if raced {
        Next::After(RACE_RETRY)
    } else {
        Next::Done
    })
}

fn is_member_of_group(shared: &Shared, csv: &ClusterServiceVersion) -> bool {
    let namespace = csv.metadata.namespace.as_deref().unwrap_or_default();
    matches!(shared.caches.groups_in(namespace).as_slice(), [group] if is_active_member(csv, group))
}

enum Op {
    Write(CopyWrite),
    Delete(crate::operator_group::copied_csv::CopyDelete),
}

/// Runs the plan's writes and deletes, at most `copy_write_concurrency` at a time. Returns
/// whether some write raced (the caller plans again shortly).
async fn execute(
    shared: &Shared,
    key: &ObjectKey,
    prototype: Option<ClusterServiceVersion>,
    plan: CopyPlan,
) -> Result<bool, CopySyncError> {
    if plan.is_empty() {
        return Ok(false);
    }
    let client = shared.ctx.client.clone();
    let writer = match prototype {
        Some(p) if !plan.writes.is_empty() => Some(Arc::new(
            CopyWriter::new(client.clone(), p).map_err(|source| CopySyncError::Encode {
                original: key.clone(),
                source,
            })?,
        )),
        _ => None,
    };
    let ops: Vec<Op> = plan
        .deletes
        .into_iter()
        .map(Op::Delete)
        .chain(plan.writes.into_iter().map(Op::Write))
        .collect();
    let total = ops.len();
    let runs = ops.into_iter().map(|op| {
        let client = client.clone();
        let writer = writer.clone();
        async move {
            match (op, writer) {
                (Op::Delete(d), _) => {
                    writes::delete_copy(&client, &d.namespace, &d.name, &d.uid).await
                }
                (Op::Write(CopyWrite::Create { namespace }), Some(w)) => w.create(&namespace).await,
                (
                    Op::Write(CopyWrite::Update {
                        namespace,
                        resource_version,
                        content,
                        status,
                    }),
                    Some(w),
                ) => {
                    w.update(&namespace, &resource_version, content, status)
                        .await
                }
                // `writer` exists whenever the plan has writes.
                (Op::Write(_), None) => Ok(Outcome::Raced),
            }
        }
    });
    let results: Vec<Result<Outcome, WriteError>> = futures::stream::iter(runs)
        .buffer_unordered(shared.options.copy_write_concurrency.max(1))
        .collect()
        .await;
    let mut raced = false;
    let mut failures = Vec::new();
    for result in results {
        match result {
            Ok(Outcome::Raced) => raced = true,
            Ok(_) => {}
            Err(err) => failures.push(err),
        }
    }
    let failed = failures.len();
    match failures.into_iter().next() {
        Some(first) => Err(CopySyncError::Writes {
            original: key.clone(),
            failed,
            total,
            first,
        }),
        None => Ok(raced),
    }
}

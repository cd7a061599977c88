//! One sync of one CSV in the one reconciler shape (docs/csv-phases.md §1): observe from the
//! stores, decide in the core ([`crate::csv::decide`], or [`crate::csv::cleanup::finalize`] for
//! a CSV being deleted), carry the writes out with the one executor (`k8s::effects`), and pick
//! the ending the decision holds for how they went.

use std::time::Duration;

use kube::ResourceExt;

use crate::api::event::ObjectEvent;
use crate::api::{ClusterServiceVersion, ClusterServiceVersionStatus, CsvPhase};
use crate::csv::cleanup::{CLEANUP_POLL, finalize, has_finalizer};
use crate::csv::identity::{name, namespace};
use crate::csv::{Ending, InstallFailure, Observed, Requeue, SyncEffects, decide};
use crate::k8s::effects::{Effects, EventOn, Write, execute, perform};
use crate::k8s::write::{ApiError, ObjectKey, Operation};
use crate::metrics::{CountedKind, Metrics};
use crate::operator_group::is_copied;
use crate::reconcile::keys::NamespacedName;
use crate::reconcile::work_queue::Next;

use super::{ReconcileError, Shared, observe};

/// Syncs the CSV `key` names.
pub async fn sync(shared: &Shared, key: &NamespacedName) -> Result<Next, ReconcileError> {
    // `csv_count` counts the CSVs this controller drives (copies are not watched).
    let stores = &shared.stores;
    shared
        .ctx
        .metrics
        .set_count(CountedKind::ClusterServiceVersion, stores.csvs.len());
    // A CSV gone from the store is done with: one being deleted stays in it, with its
    // deletionTimestamp, until its finalizer goes.
    let Some(csv) = stores.csvs.get(&key.namespace, &key.name) else {
        return Ok(Next::Done);
    };
    let seen = observe::observe(
        &shared.ctx.client,
        stores,
        &shared.ctx.served_apis,
        &shared.created,
        &csv,
    )
    .await;
    if csv.metadata.deletion_timestamp.is_some() {
        return finalize_pass(shared, &csv, &seen).await;
    }
    let decided = decide(&csv, &seen, shared.ctx.clock.now());
    tracing::debug!(
        csv = %key,
        phase = ?decided.done.phase(),
        writes = decided.writes.len(),
        install = decided.install.len(),
        requeue = ?decided.done.requeue,
        note = decided.note.as_deref().unwrap_or_default(),
        "CSV sync decided"
    );
    let (written, failed) = write(shared, &csv, &decided).await?;
    shared.queue.add_all(in_namespace(&csv, &decided.resync));
    let ending = match (failed, &decided.install_failed) {
        (Some(failure), Some(endings)) => {
            tracing::info!(csv = %key, err = ?failure, "install failed");
            endings.ending(failure)
        }
        _ => decided.done.clone(),
    };
    finish(shared, &csv, &written, &ending).await?;
    if let Some(status) = &ending.status {
        count_upgrade(&shared.ctx.metrics, &written, status);
        // Phase changes matter to the CSVs on either side of an upgrade (docs/csv-phases.md §1.1).
        shared.queue.add_all(in_namespace(&csv, &decided.on_status));
    }
    write_operator_condition(shared, &csv, &decided).await;
    // `csv_succeeded`/`csv_abnormal` after every sync, as OLM's EmitCSVMetric does.
    let mut synced = written;
    if let Some(status) = &ending.status {
        synced.status = Some(status.clone());
    }
    shared.ctx.metrics.csv_phase(&synced);
    next(&csv, &ending, shared.ctx.options.csv_resync)
}

/// The decided writes with the one executor's `perform`, each failure read as the decision
/// tagged it: the metadata patch first (its answer carries the version the status is written
/// at), then the actions' writes, then the install's. Returns the CSV as last written and, when
/// an install write was refused, how (docs/csv-phases.md §3.1 InstallReady).
async fn write(
    shared: &Shared,
    csv: &ClusterServiceVersion,
    decided: &SyncEffects,
) -> Result<(ClusterServiceVersion, Option<InstallFailure>), ReconcileError> {
    let client = &shared.ctx.client;
    let written = match &decided.metadata {
        Some(patch) => as_csv(csv, perform(client, patch).await?)?,
        None => csv.clone(),
    };
    for one in &decided.writes {
        match perform(client, &one.write).await {
            Ok(answer) => remember_created(shared, &one.write, answer),
            Err(err) if one.absent_ok && err.is_not_found() => {}
            Err(err) => return Err(err.into()),
        }
    }
    for one in &decided.install {
        let answer = perform(client, &one.write).await;
        if let Ok(answer) = answer {
            remember_created(shared, &one.write, answer);
            continue;
        }
        if let Err(err) = answer {
            return Ok((written, Some(InstallFailure(err.to_string()))));
        }
    }
    Ok((written, None))
}

/// A webhook configuration created from a `generateName` is seen by the next syncs even before
/// the stores have it (`created.rs`).
fn remember_created(shared: &Shared, write: &Write, answer: Option<kube::core::DynamicObject>) {
    if let Write::Create { .. } = write {
        shared.created.record(answer);
    }
}

/// The ending's status, written at the version the CSV was last written at (a decision taken
/// on a stale copy fails with a conflict instead of overwriting a newer status), then its
/// events.
async fn finish(
    shared: &Shared,
    csv: &ClusterServiceVersion,
    written: &ClusterServiceVersion,
    ending: &Ending,
) -> Result<(), ReconcileError> {
    let mut effects = Effects::default();
    // A CSV never read from a server has no version to guard the write with.
    if let Some(status) = &ending.status
        && let Some(write) = Write::status(written, status.clone())
    {
        effects.write(write);
    }
    effects.events = events_on(csv, &ending.events);
    execute(&shared.ctx.client, &shared.ctx.events, &effects).await?;
    Ok(())
}

/// The OperatorCondition, its RBAC and status, kept for every CSV this controller drives,
/// whatever its phase (OLM does it in a controller of its own). A failed write is reported and
/// retried at the next sync; it does not hold up the CSV's own lifecycle. A conflict only means
/// the store was behind: the OperatorCondition's own change brings the CSV back.
async fn write_operator_condition(
    shared: &Shared,
    csv: &ClusterServiceVersion,
    decided: &SyncEffects,
) {
    if decided.operator_condition.is_empty() {
        return;
    }
    let writes = Effects {
        writes: decided.operator_condition.clone(),
        ..Effects::default()
    };
    let Err(err) = execute(&shared.ctx.client, &shared.ctx.events, &writes).await else {
        return;
    };
    let csv_key = NamespacedName::new(namespace(csv), name(csv));
    if err.is_conflict() {
        tracing::debug!(csv = %csv_key, %err, "OperatorCondition changed meanwhile");
        return;
    }
    tracing::warn!(csv = %csv_key, %err, "OperatorCondition not written");
    let report = Effects {
        events: events_on(
            csv,
            &[ObjectEvent::warning(
                "OperatorConditionNotWritten",
                err.to_string(),
            )],
        ),
        ..Effects::default()
    };
    // Events only: nothing to fail.
    let _ = execute(&shared.ctx.client, &shared.ctx.events, &report).await;
}

/// One finalizer pass (docs/csv-phases.md §10).
async fn finalize_pass(
    shared: &Shared,
    csv: &ClusterServiceVersion,
    seen: &Observed,
) -> Result<Next, ReconcileError> {
    // Copies are the copy loop's (docs/operator-groups.md §10).
    if is_copied(csv) || !has_finalizer(csv) {
        return Ok(Next::Done);
    }
    let pass = finalize(csv, seen);
    match execute(&shared.ctx.client, &shared.ctx.events, &pass.effects).await {
        Ok(_) => {}
        // A CRD to reset, or the CSV itself, already gone: the next pass decides on stores
        // that know it.
        Err(err) if err.is_not_found() => return Ok(Next::After(CLEANUP_POLL)),
        Err(err) => return Err(err.into()),
    }
    if !pass.releases {
        return Ok(Next::After(CLEANUP_POLL));
    }
    shared
        .ctx
        .metrics
        .csv_deleted(csv.namespace().as_deref().unwrap_or_default(), name(csv));
    Ok(Next::Done)
}

/// When to look again, from the ending's requeue.
fn next(
    csv: &ClusterServiceVersion,
    ending: &Ending,
    period: Duration,
) -> Result<Next, ReconcileError> {
    Ok(match &ending.requeue {
        Requeue::Backoff(reason) => {
            return Err(ReconcileError::Backoff {
                csv: name(csv).to_owned(),
                reason: reason.clone(),
            });
        }
        // Our own status write brings the CSV back through the watch; an immediate requeue
        // would only race the cache.
        Requeue::After(d) if d.is_zero() && ending.status.is_some() => Next::After(resync(period)),
        Requeue::After(d) if *d >= period => Next::After(resync(period)),
        Requeue::After(d) => Next::After(*d),
        Requeue::Resync => Next::After(resync(period)),
    })
}

/// The resync period with OLM's ±20 % jitter, so CSVs synced together (e.g. after a restart)
/// do not all come back at the same moment.
fn resync(period: Duration) -> Duration {
    use rand::Rng;
    period.mul_f64(rand::rng().random_range(0.8..1.2))
}

/// The keys of the CSVs `names` of `csv`'s namespace.
fn in_namespace<'a>(
    csv: &'a ClusterServiceVersion,
    names: &'a [String],
) -> impl Iterator<Item = NamespacedName> + 'a {
    names.iter().map(|n| NamespacedName::new(namespace(csv), n))
}

/// An old CSV entering `Replacing` is one upgrade (`csv_upgrade_count`), counted once on that
/// transition.
fn count_upgrade(
    metrics: &Metrics,
    csv: &ClusterServiceVersion,
    status: &ClusterServiceVersionStatus,
) {
    let before = csv.status.as_ref().and_then(|s| s.phase.clone());
    if status.phase == Some(CsvPhase::Replacing) && before != Some(CsvPhase::Replacing) {
        metrics.csv_upgraded();
    }
}

/// `events` on the CSV as it was observed.
fn events_on(csv: &ClusterServiceVersion, events: &[ObjectEvent]) -> Vec<EventOn> {
    let mut regarding = crate::k8s::effects::reference_of(csv);
    regarding.resource_version = csv.metadata.resource_version.clone();
    events
        .iter()
        .map(|event| EventOn {
            regarding: regarding.clone(),
            event: event.clone(),
        })
        .collect()
}

/// The CSV a metadata patch returned (its resourceVersion guards the status write).
fn as_csv(
    csv: &ClusterServiceVersion,
    written: Option<kube::core::DynamicObject>,
) -> Result<ClusterServiceVersion, ReconcileError> {
    let Some(written) = written else {
        return Ok(csv.clone());
    };
    serde_json::to_value(written)
        .and_then(serde_json::from_value)
        .map_err(|e| {
            ApiError::new(
                Operation::Patch,
                ObjectKey::of(csv),
                kube::Error::SerdeError(e),
            )
            .into()
        })
}

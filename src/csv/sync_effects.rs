//! One sync of a CSV as the writes it makes, decided once before any of them is made
//! (docs/csv-phases.md §1): the metadata patch, each action's writes, and how the sync ends —
//! status, events, requeue — for every way the writes can go. The controller hands the writes
//! to the one executor (`k8s::effects::perform`) and only picks the ending that matches the
//! answer; it decides nothing.
//!
//! The install is the one step whose failure is part of the CSV's lifecycle rather than a retry
//! of the sync: a write the API server refuses moves the CSV to `Failed`, for good when a CA
//! consumer or Deployment is Forbidden, retried otherwise (docs/csv-phases.md §3.1
//! InstallReady). So an install decision carries both endings.

use jiff::Timestamp;

use crate::api::event::ObjectEvent;
use crate::api::{ClusterServiceVersion, ClusterServiceVersionStatus, CsvPhase};
use crate::k8s::effects::Write;

use super::identity::name;
use super::observed::Observed;
use super::outcome::{Action, CsvSyncOutcome, Requeue};
use super::phase::{InstallFailure, after_install_with_certs, ending_of_install, sync};
use super::replacement::{replaced_csv, replacement_of};
use super::writes::{ActionWrite, action_writes, metadata_write};

/// Everything one sync of a CSV does.
#[derive(Clone, Debug, PartialEq)]
pub struct SyncEffects {
    /// The CSV's metadata patch (finalizer, annotations), first; its answer is the version the
    /// status is written at.
    pub metadata: Option<Write>,
    /// The writes of the actions other than the install, in order; a failure fails the sync.
    pub writes: Vec<ActionWrite>,
    /// The install's writes (InstallReady), last: the phase machine ends a sync with its
    /// install. A refused one ends the install and the sync as [`Self::install_failed`] says.
    pub install: Vec<ActionWrite>,
    /// How the sync ends when every write went through.
    pub done: Ending,
    /// How it ends when an install write is refused; `None` without an install.
    pub install_failed: Option<InstallFailed>,
    /// Other CSVs of the namespace to sync again now (upgrade hand-offs), by name.
    pub resync: Vec<String>,
    /// CSVs to sync again when a status is written: the ones on either side of an upgrade
    /// (docs/csv-phases.md §1.1).
    pub on_status: Vec<String>,
    /// The OperatorCondition, its RBAC and status (docs/operator-conditions.md), after the
    /// CSV's status. Best effort: a failure is reported, not retried before the next sync.
    pub operator_condition: Vec<Write>,
    /// Why nothing happened, when that is worth a log line.
    pub note: Option<String>,
}

/// How a sync ends: the CSV's new status (`None`: unchanged), its events, when to look again.
#[derive(Clone, Debug, PartialEq)]
pub struct Ending {
    pub status: Option<ClusterServiceVersionStatus>,
    pub events: Vec<ObjectEvent>,
    pub requeue: Requeue,
}

impl Ending {
    pub fn phase(&self) -> Option<CsvPhase> {
        self.status.as_ref().map(|s| s.phase())
    }
}

impl From<CsvSyncOutcome> for Ending {
    fn from(outcome: CsvSyncOutcome) -> Self {
        Self {
            status: outcome.status,
            events: outcome.events,
            requeue: outcome.requeue,
        }
    }
}

/// The endings of a refused install, fixed when the install is decided: the status each kind of
/// refusal leads to, from the CSV's status as observed and the decision's time. Only the API
/// server's words, which the message quotes, come from the answer.
#[derive(Clone, Debug, PartialEq)]
pub struct InstallFailed {
    before: ClusterServiceVersionStatus,
    now: Timestamp,
}

impl InstallFailed {
    /// The ending for `failure` (docs/csv-phases.md §3.1 InstallReady: Forbidden on a CA
    /// consumer or Deployment is `InstallComponentFailedNoRetry`, anything else
    /// `InstallComponentFailed` with back-off).
    pub fn ending(&self, failure: InstallFailure) -> Ending {
        ending_of_install(self.before.clone(), Err(failure), self.now).into()
    }
}

/// Decides one sync of `csv` (not being deleted: [`super::cleanup::finalize`]).
pub fn decide(csv: &ClusterServiceVersion, seen: &Observed, now: Timestamp) -> SyncEffects {
    let outcome = sync(csv, seen, now);
    let mut writes = Vec::new();
    let mut install = Vec::new();
    let mut resync = Vec::new();
    let mut certs = None;
    for action in &outcome.actions {
        match action {
            Action::RequeueCsv(other) => resync.push(other.clone()),
            Action::Install(plan) => {
                install = action_writes(csv, action);
                certs = Some(plan.certs.as_ref());
            }
            _ => writes.extend(action_writes(csv, action)),
        }
    }
    let metadata = metadata_write(csv, &outcome.actions);
    let note = outcome.note.clone();
    let (done, install_failed) = match certs {
        // The install's success ends the sync in `Installing`, with the certificates' times.
        Some(certs) => (
            after_install_with_certs(csv, Ok(()), certs, now).into(),
            Some(InstallFailed {
                before: csv.status.clone().unwrap_or_default(),
                now,
            }),
        ),
        None => (outcome.into(), None),
    };
    let on_status = [replaced_csv(csv, seen), replacement_of(csv, seen)]
        .into_iter()
        .flatten()
        .map(|c| name(c).to_owned())
        .collect();
    let planned = super::operator_condition::plan(csv, seen, now);
    SyncEffects {
        metadata,
        writes,
        install,
        done,
        install_failed,
        resync,
        on_status,
        operator_condition: super::operator_condition::writes(csv, seen, planned),
        note,
    }
}

#[cfg(test)]
#[path = "sync_effects_tests.rs"]
mod tests;

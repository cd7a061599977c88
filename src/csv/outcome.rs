//! What one sync of a CSV decides, as data: the status to write, events, actions, and when to
//! look again. The reconciler carries it out; nothing here performs I/O.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::event::{EventType, ObjectEvent};
use crate::api::{
    ClusterServiceVersion, ClusterServiceVersionStatus, CsvPhase, CsvReason, RequirementStatus,
};

use super::certs::CertInstall;
use super::certs::check::WebhookKind;
use super::install_strategy::DesiredDeployment;
use super::permission_objects::PermissionObjects;

/// Deployments to create or update, and orphans to delete (docs/csv-phases.md §7.1), with the
/// certificate objects written before and the CA consumers written after the Deployments.
#[derive(Clone, Debug, PartialEq)]
pub struct DeploymentInstall {
    pub deployments: Vec<DesiredDeployment>,
    pub delete_orphans: Vec<String>,
    pub certs: Option<CertInstall>,
}

/// A write or request the reconciler must perform.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Add finalizer `operators.coreos.com/csv-cleanup`.
    AddFinalizer,
    /// Merge these annotations into the CSV's metadata, `None` removing a key (group
    /// membership, docs/csv-phases.md §2 step 6).
    SetAnnotations(BTreeMap<String, Option<String>>),
    /// Set `olm.providedAPIs` on the CSV's OperatorGroup (docs/operator-groups.md §6.2).
    SetProvidedApis { group: String, annotation: String },
    /// Delete these Deployments of the strategy (inter-group API conflicts).
    DeleteDeployments(Vec<String>),
    /// Run the install (InstallReady); how the sync ends is decided with it
    /// ([`super::sync_effects::decide`]).
    Install(DeploymentInstall),
    /// Re-apply Deployments whose live objects drifted from the desired ones.
    ReapplyDeployments(Vec<DesiredDeployment>),
    /// Re-create the ServiceAccounts and RBAC the CSV's install plan made (docs/csv-phases.md §11 item 1).
    EnsurePermissions(PermissionObjects),
    /// Delete webhook configurations of this CSV that no definition asks for any more
    /// (docs/csv-phases.md §8 step 3).
    DeleteWebhookConfigurations(Vec<(WebhookKind, String)>),
    /// Sync another CSV of the namespace soon (upgrade hand-offs), named by reference.
    RequeueCsv(String),
    /// Delete this CSV (phase Deleting).
    DeleteCsv,
}

/// When to sync this CSV again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Requeue {
    /// Only on the next watch event or periodic resync.
    Resync,
    /// After a fixed delay.
    After(Duration),
    /// With exponential back-off: the sync did not achieve what it needs (OLM returns an error).
    Backoff(String),
}

/// The decision of one sync.
#[derive(Clone, Debug, PartialEq)]
pub struct CsvSyncOutcome {
    /// The status to write; `None` when nothing changed.
    pub status: Option<ClusterServiceVersionStatus>,
    pub events: Vec<ObjectEvent>,
    pub actions: Vec<Action>,
    pub requeue: Requeue,
    /// Why nothing happened, when that is worth a log line.
    pub note: Option<String>,
}

impl CsvSyncOutcome {
    pub fn nothing(note: impl Into<String>) -> Self {
        Self {
            status: None,
            events: Vec::new(),
            actions: Vec::new(),
            requeue: Requeue::Resync,
            note: Some(note.into()),
        }
    }

    pub fn phase(&self) -> Option<CsvPhase> {
        self.status.as_ref().map(|s| s.phase())
    }
}

/// Builds a [`CsvSyncOutcome`] from the CSV's current status. Status changes go through
/// [`ClusterServiceVersionStatus::record_phase`] ("set if changed", docs/csv-phases.md §4) and emit one event
/// each.
#[derive(Clone, Debug)]
pub struct Decision {
    before: ClusterServiceVersionStatus,
    status: ClusterServiceVersionStatus,
    now: Time,
    events: Vec<ObjectEvent>,
    actions: Vec<Action>,
    requeue: Requeue,
    note: Option<String>,
}

impl Decision {
    pub fn new(csv: &ClusterServiceVersion, now: Timestamp) -> Self {
        Self::from_status(csv.status.clone().unwrap_or_default(), now)
    }

    /// A decision starting from `status` (the CSV's status as observed).
    pub fn from_status(status: ClusterServiceVersionStatus, now: Timestamp) -> Self {
        Self {
            before: status.clone(),
            status,
            now: Time(truncate_to_seconds(now)),
            events: Vec::new(),
            actions: Vec::new(),
            requeue: Requeue::Resync,
            note: None,
        }
    }

    /// The status as decided so far.
    pub fn status(&self) -> &ClusterServiceVersionStatus {
        &self.status
    }

    pub fn phase(&self) -> CsvPhase {
        self.status.phase()
    }

    pub fn reason(&self) -> Option<&CsvReason> {
        self.status.reason.as_ref()
    }

    /// Sets phase/reason/message if any of them differs; emits an event when it does.
    pub fn set(
        &mut self,
        phase: CsvPhase,
        reason: CsvReason,
        message: impl Into<String>,
    ) -> &mut Self {
        let message = message.into();
        let type_ = if phase == CsvPhase::Failed {
            EventType::Warning
        } else {
            EventType::Normal
        };
        if self
            .status
            .record_phase(phase, reason.clone(), &message, &self.now)
        {
            self.events
                .push(ObjectEvent::new(type_, reason.to_string(), message));
        }
        self
    }

    /// Stores `requirementStatus` (written whenever it changes, unlike OLM — Known pain #2).
    pub fn set_requirements(&mut self, statuses: Vec<RequirementStatus>) -> &mut Self {
        self.status.requirement_status = Some(statuses);
        self
    }

    pub fn act(&mut self, action: Action) -> &mut Self {
        self.actions.push(action);
        self
    }

    pub fn event(&mut self, event: ObjectEvent) -> &mut Self {
        self.events.push(event);
        self
    }

    pub fn requeue(&mut self, requeue: Requeue) -> &mut Self {
        self.requeue = requeue;
        self
    }

    pub fn note(&mut self, note: impl Into<String>) -> &mut Self {
        self.note = Some(note.into());
        self
    }

    pub fn finish(self) -> CsvSyncOutcome {
        let changed = self.status != self.before;
        CsvSyncOutcome {
            status: changed.then_some(self.status),
            events: self.events,
            actions: self.actions,
            requeue: self.requeue,
            note: self.note,
        }
    }
}

/// Status times are written with second precision (docs/csv-phases.md §4).
pub fn truncate_to_seconds(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second()).unwrap_or(t)
}

//! Carries out a [`CsvSyncOutcome`]: metadata first, then the actions, then the status, then
//! events. What each action writes is decided in the core (`csv::writes`); this file only hands
//! the writes to the one executor (`k8s::effects::perform`) and reads the failures.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::{Client, Resource};

use crate::api::ClusterServiceVersion;
use crate::api::event::ObjectEvent;
use crate::csv::identity::namespace;
use crate::csv::writes::{ActionWrite, action_writes, metadata_write};
use crate::csv::{Action, CsvSyncOutcome, InstallFailure};
use crate::k8s::effects::{Write, perform};
use crate::k8s::errors::ApiFailure;
use crate::k8s::events::EventPublisher;
use crate::k8s::write::{ApiError, ObjectKey, Operation};

use super::ReconcileError;

/// The writes of one sync. Returns the install outcome when the sync installed.
pub struct Executor<'a> {
    pub client: &'a Client,
    pub events: &'a EventPublisher,
    /// CSVs to requeue (upgrade hand-offs).
    pub requeue: &'a tokio::sync::mpsc::UnboundedSender<ClusterServiceVersion>,
}

impl Executor<'_> {
    /// Performs the writes of `sync` (`csv::writes`: the metadata patch, then each action's
    /// writes in order); returns the install outcome if an install ran, and the CSV as last
    /// written (its resourceVersion guards the status write).
    pub async fn run(
        &self,
        csv: &ClusterServiceVersion,
        sync: &CsvSyncOutcome,
    ) -> Result<(ClusterServiceVersion, Option<Result<(), InstallFailure>>), ReconcileError> {
        let current = match metadata_write(csv, &sync.actions) {
            Some(write) => as_csv(csv, perform(self.client, &write).await?)?,
            None => csv.clone(),
        };
        let mut installed = None;
        for action in &sync.actions {
            match action {
                Action::RequeueCsv(other) => {
                    let mut stub = ClusterServiceVersion::new(other, csv.spec.clone());
                    stub.metadata.namespace = Some(namespace(csv).to_owned());
                    // The receiver lives as long as the controller; a send error means it is
                    // shutting down, when a lost requeue does not matter.
                    let _ = self.requeue.send(stub);
                }
                Action::Install(plan) => {
                    for d in plan.certs.iter().flat_map(|c| &c.deployments) {
                        if !d.certs.reused {
                            tracing::info!(deployment = %d.deployment, ca_hash = %d.certs.ca_hash, "issuing serving certificates");
                        }
                    }
                    installed = Some(self.install(&action_writes(csv, action)).await);
                }
                _ => {
                    for one in action_writes(csv, action) {
                        match perform(self.client, &one.write).await {
                            Ok(_) => {}
                            Err(err) if one.absent_ok && err.is_not_found() => {}
                            Err(err) => return Err(err.into()),
                        }
                    }
                }
            }
        }
        Ok((current, installed))
    }

    /// An install's writes in order; the first failure ends it, read as the write says
    /// (docs/csv-phases.md §3.1 InstallReady: a 403 on a CA consumer or Deployment is final).
    async fn install(&self, writes: &[ActionWrite]) -> Result<(), InstallFailure> {
        for one in writes {
            if let Err(err) = perform(self.client, &one.write).await {
                let text = err.to_string();
                return Err(
                    if one.forbidden_is_final && err.failure() == ApiFailure::Forbidden {
                        InstallFailure::Forbidden(text)
                    } else {
                        InstallFailure::Other(text)
                    },
                );
            }
        }
        Ok(())
    }

    /// Writes the whole status through the status subresource; the resourceVersion makes a
    /// decision taken on a stale cache fail with a conflict instead of overwriting newer status.
    pub async fn write_status(
        &self,
        csv: &ClusterServiceVersion,
        status: &crate::api::ClusterServiceVersionStatus,
    ) -> Result<(), ReconcileError> {
        let Some(write) = Write::status(csv, status.clone()) else {
            // Never read from a server (no resourceVersion): nothing to guard the write with.
            return Ok(());
        };
        perform(self.client, &write).await?;
        Ok(())
    }

    pub async fn publish(&self, csv: &ClusterServiceVersion, events: &[ObjectEvent]) {
        let regarding = object_reference(csv);
        for event in events {
            self.events.emit(&regarding, event).await;
        }
    }
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

pub fn object_reference(csv: &ClusterServiceVersion) -> ObjectReference {
    ObjectReference {
        api_version: Some(ClusterServiceVersion::api_version(&()).into_owned()),
        kind: Some(ClusterServiceVersion::kind(&()).into_owned()),
        name: csv.metadata.name.clone(),
        namespace: csv.metadata.namespace.clone(),
        uid: csv.metadata.uid.clone(),
        resource_version: csv.metadata.resource_version.clone(),
        ..Default::default()
    }
}

//! Table tests of the transitions in docs/csv-phases.md §5, each from a hand-built snapshot, one file per
//! group of phases.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::DeploymentCondition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, Time};

use super::*;
use crate::api::keys::{PROVIDED_APIS_ANNOTATION, TARGET_NAMESPACES_ANNOTATION};
use crate::api::{ClusterServiceVersion, CsvPhase as P, CsvReason as R, UpgradeStrategy};
use crate::csv::fixtures::*;
use crate::csv::observed::{Discovery, Observed, ServerVersion};
use crate::csv::outcome::{Action, CsvSyncOutcome, Requeue};

pub(super) fn outcome(sync: &CsvSyncOutcome) -> (P, R, String) {
    let status = sync.status.as_ref().expect("the sync changed the status");
    (
        status.phase(),
        status.reason.clone().expect("a reason is set"),
        status.message.clone().unwrap_or_default(),
    )
}

pub(super) fn assert_outcome(sync: &CsvSyncOutcome, phase: P, reason: R, message_prefix: &str) {
    let (p, r, m) = outcome(sync);
    assert_eq!((p, r), (phase, reason), "message: {m}");
    assert!(
        m.starts_with(message_prefix),
        "message {m:?} does not start with {message_prefix:?}"
    );
}

/// A CSV that succeeded at `since`, with OLM's message.
pub(super) fn succeeded_csv(
    c: ClusterServiceVersion,
    since: jiff::Timestamp,
) -> ClusterServiceVersion {
    let mut c = in_phase(c, P::Succeeded, R::InstallSucceeded, since);
    let status = c.status.as_mut().unwrap();
    status.message = Some("install strategy completed with no errors".into());
    status.conditions.as_mut().unwrap()[0].message = status.message.clone();
    c
}

pub(super) fn installed(csv: &ClusterServiceVersion, seen: &mut Observed, available: bool) {
    seen.deployments = live_deployments(csv, seen, available);
}

/// Everything present and the group already lists the API.
pub(super) fn ready(csvs: &[&ClusterServiceVersion]) -> Observed {
    let mut seen = observed(csvs);
    let mut group = og("og", NS, &[NS]);
    group.metadata.annotations = Some(labels(&[(PROVIDED_APIS_ANNOTATION, "Demo.v1.example.com")]));
    seen.operator_groups = vec![Arc::new(group.clone())];
    seen.all_operator_groups = vec![Arc::new(group)];
    seen
}

mod certs;
mod gate;
mod install;
mod pending;
mod replacement;
mod running;

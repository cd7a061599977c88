//! One execution pass over an InstallPlan's steps, decided stage by stage
//! (docs/install-plans.md §7.3). The shell (`reconcile::install_plan::execute`) observes what a
//! stage needs, asks one function here for the stage's writes — a [`Stage`] — and hands them to
//! the one executor (`k8s::effects::execute_noted`); the next stage is decided afresh on what it
//! observes then. The stages, in order:
//!
//! 1. the reader roles of the CRDs about to be updated ([`reader_roles`]), then the update
//!    safety check on their stored resources ([`check_crd_updates`]) and, for a scoped
//!    install, the rights the account is asked for ([`scoped_questions`]) — the rest of the
//!    check before any write is `plan::execution::check_plan` and the shell's API lookups;
//! 2. the CRDs ([`crd_writes`]), always as olm-rs (docs/install-plans.md §10);
//! 3. the wait for them to be Established, with the reader roles of the CRDs just created
//!    ([`awaited_crds`]);
//! 4. the CSVs, then every other step, as the plan's identity ([`object_writes`]); the other
//!    steps are decided only after the CSVs were written, with owner references to each CSV's
//!    uid as observed then;
//! 5. the installed-alongside annotations each CRD must still carry ([`alongside_repairs`]).
//!
//! Nothing here reads the cluster or the clock.

mod crds;
mod objects;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use kube::core::ApiResource;
use serde_json::Value;

pub use crds::{
    AwaitedCrds, all_crds, alongside_repairs, awaited_crds, check_crd_updates, crd_writes,
    crds_awaited, crds_to_write, established, reader_roles,
};
pub use objects::{csv_steps, object_writes, other_steps, owners_needed, scoped_questions};

use super::execution::CheckedPlan;
use super::kinds::{Scope, StepKind};
use super::order::{StepAction, step_action};
use super::phase::{PassOutcome, StepFailure};
use super::scope::ExecuteAs;
use crate::api::{Step, StepStatus};
use crate::k8s::effects::Write;

/// Where a step's object lives on the API server: its resource and scope.
#[derive(Debug, Clone, PartialEq)]
pub struct StepApi {
    pub resource: ApiResource,
    pub scope: Scope,
}

/// What every stage of a pass knows: the plan's namespace and whose credentials its steps run
/// with.
#[derive(Debug, Clone, Copy)]
pub struct PassContext<'a> {
    pub namespace: &'a str,
    pub identity: &'a ExecuteAs,
}

/// The live objects a stage observed, by step index; a step whose object is absent has none.
pub type Observed = BTreeMap<usize, Value>;

/// What a write records in its step's status once carried out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Records {
    /// This status, whatever the answer.
    Status(StepStatus),
    /// `Created` when the write made the object, `Present` when its name was taken (a
    /// create-if-absent).
    CreatedOrPresent,
    /// Nothing: a write on the step's behalf (its CRD's reader role, a repaired annotation).
    Nothing,
}

/// One write of a stage, made for one step.
#[derive(Debug, Clone, PartialEq)]
pub struct StepWrite {
    pub step: usize,
    pub write: Write,
    /// What the plan's message says was being done when the write fails: `creating`, …
    pub action: &'static str,
    pub records: Records,
}

/// One stage's decision: its writes in order, as whom, and the statuses settled without a
/// write.
#[derive(Debug, Clone, PartialEq)]
pub struct Stage {
    /// CRDs and olm-rs's own objects: `Controller`; every other step: the plan's identity.
    pub acting: ExecuteAs,
    pub writes: Vec<StepWrite>,
    /// Steps whose new status needs no write (an object already there, a CRD Established).
    pub settled: Vec<(usize, StepStatus)>,
}

impl Stage {
    fn new(acting: ExecuteAs) -> Self {
        Self {
            acting,
            writes: Vec::new(),
            settled: Vec::new(),
        }
    }
}

/// Why a stage cannot be decided; each is retried within the plan's retry window.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PassError {
    #[error(
        "ClusterServiceVersion {namespace}/{csv} does not exist yet, so objects owned by it cannot be created"
    )]
    OwnerMissing { namespace: String, csv: String },
    #[error(
        "CustomResourceDefinition {name} was applied by this plan and is gone; the plan cannot complete without it"
    )]
    CrdGone { name: String },
    #[error("no API resolved for step {index} ({kind} {name})")]
    NoApi {
        index: usize,
        kind: String,
        name: String,
    },
    #[error(transparent)]
    CrdUpdate(#[from] super::crd_safety::CrdUpdateError),
}

impl From<PassError> for PassOutcome {
    fn from(error: PassError) -> Self {
        PassOutcome::StepFailed {
            message: error.to_string(),
            failure: StepFailure::Retryable,
        }
    }
}

/// The steps of `plan` of `kinds` whose action is `action`, in the order a pass applies them.
fn steps_where(
    plan: &CheckedPlan,
    steps: &[Step],
    action: StepAction,
    wanted: impl Fn(StepKind) -> bool,
) -> Vec<usize> {
    plan.order
        .crds
        .iter()
        .chain(&plan.order.after_crds)
        .copied()
        .filter(|&i| wanted(plan.steps[i].kind))
        .filter(|&i| step_action(plan.steps[i].kind, &steps[i].status) == action)
        .collect()
}

/// The object without its status: what is written.
fn strip_status(object: &mut Value) {
    if let Some(map) = object.as_object_mut() {
        map.remove("status");
    }
}

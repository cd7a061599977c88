//! One execution pass over an InstallPlan's steps (docs/install-plans.md §7.3): the shell that
//! performs what `plan::execution` and `plan::order` decide.
//!
//! The whole plan is checked before anything is written — `plan::execution::check_plan`
//! (manifests readable, kinds supported, no v1beta1 CRD), then what needs the cluster (APIs
//! served, CRD updates safe) — and applied in `plan::order::execution_order`: CRDs; wait until
//! they are Established (`WaitingForApi`); CSVs; everything else in plan order, each step as
//! `plan::order::step_action` says. Every write is idempotent (create-if-absent or server-side
//! apply of a fixed name), so a pass interrupted by a crash is simply run again: nothing is
//! duplicated.

mod apply;
mod check;

use std::collections::HashMap;

use kube::Client;
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::Value;

use crate::api::Step;
use crate::k8s::errors::is_transient;
use crate::k8s::warnings::WarningLog;
use crate::k8s::write::ApiError;
use crate::plan::execution::{
    ParsedStep, PassReport, PlanWarning, applied_with_warnings, check_plan,
};
use crate::plan::kinds::StepKind;
use crate::plan::order::{StepAction, step_action};
use crate::plan::phase::{PassOutcome, StepFailure};
use crate::plan::prepare::OwnerCsv;

/// What a pass needs.
pub struct Pass<'a> {
    /// olm-rs's own client: CRDs are always applied with it (docs/install-plans.md §10).
    pub admin: &'a Client,
    /// The client for every other step (olm-rs's, or the OperatorGroup's service account).
    pub steps: &'a Client,
    /// The OperatorGroup's service account (in `namespace`) `steps` acts as, if any: its
    /// permissions are checked before anything is written (docs/install-plans.md §10).
    pub scoped_as: Option<&'a str>,
    pub namespace: &'a str,
    /// Where both clients record the API server's warnings (`k8s::warnings::recording`).
    pub api_warnings: &'a WarningLog,
    /// Resources of step kinds olm-rs does not know, as discovery last found them.
    pub served_apis: &'a crate::k8s::discovery::ServedApis,
}

impl Pass<'_> {
    /// Runs one pass over `steps`: their new statuses, how the pass ended, its warnings.
    pub async fn run(&self, mut steps: Vec<Step>) -> PassReport {
        let mut warnings = Vec::new();
        let outcome = self.apply_steps(&mut steps, &mut warnings).await;
        PassReport {
            steps,
            outcome,
            warnings,
        }
    }

    async fn apply_steps(
        &self,
        steps: &mut [Step],
        warnings: &mut Vec<PlanWarning>,
    ) -> PassOutcome {
        let plan = match check_plan(steps) {
            Ok(plan) => plan,
            Err(refusal) => return refusal.into(),
        };
        let apis = match self.check(steps, &plan.steps, warnings).await {
            Ok(apis) => apis,
            Err(outcome) => return outcome,
        };
        // CRDs first, then wait for them to be served.
        for &i in &plan.order.crds {
            let p = &plan.steps[i];
            if step_action(p.kind, &steps[i].status) == StepAction::Write {
                self.api_warnings.take();
                let applied = self.apply_crd(p).await;
                self.note_api_warnings(p, warnings);
                match applied {
                    Ok(status) => steps[i].status = status,
                    Err(error) => return failed_step(error),
                }
            }
        }
        let mut waiting = false;
        for &i in &plan.order.crds {
            let p = &plan.steps[i];
            if step_action(p.kind, &steps[i].status) == StepAction::AwaitEstablished {
                match self.established(&p.object.name).await {
                    Ok(true) => steps[i].status = crate::api::StepStatus::Created,
                    Ok(false) => waiting = true,
                    Err(error) => return failed_step(error),
                }
            }
        }
        if waiting {
            return PassOutcome::WaitingForApi;
        }
        let mut owners: HashMap<String, OwnerCsv> = HashMap::new();
        for &i in &plan.order.after_crds {
            let p = &plan.steps[i];
            if step_action(p.kind, &steps[i].status) == StepAction::Done {
                continue;
            }
            let Some(api) = apis.get(&i) else {
                return failed(format!(
                    "no API resolved for step {i} ({} {})",
                    p.object.kind, p.object.name
                ));
            };
            self.api_warnings.take();
            let applied = self.apply(p, api, &mut owners).await;
            self.note_api_warnings(p, warnings);
            match applied {
                Ok(status) => steps[i].status = status,
                Err(error) => return failed_step(error),
            }
        }
        // Every other step is written: before the plan completes, each of its CRDs must still
        // carry the annotation its CSV's requirement check looks for (docs/install-plans.md
        // §7.3). The CSV exists now, so no later update of the CRD drops it again.
        for &i in &plan.order.crds {
            if let Err(message) = self.keep_alongside(&plan.steps[i]).await {
                return failed(message);
            }
        }
        PassOutcome::Done
    }

    /// Turns the warnings the API server returned while applying step `p` into an event.
    fn note_api_warnings(&self, p: &ParsedStep, warnings: &mut Vec<PlanWarning>) {
        let texts = self.api_warnings.take();
        warnings.extend(applied_with_warnings(p, &texts));
    }
}

fn csv_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("operators.coreos.com", "v1alpha1", "ClusterServiceVersion"),
        "clusterserviceversions",
    )
}

fn strip_status(object: &mut Value) {
    if let Some(map) = object.as_object_mut() {
        map.remove("status");
    }
}

/// A step error: retried within the plan's retry window.
fn failed(error: impl std::fmt::Display) -> PassOutcome {
    PassOutcome::StepFailed {
        message: error.to_string(),
        failure: StepFailure::Retryable,
    }
}

/// A failed API call: waited out when transient (`k8s::errors::is_transient`), else retried
/// within the plan's retry window.
fn failed_call(message: impl std::fmt::Display, error: &kube::Error) -> PassOutcome {
    PassOutcome::StepFailed {
        message: message.to_string(),
        failure: if is_transient(error) {
            StepFailure::Transient
        } else {
            StepFailure::Retryable
        },
    }
}

/// A step error, classified by the API call behind it.
fn failed_step(error: StepError) -> PassOutcome {
    match error.call() {
        Some(call) => failed_call(&error, call),
        None => failed(error),
    }
}

/// Why a step could not be written; the text is the plan's message.
#[derive(Debug, thiserror::Error)]
enum StepError {
    /// An API call on the step's object failed.
    #[error("error {action} {kind} {name}: {}", server_words(&.source.source))]
    Api {
        /// `creating`, `updating`, `reading`, …
        action: &'static str,
        kind: String,
        name: String,
        #[source]
        source: ApiError,
    },
    #[error(transparent)]
    Encode(#[from] serde_json::Error),
    #[error("listing CSVs in {namespace}: {source}")]
    ListCsvs {
        namespace: String,
        #[source]
        source: kube::Error,
    },
    #[error("listing InstallPlans in {namespace}: {source}")]
    ListPlans {
        namespace: String,
        #[source]
        source: kube::Error,
    },
    #[error(
        "CustomResourceDefinition {name} was applied by this plan and is gone; the plan cannot complete without it"
    )]
    CrdGone { name: String },
    #[error("reading CustomResourceDefinition {name}: {}", .source.source)]
    ReadCrd {
        name: String,
        #[source]
        source: ApiError,
    },
    #[error("reading ClusterServiceVersion {namespace}/{csv}: {source}")]
    ReadOwner {
        namespace: String,
        csv: String,
        #[source]
        source: kube::Error,
    },
    #[error(
        "ClusterServiceVersion {namespace}/{csv} does not exist yet, so objects owned by it cannot be created"
    )]
    OwnerMissing { namespace: String, csv: String },
}

impl StepError {
    /// The API call that failed, when one did.
    fn call(&self) -> Option<&kube::Error> {
        match self {
            StepError::Api { source, .. } | StepError::ReadCrd { source, .. } => {
                Some(&source.source)
            }
            StepError::ListCsvs { source, .. }
            | StepError::ListPlans { source, .. }
            | StepError::ReadOwner { source, .. } => Some(source),
            StepError::Encode(_) | StepError::OwnerMissing { .. } | StepError::CrdGone { .. } => {
                None
            }
        }
    }
}

/// The server's own message when it gave one.
fn server_words(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) if !status.message.is_empty() => status.message.clone(),
        other => other.to_string(),
    }
}

/// A failed API call of step `p`, in the plan's words.
fn step_error(action: &'static str, p: &ParsedStep, source: ApiError) -> StepError {
    StepError::Api {
        action,
        kind: StepKind::manifest_kind(&p.object.kind).to_string(),
        name: p.object.name.clone(),
        source,
    }
}

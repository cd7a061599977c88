//! One execution pass over an InstallPlan's steps (docs/install-plans.md §7.3), in the shape of
//! every controller: stage by stage, the shell observes what the stage needs
//! (`observe.rs`), `plan::pass` decides the stage's writes as a value, and the one executor
//! (`k8s::effects::execute_noted`) carries them out with the client the stage names — olm-rs's
//! own for CRDs, the plan's identity for the other steps (docs/install-plans.md §10). Each stage
//! is decided afresh on what is observed after the one before it was written.
//!
//! The whole plan is checked before anything is written — `plan::execution::check_plan`
//! (manifests readable, kinds supported, no v1beta1 CRD), then what needs the cluster (APIs
//! served, CRD updates safe, the scoped account's rights). Every write is idempotent
//! (create-if-absent or server-side apply of a fixed name), so a pass interrupted by a crash is
//! simply run again: nothing is duplicated.

mod observe;

use std::collections::HashMap;

use kube::Client;

use crate::api::{Step, StepStatus};
use crate::k8s::effects::execute_noted;
use crate::k8s::errors::is_transient;
use crate::k8s::warnings::WarningLog;
use crate::k8s::write::ApiError;
use crate::plan::execution::{
    CheckedPlan, ParsedStep, PassReport, PlanWarning, applied_with_warnings, check_plan,
};
use crate::plan::kinds::StepKind;
use crate::plan::pass::{self, PassContext, Records, Stage};
use crate::plan::phase::{PassOutcome, StepFailure};
use crate::plan::scope::ExecuteAs;

/// What a pass needs.
pub struct Pass<'a> {
    /// olm-rs's own client: CRDs are always applied with it (docs/install-plans.md §10).
    pub admin: &'a Client,
    /// The client for every other step (olm-rs's, or the OperatorGroup's service account).
    pub steps: &'a Client,
    /// Whose credentials `steps` carries: a service account's permissions are checked before
    /// anything is written (docs/install-plans.md §10).
    pub identity: &'a ExecuteAs,
    pub namespace: &'a str,
    /// Where both clients record the API server's warnings (`k8s::warnings::recording`).
    pub api_warnings: &'a WarningLog,
    /// Resources of step kinds olm-rs does not know, as discovery last found them.
    pub served_apis: &'a crate::k8s::discovery::ServedApis,
}

/// A pass under way: the steps with the statuses recorded so far, and what to report.
struct Run {
    steps: Vec<Step>,
    /// `CRDValidation` warnings, in the order they were found.
    notes: Vec<PlanWarning>,
    /// The API server's warnings per step, in the order the steps drew them.
    drawn: Vec<(usize, Vec<String>)>,
}

impl Run {
    fn drew(&mut self, step: usize, texts: Vec<String>) {
        if texts.is_empty() {
            return;
        }
        match self.drawn.iter_mut().find(|(i, _)| *i == step) {
            Some((_, all)) => all.extend(texts),
            None => self.drawn.push((step, texts)),
        }
    }

    fn report(self, plan: Option<&CheckedPlan>, outcome: PassOutcome) -> PassReport {
        let mut warnings = self.notes;
        if let Some(plan) = plan {
            for (step, texts) in &self.drawn {
                warnings.extend(applied_with_warnings(&plan.steps[*step], texts));
            }
        }
        PassReport {
            steps: self.steps,
            outcome,
            warnings,
        }
    }
}

impl Pass<'_> {
    /// Runs one pass over `steps`: their new statuses, how the pass ended, its warnings.
    pub async fn run(&self, mut steps: Vec<Step>) -> PassReport {
        let checked = check_plan(&mut steps);
        let mut run = Run {
            steps,
            notes: Vec::new(),
            drawn: Vec::new(),
        };
        let plan = match checked {
            Ok(plan) => plan,
            Err(refusal) => return run.report(None, refusal.into()),
        };
        let outcome = match self.stages(&plan, &mut run).await {
            Ok(()) => PassOutcome::Done,
            Err(outcome) => outcome,
        };
        run.report(Some(&plan), outcome)
    }

    /// Every stage of the pass, each observed, decided by `plan::pass` and executed in turn;
    /// the first that does not end well ends the pass.
    async fn stages(&self, plan: &CheckedPlan, run: &mut Run) -> Result<(), PassOutcome> {
        let ctx = PassContext {
            namespace: self.namespace,
            identity: self.identity,
        };
        // Before any step is written: the CRD updates are safe, every API is served (or comes
        // from a CRD of the plan), and a scoped account may write every step.
        let writing = pass::crds_to_write(plan, &run.steps);
        let before = self.observe_crds(plan, &writing).await?;
        // olm-rs grants itself the read of an existing CRD's resources before listing them (a
        // CRD installed before olm-rs, by OLM say, has no reader role yet: §7.5).
        self.carry_out(plan, pass::reader_roles(&before, &writing), run)
            .await?;
        let stored = self.observe_stored(plan, &before).await?;
        run.notes
            .extend(pass::check_crd_updates(plan, &before, &writing, &stored)?);
        let apis = self.observe_apis(plan).await?;
        if let ExecuteAs::ServiceAccount { name, .. } = self.identity {
            let questions = pass::scoped_questions(plan, &run.steps, &apis, self.namespace);
            self.ask_scoped(name, questions).await?;
        }
        // CRDs, then the wait until they are served.
        let facts = self.observe_alongside(&before).await?;
        let crds = pass::crd_writes(plan, ctx, &writing, &before, &facts);
        self.carry_out(plan, crds, run).await?;
        let created: Vec<usize> = writing
            .iter()
            .copied()
            .filter(|i| !before.contains_key(i))
            .collect();
        let awaited = pass::crds_awaited(plan, &run.steps);
        let live = self.observe_crds(plan, &awaited).await?;
        let awaited = pass::awaited_crds(&awaited, &created, &live);
        self.carry_out(plan, awaited.stage, run).await?;
        if awaited.waiting {
            return Err(PassOutcome::WaitingForApi);
        }
        // CSVs, then everything else, owned by the CSVs as they are now.
        let csvs = pass::csv_steps(plan, &run.steps);
        let live = self.observe_objects(plan, &csvs, &apis).await?;
        let stage = pass::object_writes(plan, ctx, &csvs, &apis, &live, &HashMap::new())?;
        self.carry_out(plan, stage, run).await?;
        let rest = pass::other_steps(plan, &run.steps);
        let owners = self
            .observe_owners(&pass::owners_needed(plan, &rest, &apis))
            .await?;
        let live = self.observe_objects(plan, &rest, &apis).await?;
        let stage = pass::object_writes(plan, ctx, &rest, &apis, &live, &owners)?;
        self.carry_out(plan, stage, run).await?;
        // Every other step is written: each CRD must still carry the annotation its CSV's
        // requirement check looks for (§7.3). The CSV exists now, so no later update of the
        // CRD drops it again.
        let live = self.observe_crds(plan, &pass::all_crds(plan)).await?;
        self.carry_out(plan, pass::alongside_repairs(plan, ctx, &live)?, run)
            .await
    }

    /// Hands `stage` to the one executor with the client it names, then records each step's
    /// status and the API server's warnings write by write. A failed write ends the pass; the
    /// writes before it stay recorded.
    async fn carry_out(
        &self,
        plan: &CheckedPlan,
        stage: Stage,
        run: &mut Run,
    ) -> Result<(), PassOutcome> {
        for (i, status) in stage.settled {
            run.steps[i].status = status;
        }
        if stage.writes.is_empty() {
            return Ok(());
        }
        let client = match stage.acting {
            ExecuteAs::Controller => self.admin,
            ExecuteAs::ServiceAccount { .. } => self.steps,
        };
        let writes: Vec<_> = stage.writes.iter().map(|w| w.write.clone()).collect();
        let noted = execute_noted(client, self.api_warnings, &writes).await;
        let failed_at = noted.done.len();
        for (w, done) in stage.writes.iter().zip(noted.done) {
            match w.records {
                Records::Status(ref status) => run.steps[w.step].status = status.clone(),
                Records::CreatedOrPresent => {
                    run.steps[w.step].status = if done.answer.is_some() {
                        StepStatus::Created
                    } else {
                        StepStatus::Present
                    };
                }
                Records::Nothing => {}
            }
            run.drew(w.step, done.warnings);
        }
        match noted.failed {
            None => Ok(()),
            Some(failure) => {
                // The executor stops at the first failure: it is the write after those done.
                let w = &stage.writes[failed_at];
                run.drew(w.step, failure.warnings);
                Err(failed_step(step_error(
                    w.action,
                    &plan.steps[w.step],
                    failure.error,
                )))
            }
        }
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
    failed_call(&error, error.call())
}

/// Why a step could not be observed or written; the text is the plan's message.
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
    #[error("reading ClusterServiceVersion {namespace}/{csv}: {source}")]
    ReadOwner {
        namespace: String,
        csv: String,
        #[source]
        source: kube::Error,
    },
}

impl StepError {
    /// The API call that failed.
    fn call(&self) -> &kube::Error {
        match self {
            StepError::Api { source, .. } => &source.source,
            StepError::ListCsvs { source, .. }
            | StepError::ListPlans { source, .. }
            | StepError::ReadOwner { source, .. } => source,
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

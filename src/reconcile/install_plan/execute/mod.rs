//! One execution pass over an InstallPlan's steps (docs/install-plans.md §7.3).
//!
//! The whole plan is checked before anything is written (manifests readable, kinds supported,
//! APIs served, CRD updates safe), then applied in this order: CRDs; wait until they are
//! Established (`WaitingForApi`); CSVs; everything else in plan order. Every write is
//! idempotent (create-if-absent or server-side apply of a fixed name), so a pass interrupted by
//! a crash is simply run again: nothing is duplicated.

mod apply;
mod check;

use std::collections::HashMap;

use kube::Client;
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::Value;

use super::apis::StepApi;
use crate::api::{Step, StepStatus};
use crate::k8s::warnings::WarningLog;
use crate::plan::kinds::{StepKind, supported_kind_names};
use crate::plan::object::StepObject;
use crate::plan::phase::PassOutcome;
use crate::plan::prepare::OwnerCsv;

/// What a pass needs.
pub struct Pass<'a> {
    /// olm-rs's own client: CRDs are always applied with it (docs/install-plans.md §10).
    pub admin: &'a Client,
    /// The client for every other step (olm-rs's, or the OperatorGroup's service account).
    pub steps: &'a Client,
    pub namespace: &'a str,
    /// Where both clients record the API server's warnings (`k8s::warnings::recording`).
    pub api_warnings: &'a WarningLog,
}

/// A Warning event to publish on the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanWarning {
    /// `CRDValidation`, or `AppliedWithWarnings` for warnings the API server returned.
    pub reason: &'static str,
    pub message: String,
    /// The step it concerns: the event's `fieldPath` is then `status.plan[<step>]`.
    pub step: Option<usize>,
}

/// The event reason for API-server warnings drawn by a step (docs/install-plans.md §7.3).
pub const APPLIED_WITH_WARNINGS: &str = "AppliedWithWarnings";

pub type Warnings = Vec<PlanWarning>;

/// OLM's words for the warnings one step drew.
fn applied_with_warnings(p: &Parsed, texts: &[String]) -> PlanWarning {
    let what = format!("({} {:?})", p.object.kind, p.object.name);
    let message = if p.resolving.is_empty() {
        format!(
            "{} warning(s) generated during operator installation {what}: {}",
            texts.len(),
            texts.join(", ")
        )
    } else {
        format!(
            "{} warning(s) generated during installation of operator {:?} {what}: {}",
            texts.len(),
            p.resolving,
            texts.join(", ")
        )
    };
    PlanWarning {
        reason: APPLIED_WITH_WARNINGS,
        message,
        step: Some(p.index),
    }
}

struct Parsed {
    index: usize,
    kind: StepKind,
    object: StepObject,
    /// The CSV the step belongs to.
    resolving: String,
}

impl Pass<'_> {
    /// Runs one pass, updating each step's status in place.
    pub async fn run(&self, steps: &mut [Step], warnings: &mut Warnings) -> PassOutcome {
        let parsed = match parse(steps) {
            Ok(parsed) => parsed,
            Err(message) => {
                return PassOutcome::StepFailed {
                    message,
                    permanent: true,
                };
            }
        };
        let mut apis: HashMap<usize, StepApi> = HashMap::new();
        if let Err(outcome) = self.check(steps, &parsed, &mut apis, warnings).await {
            return outcome;
        }
        // CRDs first, then wait for them to be served.
        for p in parsed
            .iter()
            .filter(|p| p.kind == StepKind::CustomResourceDefinition)
        {
            if steps[p.index].status == StepStatus::Unknown
                || steps[p.index].status == StepStatus::NotPresent
            {
                self.api_warnings.take();
                let applied = self.apply_crd(p).await;
                self.note_api_warnings(p, warnings);
                match applied {
                    Ok(status) => steps[p.index].status = status,
                    Err(message) => return failed(message),
                }
            }
        }
        let mut waiting = false;
        for p in parsed
            .iter()
            .filter(|p| p.kind == StepKind::CustomResourceDefinition)
        {
            if steps[p.index].status == StepStatus::WaitingForApi {
                match self.established(&p.object.name).await {
                    Ok(true) => steps[p.index].status = StepStatus::Created,
                    Ok(false) => waiting = true,
                    Err(message) => return failed(message),
                }
            }
        }
        if waiting {
            return PassOutcome::WaitingForApi;
        }
        let mut owners: HashMap<String, OwnerCsv> = HashMap::new();
        let order = parsed
            .iter()
            .filter(|p| p.kind == StepKind::ClusterServiceVersion)
            .chain(parsed.iter().filter(|p| {
                p.kind != StepKind::ClusterServiceVersion
                    && p.kind != StepKind::CustomResourceDefinition
            }));
        for p in order {
            if matches!(
                steps[p.index].status,
                StepStatus::Created | StepStatus::Present
            ) {
                continue;
            }
            let Some(api) = apis.get(&p.index) else {
                return failed(format!(
                    "no API resolved for step {} ({} {})",
                    p.index, p.object.kind, p.object.name
                ));
            };
            self.api_warnings.take();
            let applied = self.apply(p, api, &mut owners).await;
            self.note_api_warnings(p, warnings);
            match applied {
                Ok(status) => steps[p.index].status = status,
                Err(message) => return failed(message),
            }
        }
        PassOutcome::Done
    }

    /// Turns the warnings the API server returned while applying step `p` into an event.
    fn note_api_warnings(&self, p: &Parsed, warnings: &mut Warnings) {
        let mut texts = self.api_warnings.take();
        // A step reads before it writes, and both draw the same warning: say it once.
        let mut seen = std::collections::HashSet::new();
        texts.retain(|t| seen.insert(t.clone()));
        if !texts.is_empty() {
            warnings.push(applied_with_warnings(p, &texts));
        }
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

fn failed(message: String) -> PassOutcome {
    PassOutcome::StepFailed {
        message,
        permanent: false,
    }
}

fn api_error(action: &str, p: &Parsed, error: &kube::Error) -> String {
    let detail = match error {
        kube::Error::Api(status) if !status.message.is_empty() => status.message.clone(),
        other => other.to_string(),
    };
    format!(
        "error {action} {} {}: {detail}",
        StepKind::manifest_kind(&p.object.kind),
        p.object.name
    )
}

/// Reads every step; an unsupported kind or unreadable manifest makes the plan unusable.
fn parse(steps: &mut [Step]) -> Result<Vec<Parsed>, String> {
    let mut out = Vec::with_capacity(steps.len());
    for (index, step) in steps.iter_mut().enumerate() {
        let r = &step.resource;
        let Some(kind) = StepKind::of(&r.kind) else {
            step.status = StepStatus::UnsupportedResource;
            return Err(format!(
                "the InstallPlan contains invalid data: step {index} ({} {} of {}) has a kind olm-rs does not install; supported kinds: {}",
                r.kind,
                r.name,
                step.resolving,
                supported_kind_names().join(", ")
            ));
        };
        let manifest: Value = r
            .manifest
            .as_deref()
            .ok_or_else(|| format!("the InstallPlan contains invalid data: step {index} ({} {}) has no manifest", r.kind, r.name))
            .and_then(|m| serde_json::from_str(m).map_err(|e| format!("the InstallPlan contains invalid data: step {index} ({} {}): manifest is not JSON: {e}", r.kind, r.name)))?;
        if manifest.get("catalogSourceName").is_some()
            && manifest.get("kind").and_then(Value::as_str) == Some("ConfigMap")
            && r.kind != "ConfigMap"
        {
            return Err(format!(
                "step {index} ({} {}) refers to an unpacked bundle ConfigMap; olm-rs does not read unpacked bundle images yet",
                r.kind, r.name
            ));
        }
        out.push(Parsed {
            index,
            kind,
            object: StepObject {
                group: r.group.clone(),
                version: r.version.clone(),
                kind: r.kind.clone(),
                name: r.name.clone(),
                manifest,
            },
            resolving: step.resolving.clone(),
        });
    }
    Ok(out)
}

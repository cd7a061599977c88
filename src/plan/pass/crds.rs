//! The CRD stages of a pass (docs/install-plans.md §7.3–§7.5): CRDs are written first, always
//! as olm-rs, and the pass goes on only once each is Established.

use std::collections::HashMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::Value;

use super::{
    Observed, PassContext, PassError, Records, Stage, StepWrite, steps_where, strip_status,
};
use crate::api::{Step, StepStatus};
use crate::k8s::effects::{Body, Write};
use crate::k8s::write::{ObjectKey, Ownership};
use crate::plan::alongside::{AlongsideFacts, alongside_repair, crd_update_writes};
use crate::plan::crd_reader::reader_role;
use crate::plan::crd_safety::{CrdUpdateCheck, VersionToValidate, check_crd_update};
use crate::plan::execution::{CRD_VALIDATION, CheckedPlan, PlanWarning};
use crate::plan::kinds::{Scope, StepKind};
use crate::plan::order::StepAction;
use crate::plan::prepare::prepare_object;
use crate::plan::scope::ExecuteAs;

/// The CRD steps this pass writes.
pub fn crds_to_write(plan: &CheckedPlan, steps: &[Step]) -> Vec<usize> {
    steps_where(plan, steps, StepAction::Write, |k| {
        k == StepKind::CustomResourceDefinition
    })
}

/// The CRD steps written by an earlier pass and not yet seen Established.
pub fn crds_awaited(plan: &CheckedPlan, steps: &[Step]) -> Vec<usize> {
    steps_where(plan, steps, StepAction::AwaitEstablished, |k| {
        k == StepKind::CustomResourceDefinition
    })
}

/// Every CRD step of the plan.
pub fn all_crds(plan: &CheckedPlan) -> Vec<usize> {
    plan.order.crds.clone()
}

/// olm-rs's read access to the custom resources of each CRD of `which` that `live` holds: its
/// reader role, server-side applied, owned by the live CRD (docs/install-plans.md §7.5). Before
/// an update, the safety check lists those resources through it.
pub fn reader_roles(live: &Observed, which: &[usize]) -> Stage {
    let mut stage = Stage::new(ExecuteAs::Controller);
    for &i in which {
        let Some(role) = live.get(&i).and_then(reader_role) else {
            continue;
        };
        stage.writes.push(StepWrite {
            step: i,
            write: Write::apply(role, Ownership::Force),
            action: "granting olm-rs read access for",
            records: Records::Nothing,
        });
    }
    stage
}

/// The update check of every CRD of `which` that exists (docs/install-plans.md §7.4): refused
/// when a stored resource fails the new schema or a stored version is dropped; the warnings to
/// publish otherwise. `stored` holds, per step, the resources of each version to validate.
pub fn check_crd_updates(
    plan: &CheckedPlan,
    live: &Observed,
    which: &[usize],
    stored: &HashMap<usize, Vec<(VersionToValidate, Vec<Value>)>>,
) -> Result<Vec<PlanWarning>, PassError> {
    let validate = |schema: &Value, object: &Value| {
        let mut copy = object.clone();
        crate::api::crd::validate::admit_object(schema, None, &mut copy).violations
    };
    let mut warnings = Vec::new();
    for &i in which {
        let Some(existing) = live.get(&i) else {
            continue;
        };
        let resources = stored.get(&i).map_or(&[][..], Vec::as_slice);
        let new = &plan.steps[i].object.manifest;
        if let CrdUpdateCheck::SafeWithWarning(message) =
            check_crd_update(existing, new, resources, validate)?
        {
            warnings.push(PlanWarning {
                reason: CRD_VALIDATION,
                message,
                step: Some(i),
            });
        }
    }
    Ok(warnings)
}

/// The writes of the CRDs of `which`: an absent CRD is created (`WaitingForApi` until
/// Established; a name taken meanwhile is the same outcome); an existing one is server-side
/// applied without installed-alongside annotations, then those are merge-patched: the plan's
/// own and those of the live copy that `facts` keeps, the others removed (`plan::alongside`).
/// The step is `Present` once both are written. Always as olm-rs (docs/install-plans.md §10).
/// Neither write is guarded by the copy's resourceVersion (the API server moves it with every
/// status update of the CRD); none of them removes an annotation added since the copy was read
/// (docs/reliability.md §3.7).
pub fn crd_writes(
    plan: &CheckedPlan,
    ctx: PassContext<'_>,
    which: &[usize],
    live: &Observed,
    facts: &HashMap<usize, AlongsideFacts>,
) -> Stage {
    let mut stage = Stage::new(ExecuteAs::Controller);
    for &i in which {
        let p = &plan.steps[i];
        let key = ObjectKey::new::<CustomResourceDefinition>(None, &p.object.name);
        let mut desired = prepare_object(
            p.kind,
            Scope::Cluster,
            &p.object.manifest,
            ctx.namespace,
            &p.resolving,
            None,
        );
        let Some(existing) = live.get(&i) else {
            stage.writes.push(StepWrite {
                step: i,
                write: Write::CreateIfAbsent {
                    key,
                    object: Body::new(desired),
                },
                action: "creating",
                records: Records::Status(StepStatus::WaitingForApi),
            });
            continue;
        };
        strip_status(&mut desired);
        let kept = facts.get(&i).cloned().unwrap_or_default();
        let [apply, annotate] = crd_update_writes(key, desired, existing, &kept);
        stage.writes.push(StepWrite {
            step: i,
            write: apply,
            action: "updating",
            records: Records::Nothing,
        });
        stage.writes.push(StepWrite {
            step: i,
            write: annotate,
            action: "annotating",
            records: Records::Status(StepStatus::Present),
        });
    }
    stage
}

/// Whether a CRD (as read) is Established with its names accepted.
pub fn established(crd: &Value) -> bool {
    let conditions = crd
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    let is_true = |t: &str| {
        conditions.iter().any(|c| {
            c.get("type").and_then(Value::as_str) == Some(t)
                && c.get("status").and_then(Value::as_str) == Some("True")
        })
    };
    is_true("Established") && is_true("NamesAccepted")
}

/// The CRDs awaited, as observed after they were written.
#[derive(Debug, Clone, PartialEq)]
pub struct AwaitedCrds {
    /// The reader roles of the CRDs this pass created; the Established ones become `Created`.
    pub stage: Stage,
    /// Some CRD is not Established yet: the pass ends `WaitingForApi`.
    pub waiting: bool,
}

/// The CRDs of `awaited` as `live` shows them (a CRD gone is not Established), and the reader
/// roles of those of `created` — created by this pass, so read only now with their uid.
pub fn awaited_crds(awaited: &[usize], created: &[usize], live: &Observed) -> AwaitedCrds {
    let mut stage = reader_roles(live, created);
    let mut waiting = false;
    for &i in awaited {
        if live.get(&i).is_some_and(established) {
            stage.settled.push((i, StepStatus::Created));
        } else {
            waiting = true;
        }
    }
    AwaitedCrds { stage, waiting }
}

/// Before the plan completes, each of its CRDs must still carry the installed-alongside
/// annotation of its CSV, or that CSV waits on it forever (docs/install-plans.md §7.3): a lost
/// one is added back by a merge patch of that annotation alone, guarded by the CRD's
/// resourceVersion. A CRD this plan applied and that is gone fails the pass.
pub fn alongside_repairs(
    plan: &CheckedPlan,
    ctx: PassContext<'_>,
    live: &Observed,
) -> Result<Stage, PassError> {
    let mut stage = Stage::new(ExecuteAs::Controller);
    for &i in &plan.order.crds {
        let p = &plan.steps[i];
        let Some(crd) = live.get(&i) else {
            return Err(PassError::CrdGone {
                name: p.object.name.clone(),
            });
        };
        if let Some(repair) = alongside_repair(crd, ctx.namespace, &p.resolving) {
            stage.writes.push(StepWrite {
                step: i,
                write: repair,
                action: "annotating",
                records: Records::Nothing,
            });
        }
    }
    Ok(stage)
}

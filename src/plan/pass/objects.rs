//! The stages of a pass after the CRDs (docs/install-plans.md §7.3, §10): the CSVs, then every
//! other step, each as the plan's identity. Create-only kinds are created when absent and left
//! as they are when present; the others are server-side applied. Namespaced objects are owned by
//! their CSV, whose uid the shell observed after the CSVs were written.

use std::collections::{BTreeSet, HashMap};

use super::{Observed, PassContext, PassError, Records, Stage, StepApi, StepWrite, steps_where};
use crate::api::{Step, StepStatus};
use crate::k8s::effects::{Body, Write};
use crate::k8s::write::{ObjectKey, Ownership};
use crate::plan::execution::CheckedPlan;
use crate::plan::kinds::{Scope, StepKind};
use crate::plan::order::StepAction;
use crate::plan::prepare::{OwnerCsv, merge_owner_references, prepare_object};
use crate::plan::scoped_refusal::RefusedWrite;

/// The CSV steps this pass writes, in plan order.
pub fn csv_steps(plan: &CheckedPlan, steps: &[Step]) -> Vec<usize> {
    steps_where(plan, steps, StepAction::Write, |k| {
        k == StepKind::ClusterServiceVersion
    })
}

/// Every other step but CRDs this pass writes, in plan order.
pub fn other_steps(plan: &CheckedPlan, steps: &[Step]) -> Vec<usize> {
    steps_where(plan, steps, StepAction::Write, |k| {
        k != StepKind::ClusterServiceVersion && k != StepKind::CustomResourceDefinition
    })
}

/// Whether step `p` with `api` gets an owner reference to its CSV.
fn needs_owner(kind: StepKind, api: &StepApi) -> bool {
    api.scope == Scope::Namespaced && !kind.create_only()
}

/// The CSVs (of the plan's namespace) that the steps of `which` are owned by: their uids must
/// be observed before those steps are decided.
pub fn owners_needed(
    plan: &CheckedPlan,
    which: &[usize],
    apis: &HashMap<usize, StepApi>,
) -> Vec<String> {
    let mut names = BTreeSet::new();
    for &i in which {
        let p = &plan.steps[i];
        if apis.get(&i).is_some_and(|api| needs_owner(p.kind, api)) {
            names.insert(p.resolving.clone());
        }
    }
    names.into_iter().collect()
}

/// The writes of the steps of `which` (CSVs or the rest), as the plan's identity. `live` holds
/// the objects found under the steps' names, `owners` the uid of each CSV found. A step whose
/// object is there and is create-only is `Present` without a write; a namespaced step owned by
/// a CSV that does not exist refuses the stage whole.
pub fn object_writes(
    plan: &CheckedPlan,
    ctx: PassContext<'_>,
    which: &[usize],
    apis: &HashMap<usize, StepApi>,
    live: &Observed,
    owners: &HashMap<String, String>,
) -> Result<Stage, PassError> {
    let mut stage = Stage::new(ctx.identity.clone());
    for &i in which {
        let p = &plan.steps[i];
        let api = apis.get(&i).ok_or_else(|| PassError::NoApi {
            index: i,
            kind: p.object.kind.clone(),
            name: p.object.name.clone(),
        })?;
        let owner = if needs_owner(p.kind, api) {
            let uid = owners
                .get(&p.resolving)
                .ok_or_else(|| PassError::OwnerMissing {
                    namespace: ctx.namespace.to_owned(),
                    csv: p.resolving.clone(),
                })?;
            Some(OwnerCsv {
                name: p.resolving.clone(),
                uid: uid.clone(),
            })
        } else {
            None
        };
        let key = ObjectKey {
            resource: api.resource.clone(),
            namespace: (api.scope == Scope::Namespaced).then(|| ctx.namespace.to_owned()),
            name: p.object.name.clone(),
        };
        let mut desired = prepare_object(
            p.kind,
            api.scope,
            &p.object.manifest,
            ctx.namespace,
            &p.resolving,
            owner.as_ref(),
        );
        let existing = live.get(&i);
        if p.kind.create_only() {
            match existing {
                Some(_) => stage.settled.push((i, StepStatus::Present)),
                None => stage.writes.push(StepWrite {
                    step: i,
                    write: Write::CreateIfAbsent {
                        key,
                        object: Body::new(desired),
                    },
                    action: "creating",
                    records: Records::CreatedOrPresent,
                }),
            }
            continue;
        }
        // Several CSVs may share a ServiceAccount: it keeps every owner.
        if p.kind == StepKind::ServiceAccount {
            merge_owner_references(existing, &mut desired);
        }
        let (action, status) = match existing {
            Some(_) => ("updating", StepStatus::Present),
            None => ("creating", StepStatus::Created),
        };
        stage.writes.push(StepWrite {
            step: i,
            write: Write::Apply {
                key,
                object: Body::new(desired),
                ownership: Ownership::Force,
            },
            action,
            records: Records::Status(status),
        });
    }
    Ok(stage)
}

/// A scoped install (docs/install-plans.md §10): every write the account must be allowed before
/// anything is written — `create`, and `patch` for the kinds that are server-side applied — for
/// every step but CRDs (olm-rs applies those with its own rights once the account passes).
/// The shell asks each as the account; the refused ones make the plan's refusal
/// (`plan::scoped_refusal`).
pub fn scoped_questions(
    plan: &CheckedPlan,
    steps: &[Step],
    apis: &HashMap<usize, StepApi>,
    namespace: &str,
) -> Vec<RefusedWrite> {
    let mut questions = Vec::new();
    for p in &plan.steps {
        if p.kind == StepKind::CustomResourceDefinition
            || crate::plan::order::step_action(p.kind, &steps[p.index].status) != StepAction::Write
        {
            continue;
        }
        let Some(api) = apis.get(&p.index) else {
            continue;
        };
        let verbs: &[&str] = if p.kind.create_only() {
            &["create"]
        } else {
            &["create", "patch"]
        };
        for verb in verbs {
            questions.push(RefusedWrite {
                kind: p.kind,
                name: p.object.name.clone(),
                verb: (*verb).to_owned(),
                group: api.resource.group.clone(),
                plural: api.resource.plural.clone(),
                namespace: (api.scope == Scope::Namespaced).then(|| namespace.to_owned()),
            });
        }
    }
    questions
}

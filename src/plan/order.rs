//! The two orders of a plan, kept side by side so they cannot drift apart
//! (docs/install-plans.md §7.2–§7.3):
//!
//! - the order the steps are **listed** in `status.plan` ([`order_plan`]): every CSV, then every
//!   CRD, then the rest — what OLM writes, and what users and tools reading a plan expect;
//! - the order a pass **applies** them in ([`execution_order`]): every CRD, then (once each is
//!   Established) every CSV, then the rest. A CSV created before its CRDs are served would go
//!   `Pending` on requirements that are only a moment away.
//!
//! Both keep the plan's relative order within each group, so a plan listed by [`order_plan`]
//! is applied CRDs first and otherwise in list order.

use super::kinds::StepKind;
use super::steps::PlannedStep;
use crate::api::StepStatus;

/// How a plan lists its steps: every CSV, then every CRD, then the rest, each group keeping its
/// relative order.
pub fn order_plan(steps: Vec<PlannedStep>) -> Vec<PlannedStep> {
    let rank = |s: &PlannedStep| {
        if s.object.is_csv() {
            0
        } else if s.object.is_crd() {
            1
        } else {
            2
        }
    };
    let mut steps = steps;
    steps.sort_by_key(rank); // stable
    steps
}

/// The order one pass applies a plan's steps in: indices into the plan.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecutionOrder {
    /// Every CRD, in plan order: written first; the pass goes on only once all are Established.
    pub crds: Vec<usize>,
    /// Then every CSV, then every other step, each in plan order.
    pub after_crds: Vec<usize>,
}

/// The order a pass applies steps of these kinds in (`kinds[i]` is the kind of step `i`).
pub fn execution_order(kinds: &[StepKind]) -> ExecutionOrder {
    let of = |wanted: fn(StepKind) -> bool| -> Vec<usize> {
        kinds
            .iter()
            .enumerate()
            .filter(|(_, k)| wanted(**k))
            .map(|(i, _)| i)
            .collect()
    };
    let crds = of(|k| k == StepKind::CustomResourceDefinition);
    let mut after_crds = of(|k| k == StepKind::ClusterServiceVersion);
    after_crds.extend(of(|k| {
        k != StepKind::ClusterServiceVersion && k != StepKind::CustomResourceDefinition
    }));
    ExecutionOrder { crds, after_crds }
}

/// What a pass does with one step, given its kind and recorded status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepAction {
    /// Write the object (a CRD also has its update checked first).
    Write,
    /// A CRD written by an earlier pass: see whether it is Established yet.
    AwaitEstablished,
    /// Already applied by an earlier pass: nothing to do (every write is idempotent, so a pass
    /// interrupted by a crash resumes here).
    Done,
}

/// The action for a step of `kind` whose status is `status`.
pub fn step_action(kind: StepKind, status: &StepStatus) -> StepAction {
    match (kind, status) {
        (StepKind::CustomResourceDefinition, StepStatus::Unknown | StepStatus::NotPresent) => {
            StepAction::Write
        }
        (StepKind::CustomResourceDefinition, StepStatus::WaitingForApi) => {
            StepAction::AwaitEstablished
        }
        (StepKind::CustomResourceDefinition, _) => StepAction::Done,
        (_, StepStatus::Created | StepStatus::Present) => StepAction::Done,
        _ => StepAction::Write,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::CatalogRef;
    use crate::plan::steps::{BundleContent, bundle_steps, catalog_source_names, csv_names};
    use serde_json::json;

    fn bundle(name: &str) -> BundleContent {
        BundleContent {
            name: name.into(),
            manifests: vec![
                json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                       "metadata": {"name": format!("widgets.{name}.example.com")}}),
                json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
                       "metadata": {"name": name},
                       "spec": {"install": {"strategy": "deployment", "spec": {"deployments": []}}}}),
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}),
            ],
            properties: vec![],
            catalog: CatalogRef::new("olm", "cat"),
        }
    }

    fn kinds_of(steps: &[PlannedStep]) -> Vec<StepKind> {
        steps
            .iter()
            .map(|s| StepKind::of(&s.object.kind).unwrap())
            .collect()
    }

    #[test]
    fn plans_list_csvs_first_and_apply_crds_first() {
        let mut steps = bundle_steps(&bundle("op.v2"), "ns", None).unwrap();
        steps.extend(bundle_steps(&bundle("other.v1"), "ns", None).unwrap());
        let listed = order_plan(steps);
        let ids: Vec<String> = listed
            .iter()
            .map(|s| format!("{}:{}", s.object.kind, s.resolving))
            .collect();
        assert_eq!(
            ids,
            [
                "ClusterServiceVersion:op.v2",
                "ClusterServiceVersion:other.v1",
                "CustomResourceDefinition:op.v2",
                "CustomResourceDefinition:other.v1",
                "ConfigMap:op.v2",
                "ConfigMap:other.v1",
            ]
        );
        assert_eq!(csv_names(&listed), ["op.v2", "other.v1"]);
        assert_eq!(catalog_source_names(&listed), ["cat"]);
        // The same plan is applied CRDs first, then in list order.
        assert_eq!(
            execution_order(&kinds_of(&listed)),
            ExecutionOrder {
                crds: vec![2, 3],
                after_crds: vec![0, 1, 4, 5],
            }
        );
    }

    #[test]
    fn steps_appended_bundle_by_bundle_still_apply_crds_then_csvs_then_the_rest() {
        // Bundle lookups append each pulled bundle's steps (CSV, its manifests, RBAC) as they
        // come; the pass order does not depend on the list being ordered.
        use StepKind::*;
        let kinds = [
            ClusterServiceVersion,
            ConfigMap,
            CustomResourceDefinition,
            Role,
            ClusterServiceVersion,
            CustomResourceDefinition,
            Service,
        ];
        assert_eq!(
            execution_order(&kinds),
            ExecutionOrder {
                crds: vec![2, 5],
                after_crds: vec![0, 4, 1, 3, 6],
            }
        );
        assert_eq!(execution_order(&[]), ExecutionOrder::default());
    }

    #[test]
    fn each_status_says_what_a_pass_does_with_its_step() {
        use StepAction::*;
        let crd = StepKind::CustomResourceDefinition;
        let cm = StepKind::ConfigMap;
        let cases = [
            (crd, StepStatus::Unknown, Write),
            (crd, StepStatus::NotPresent, Write),
            (crd, StepStatus::WaitingForApi, AwaitEstablished),
            (crd, StepStatus::Created, Done),
            (crd, StepStatus::Present, Done),
            (cm, StepStatus::Unknown, Write),
            (cm, StepStatus::NotPresent, Write),
            (cm, StepStatus::Created, Done),
            (cm, StepStatus::Present, Done),
            (StepKind::ClusterServiceVersion, StepStatus::Unknown, Write),
            (StepKind::ClusterServiceVersion, StepStatus::Present, Done),
        ];
        for (kind, status, action) in cases {
            assert_eq!(step_action(kind, &status), action, "{kind:?} {status:?}");
        }
    }
}

//! The pure half of executing a plan (docs/install-plans.md §7.3): reading every step, the
//! refusals known before anything is written, the APIs the plan's own CRDs will serve, and what
//! a pass reports. The stages of a pass, in [`super::order::execution_order`] and following
//! [`super::order::step_action`], are decided by [`super::pass`]; the shell
//! (`reconcile::install_plan::execute`) observes and executes them, deciding nothing.

use kube::core::{ApiResource, GroupVersionKind};
use serde_json::Value;

use super::kinds::{Scope, StepKind, supported_kind_names};
use super::object::{StepObject, with_step_type};
use super::order::{ExecutionOrder, execution_order};
use super::phase::PassOutcome;
use crate::api::{Step, StepStatus};

/// One step, read: its index in the plan, how it is handled, its object, the CSV it belongs to.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedStep {
    pub index: usize,
    pub kind: StepKind,
    pub object: StepObject,
    /// The CSV the step belongs to.
    pub resolving: String,
}

/// Why a plan is refused before anything is written. Each is permanent: the plan's own content
/// is unusable, retrying cannot help.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error(
        "the InstallPlan contains invalid data: step {index} ({kind} {name} of {resolving}) has a kind olm-rs does not install; supported kinds: {supported}"
    )]
    UnsupportedKind {
        index: usize,
        kind: String,
        name: String,
        resolving: String,
        supported: String,
    },
    #[error("the InstallPlan contains invalid data: step {index} ({kind} {name}) has no manifest")]
    NoManifest {
        index: usize,
        kind: String,
        name: String,
    },
    #[error(
        "the InstallPlan contains invalid data: step {index} ({kind} {name}): manifest is not JSON: {reason}"
    )]
    ManifestNotJson {
        index: usize,
        kind: String,
        name: String,
        reason: String,
    },
    /// OLM's unpack Jobs leave ConfigMaps that steps point into; olm-rs pulls images instead.
    #[error(
        "step {index} ({kind} {name}) refers to an unpacked bundle ConfigMap; olm-rs does not read unpacked bundle images yet"
    )]
    UnpackedBundleReference {
        index: usize,
        kind: String,
        name: String,
    },
    #[error(
        "CustomResourceDefinition {name} is apiextensions.k8s.io/v1beta1, which Kubernetes has not served since 1.22; the bundle must ship a v1 CRD"
    )]
    V1beta1Crd { name: String },
}

impl From<Refusal> for PassOutcome {
    fn from(refusal: Refusal) -> Self {
        PassOutcome::StepFailed {
            message: refusal.to_string(),
            failure: super::phase::StepFailure::Permanent,
        }
    }
}

/// A plan read and checked: its steps and the order to apply them in.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckedPlan {
    pub steps: Vec<ParsedStep>,
    pub order: ExecutionOrder,
}

/// Reads every step and refuses what can be refused without the cluster: a kind olm-rs does
/// not install (that step's status becomes `UnsupportedResource`, as OLM records it), a missing
/// or unreadable manifest, a reference into an unpacked bundle ConfigMap, a v1beta1 CRD.
pub fn check_plan(steps: &mut [Step]) -> Result<CheckedPlan, Refusal> {
    let mut parsed = Vec::with_capacity(steps.len());
    for (index, step) in steps.iter_mut().enumerate() {
        parsed.push(parse_step(index, step)?);
    }
    if let Some(beta) = parsed.iter().find(|p| {
        p.kind == StepKind::CustomResourceDefinition
            && p.object.group == "apiextensions.k8s.io"
            && p.object.version == "v1beta1"
    }) {
        return Err(Refusal::V1beta1Crd {
            name: beta.object.name.clone(),
        });
    }
    let kinds: Vec<StepKind> = parsed.iter().map(|p| p.kind).collect();
    Ok(CheckedPlan {
        order: execution_order(&kinds),
        steps: parsed,
    })
}

fn parse_step(index: usize, step: &mut Step) -> Result<ParsedStep, Refusal> {
    let r = &step.resource;
    let Some(kind) = StepKind::of(&r.kind) else {
        step.status = StepStatus::UnsupportedResource;
        let r = &step.resource;
        return Err(Refusal::UnsupportedKind {
            index,
            kind: r.kind.clone(),
            name: r.name.clone(),
            resolving: step.resolving.clone(),
            supported: supported_kind_names().join(", "),
        });
    };
    let text = r.manifest.as_deref().ok_or_else(|| Refusal::NoManifest {
        index,
        kind: r.kind.clone(),
        name: r.name.clone(),
    })?;
    let manifest: Value = serde_json::from_str(text).map_err(|e| Refusal::ManifestNotJson {
        index,
        kind: r.kind.clone(),
        name: r.name.clone(),
        reason: e.to_string(),
    })?;
    let manifest = with_step_type(manifest, &r.group, &r.version, &r.kind);
    if manifest.get("catalogSourceName").is_some()
        && manifest.get("kind").and_then(Value::as_str) == Some("ConfigMap")
        && r.kind != "ConfigMap"
    {
        return Err(Refusal::UnpackedBundleReference {
            index,
            kind: r.kind.clone(),
            name: r.name.clone(),
        });
    }
    Ok(ParsedStep {
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
    })
}

/// An API one of the plan's own CRDs will serve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedApi {
    pub group: String,
    pub kind: String,
    pub plural: String,
    pub scope: Scope,
}

/// The APIs the CRDs of `steps` will serve.
pub fn planned_apis(steps: &[ParsedStep]) -> Vec<PlannedApi> {
    steps
        .iter()
        .filter(|p| p.kind == StepKind::CustomResourceDefinition)
        .filter_map(|p| {
            let text = |path: &str| p.object.manifest.pointer(path).and_then(Value::as_str);
            Some(PlannedApi {
                group: text("/spec/group")?.to_owned(),
                kind: text("/spec/names/kind")?.to_owned(),
                plural: text("/spec/names/plural")?.to_owned(),
                scope: match text("/spec/scope").unwrap_or("Namespaced") {
                    "Namespaced" => Scope::Namespaced,
                    _ => Scope::Cluster,
                },
            })
        })
        .collect()
}

/// The resource of `object` when a CRD of the plan serves it (the cluster does not serve it
/// yet: the CRD is written by this very pass).
pub fn served_by_plan(planned: &[PlannedApi], object: &StepObject) -> Option<(ApiResource, Scope)> {
    let kind = StepKind::manifest_kind(&object.kind);
    let api = planned
        .iter()
        .find(|a| a.group == object.group && a.kind == kind)?;
    let gvk = GroupVersionKind::gvk(&object.group, &object.version, kind);
    Some((
        ApiResource::from_gvk_with_plural(&gvk, &api.plural),
        api.scope,
    ))
}

/// A Warning event a pass asks for on the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanWarning {
    /// `CRDValidation`, or [`APPLIED_WITH_WARNINGS`] for warnings the API server returned.
    pub reason: &'static str,
    pub message: String,
    /// The step it concerns: the event's `fieldPath` is then `status.plan[<step>]`.
    pub step: Option<usize>,
}

/// The event reason for API-server warnings drawn by a step (docs/install-plans.md §7.3).
pub const APPLIED_WITH_WARNINGS: &str = "AppliedWithWarnings";
/// The event reason for a CRD update let through although existing resources fail its schema.
pub const CRD_VALIDATION: &str = "CRDValidation";

/// OLM's words for the API-server warnings one step drew (each said once, in order).
pub fn applied_with_warnings(step: &ParsedStep, texts: &[String]) -> Option<PlanWarning> {
    let mut seen = std::collections::HashSet::new();
    // A step reads before it writes, and both draw the same warning: say it once.
    let texts: Vec<&str> = texts
        .iter()
        .map(String::as_str)
        .filter(|t| seen.insert(*t))
        .collect();
    if texts.is_empty() {
        return None;
    }
    let what = format!("({} {:?})", step.object.kind, step.object.name);
    let message = if step.resolving.is_empty() {
        format!(
            "{} warning(s) generated during operator installation {what}: {}",
            texts.len(),
            texts.join(", ")
        )
    } else {
        format!(
            "{} warning(s) generated during installation of operator {:?} {what}: {}",
            texts.len(),
            step.resolving,
            texts.join(", ")
        )
    };
    Some(PlanWarning {
        reason: APPLIED_WITH_WARNINGS,
        message,
        step: Some(step.index),
    })
}

/// What one pass did: the steps with their new statuses, how it ended, the warnings to publish.
#[derive(Debug, Clone, PartialEq)]
pub struct PassReport {
    pub steps: Vec<Step>,
    pub outcome: PassOutcome,
    pub warnings: Vec<PlanWarning>,
}

impl PassReport {
    /// How many steps drew API-server warnings (OLM's `installplan_warnings_total` counts
    /// those, not its own notes such as `CRDValidation`).
    pub fn steps_with_api_warnings(&self) -> usize {
        self.warnings
            .iter()
            .filter(|w| w.reason == APPLIED_WITH_WARNINGS)
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::StepResource;
    use serde_json::json;

    fn step(kind: &str, api_version: &str, name: &str, manifest: Option<Value>) -> Step {
        let (group, version) = super::super::object::split_api_version(api_version);
        Step {
            resolving: "op.v1".into(),
            resource: StepResource {
                group: group.into(),
                version: version.into(),
                kind: kind.into(),
                name: name.into(),
                manifest: manifest.map(|m| m.to_string()),
                ..StepResource::default()
            },
            optional: None,
            status: StepStatus::Unknown,
        }
    }

    fn crd(api_version: &str, name: &str) -> Step {
        step(
            "CustomResourceDefinition",
            api_version,
            name,
            Some(
                json!({"apiVersion": api_version, "kind": "CustomResourceDefinition",
                "metadata": {"name": name},
                "spec": {"group": "example.com", "scope": "Cluster",
                         "names": {"kind": "Widget", "plural": "widgets"}}}),
            ),
        )
    }

    fn config_map(name: &str) -> Step {
        step(
            "ConfigMap",
            "v1",
            name,
            Some(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}})),
        )
    }

    #[test]
    fn a_plan_is_refused_whole_before_anything_is_written() {
        let deployment = step(
            "Deployment",
            "apps/v1",
            "stray",
            Some(json!({"kind": "Deployment"})),
        );
        let unpacked = step(
            "ClusterServiceVersion",
            "operators.coreos.com/v1alpha1",
            "op.v1",
            Some(json!({"kind": "ConfigMap", "catalogSourceName": "cat"})),
        );
        let mut not_json = config_map("c");
        not_json.resource.manifest = Some("{".into());
        // (plan, the refusal's first words, the step left UnsupportedResource)
        let cases: Vec<(Vec<Step>, &str, Option<usize>)> = vec![
            (
                vec![config_map("a"), deployment.clone()],
                "the InstallPlan contains invalid data: step 1 (Deployment stray of op.v1) has a kind olm-rs does not install; supported kinds: CustomResourceDefinition, ",
                Some(1),
            ),
            (
                vec![step("ConfigMap", "v1", "m", None)],
                "the InstallPlan contains invalid data: step 0 (ConfigMap m) has no manifest",
                None,
            ),
            (
                vec![not_json],
                "the InstallPlan contains invalid data: step 0 (ConfigMap c): manifest is not JSON: ",
                None,
            ),
            (
                vec![unpacked],
                "step 0 (ClusterServiceVersion op.v1) refers to an unpacked bundle ConfigMap",
                None,
            ),
            (
                // A v1beta1 CRD anywhere refuses the plan, even after steps that could be applied.
                vec![
                    config_map("a"),
                    crd("apiextensions.k8s.io/v1beta1", "widgets.example.com"),
                ],
                "CustomResourceDefinition widgets.example.com is apiextensions.k8s.io/v1beta1, which Kubernetes has not served since 1.22",
                None,
            ),
        ];
        for (mut steps, words, unsupported) in cases {
            let refusal = check_plan(&mut steps).unwrap_err();
            let outcome = PassOutcome::from(refusal.clone());
            let PassOutcome::StepFailed { message, failure } = outcome else {
                panic!("a refusal fails a step");
            };
            assert_eq!(
                failure,
                super::super::phase::StepFailure::Permanent,
                "{message}"
            );
            assert!(message.starts_with(words), "{message}");
            for (i, s) in steps.iter().enumerate() {
                let expected = if Some(i) == unsupported {
                    StepStatus::UnsupportedResource
                } else {
                    StepStatus::Unknown
                };
                assert_eq!(s.status, expected, "{message}: step {i}");
            }
        }
    }

    #[test]
    fn a_good_plan_is_read_with_its_order() {
        let mut steps = vec![
            config_map("a"),
            crd("apiextensions.k8s.io/v1", "widgets.example.com"),
        ];
        let checked = check_plan(&mut steps).unwrap();
        assert_eq!(checked.order.crds, [1]);
        assert_eq!(checked.order.after_crds, [0]);
        assert_eq!(checked.steps[1].kind, StepKind::CustomResourceDefinition);
        assert_eq!(checked.steps[0].object.manifest["metadata"]["name"], "a");
    }

    #[test]
    fn rbac_steps_olm_wrote_without_a_type_are_read_with_the_steps() {
        let mut steps = vec![step(
            "ServiceAccount",
            "v1",
            "op-sa",
            Some(json!({"metadata": {"name": "op-sa", "creationTimestamp": null}})),
        )];
        let checked = check_plan(&mut steps).unwrap();
        let manifest = &checked.steps[0].object.manifest;
        assert_eq!(manifest["apiVersion"], "v1");
        assert_eq!(manifest["kind"], "ServiceAccount");
    }

    #[test]
    fn custom_resources_of_the_plan_use_the_api_its_crds_will_serve() {
        let mut steps = vec![crd("apiextensions.k8s.io/v1", "widgets.example.com")];
        let checked = check_plan(&mut steps).unwrap();
        let planned = planned_apis(&checked.steps);
        assert_eq!(
            planned,
            [PlannedApi {
                group: "example.com".into(),
                kind: "Widget".into(),
                plural: "widgets".into(),
                scope: Scope::Cluster,
            }]
        );
        let widget = StepObject {
            group: "example.com".into(),
            version: "v1".into(),
            kind: "Widget".into(),
            name: "w".into(),
            manifest: json!({}),
        };
        let (resource, scope) = served_by_plan(&planned, &widget).unwrap();
        assert_eq!(
            (
                resource.plural.as_str(),
                resource.api_version.as_str(),
                scope
            ),
            ("widgets", "example.com/v1", Scope::Cluster)
        );
        let gadget = StepObject {
            kind: "Gadget".into(),
            ..widget
        };
        assert_eq!(served_by_plan(&planned, &gadget), None);
    }

    #[test]
    fn api_server_warnings_are_said_once_in_olms_words() {
        let mut steps = vec![config_map("c")];
        let parsed = check_plan(&mut steps).unwrap().steps.remove(0);
        assert_eq!(applied_with_warnings(&parsed, &[]), None);
        let texts = [
            "deprecated".to_owned(),
            "deprecated".to_owned(),
            "other".to_owned(),
        ];
        let warning = applied_with_warnings(&parsed, &texts).unwrap();
        assert_eq!(
            warning,
            PlanWarning {
                reason: APPLIED_WITH_WARNINGS,
                message: r#"2 warning(s) generated during installation of operator "op.v1" (ConfigMap "c"): deprecated, other"#.into(),
                step: Some(0),
            }
        );
        let report = PassReport {
            steps,
            outcome: PassOutcome::Done,
            warnings: vec![
                warning,
                PlanWarning {
                    reason: CRD_VALIDATION,
                    message: "m".into(),
                    step: Some(0),
                },
            ],
        };
        assert_eq!(report.steps_with_api_warnings(), 1);
    }
}

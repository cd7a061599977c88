//! The InstallPlan object for a resolution, before it exists (docs/install-plans.md §5).
//!
//! Crash safety: a plan carries the label [`RESOLUTION_LABEL`], a hash of what it resolves (the
//! Subscriptions by UID, and for each the bundle, the CSV it replaces and the catalog), and its
//! name is drawn from that hash (`plan::name`). A decision adopts a plan of the namespace with
//! the same label instead of creating one, and a create of a plan the store has not seen yet
//! finds its name taken; so a crash between creating a plan and recording it on the
//! Subscription never yields a second plan for the same resolution, and a plan whose status
//! write was lost is completed instead of being ignored forever (OLM's upstream #2795)
//! (docs/subscription-plans.md).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::steps::{PlannedStep, catalog_source_names, csv_names};
use crate::api::keys::GENERATED_BY_ANNOTATION;
use crate::api::{
    Approval, BundleLookup, InstallPlan, InstallPlanPhase, InstallPlanSpec, InstallPlanStatus,
    Step, StepResource, StepStatus,
};
use crate::olm_hash::fnv1a_hex;

/// Label naming the resolution a plan was made for (olm-rs's own; OLM plans have none).
pub const RESOLUTION_LABEL: &str = "olm-rs/resolution";

/// A Subscription a plan serves (and is owned by).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedSubscription {
    pub name: String,
    pub uid: String,
    /// The bundle the plan installs for it, the CSV it replaces, and its catalog.
    pub bundle: String,
    pub replaces: Option<String>,
    pub catalog: String,
}

/// Everything needed to create (or recognise) one InstallPlan.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanDraft {
    pub namespace: String,
    pub subscriptions: Vec<ServedSubscription>,
    pub approval: Approval,
    /// `spec.generation`: one more than any generation seen in the namespace.
    pub generation: i64,
    pub steps: Vec<PlannedStep>,
    /// Bundles to pull before their steps can be appended (image bundles).
    pub lookups: Vec<BundleLookup>,
}

impl PlanDraft {
    /// The value of [`RESOLUTION_LABEL`] for this plan.
    pub fn resolution_key(&self) -> String {
        let mut parts: Vec<String> = self
            .subscriptions
            .iter()
            .map(|s| {
                format!(
                    "{}|{}|{}|{}",
                    s.uid,
                    s.bundle,
                    s.replaces.as_deref().unwrap_or_default(),
                    s.catalog
                )
            })
            .collect();
        parts.sort();
        fnv1a_hex(&format!("{}\n{}", self.namespace, parts.join("\n")))
    }

    /// The object to create: spec only (status is a separate write).
    pub fn install_plan(&self, name: &str) -> InstallPlan {
        let owners = self
            .subscriptions
            .iter()
            .map(|s| OwnerReference {
                api_version: crate::api::V1ALPHA1.into(),
                kind: "Subscription".into(),
                name: s.name.clone(),
                uid: s.uid.clone(),
                controller: Some(false),
                block_owner_deletion: Some(false),
            })
            .collect();
        let mut plan = InstallPlan::new(
            name,
            InstallPlanSpec {
                source: None,
                source_namespace: None,
                cluster_service_version_names: self.csv_names(),
                approval: self.approval.clone(),
                approved: self.approval != Approval::Manual,
                generation: Some(self.generation),
            },
        );
        plan.metadata = ObjectMeta {
            name: Some(name.into()),
            namespace: Some(self.namespace.clone()),
            owner_references: Some(owners),
            labels: Some(BTreeMap::from([(
                RESOLUTION_LABEL.to_owned(),
                self.resolution_key(),
            )])),
            ..ObjectMeta::default()
        };
        plan
    }

    /// `spec.clusterServiceVersionNames`: the CSV steps, then the bundles still to be pulled.
    fn csv_names(&self) -> Vec<String> {
        let mut names = csv_names(&self.steps);
        names.extend(self.lookups.iter().map(|l| l.identifier.clone()));
        names
    }

    /// [`Self::initial_status`] of the plan named `plan`: dependency Subscriptions it creates
    /// carry `olm.generated-by: <plan>` (docs/install-plans.md §5.3).
    pub fn initial_status_named(&self, plan: &str) -> InstallPlanStatus {
        let mut status = self.initial_status();
        for step in status.plan.iter_mut().flatten() {
            if step.resource.kind != "Subscription" {
                continue;
            }
            let Some(text) = &step.resource.manifest else {
                continue;
            };
            if let Ok(mut manifest) = serde_json::from_str::<serde_json::Value>(text) {
                manifest["metadata"]["annotations"][GENERATED_BY_ANNOTATION] = plan.into();
                step.resource.manifest = Some(manifest.to_string());
            }
        }
        status
    }

    /// The first status of the plan: `RequiresApproval` (Manual) or `Installing` (Automatic),
    /// every step `Unknown`, every bundle lookup pending.
    pub fn initial_status(&self) -> InstallPlanStatus {
        let mut catalog_sources = catalog_source_names(&self.steps);
        for lookup in &self.lookups {
            let name = lookup.catalog_source_ref.name.clone().unwrap_or_default();
            if !catalog_sources.contains(&name) {
                catalog_sources.push(name);
            }
        }
        InstallPlanStatus {
            phase: if self.approval == Approval::Manual {
                InstallPlanPhase::RequiresApproval
            } else {
                InstallPlanPhase::Installing
            },
            catalog_sources,
            plan: Some(self.steps.iter().map(wire_step).collect()),
            bundle_lookups: Some(self.lookups.clone()).filter(|l| !l.is_empty()),
            ..InstallPlanStatus::default()
        }
    }
}

/// A planned step as `status.plan` holds it.
pub fn wire_step(step: &PlannedStep) -> Step {
    Step {
        resolving: step.resolving.clone(),
        resource: StepResource {
            source_name: step.catalog.name.clone(),
            source_namespace: step.catalog.namespace.clone(),
            group: step.object.group.clone(),
            version: step.object.version.clone(),
            kind: step.object.kind.clone(),
            name: step.object.name.clone(),
            manifest: Some(step.object.manifest.to_string()),
        },
        optional: None,
        status: StepStatus::Unknown,
    }
}

/// `spec.generation` for the next plan: one more than every Subscription's
/// `installPlanGeneration` and every plan's `spec.generation` (docs/install-plans.md §5.2).
pub fn next_generation(
    subscription_generations: impl Iterator<Item = i64>,
    plan_generations: impl Iterator<Item = i64>,
) -> i64 {
    subscription_generations
        .chain(plan_generations)
        .max()
        .unwrap_or(0)
        + 1
}

/// A reference to a plan, as a Subscription records it.
pub fn plan_reference(plan: &InstallPlan) -> ObjectReference {
    ObjectReference {
        api_version: Some(crate::api::V1ALPHA1.into()),
        kind: Some("InstallPlan".into()),
        name: plan.metadata.name.clone(),
        namespace: plan.metadata.namespace.clone(),
        uid: plan.metadata.uid.clone(),
        resource_version: plan.metadata.resource_version.clone(),
        field_path: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::CatalogRef;
    use crate::plan::{BundleContent, bundle_steps};
    use serde_json::json;

    fn draft(approval: Approval) -> PlanDraft {
        let bundle = BundleContent {
            name: "op.v1".into(),
            manifests: vec![
                json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
                                   "metadata": {"name": "op.v1"}, "spec": {}}),
            ],
            properties: vec![],
            catalog: CatalogRef::new("olm", "cat"),
        };
        PlanDraft {
            namespace: "ns".into(),
            subscriptions: vec![ServedSubscription {
                name: "op".into(),
                uid: "uid-1".into(),
                bundle: "op.v1".into(),
                replaces: None,
                catalog: "olm/cat".into(),
            }],
            approval,
            generation: 3,
            steps: bundle_steps(&bundle, "ns", None).unwrap(),
            lookups: vec![],
        }
    }

    #[test]
    fn manual_plans_wait_for_approval_and_are_owned_by_their_subscriptions() {
        let d = draft(Approval::Manual);
        let plan = d.install_plan("install-abcde");
        assert!(!plan.spec.approved);
        assert_eq!(plan.spec.cluster_service_version_names, ["op.v1"]);
        assert_eq!(plan.spec.generation, Some(3));
        let owner = &plan.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
            ("Subscription", "uid-1", Some(false))
        );
        assert_eq!(
            plan.metadata.labels.as_ref().unwrap()[RESOLUTION_LABEL],
            d.resolution_key()
        );
        let status = d.initial_status();
        assert_eq!(status.phase, InstallPlanPhase::RequiresApproval);
        assert_eq!(status.catalog_sources, ["cat"]);
        assert_eq!(status.plan.as_ref().unwrap()[0].status, StepStatus::Unknown);
        assert_eq!(
            draft(Approval::Automatic).initial_status().phase,
            InstallPlanPhase::Installing
        );
    }

    #[test]
    fn the_resolution_key_changes_with_what_is_resolved() {
        let a = draft(Approval::Automatic);
        let mut b = a.clone();
        assert_eq!(
            a.resolution_key(),
            b.resolution_key(),
            "approval and generation are not part of it"
        );
        b.generation = 9;
        assert_eq!(a.resolution_key(), b.resolution_key());
        b.subscriptions[0].bundle = "op.v2".into();
        assert_ne!(a.resolution_key(), b.resolution_key());
        assert_eq!(next_generation([1, 4].into_iter(), [2].into_iter()), 5);
        assert_eq!(next_generation(std::iter::empty(), std::iter::empty()), 1);
    }
}

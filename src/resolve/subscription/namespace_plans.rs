//! The namespace's InstallPlans as one Subscription decision sees them
//! (docs/subscription-plans.md, "One sync"): the plan a Subscription adopts instead of making
//! one, the free name of a new plan, the plans its status references, and the old plans the
//! decision deletes (`plan::gc`). Pure; part of `effects`.

use crate::api::{InstallPlan, InstallPlanPhase, Subscription};
use crate::k8s::effects::Effects;
use crate::k8s::owned_set::OwnedSet;
use crate::k8s::write::ObjectKey;
use crate::plan::{PlanDraft, PlanForGc, RESOLUTION_LABEL, install_plan_name, plans_to_delete};

/// A plan of the Subscription that already installed `bundle`: the CSV exists and the plan,
/// owned by the Subscription, lists it. A co-upgrade's member whose status write was refused
/// (409) while the plan ran finds it so, instead of planning its own half again
/// (docs/subscription-plans.md, "Co-upgrades"). `installed`: whether the CSV exists.
pub(super) fn installed_by<'a>(
    plans: &'a [InstallPlan],
    installed: bool,
    sub: &Subscription,
    bundle: &str,
) -> Option<&'a InstallPlan> {
    let uid = sub.metadata.uid.as_deref()?;
    if !installed {
        return None;
    }
    plans.iter().find(|p| {
        p.metadata.deletion_timestamp.is_none()
            && p.spec
                .cluster_service_version_names
                .iter()
                .any(|c| c == bundle)
            && p.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.uid == uid)
    })
}

/// A plan made for the same resolution and approval that can serve the Subscription (not the
/// one being superseded, not one being deleted). A completed plan serves only while the CSV it
/// installed is there (`installed`): once that CSV is deleted, its work is undone and a new plan
/// installs it again (docs/install-plans.md §1.1).
pub(super) fn adoptable<'a>(
    plans: &'a [InstallPlan],
    draft: &PlanDraft,
    superseded: Option<&str>,
    installed: bool,
) -> Option<&'a InstallPlan> {
    let key = draft.resolution_key();
    plans.iter().find(|p| {
        let completed = p
            .status
            .as_ref()
            .is_some_and(|s| s.phase == InstallPlanPhase::Complete);
        p.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(RESOLUTION_LABEL))
            == Some(&key)
            && p.spec.approval == draft.approval
            && p.metadata.name.as_deref() != superseded
            && p.metadata.deletion_timestamp.is_none()
            && (installed || !completed)
    })
}

/// The plan's first status was never written (a crash, or a write that failed, between the
/// create and the status write): neither steps nor bundle lookups. The InstallPlan controller
/// leaves such a plan alone.
pub(super) fn status_lost(plan: &InstallPlan) -> bool {
    plan.status
        .as_ref()
        .is_none_or(|s| s.plan.is_none() && s.bundle_lookups.is_none())
}

/// The first name for `key` that no plan of the namespace holds and no deleted plan held.
pub(super) fn free_name(key: &str, plans: &[InstallPlan], gone: &[String]) -> String {
    let taken = |name: &str| {
        plans
            .iter()
            .any(|p| p.metadata.name.as_deref() == Some(name))
            || gone.iter().any(|g| g == name)
    };
    (0..u32::MAX)
        .map(|salt| install_plan_name(key, salt))
        .find(|name| !taken(name))
        // Unreachable: fewer names are taken than salts tried.
        .unwrap_or_else(|| install_plan_name(key, 0))
}

/// Deletes of old plans: every plan counts except the ones a decided status references, the
/// ones just created or adopted, and the superseded ones (already being deleted); the plans
/// `created` in this decision count too, kept. The plans
/// are an owned set: the sweep's choice (`plan::gc`) says which are kept, the others found in
/// the namespace are deleted, each only as observed (a plan changed since — approved, say — is
/// decided again at the next sync).
pub(super) fn garbage(plans: &[InstallPlan], kept: &[String], created: &[String]) -> Effects {
    let live: Vec<&InstallPlan> = plans
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    let mut view: Vec<PlanForGc> = live
        .iter()
        .map(|p| {
            let name = p.metadata.name.clone().unwrap_or_default();
            PlanForGc {
                referenced: kept.contains(&name),
                installing: p
                    .status
                    .as_ref()
                    .is_some_and(|s| s.phase == InstallPlanPhase::Installing),
                generation: p.spec.generation.unwrap_or(0),
                created: p.metadata.creation_timestamp.as_ref().map(|t| t.0),
                // Only a plan this controller made (it carries the resolution it was made
                // for); another's plan without a status is left as it is.
                status_lost: status_lost(p)
                    && p.metadata
                        .labels
                        .as_ref()
                        .is_some_and(|l| l.contains_key(RESOLUTION_LABEL)),
                name,
            }
        })
        .collect();
    view.extend(created.iter().map(|name| PlanForGc {
        name: name.clone(),
        generation: 0,
        created: None,
        referenced: true,
        installing: false,
        status_lost: false,
    }));
    let swept = plans_to_delete(&view);
    let mut owned = OwnedSet::new();
    for plan in &live {
        if !swept
            .iter()
            .any(|name| plan.metadata.name.as_ref() == Some(name))
        {
            owned.keep(ObjectKey::of(*plan));
        }
    }
    owned.found(live.iter().copied());
    let mut effects = Effects::default();
    owned.into_effects(&mut effects);
    effects
}

pub(super) fn referenced_plans(sub: &Subscription) -> Vec<String> {
    let Some(status) = &sub.status else {
        return Vec::new();
    };
    let by_ref = status
        .install_plan_ref
        .as_ref()
        .and_then(|r| r.name.clone());
    let by_name = status.install_plan.as_ref().map(|r| r.name.clone());
    by_ref.into_iter().chain(by_name).collect()
}

//! A plan its Subscriptions have moved past (docs/install-plans.md §7.6).
//!
//! A Subscription counts its CSV installed as soon as the CSV exists, as OLM's does, and may
//! then make the next plan while its own plan's status lags behind what the plan wrote (a
//! status write lost or not yet seen). Once the next plan has replaced and deleted that CSV,
//! another pass of the older plan would create it again and apply its older CRDs over the
//! newer ones. So a plan every owning Subscription has moved past writes nothing more: it
//! ends `Complete` with a message naming the plan that took over.

use crate::api::{InstallPlan, Subscription};

/// The Subscription that moved past a plan, and the plan it references now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Superseded {
    pub subscription: String,
    pub by: String,
}

impl Superseded {
    /// The plan's message and its `Installed` condition's.
    pub fn message(&self) -> String {
        format!(
            "superseded by InstallPlan {} of Subscription {}: its remaining steps are not written",
            self.by, self.subscription
        )
    }
}

/// Whether every Subscription that owns `plan` references a later InstallPlan now: another
/// plan, of a higher `spec.generation` (the namespace's plan counter). A Subscription that
/// still references an earlier plan has not yet recorded `plan`, which it has just made.
/// `subscriptions` are those of the plan's namespace. `None` when the plan has no owning
/// Subscription (made by hand) or no generation, when an owner is not found (deleted: the plan
/// goes with it), or when one references the plan, an earlier one or none.
pub fn superseded_by<'s>(
    plan: &InstallPlan,
    subscriptions: impl IntoIterator<Item = &'s Subscription> + Clone,
) -> Option<Superseded> {
    let name = plan.metadata.name.as_deref()?;
    let generation = plan.spec.generation?;
    let owners: Vec<_> = plan
        .metadata
        .owner_references
        .iter()
        .flatten()
        .filter(|o| o.kind == "Subscription")
        .collect();
    let mut first = None;
    for owner in owners {
        let subscription = subscriptions.clone().into_iter().find(|s| {
            s.metadata.name.as_deref() == Some(owner.name.as_str())
                && s.metadata.uid.as_deref().is_none_or(|uid| uid == owner.uid)
        })?;
        let status = subscription.status.as_ref()?;
        let referenced = status.install_plan_ref.as_ref()?.name.as_deref()?;
        if referenced == name || status.install_plan_generation? <= generation {
            return None;
        }
        first.get_or_insert_with(|| Superseded {
            subscription: owner.name.clone(),
            by: referenced.to_owned(),
        });
    }
    first
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn plan(owners: &[(&str, &str)]) -> InstallPlan {
        let owners: Vec<_> = owners
            .iter()
            .map(|(name, uid)| {
                json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
                       "name": name, "uid": uid})
            })
            .collect();
        serde_json::from_value(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
            "metadata": {"name": "install-old", "namespace": "ns", "ownerReferences": owners},
            "spec": {"approval": "Automatic", "approved": true, "clusterServiceVersionNames": [],
                     "generation": 2},
        }))
        .unwrap()
    }

    /// A Subscription referencing plan `references`: (name, generation).
    fn subscription(name: &str, uid: &str, references: Option<(&str, i64)>) -> Subscription {
        let reference = references.map(|(plan, _)| json!({"name": plan, "namespace": "ns"}));
        let generation = references.map(|(_, generation)| generation);
        serde_json::from_value(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
            "metadata": {"name": name, "namespace": "ns", "uid": uid},
            "spec": {"name": "demo", "source": "catalog", "sourceNamespace": "olm"},
            "status": {"installPlanRef": reference, "installPlanGeneration": generation,
                       "lastUpdated": "2026-01-01T00:00:00Z"},
        }))
        .unwrap()
    }

    #[test]
    fn a_plan_is_superseded_only_when_every_owner_moved_past_it() {
        let moved = |name, uid| subscription(name, uid, Some(("install-new", 3)));
        let stays = |name, uid| subscription(name, uid, Some(("install-old", 2)));
        let by = Some(Superseded {
            subscription: "demo".into(),
            by: "install-new".into(),
        });
        // (what, the plan's owners, the namespace's Subscriptions, the answer)
        let cases: [(&str, InstallPlan, Vec<Subscription>, Option<Superseded>); 8] = [
            (
                "its Subscription references the next plan",
                plan(&[("demo", "u1")]),
                vec![moved("demo", "u1")],
                by.clone(),
            ),
            (
                // The Subscription made the plan and has not recorded it yet.
                "its Subscription references the plan before it",
                plan(&[("demo", "u1")]),
                vec![subscription("demo", "u1", Some(("install-older", 1)))],
                None,
            ),
            (
                "its Subscription still references it",
                plan(&[("demo", "u1")]),
                vec![stays("demo", "u1")],
                None,
            ),
            (
                "a co-upgrade: one member moved on, the other did not",
                plan(&[("demo", "u1"), ("other", "u2")]),
                vec![moved("demo", "u1"), stays("other", "u2")],
                None,
            ),
            (
                "a co-upgrade: every member moved on",
                plan(&[("demo", "u1"), ("other", "u2")]),
                vec![moved("demo", "u1"), moved("other", "u2")],
                by.clone(),
            ),
            (
                "a Subscription of the same name made again is not the owner",
                plan(&[("demo", "u1")]),
                vec![moved("demo", "u9")],
                None,
            ),
            (
                "a Subscription referencing no plan yet",
                plan(&[("demo", "u1")]),
                vec![subscription("demo", "u1", None)],
                None,
            ),
            (
                "a plan made by hand has no owner to move past it",
                plan(&[]),
                vec![moved("demo", "u1")],
                None,
            ),
        ];
        for (what, plan, subscriptions, want) in cases {
            assert_eq!(superseded_by(&plan, &subscriptions), want, "{what}");
        }
    }
}

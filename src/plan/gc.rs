//! Garbage collection of old InstallPlans (docs/install-plans.md §11): at most 5 kept per
//! namespace, at most 5 deleted per sweep, oldest generation first, oldest plan first within a
//! generation.
//!
//! Two deliberate differences from OLM: every plan is considered (OLM looks at the first 10 its
//! cache returns, in no order), and a plan still referenced by a Subscription or still
//! installing is never deleted — OLM may delete the plan a Subscription points at, which then
//! reports `InstallPlanMissing` for no fault of the user.

use jiff::Timestamp;

pub const MAX_KEPT: usize = 5;
pub const MAX_DELETED_PER_SWEEP: usize = 5;

/// What GC needs to know about one plan.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanForGc {
    pub name: String,
    /// `spec.generation` (0 when unset).
    pub generation: i64,
    pub created: Option<Timestamp>,
    /// Some Subscription's `status.installPlanRef` names it.
    pub referenced: bool,
    /// Phase `Installing`: steps are being applied.
    pub installing: bool,
    /// olm-rs's Subscription controller made it and its first status was never written
    /// (neither steps nor bundle lookups); no decision of this sync adopts it when it is not
    /// `referenced` (which covers the plans a decision keeps).
    pub status_lost: bool,
}

/// Names of the plans to delete now: first every plan whose status was lost and that nothing
/// keeps, whatever their number — nothing ever ran from it (it has no steps), and the
/// Subscriptions have moved on, so no decision will adopt it (docs/install-plans.md §11);
/// then the oldest beyond [`MAX_KEPT`]. At most [`MAX_DELETED_PER_SWEEP`] in all.
pub fn plans_to_delete(plans: &[PlanForGc]) -> Vec<String> {
    let unused = |p: &&PlanForGc| !p.referenced && !p.installing;
    let mut chosen: Vec<&PlanForGc> = plans
        .iter()
        .filter(unused)
        .filter(|p| p.status_lost)
        .collect();
    chosen.sort_by(|a, b| (a.created, &a.name).cmp(&(b.created, &b.name)));
    let left = plans.len() - chosen.len();
    let excess = left.saturating_sub(MAX_KEPT);
    let mut candidates: Vec<&PlanForGc> = plans
        .iter()
        .filter(unused)
        .filter(|p| !p.status_lost)
        .collect();
    candidates.sort_by(|a, b| {
        (a.generation, a.created, &a.name).cmp(&(b.generation, b.created, &b.name))
    });
    chosen.extend(candidates.into_iter().take(excess));
    chosen
        .into_iter()
        .take(MAX_DELETED_PER_SWEEP)
        .map(|p| p.name.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(name: &str, generation: i64, second: i64, referenced: bool) -> PlanForGc {
        PlanForGc {
            name: name.into(),
            generation,
            created: Timestamp::from_second(second).ok(),
            referenced,
            installing: false,
            status_lost: false,
        }
    }

    #[test]
    fn keeps_five_and_deletes_oldest_generations_first() {
        let plans: Vec<PlanForGc> = (1..=8)
            .map(|g| plan(&format!("install-{g}"), 9 - g, g, false))
            .collect();
        // generations 8..1 → delete generations 1, 2, 3 (plans install-8, install-7, install-6)
        assert_eq!(
            plans_to_delete(&plans),
            ["install-8", "install-7", "install-6"]
        );
        assert!(plans_to_delete(&plans[..5]).is_empty());
    }

    #[test]
    fn never_deletes_referenced_or_installing_plans_and_caps_each_sweep() {
        let mut plans: Vec<PlanForGc> = (0..14)
            .map(|i| plan(&format!("p{i:02}"), i, i, false))
            .collect();
        plans[0].referenced = true;
        plans[1].installing = true;
        assert_eq!(plans_to_delete(&plans), ["p02", "p03", "p04", "p05", "p06"]);
        let all_referenced: Vec<PlanForGc> =
            (0..7).map(|i| plan(&format!("r{i}"), i, i, true)).collect();
        assert!(plans_to_delete(&all_referenced).is_empty());
    }

    #[test]
    fn a_plan_whose_status_was_lost_and_that_nothing_keeps_is_deleted_whatever_the_count() {
        // The defect: under faults a plan's first status write was lost, the Subscriptions
        // then planned differently, and the status-less plan stayed for good — nothing runs
        // it, and with fewer than 6 plans nothing deleted it (tests/integration/
        // subscription_faults.rs, docs/reliability.md §3.6).
        let mut plans = vec![
            plan("done", 1, 1, true),
            plan("orphan", 2, 2, false),
            plan("adopted", 2, 3, true),
        ];
        plans[1].status_lost = true;
        plans[2].status_lost = true;
        assert_eq!(plans_to_delete(&plans), ["orphan"]);
        // Past 5 as well, and within the sweep's cap.
        let mut many: Vec<PlanForGc> = (0..8)
            .map(|i| plan(&format!("p{i}"), i, i, false))
            .collect();
        many[7].status_lost = true;
        assert_eq!(plans_to_delete(&many), ["p7", "p0", "p1"]);
    }

    #[test]
    fn same_generation_deletes_oldest_then_by_name() {
        let plans = vec![
            plan("b", 1, 10, false),
            plan("a", 1, 10, false),
            plan("c", 1, 5, false),
            plan("d", 2, 1, false),
            plan("e", 2, 1, false),
            plan("f", 2, 1, false),
            plan("g", 3, 1, false),
        ];
        assert_eq!(plans_to_delete(&plans), ["c", "a"]);
    }
}

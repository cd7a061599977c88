use super::*;

// ---- Replacement ------------------------------------------------------------------------------

#[test]
fn the_upgrade_sequence_hands_over_and_deletes_the_old_csv() {
    let old = in_phase(csv("a.v1"), P::Succeeded, R::InstallSucceeded, t(0));
    let new = in_phase(
        replacing(csv("a.v2"), "a.v1"),
        P::Pending,
        R::RequirementsUnknown,
        t(0),
    );
    let seen = ready(&[&old, &new]);
    assert_outcome(
        &sync(&old, &seen, t(10)),
        P::Replacing,
        R::BeingReplaced,
        "being replaced by csv: a.v2",
    );

    let old = in_phase(csv("a.v1"), P::Replacing, R::BeingReplaced, t(10));
    let seen = ready(&[&old, &new]);
    assert_outcome(
        &sync(&new, &seen, t(20)),
        P::InstallReady,
        R::AllRequirementsMet,
        "",
    );
    let s = sync(&old, &seen, t(20));
    assert!(s.status.is_none() && s.actions.contains(&Action::RequeueCsv("a.v2".into())));

    let new = in_phase(
        replacing(csv("a.v2"), "a.v1"),
        P::Succeeded,
        R::InstallSucceeded,
        t(30),
    );
    let seen = ready(&[&old, &new]);
    assert_outcome(
        &sync(&old, &seen, t(40)),
        P::Deleting,
        R::Replaced,
        "has been replaced by a newer ClusterServiceVersion that has successfully installed.",
    );
    let deleting = in_phase(csv("a.v1"), P::Deleting, R::Replaced, t(40));
    assert_eq!(
        sync(&deleting, &seen, t(41)).actions,
        vec![Action::DeleteCsv]
    );
}

#[test]
fn a_chain_collapses_to_its_head() {
    let a = in_phase(csv("a.v1"), P::Replacing, R::BeingReplaced, t(0));
    let b = in_phase(
        replacing(csv("a.v2"), "a.v1"),
        P::Replacing,
        R::BeingReplaced,
        t(0),
    );
    let c = in_phase(
        replacing(csv("a.v3"), "a.v2"),
        P::Installing,
        R::InstallSucceeded,
        t(0),
    );
    let seen = ready(&[&a, &b, &c]);
    // B is not the oldest link: it waits.
    let s = sync(&b, &seen, t(10));
    assert!(s.status.is_none() && s.actions.is_empty());
    // A's successor B already succeeded once (it is Replacing), so A goes.
    assert_outcome(&sync(&a, &seen, t(10)), P::Deleting, R::Replaced, "");
}

#[test]
fn fail_forward_replaces_a_failed_csv_and_waits_for_the_newest() {
    let old = in_phase(csv("a.v1"), P::Failed, R::ComponentUnhealthy, t(0));
    let new = in_phase(
        replacing(csv("a.v2"), "a.v1"),
        P::Pending,
        R::RequirementsUnknown,
        t(0),
    );
    let mut seen = ready(&[&old, &new]);
    assert_ne!(
        sync(&old, &seen, t(10)).phase(),
        Some(P::Replacing),
        "Default strategy does not"
    );
    let mut group = (*seen.operator_groups[0]).clone();
    group.spec.upgrade_strategy = Some(UpgradeStrategy::TechPreviewUnsafeFailForward);
    seen.operator_groups = vec![Arc::new(group.clone())];
    seen.all_operator_groups = vec![Arc::new(group)];
    assert_outcome(
        &sync(&old, &seen, t(10)),
        P::Replacing,
        R::BeingReplaced,
        "Fail Forward is enabled, allowing Failed csv to be replaced by csv: a.v2",
    );
}

#[test]
fn a_replacing_csv_whose_replacement_vanished_rechecks_itself() {
    let old = in_phase(csv("a.v1"), P::Replacing, R::BeingReplaced, t(0));
    assert_outcome(
        &sync(&old, &ready(&[&old]), t(10)),
        P::Pending,
        R::RequirementsUnknown,
        "marked as replacement, but no replacement CSV found in cluster",
    );
}

// ---- Status bookkeeping (docs/csv-phases.md §4) -----------------------------------------------------------

#[test]
fn unchanged_outcomes_write_nothing_and_emit_nothing() {
    let c = in_phase(csv("a.v1"), P::Pending, R::RequirementsUnknown, t(0));
    let mut seen = ready(&[&c]);
    seen.crds.clear();
    let first = sync(&c, &seen, t(10));
    let mut again = c.clone();
    again.status = first.status.clone();
    let second = sync(&again, &seen, t(20));
    assert!(
        second.status.is_none(),
        "set-if-changed: {:?}",
        second.status
    );
    assert!(second.events.is_empty());
    // A fresh requirementStatus is still written when it changes (docs/csv-phases.md §11 item 2).
    seen.service_accounts.clear();
    let third = sync(&again, &seen, t(30));
    let status = third.status.expect("message and requirementStatus changed");
    assert_eq!(
        status.last_transition_time,
        Some(Time(t(0))),
        "same phase: transition kept"
    );
    assert_eq!(status.last_update_time, Some(Time(t(30))));
}

//! `Replacing`: hand over to the newer CSV and get out of the way (docs/csv-phases.md §3.1, §9).

use crate::api::{CsvPhase, CsvReason, UpgradeStrategy};

use super::super::identity::name;
use super::super::outcome::{Action, Decision, Requeue};
use super::super::replacement::{newest_in_chain, replaced_csv, replacement_of};
use super::{Ctx, POLL_INTERVAL};

pub(super) fn replacing(ctx: &Ctx<'_>, d: &mut Decision) {
    // Step 1: only the oldest member of a chain decides; deleting an inner link first would
    // break the chain.
    if let Some(older) = replaced_csv(ctx.csv, ctx.seen) {
        d.note(format!(
            "not the oldest in the replacement chain ({} still exists)",
            name(older)
        ));
        return;
    }
    // Step 2.
    let Some(mut next) = replacement_of(ctx.csv, ctx.seen) else {
        // OLM retries "marked as replacement, but no replacement CSV found in cluster" forever
        // (docs/csv-phases.md §11 item 4). The replacement is gone, so this CSV is the installed one again:
        // re-check it from Pending (a reinstall re-applies its own Deployments).
        d.set(
            CsvPhase::Pending,
            CsvReason::RequirementsUnknown,
            "marked as replacement, but no replacement CSV found in cluster; checking requirements again",
        );
        return;
    };
    let fail_forward = ctx.group.spec.effective_upgrade_strategy()
        == UpgradeStrategy::TechPreviewUnsafeFailForward;
    if fail_forward {
        next = newest_in_chain(next, ctx.seen);
    }
    let next_phase = next
        .status
        .as_ref()
        .map(|s| s.phase())
        .unwrap_or(CsvPhase::None);
    // Step 3. A successor that is itself Replacing or Deleting has succeeded before (only a
    // Succeeded CSV becomes Replacing without fail-forward), so an A←B←C chain collapses to
    // its head even when B moved on before A looked.
    let succeeded = next_phase == CsvPhase::Succeeded
        || (!fail_forward && matches!(next_phase, CsvPhase::Replacing | CsvPhase::Deleting));
    if succeeded {
        d.set(
            CsvPhase::Deleting,
            CsvReason::Replaced,
            "has been replaced by a newer ClusterServiceVersion that has successfully installed.",
        );
        return;
    }
    // Step 4.
    d.act(Action::RequeueCsv(name(next).to_owned()))
        .requeue(Requeue::After(POLL_INTERVAL));
}

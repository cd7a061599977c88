//! `Succeeded` and `Failed`: keep checking a running operator (docs/csv-phases.md §3.1).

use std::time::Duration;

use crate::api::{CsvPhase, CsvReason, UpgradeStrategy};

use super::super::health::drifted;
use super::super::identity::name;
use super::super::outcome::{Action, Decision, Requeue};
use super::super::replacement::replacement_of;
use super::certs::{failed_checks, succeeded_checks};
use super::install::stop_without_installer;
use super::pending::{fail_invalid_webhooks, fail_owner_conflict, repair_permissions};
use super::{
    Components, Ctx, check_components, requirements_or_fail, retry_unknown_requirements,
    with_summary,
};

/// How often a healthy operator is re-checked without any event.
const SUCCEEDED_RECHECK: Duration = Duration::from_secs(5 * 60);

pub(super) fn succeeded(ctx: &Ctx<'_>, d: &mut Decision) {
    // Step 1.
    if let Some(next) = replacement_of(ctx.csv, ctx.seen) {
        d.set(
            CsvPhase::Replacing,
            CsvReason::BeingReplaced,
            format!("being replaced by csv: {}", name(next)),
        );
        return;
    }
    // Step 2.
    if stop_without_installer(ctx, d) {
        return;
    }
    // Webhook definitions edited into invalid ones: nothing below may act on them.
    if fail_invalid_webhooks(ctx, d) {
        return;
    }
    // Steps 3-4: APIService resources, certificate rotation.
    if succeeded_checks(ctx, d) {
        return;
    }
    // Step 5.
    let Some(check) = requirements_or_fail(ctx, d) else {
        return;
    };
    if !check.met {
        if retry_unknown_requirements(&check, d) {
            return;
        }
        if repair_permissions(ctx, &check, d) {
            // Put back what was deleted first; the next sync re-checks.
            return;
        }
        d.set_requirements(check.statuses.clone());
        d.set(
            CsvPhase::Failed,
            CsvReason::RequirementsNotMet,
            with_summary("requirements no longer met", &check),
        );
        return;
    }
    d.set_requirements(check.statuses);
    // Steps 6-7.
    let checked = check_components(ctx, d, CsvPhase::Failed, CsvReason::ComponentUnhealthy);
    if let Components::Healthy(desired) = checked {
        // docs/csv-phases.md §11 item 6: put back hand-edited or scaled Deployments.
        let drift = drifted(&desired, &ctx.seen.deployments);
        if !drift.is_empty() {
            let what: Vec<String> = drift
                .iter()
                .map(|(want, path)| format!("{} ({path})", want.name))
                .collect();
            d.event(crate::api::event::ObjectEvent::normal(
                "DeploymentDriftReverted",
                format!("re-applying drifted deployments: {}", what.join(", ")),
            ))
            .act(Action::ReapplyDeployments(
                drift.into_iter().map(|(want, _)| want.clone()).collect(),
            ));
        }
        d.requeue(Requeue::After(SUCCEEDED_RECHECK));
    }
    // Step 8 (per-API ClusterRoles) is the OperatorGroup controller's.
}

pub(super) fn failed(ctx: &Ctx<'_>, d: &mut Decision) {
    // Step 1.
    let fail_forward = ctx.group.spec.effective_upgrade_strategy()
        == UpgradeStrategy::TechPreviewUnsafeFailForward;
    if fail_forward && let Some(next) = replacement_of(ctx.csv, ctx.seen) {
        d.set(
            CsvPhase::Replacing,
            CsvReason::BeingReplaced,
            format!(
                "Fail Forward is enabled, allowing Failed csv to be replaced by csv: {}",
                name(next)
            ),
        );
        return;
    }
    // Step 2.
    if stop_without_installer(ctx, d) {
        return;
    }
    // Steps 3-5: the gate passed this time, so the group problem is gone.
    let recovered = match d.reason() {
        Some(
            CsvReason::NoTargetNamespaces
            | CsvReason::NoOperatorGroup
            | CsvReason::TooManyOperatorGroups
            | CsvReason::UnsupportedOperatorGroup,
        ) => Some("InstallModes now support target namespaces"),
        Some(CsvReason::InterOperatorGroupOwnerConflict) => {
            Some("OperatorGroup no longer intersecting with conflicting owner")
        }
        Some(CsvReason::CannotModifyStaticOperatorGroupProvidedApis) => {
            Some("static OperatorGroup and intersecting groups now support providedAPIs")
        }
        _ => None,
    };
    if let Some(message) = recovered {
        d.set(CsvPhase::Pending, CsvReason::RequirementsUnknown, message);
        return;
    }
    // A CSV that failed a check of Pending stays Failed while that check still fails: the
    // steps below would send it back to Pending (certificates of its webhooks "due",
    // components "missing") only for Pending to fail it again, on every sync. Invalid webhook
    // definitions fail the CSV whatever its reason (only a change of the CSV can fix them);
    // an ownership conflict is looked at again only for a CSV that failed on one, so an
    // installed operator does not change reason when a conflicting CSV appears later.
    if fail_invalid_webhooks(ctx, d) {
        return;
    }
    if d.reason() == Some(&CsvReason::OwnerConflict) && fail_owner_conflict(ctx, d) {
        return;
    }
    // Step 6. An invalid strategy stays Failed (OLM bounces it through Pending and back).
    let Some(check) = requirements_or_fail(ctx, d) else {
        return;
    };
    if !check.met {
        if retry_unknown_requirements(&check, d) {
            return;
        }
        repair_permissions(ctx, &check, d);
        d.set_requirements(check.statuses.clone());
        d.set(
            CsvPhase::Pending,
            CsvReason::RequirementsNotMet,
            with_summary("requirements not met", &check),
        );
        return;
    }
    d.set_requirements(check.statuses);
    // Steps 7-8: APIService resources, certificate rotation.
    if failed_checks(ctx, d) {
        return;
    }
    // Steps 9-10.
    check_components(ctx, d, CsvPhase::Pending, CsvReason::NeedsReinstall);
}

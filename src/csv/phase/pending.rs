//! `Pending`: check requirements, wait for the CSV being replaced (docs/csv-phases.md §3.1 Pending).

use std::time::Duration;

use crate::api::{CsvPhase, CsvReason};

use super::super::identity::name;
use super::super::operator_condition::upgradeable;
use super::super::outcome::{Action, Decision, Requeue};
use super::super::ownership::{api_service_owner_conflict, crd_owner_conflict, validate_webhooks};
use super::super::permission_objects::{may_repair_permissions, permissions_to_repair};
use super::super::replacement::replaced_csv;
use super::super::requirements::RequirementCheck;
use super::{Ctx, POLL_INTERVAL, requirements_or_fail, with_summary};

pub(super) fn pending(ctx: &Ctx<'_>, d: &mut Decision) {
    let replaced = replaced_csv(ctx.csv, ctx.seen);
    // Step 1.
    if let Some(prev) = replaced
        && let Err(detail) = upgradeable(ctx.seen.operator_condition(name(prev)))
    {
        d.set(
            CsvPhase::Pending,
            CsvReason::OperatorConditionNotUpgradeable,
            format!("operator is not upgradeable: {detail}"),
        )
        .requeue(Requeue::After(POLL_INTERVAL));
        return;
    }
    // Step 2.
    let Some(check) = requirements_or_fail(ctx, d) else {
        return;
    };
    d.set_requirements(check.statuses.clone());
    // Step 3.
    if let Some(prev) = replaced
        && prev.status.as_ref().map(|s| s.phase()) == Some(CsvPhase::Succeeded)
    {
        d.act(Action::RequeueCsv(name(prev).to_owned()));
    }
    // Step 4.
    if !check.met {
        let repairing = repair_permissions(ctx, &check, d);
        d.set(
            CsvPhase::Pending,
            CsvReason::RequirementsNotMet,
            with_summary("one or more requirements couldn't be found", &check),
        );
        if !repairing {
            d.requeue(Requeue::Backoff("requirements not met".to_owned()));
        }
        return;
    }
    // Step 5.
    if fail_invalid_webhooks(ctx, d) {
        return;
    }
    // Steps 6-7.
    if fail_owner_conflict(ctx, d) {
        return;
    }
    // Step 8.
    if let Some(prev) = replaced {
        let phase = prev
            .status
            .as_ref()
            .map(|s| s.phase())
            .unwrap_or(CsvPhase::None);
        if phase != CsvPhase::Replacing {
            d.note(format!(
                "waiting for {} (phase {:?}) to be Replacing",
                name(prev),
                phase.as_str()
            ))
            .requeue(Requeue::After(POLL_INTERVAL));
            return;
        }
    }
    // Step 9.
    d.set(
        CsvPhase::InstallReady,
        CsvReason::AllRequirementsMet,
        "all requirements found, attempting install",
    );
}

/// Step 5: a CSV whose webhook definitions are invalid is `Failed` /
/// `InvalidWebhookDescription`. Returns true when it is.
///
/// The handlers of the other phases call this before anything that could move the CSV on
/// (certificate checks, health, install): OLM validates only in `Pending`, so its `Failed`
/// handler finds the webhook certificates missing and goes `Pending` / `NeedsCertRotation`,
/// straight back to `Failed`, on every sync. Invalid stays `Failed` until the CSV changes.
pub(super) fn fail_invalid_webhooks(ctx: &Ctx<'_>, d: &mut Decision) -> bool {
    match validate_webhooks(ctx.csv) {
        Ok(()) => false,
        Err(invalid) => {
            d.set(
                CsvPhase::Failed,
                CsvReason::InvalidWebhookDescription,
                invalid.to_string(),
            );
            true
        }
    }
}

/// Steps 6–7: another CSV owns one of this CSV's CRDs, or an APIService it cannot adopt.
/// Returns true when the CSV is `Failed` / `OwnerConflict`.
pub(super) fn fail_owner_conflict(ctx: &Ctx<'_>, d: &mut Decision) -> bool {
    let message = if let Some((other, crd)) = crd_owner_conflict(ctx.csv, ctx.seen) {
        format!(
            "conflicting CRD owner in namespace: CRD {crd} is owned by ClusterServiceVersion {other}"
        )
    } else if let Some(api) = api_service_owner_conflict(ctx.csv, ctx.seen) {
        format!("unable to adopt APIService {api}")
    } else {
        return false;
    };
    d.set(CsvPhase::Failed, CsvReason::OwnerConflict, message);
    true
}

/// Adds an `EnsurePermissions` action when ServiceAccounts or RBAC the install plan made are
/// missing and may be re-created. Returns whether it did.
pub(super) fn repair_permissions(
    ctx: &Ctx<'_>,
    check: &RequirementCheck,
    d: &mut Decision,
) -> bool {
    if check.service_account_gaps.is_empty() {
        return false;
    }
    if let Err(why) = may_repair_permissions(ctx.csv, Some(ctx.group), ctx.seen) {
        d.note(format!("not re-creating permissions: {why}"));
        return false;
    }
    match permissions_to_repair(ctx.csv, ctx.seen) {
        Ok(objects) if !objects.is_empty() => {
            d.event(crate::api::event::ObjectEvent::normal(
                "PermissionsRestored",
                format!("re-creating {}", objects.describe()),
            ))
            .act(Action::EnsurePermissions(objects))
            .requeue(Requeue::After(Duration::from_secs(1)));
            true
        }
        Ok(_) => false,
        Err(err) => {
            d.note(format!("cannot compute permissions to restore: {err}"));
            false
        }
    }
}

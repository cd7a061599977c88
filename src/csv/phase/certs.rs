//! The certificate steps of the phase handlers (docs/csv-phases.md §3.1, docs/certificates.md §6–§7): the APIService
//! resource check and the rotation check of `Succeeded` and `Failed`, the APIService/webhook
//! part of the health evaluation, and the status times written after an install.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::{CsvPhase, CsvReason};

use super::super::certs::check::{
    CertHealth, api_service_issues, cert_health, rotation_due, stale_webhooks,
};
use super::super::certs::live_ca_hashes;
use super::super::identity::name;
use super::super::install_strategy::{
    BuildError, DesiredDeployment, desired_deployments_with_certs,
};
use super::super::outcome::{Action, CsvSyncOutcome, Decision, Requeue, truncate_to_seconds};
use super::super::strategy::needs_certificates;
use super::{Ctx, POLL_INTERVAL};

/// The Deployments as they must run now, with `olmcahash` from the live cert Secrets.
pub(super) fn desired_now(ctx: &Ctx<'_>) -> Result<Vec<DesiredDeployment>, BuildError> {
    desired_deployments_with_certs(
        ctx.csv,
        ctx.seen.subscription_config(name(ctx.csv)),
        &live_ca_hashes(ctx.csv, &ctx.seen.certs),
    )
}

/// `Succeeded` steps 3–4. Returns true when the phase changed.
pub(super) fn succeeded_checks(ctx: &Ctx<'_>, d: &mut Decision) -> bool {
    if !needs_certificates(ctx.csv) {
        return false;
    }
    let issues = api_service_issues(ctx.csv, ctx.seen);
    if !issues.is_empty() {
        let text: Vec<&str> = issues.iter().map(|i| i.message.as_str()).collect();
        d.set(
            CsvPhase::Failed,
            CsvReason::ApiServiceResourceIssue,
            text.join("; "),
        );
        return true;
    }
    if let Some(why) = rotation_due(ctx.csv, ctx.seen, ctx.now) {
        d.set(
            CsvPhase::Pending,
            CsvReason::NeedsCertRotation,
            "CSV owns resources that require a cert refresh",
        )
        .note(why);
        return true;
    }
    false
}

/// `Failed` steps 7–8. Returns true when the handler must stop here.
pub(super) fn failed_checks(ctx: &Ctx<'_>, d: &mut Decision) -> bool {
    if !needs_certificates(ctx.csv) {
        return false;
    }
    let issues = api_service_issues(ctx.csv, ctx.seen);
    if !issues.is_empty() {
        let text: Vec<&str> = issues.iter().map(|i| i.message.as_str()).collect();
        if issues.iter().all(|i| i.recoverable) {
            d.set(
                CsvPhase::Pending,
                CsvReason::ApiServiceResourcesNeedReinstall,
                text.join("; "),
            );
        } else {
            // An APIService held by another operator: reinstalling cannot help.
            d.note(text.join("; "));
        }
        return true;
    }
    if let Some(why) = rotation_due(ctx.csv, ctx.seen, ctx.now) {
        d.set(
            CsvPhase::Pending,
            CsvReason::NeedsCertRotation,
            "owned APIServices need cert refresh",
        )
        .note(why);
        return true;
    }
    false
}

/// docs/csv-phases.md §8 steps 2–3, once the Deployments are healthy. Returns true (and sets the status
/// with requeue phase `phase` / reason `reason`) when APIServices or webhooks are not ready.
pub(super) fn not_ready(
    ctx: &Ctx<'_>,
    d: &mut Decision,
    phase: CsvPhase,
    reason: CsvReason,
) -> bool {
    let stale = stale_webhooks(ctx.csv, ctx.seen);
    if !stale.is_empty() {
        d.act(Action::DeleteWebhookConfigurations(stale));
    }
    if !needs_certificates(ctx.csv) {
        return false;
    }
    match cert_health(ctx.csv, ctx.seen) {
        CertHealth::Healthy => false,
        CertHealth::ApiServicesNotReady(why) => {
            d.set(phase, reason, "apiServices not installed")
                .note(why)
                .requeue(Requeue::After(POLL_INTERVAL));
            true
        }
        CertHealth::WebhooksMissing(why) => {
            d.set(phase, reason, "webhooks not installed")
                .note(why)
                .requeue(Requeue::After(POLL_INTERVAL));
            true
        }
        CertHealth::WebhookOutdated(why) => {
            d.set(
                CsvPhase::InstallReady,
                reason,
                format!("Webhook install failed: {why}"),
            );
            true
        }
    }
}

/// docs/certificates.md §6.3 step 5: after a successful install, the times of the certificates in the
/// Secrets (Known pain #1: derived from the certificates, not from the install time).
pub(super) fn record_cert_times(sync: &mut CsvSyncOutcome, times: Option<(Timestamp, Timestamp)>) {
    let (Some(status), Some((last, rotate))) = (sync.status.as_mut(), times) else {
        return;
    };
    status.certs_last_updated = Some(Time(truncate_to_seconds(last)));
    status.certs_rotate_at = Some(Time(truncate_to_seconds(rotate)));
}

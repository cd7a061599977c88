//! `InstallReady` and `Installing` (docs/csv-phases.md §3.1, §7).

use std::time::Duration;

use jiff::Timestamp;

use crate::api::{
    ClusterServiceVersion, ClusterServiceVersionStatus, CsvPhase, CsvReason, OperatorGroup,
};

use super::super::certs::{CertInstall, plan_cert_install};
use super::super::identity::name;
use super::super::install_strategy::{
    DesiredDeployment, desired_deployments_with_certs, orphaned_deployments,
};
use super::super::observed::Observed;
use super::super::outcome::{Action, CsvSyncOutcome, Decision, DeploymentInstall, Requeue};
use super::super::rbac_eval::{Request, Scope, ServiceAccountUser};
use super::certs::record_cert_times;
use super::{Components, Ctx, INSTALL_TIMEOUT, POLL_INTERVAL, check_components};

/// Why the group's installer cannot be built (docs/operator-groups.md §8); OLM only logs it.
pub(super) fn installer_unavailable(group: &OperatorGroup) -> Option<String> {
    let sa = group
        .spec
        .service_account_name
        .as_deref()
        .filter(|s| !s.is_empty())?;
    let resolved = group
        .status
        .as_ref()
        .and_then(|s| s.service_account_ref.as_ref())
        .is_some();
    (!resolved).then(|| {
        format!(
            "please make sure the service account exists. sa={sa} operatorgroup={}/{}",
            group.metadata.namespace.as_deref().unwrap_or_default(),
            group.metadata.name.as_deref().unwrap_or_default()
        )
    })
}

/// Stops the handler (no status change, retry later) when the installer is unavailable.
/// OLM stays silent here (Known pain #7); olm-rs at least says why in an event.
pub(super) fn stop_without_installer(ctx: &Ctx<'_>, d: &mut Decision) -> bool {
    match installer_unavailable(ctx.group) {
        Some(why) => {
            d.event(crate::api::event::ObjectEvent::warning(
                "InstallerUnavailable",
                why.clone(),
            ))
            .note(why)
            .requeue(Requeue::After(Duration::from_secs(30)));
            true
        }
        None => false,
    }
}

pub(super) fn install_ready(ctx: &Ctx<'_>, d: &mut Decision) {
    if stop_without_installer(ctx, d) {
        return;
    }
    // Reinstalls come here from Succeeded and Failed too: never install invalid webhooks.
    if super::pending::fail_invalid_webhooks(ctx, d) {
        return;
    }
    // docs/certificates.md §6.3: Services, Secrets (reused while valid) and RBAC of the cert deployments,
    // and the CA consumers, planned before the Deployments that mount the Secrets.
    let certs = match plan_cert_install(ctx.csv, ctx.seen, ctx.group, ctx.now) {
        Ok(certs) => certs,
        Err(err) => {
            d.set(
                CsvPhase::Failed,
                CsvReason::InstallComponentFailed,
                format!("install strategy failed: {err}"),
            );
            return;
        }
    };
    let ca_hashes = certs
        .as_ref()
        .map(CertInstall::ca_hashes)
        .unwrap_or_default();
    let config = ctx.seen.subscription_config(name(ctx.csv));
    let desired = match desired_deployments_with_certs(ctx.csv, config, &ca_hashes) {
        Ok(desired) => desired,
        Err(err) => {
            d.set(
                CsvPhase::Failed,
                CsvReason::InstallComponentFailed,
                format!("install strategy failed: {err}"),
            );
            return;
        }
    };
    let orphans = orphaned_deployments(
        ctx.csv,
        &desired,
        ctx.seen.deployments.iter().map(|d| d.as_ref()),
    );
    // A scoped group's account must be allowed to write what OLM writes on its behalf; OLM
    // learns this from a Forbidden answer, olm-rs asks its RBAC evaluation first.
    if let Some(forbidden) = scoped_install_forbidden(ctx.group, ctx.seen, &desired, &orphans) {
        d.set(
            CsvPhase::Failed,
            CsvReason::InstallComponentFailedNoRetry,
            format!("install strategy failed: {forbidden}"),
        );
        return;
    }
    if let Some(certs) = &certs {
        for (deployment, why) in certs.reissued() {
            d.event(crate::api::event::ObjectEvent::normal(
                "CertificatesIssued",
                format!("issuing certificates for deployment {deployment}: {why}"),
            ));
        }
    }
    d.act(Action::Install(DeploymentInstall {
        deployments: desired,
        delete_orphans: orphans,
        certs,
    }));
}

/// How an install attempt went wrong: the API server's answer to one of its writes. Every
/// refusal is retried with back-off, Forbidden included (docs/csv-phases.md §3.1
/// InstallReady): olm-rs writes as itself, so a 403 is about olm-rs's own identity — an API
/// server whose authorizer has not filled its caches yet after a restart (seen on the real
/// node, docs/reliability.md §3.4), or a gap in the chart's RBAC — and neither is mended by
/// the RBAC change in the operator's namespace that lifts a NoRetry freeze. A scoped
/// OperatorGroup's account lacking a permission is decided before any write
/// (`scoped_install_forbidden`) and stays `InstallComponentFailedNoRetry`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstallFailure(pub String);

/// [`after_install`], also recording `status.certsLastUpdated` / `certsRotateAt` from the
/// install's certificates when it succeeded (docs/certificates.md §6.3 step 5).
pub fn after_install_with_certs(
    csv: &ClusterServiceVersion,
    outcome: Result<(), InstallFailure>,
    certs: Option<&CertInstall>,
    now: Timestamp,
) -> CsvSyncOutcome {
    let succeeded = outcome.is_ok();
    let mut sync = after_install(csv, outcome, now);
    if succeeded {
        record_cert_times(&mut sync, certs.and_then(CertInstall::status_times));
    }
    sync
}

/// How the sync of an `InstallReady` CSV ends when its install goes as `outcome` says
/// (docs/csv-phases.md §3.1 InstallReady). Decided with the install, before any write
/// ([`crate::csv::sync_effects::decide`]).
pub fn after_install(
    csv: &ClusterServiceVersion,
    outcome: Result<(), InstallFailure>,
    now: Timestamp,
) -> CsvSyncOutcome {
    ending_of_install(csv.status.clone().unwrap_or_default(), outcome, now)
}

/// [`after_install`] from the CSV's status as observed.
pub fn ending_of_install(
    before: ClusterServiceVersionStatus,
    outcome: Result<(), InstallFailure>,
    now: Timestamp,
) -> CsvSyncOutcome {
    let mut d = Decision::from_status(before, now);
    match outcome {
        Ok(()) => {
            d.set(
                CsvPhase::Installing,
                CsvReason::InstallSucceeded,
                "waiting for install components to report healthy",
            )
            .requeue(Requeue::After(POLL_INTERVAL));
        }
        Err(InstallFailure(err)) => {
            d.set(
                CsvPhase::Failed,
                CsvReason::InstallComponentFailed,
                format!("install strategy failed: {err}"),
            )
            .requeue(Requeue::Backoff(err));
        }
    }
    d.finish()
}

pub(super) fn installing(ctx: &Ctx<'_>, d: &mut Decision) {
    let checked = check_components(ctx, d, CsvPhase::Installing, CsvReason::InstallWaiting);
    if matches!(checked, Components::Reinstall) || d.phase() != CsvPhase::Installing {
        return;
    }
    let since = d
        .status()
        .last_transition_time
        .as_ref()
        .map(|t| t.0)
        .unwrap_or(ctx.now);
    let elapsed = ctx.now.duration_since(since);
    let timeout =
        jiff::SignedDuration::try_from(INSTALL_TIMEOUT).unwrap_or(jiff::SignedDuration::MAX);
    if elapsed >= timeout {
        d.set(
            CsvPhase::Failed,
            CsvReason::InstallCheckFailed,
            "install timeout",
        );
    } else {
        let left = Duration::try_from(timeout - elapsed).unwrap_or(POLL_INTERVAL);
        d.requeue(Requeue::After(left.min(POLL_INTERVAL)));
    }
}

/// With a scoping ServiceAccount on the group, the first write of the install it may not do,
/// worded like the API server's Forbidden answer.
fn scoped_install_forbidden(
    group: &OperatorGroup,
    seen: &Observed,
    desired: &[DesiredDeployment],
    orphans: &[String],
) -> Option<String> {
    let sa = group
        .spec
        .service_account_name
        .as_deref()
        .filter(|s| !s.is_empty())?;
    let ns = group.metadata.namespace.as_deref().unwrap_or_default();
    let user = ServiceAccountUser::new(ns, sa);
    let grants = seen.rbac().grants_for(&user, Scope::Namespace(ns));
    let exists = |name: &str| seen.deployment(name).is_some();
    let writes = desired
        .iter()
        .map(|d| {
            (
                if exists(&d.name) { "update" } else { "create" },
                d.name.as_str(),
            )
        })
        .chain(orphans.iter().map(|o| ("delete", o.as_str())));
    for (verb, deployment) in writes {
        let request = Request::Resource {
            verb: verb.to_owned(),
            group: "apps".to_owned(),
            resource: "deployments".to_owned(),
            subresource: String::new(),
            name: deployment.to_owned(),
        };
        if !grants.allows(&request) {
            return Some(format!(
                "deployments.apps \"{deployment}\" is forbidden: User \"{}\" cannot {verb} resource \"deployments\" in API group \"apps\" in the namespace \"{ns}\"",
                user.user_name()
            ));
        }
    }
    None
}

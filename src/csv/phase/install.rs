//! `InstallReady` and `Installing` (csv.md §3.1, §7).

use std::time::Duration;

use jiff::Timestamp;

use crate::api::{ClusterServiceVersion, CsvPhase, CsvReason, OperatorGroup};

use super::super::health::evaluate;
use super::super::identity::name;
use super::super::install_strategy::{
    DesiredDeployment, desired_deployments, orphaned_deployments,
};
use super::super::observed::{CertificateSupport, Observed};
use super::super::rbac_eval::{Request, Scope, ServiceAccountUser};
use super::super::strategy::{certificate_deployments, needs_certificates};
use super::super::sync::{Action, Decision, InstallPlan, Requeue, Sync};
use super::{Ctx, INSTALL_TIMEOUT, POLL_INTERVAL, apply_health};

/// Why the group's installer cannot be built (operatorgroup.md §8); OLM only logs it.
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
            d.event(true, "InstallerUnavailable", why.clone())
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
    if needs_certificates(ctx.csv) && ctx.seen.certificates == CertificateSupport::Unavailable {
        d.set(
            CsvPhase::Failed,
            CsvReason::InstallComponentFailed,
            format!(
                "install strategy failed: {}",
                certificates_unavailable(ctx.csv)
            ),
        );
        return;
    }
    let desired = match desired_deployments(ctx.csv, ctx.seen.subscription_config(name(ctx.csv))) {
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
    d.act(Action::Install(InstallPlan {
        deployments: desired,
        delete_orphans: orphans,
    }));
}

/// Text of the certificate seam's failure.
pub(super) fn certificates_unavailable(csv: &ClusterServiceVersion) -> String {
    format!(
        "serving certificates for owned APIServices and webhooks cannot be provisioned yet (deployments: {})",
        certificate_deployments(csv).join(", ")
    )
}

/// How an install attempt went wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InstallFailure {
    /// The API server answered Forbidden while writing a Deployment: not retried.
    Forbidden(String),
    /// Anything else: retried.
    Other(String),
}

/// The status after the reconciler ran the install of an `InstallReady` CSV.
pub fn after_install(
    csv: &ClusterServiceVersion,
    outcome: Result<(), InstallFailure>,
    now: Timestamp,
) -> Sync {
    let mut d = Decision::new(csv, now);
    match outcome {
        Ok(()) => {
            d.set(
                CsvPhase::Installing,
                CsvReason::InstallSucceeded,
                "waiting for install components to report healthy",
            )
            .requeue(Requeue::After(POLL_INTERVAL));
        }
        Err(InstallFailure::Forbidden(err)) => {
            d.set(
                CsvPhase::Failed,
                CsvReason::InstallComponentFailedNoRetry,
                format!("install strategy failed: {err}"),
            );
        }
        Err(InstallFailure::Other(err)) => {
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
    let desired = match desired_deployments(ctx.csv, ctx.seen.subscription_config(name(ctx.csv))) {
        Ok(desired) => desired,
        Err(_) => {
            d.set(
                CsvPhase::Pending,
                CsvReason::NeedsReinstall,
                "calculated deployment install is bad",
            );
            return;
        }
    };
    let health = evaluate(ctx.csv, &desired, &ctx.seen.deployments);
    apply_health(d, health, CsvPhase::Installing, CsvReason::InstallWaiting);
    if d.phase() != CsvPhase::Installing {
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

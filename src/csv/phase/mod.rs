//! The phase machine (docs/csv-phases.md §3–§5): one sync of one CSV as a pure function of what is
//! observed. [`sync`] decides; [`crate::csv::sync_effects::decide`] turns its actions into
//! writes and, for an install, decides with [`after_install`] how the sync ends whichever way
//! the install goes.

mod certs;
mod install;
mod pending;
mod replacing;
mod running;

use std::time::Duration;

use jiff::Timestamp;

use crate::api::{ClusterServiceVersion, CsvPhase, CsvReason, OperatorGroup};

use super::gate::{Gate, gate};
use super::health::{Health, evaluate};
use super::install_strategy::DesiredDeployment;
use super::observed::Observed;
use super::outcome::{CsvSyncOutcome, Decision, Requeue};
use super::requirements::{RequirementCheck, check_requirements};

pub use install::{InstallFailure, after_install, after_install_with_certs, ending_of_install};

/// OLM fails an install that is not healthy this long after entering `Installing` (docs/csv-phases.md §3.1).
pub const INSTALL_TIMEOUT: Duration = Duration::from_secs(5 * 60);
/// How often a CSV waiting for its components is looked at again.
pub const POLL_INTERVAL: Duration = Duration::from_secs(10);

/// Everything a phase handler reads.
struct Ctx<'a> {
    csv: &'a ClusterServiceVersion,
    seen: &'a Observed,
    group: &'a OperatorGroup,
    now: Timestamp,
}

/// One sync of a CSV that is not being deleted (deletion: [`super::cleanup`]).
pub fn sync(csv: &ClusterServiceVersion, seen: &Observed, now: Timestamp) -> CsvSyncOutcome {
    if csv.metadata.deletion_timestamp.is_some() {
        return CsvSyncOutcome::nothing("CSV is being deleted");
    }
    let (mut d, group) = match gate(csv, seen, now) {
        Gate::Stop(d) => return d.finish(),
        Gate::Pass { decision, group } => (decision, group),
    };
    let ctx = Ctx {
        csv,
        seen,
        group,
        now,
    };
    match d.phase() {
        CsvPhase::None => {
            d.set(
                CsvPhase::Pending,
                CsvReason::RequirementsUnknown,
                "requirements not yet checked",
            );
        }
        CsvPhase::Pending => pending::pending(&ctx, &mut d),
        CsvPhase::InstallReady => install::install_ready(&ctx, &mut d),
        CsvPhase::Installing => install::installing(&ctx, &mut d),
        CsvPhase::Succeeded => running::succeeded(&ctx, &mut d),
        CsvPhase::Failed => running::failed(&ctx, &mut d),
        CsvPhase::Replacing => replacing::replacing(&ctx, &mut d),
        CsvPhase::Deleting => {
            d.act(super::outcome::Action::DeleteCsv);
        }
        CsvPhase::Unknown | CsvPhase::Other(_) => {
            d.note(format!("phase {:?} is not driven", d.phase().as_str()));
        }
    }
    d.finish()
}

/// What the component check of an installing or running CSV found.
enum Components {
    /// Its Deployments cannot be computed: it goes back to `Pending` / `NeedsReinstall`.
    Reinstall,
    /// Not (yet) healthy; the decision says why.
    NotHealthy,
    /// Every Deployment is healthy and its certificates and APIServices are ready: the
    /// Deployments it wants now.
    Healthy(Vec<DesiredDeployment>),
}

/// The one deployment-health check of `Installing`, `Succeeded` and `Failed`
/// (docs/csv-phases.md §8): the Deployments the CSV wants now, their health, then its
/// certificates and APIServices; a CSV not healthy goes to `phase` / `reason` as
/// [`apply_health`] maps it.
fn check_components(
    ctx: &Ctx<'_>,
    d: &mut Decision,
    phase: CsvPhase,
    reason: CsvReason,
) -> Components {
    let Ok(desired) = certs::desired_now(ctx) else {
        d.set(
            CsvPhase::Pending,
            CsvReason::NeedsReinstall,
            "calculated deployment install is bad",
        );
        return Components::Reinstall;
    };
    let health = evaluate(ctx.csv, &desired, &ctx.seen.deployments);
    let healthy = health == Health::Healthy;
    if healthy && certs::not_ready(ctx, d, phase.clone(), reason.clone()) {
        return Components::NotHealthy;
    }
    apply_health(d, health, phase, reason);
    if healthy {
        Components::Healthy(desired)
    } else {
        Components::NotHealthy
    }
}

/// Maps the health evaluation to a status (docs/csv-phases.md §8 "Outcome"), with the handler's requeue
/// phase and reason.
fn apply_health(d: &mut Decision, health: Health, phase: CsvPhase, reason: CsvReason) {
    match health {
        Health::Healthy => {
            d.set(
                CsvPhase::Succeeded,
                CsvReason::InstallSucceeded,
                "install strategy completed with no errors",
            );
        }
        Health::Unrecoverable(why) => {
            d.set(
                CsvPhase::Failed,
                CsvReason::InstallCheckFailed,
                format!("install failed: {why}"),
            );
        }
        Health::Changed(why) => {
            d.set(CsvPhase::InstallReady, reason, format!("installing: {why}"));
        }
        Health::NotReady(why) => {
            d.set(phase, reason, format!("installing: {why}"))
                .requeue(Requeue::After(POLL_INTERVAL));
        }
    }
}

/// The requirement check every phase starts from, or `None` when the CSV's install strategy
/// cannot even be read: then the CSV is Failed with InvalidInstallStrategy (docs/csv-phases.md §3.1; OLM
/// bounces such a CSV through Pending and back, we leave it Failed).
fn requirements_or_fail(ctx: &Ctx<'_>, d: &mut Decision) -> Option<RequirementCheck> {
    match check_requirements(ctx.csv, ctx.seen) {
        Ok(check) => Some(check),
        Err(err) => {
            d.set(
                CsvPhase::Failed,
                CsvReason::InvalidInstallStrategy,
                format!("install strategy invalid: {err}"),
            );
            None
        }
    }
}

/// For a running operator: when the only unmet requirements are lookups that failed, note it
/// and look again later instead of demoting the CSV (docs/csv-phases.md §11 item 3: a failed lookup is
/// not a missing API). Returns whether that is the case.
fn retry_unknown_requirements(check: &RequirementCheck, d: &mut Decision) -> bool {
    if !check.only_unknown() {
        return false;
    }
    d.note(format!(
        "requirements could not be checked: {}",
        check.unknown.join("; ")
    ))
    .requeue(Requeue::Backoff("requirement lookup failed".to_owned()));
    true
}

/// `base` plus what is missing (docs/csv-phases.md §11 item 1: say exactly what).
fn with_summary(base: &str, check: &RequirementCheck) -> String {
    if !check.unmet.is_empty() {
        format!("{base}: {}", check.summary())
    } else if let Some(unknown) = check.unknown.first() {
        format!("{base}: could not check: {unknown}")
    } else {
        base.to_owned()
    }
}

#[cfg(test)]
mod tests;

//! A failed upgrade rolled back, in a Subscription's sync (docs/upgrades.md §3). Pure.
//!
//! With `olm-rs.io/on-failed-upgrade: rollback` (the Subscription's, else its OperatorGroup's),
//! an upgrade whose new CSV ends `Failed` before it ever succeeded, over a replaced CSV that had
//! `Succeeded`, is answered in two steps, each a decision on the objects as they are:
//! 1. a plan restores the replaced version from its catalog bundle (CRDs under the downgrade
//!    rule, its CSV marked `olm-rs.io/downgraded-from` the failed one), `Automatic` whatever
//!    the Subscription's approval — it restores what was approved before; the Subscription
//!    gets `RolledBack=True` naming the failed version, its reason and the version restored,
//!    and the mark `olm-rs.io/failed-upgrade`;
//! 2. once that plan has run, the failed CSV is deleted (at the version judged): what only it
//!    owned goes with it (owner references), and the restored CSV, replaced by nothing any
//!    more, installs its own Deployments again. Custom resources are never touched.
//!
//! When the CRD rule forbids it, or a package the restored version requires was moved on by a
//! co-upgrade with the failed one, `RolledBack=False` (`RollbackRefused`) says why and nothing
//! is changed.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::planning::{downgrade_allowed, plan_for};
use super::{NamespaceState, Note, PlanRequest, SubscriptionUpdate};
use crate::api::event::ObjectEvent;
use crate::api::{
    CatalogRef, ConditionStatus, CsvPhase, Subscription, SubscriptionCondition,
    SubscriptionConditionType, remove_condition, set_condition,
};
use crate::catalog::properties::{PackageRequiredValue, required_packages};
use crate::resolve::channels::ranked_channels;
use crate::resolve::input::NamespaceInput;
use crate::resolve::outcome::{Target, Why};
use crate::resolve::rollback::{
    CsvFacts, FailedUpgrade, RollbackRefused, dependency_moved, failed_mark, failed_upgrade,
    reason, rollback_wanted,
};

/// What a rollback reads of the namespace besides resolution's input.
#[derive(Debug, Clone, Default)]
pub struct RollbackInput {
    /// The single OperatorGroup's name and its `olm-rs.io/on-failed-upgrade`, when it has one.
    pub group_policy: Option<(String, String)>,
    /// The CSVs of the namespace; read only when some policy is set.
    pub csvs: Vec<CsvFacts>,
}

/// The writes a rollback adds to the Subscription's own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RollbackWrites {
    /// The value of `olm-rs.io/failed-upgrade` to set.
    pub mark: Option<String>,
    /// The failed CSV to delete, with the resourceVersion it was judged at.
    pub delete_failed: Option<(String, Option<String>)>,
}

/// The restored version is no longer in the Subscription's catalog.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("catalog {catalog} no longer offers {bundle} in package {package:?}; nothing was changed")]
pub struct RestoreUnavailable {
    pub catalog: CatalogRef,
    pub package: String,
    pub bundle: String,
}

/// Runs the rollback part of `sub`'s sync on `update`. Returns whether it decided the sync (a
/// rollback planned): then the resolver's answer is not applied. A refused rollback leaves the
/// sync to the resolver, as OLM would have it.
pub(super) fn roll_back(
    state: &NamespaceState<'_>,
    sub: &Subscription,
    update: &mut SubscriptionUpdate,
    generation: &mut i64,
    now: &Time,
) -> bool {
    let group = state
        .rollback
        .group_policy
        .as_ref()
        .map(|(n, v)| (n.as_str(), v.as_str()));
    let mut conditions = update.status.conditions.take().unwrap_or_default();
    let (changed, decided) = match rollback_wanted(sub, group) {
        Err(bad) => (
            set_rolled_back(
                &mut conditions,
                false,
                reason::BAD_POLICY,
                &bad.to_string(),
                now,
                &mut update.notes,
            ),
            false,
        ),
        Ok(false) => (clear_without_mark(sub, &mut conditions), false),
        Ok(true) => {
            update.rollback.delete_failed = failed_left_over(sub, &state.rollback.csvs);
            match failed_upgrade(sub, &state.rollback.csvs) {
                None => (clear_without_mark(sub, &mut conditions), false),
                Some(upgrade) => restore(
                    state,
                    sub,
                    &upgrade,
                    update,
                    &mut conditions,
                    generation,
                    now,
                ),
            }
        }
    };
    update.status.conditions = Some(conditions);
    update.changed |= changed;
    decided
}

/// Plans the restore of `upgrade`'s replaced CSV, or says why not: (status changed, planned).
fn restore(
    state: &NamespaceState<'_>,
    sub: &Subscription,
    upgrade: &FailedUpgrade,
    update: &mut SubscriptionUpdate,
    conditions: &mut Vec<SubscriptionCondition>,
    generation: &mut i64,
    now: &Time,
) -> (bool, bool) {
    let refuse = |detail: &dyn std::fmt::Display,
                  conditions: &mut Vec<SubscriptionCondition>,
                  notes: &mut Vec<Note>| {
        let refused = RollbackRefused::new(upgrade, detail);
        let changed = set_rolled_back(
            conditions,
            false,
            reason::ROLLBACK_REFUSED,
            &refused.to_string(),
            now,
            notes,
        );
        (changed, false)
    };
    let (target, required) = match restore_target(&state.input, sub, upgrade) {
        Ok(found) => found,
        Err(missing) => return refuse(&missing, conditions, &mut update.notes),
    };
    // A co-upgrade moved a dependency on with the failed version: the old version alone would
    // not fit it (docs/upgrades.md §3).
    let installed = state.input.installed.iter();
    if let Some(moved) = dependency_moved(&target.bundle, required, installed, &upgrade.failed.name)
    {
        return refuse(&moved, conditions, &mut update.notes);
    }
    if let Err(refused) = downgrade_allowed(&state.input, &target, state.crds) {
        return refuse(&refused, conditions, &mut update.notes);
    }
    let draft = match plan_for(&state.input, &[(sub, &target)], *generation, now) {
        Ok(draft) => draft,
        Err(unplannable) => return refuse(&unplannable, conditions, &mut update.notes),
    };
    *generation += 1;
    let mark = upgrade.mark();
    if failed_mark(sub).is_none_or(|m| m.value != mark) {
        update.rollback.mark = Some(mark);
    }
    let set = set_rolled_back(
        conditions,
        true,
        upgrade.reason(),
        &upgrade.to_string(),
        now,
        &mut update.notes,
    );
    if set {
        update.notes.push(ObjectEvent::normal(
            reason::ROLLING_BACK,
            format!(
                "planning the restore of {} over the failed {}",
                upgrade.restore.name, upgrade.failed.name
            ),
        ));
    }
    update.plan = Some(PlanRequest { draft, target });
    // The plan is made and attached like any other; the status is written with it.
    (set, true)
}

/// The replaced CSV's bundle in the Subscription's catalog, as a target replacing the failed
/// CSV, with the packages that bundle requires.
fn restore_target(
    input: &NamespaceInput<'_>,
    sub: &Subscription,
    upgrade: &FailedUpgrade,
) -> Result<(Target, Vec<PackageRequiredValue>), RestoreUnavailable> {
    let spec = &sub.spec;
    let catalog = CatalogRef::new(&spec.source_namespace, &spec.source);
    let bundle = upgrade.restore.name.clone();
    let missing = || RestoreUnavailable {
        catalog: catalog.clone(),
        package: spec.name.clone(),
        bundle: bundle.clone(),
    };
    let package = input
        .catalog(&catalog)
        .and_then(|c| c.index())
        .and_then(|index| index.package(&spec.name))
        .ok_or_else(missing)?;
    let wanted = spec.channel.as_deref().filter(|c| !c.is_empty());
    let channel = ranked_channels(package, wanted)
        .into_iter()
        .flatten()
        .chain(package.channels().iter())
        .find(|c| c.graph().entry(&bundle).is_some())
        .ok_or_else(missing)?;
    let found = package.bundle(&bundle).ok_or_else(missing)?;
    let required = required_packages(found.properties()).collect();
    let target = Target {
        catalog: catalog.clone(),
        package: spec.name.clone(),
        channel: channel.name().to_owned(),
        bundle: bundle.clone(),
        version: found.version_string(),
        replaces: Some(upgrade.failed.name.clone()),
        why: Why::Rollback,
        dependencies: Vec::new(),
        together: Vec::new(),
    };
    Ok((target, required))
}

/// Step 2: the failed CSV of a rollback whose plan has run — the Subscription is at the
/// restored CSV again and carries the mark, and a CSV of the marked version (or name), never
/// succeeded and `Failed`, still names the restored one in `spec.replaces`.
fn failed_left_over(sub: &Subscription, csvs: &[CsvFacts]) -> Option<(String, Option<String>)> {
    let mark = failed_mark(sub)?;
    let status = sub.status.as_ref()?;
    let installed = status.installed_csv.as_deref()?;
    if status.current_csv.as_deref() != Some(installed) {
        return None;
    }
    csvs.iter()
        .find(|c| {
            !c.deleting
                && !c.succeeded_before
                && c.phase == Some(CsvPhase::Failed)
                && c.replaces.as_deref() == Some(installed)
                && (c.version.as_deref() == Some(mark.value.as_str()) || c.name == mark.value)
        })
        .map(|c| (c.name.clone(), c.resource_version.clone()))
}

/// A `RolledBack` condition is the record of the last rollback while its mark stands; without
/// the mark (a person removed it, or never set) it goes.
fn clear_without_mark(sub: &Subscription, conditions: &mut Vec<SubscriptionCondition>) -> bool {
    if failed_mark(sub).is_some() {
        return false;
    }
    remove_condition(conditions, SubscriptionConditionType::RolledBack.as_str())
}

/// `RolledBack` with `reason` and `message`; an event (a warning) when new.
fn set_rolled_back(
    conditions: &mut Vec<SubscriptionCondition>,
    done: bool,
    reason: &str,
    message: &str,
    now: &Time,
    notes: &mut Vec<Note>,
) -> bool {
    let status = if done {
        ConditionStatus::True
    } else {
        ConditionStatus::False
    };
    let set = set_condition(
        conditions,
        SubscriptionCondition::new(
            SubscriptionConditionType::RolledBack,
            status,
            reason,
            message,
        ),
        now,
    );
    if set {
        let event = if done { "RolledBack" } else { reason };
        notes.push(ObjectEvent::warning(event, message.to_owned()));
    }
    set
}

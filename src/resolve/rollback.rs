//! Automatic rollback of a failed upgrade (docs/upgrades.md §3), an olm-rs extension OLM
//! ignores: `olm-rs.io/on-failed-upgrade: rollback` on a Subscription (or on its namespace's
//! OperatorGroup, for every Subscription there) restores the replaced version when the new CSV
//! of an upgrade ends `Failed` before it ever succeeded, and remembers the failed version in
//! `olm-rs.io/failed-upgrade` so the Subscription does not try it again.
//!
//! Pure: which upgrade failed, whether the policy asks for a rollback, what the mark bars, and
//! the words of the `RolledBack` condition. `subscription::rollback_plan` turns a rollback into
//! a plan and writes.

use std::fmt;

use crate::api::{ClusterServiceVersion, CsvPhase, CsvReason, Subscription};
use crate::catalog::properties::PackageRequiredValue;
use crate::catalog::semver_range::{Version, VersionRange, compare, parse_tolerant};
use crate::catalog::upgrade_graph::GraphEntry;

use super::input::InstalledCsv;
use super::version_request::Held;

/// `rollback`: a failed upgrade is rolled back. On a Subscription, or on the OperatorGroup for
/// every Subscription of its namespace; the Subscription's own value wins.
pub const ON_FAILED_UPGRADE: &str = "olm-rs.io/on-failed-upgrade";
/// The only value [`ON_FAILED_UPGRADE`] takes.
pub const ROLLBACK: &str = "rollback";
/// Written on the Subscription by a rollback: the version that failed (its CSV's name when it
/// has no version). Upgrades to it or below are not tried again until a person removes it.
pub use crate::api::keys::FAILED_UPGRADE_ANNOTATION as FAILED_UPGRADE;

/// Reasons of the `RolledBack` condition (its `True` reason is the failed CSV's own reason).
pub mod reason {
    /// `RolledBack=False`: the CRD rule forbids restoring the replaced version.
    pub const ROLLBACK_REFUSED: &str = "RollbackRefused";
    /// `RolledBack=False`: the annotation holds something else than `rollback`.
    pub const BAD_POLICY: &str = "InvalidOnFailedUpgrade";
    /// The event of a rollback started.
    pub const ROLLING_BACK: &str = "RollingBack";
}

/// The CSV reasons of a failed install that a rollback answers: the install check failed (a
/// Deployment past its `progressDeadlineSeconds`, or olm-rs's install timeout), or the
/// components turned unhealthy or could not be created. Other failures (an OperatorGroup
/// problem, a requirement missing) are fixed where they are, not by going back.
const FAILURE_REASONS: [CsvReason; 4] = [
    CsvReason::InstallCheckFailed,
    CsvReason::ComponentUnhealthy,
    CsvReason::InstallComponentFailed,
    CsvReason::InstallComponentFailedNoRetry,
];

/// What a rollback reads of a CSV of the namespace.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CsvFacts {
    pub name: String,
    pub resource_version: Option<String>,
    /// `spec.version`, as written.
    pub version: Option<String>,
    pub replaces: Option<String>,
    pub phase: Option<CsvPhase>,
    pub reason: Option<CsvReason>,
    pub message: Option<String>,
    /// `Succeeded` now or in its phase history (`status.conditions`).
    pub succeeded_before: bool,
    /// Being deleted.
    pub deleting: bool,
}

impl CsvFacts {
    pub fn of(csv: &ClusterServiceVersion) -> Self {
        let status = csv.status.as_ref();
        let phase = status.and_then(|s| s.phase.clone());
        let succeeded_before = phase == Some(CsvPhase::Succeeded)
            || status
                .and_then(|s| s.conditions.as_ref())
                .into_iter()
                .flatten()
                .any(|c| c.phase == Some(CsvPhase::Succeeded));
        CsvFacts {
            name: csv.metadata.name.clone().unwrap_or_default(),
            resource_version: csv.metadata.resource_version.clone(),
            version: csv.spec.version.clone(),
            replaces: csv.spec.replaces.clone(),
            phase,
            reason: status.and_then(|s| s.reason.clone()),
            message: status.and_then(|s| s.message.clone()),
            succeeded_before,
            deleting: csv.metadata.deletion_timestamp.is_some(),
        }
    }

    fn described(&self) -> String {
        match &self.version {
            Some(v) => format!("{} (version {v})", self.name),
            None => self.name.clone(),
        }
    }
}

/// `olm-rs.io/on-failed-upgrade` holds something else than `rollback`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "annotation {ON_FAILED_UPGRADE} {value:?} on {object} is not a policy (the one value is \"{ROLLBACK}\"); a failed upgrade is left as it is"
)]
pub struct BadPolicy {
    /// `Subscription <name>` or `OperatorGroup <name>`.
    pub object: String,
    pub value: String,
}

/// Whether a failed upgrade of `sub` is rolled back: its own annotation, else its OperatorGroup's
/// (`group`: the group's name and annotation value). Without either, OLM's behaviour: no.
pub fn rollback_wanted(sub: &Subscription, group: Option<(&str, &str)>) -> Result<bool, BadPolicy> {
    let own = sub
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ON_FAILED_UPGRADE));
    let (object, value) = match (own, group) {
        (Some(v), _) => (
            format!(
                "Subscription {}",
                sub.metadata.name.as_deref().unwrap_or_default()
            ),
            v.as_str(),
        ),
        (None, Some((name, v))) => (format!("OperatorGroup {name}"), v),
        (None, None) => return Ok(false),
    };
    if value.trim() == ROLLBACK {
        Ok(true)
    } else {
        Err(BadPolicy {
            object,
            value: value.to_owned(),
        })
    }
}

/// An upgrade whose new CSV failed while the one it replaces waits for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedUpgrade {
    pub failed: CsvFacts,
    /// The replaced CSV, `Succeeded` before the upgrade and `Replacing` since.
    pub restore: CsvFacts,
}

impl FailedUpgrade {
    /// The failed CSV's reason, as the `RolledBack` condition's reason.
    pub fn reason(&self) -> &str {
        self.failed.reason.as_ref().map_or("Failed", |r| r.as_str())
    }

    /// The value of [`FAILED_UPGRADE`]: the failed version, else the CSV's name.
    pub fn mark(&self) -> String {
        self.failed
            .version
            .clone()
            .unwrap_or_else(|| self.failed.name.clone())
    }

    fn failure(&self) -> String {
        let message = self.failed.message.as_deref().unwrap_or_default();
        format!(
            "upgrade to {} failed ({}: {message})",
            self.failed.described(),
            self.reason()
        )
    }
}

/// The `RolledBack=True` message, the rollback's event, and the mark left.
impl fmt::Display for FailedUpgrade {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}; rolled back to {}; {FAILED_UPGRADE}: {:?} keeps it from being tried again until the catalog offers a newer version or the annotation is removed",
            self.failure(),
            self.restore.described(),
            self.mark()
        )
    }
}

/// A rollback the CRD rule forbids: nothing is changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{failure}; rollback to {restore} refused: {detail}")]
pub struct RollbackRefused {
    failure: String,
    restore: String,
    /// The CRD rule's words (`plan::downgrade_safety`).
    detail: String,
}

impl RollbackRefused {
    pub fn new(upgrade: &FailedUpgrade, detail: &dyn fmt::Display) -> Self {
        RollbackRefused {
            failure: upgrade.failure(),
            restore: upgrade.restore.described(),
            detail: detail.to_string(),
        }
    }
}

/// The failed upgrade of `sub`'s installed CSV, if there is one to roll back: the installed
/// (or current) CSV is `Failed` for one of [`FAILURE_REASONS`] and never succeeded — the
/// window is its install, up to its Deployments' progress deadline (docs/upgrades.md §3) — and
/// the CSV it replaces had `Succeeded` and now waits in `Replacing`.
pub fn failed_upgrade(sub: &Subscription, csvs: &[CsvFacts]) -> Option<FailedUpgrade> {
    let status = sub.status.as_ref()?;
    let name = status
        .installed_csv
        .as_deref()
        .or(status.current_csv.as_deref())?;
    let find = |n: &str| csvs.iter().find(|c| c.name == n && !c.deleting);
    let failed = find(name)?;
    let failed_now = failed.phase == Some(CsvPhase::Failed)
        && failed
            .reason
            .as_ref()
            .is_some_and(|r| FAILURE_REASONS.contains(r))
        && !failed.succeeded_before;
    if !failed_now {
        return None;
    }
    let restore = find(failed.replaces.as_deref()?)?;
    if restore.phase != Some(CsvPhase::Replacing) || !restore.succeeded_before {
        return None;
    }
    Some(FailedUpgrade {
        failed: failed.clone(),
        restore: restore.clone(),
    })
}

/// A package the restored version requires, which the installed CSVs no longer satisfy: a
/// co-upgrade moved it on together with the failed version (docs/upgrades.md §3, "A
/// co-upgrade's rollback"). Restoring the old version alone would break that requirement.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{restore} requires package {package:?} in range {range:?}, but {installed} (version {version}) is installed, upgraded together with the failed version; restoring {restore} alone would break that requirement: downgrade {package:?} first (olm-rs.io/version with olm-rs.io/allow-downgrade on its Subscription), then the rollback goes ahead; nothing was changed"
)]
pub struct DependencyMoved {
    pub restore: String,
    pub package: String,
    pub range: String,
    pub installed: String,
    pub version: String,
}

/// The first package `restore` requires (its `olm.package.required` entries) that an installed
/// CSV of the namespace, other than the `failed` one, holds at a version outside the range.
/// A required package with no installed CSV, a CSV without a version or a range that does not
/// parse is left to resolution, which judges those the same way for every install.
pub fn dependency_moved<'a>(
    restore: &str,
    required: impl IntoIterator<Item = PackageRequiredValue>,
    installed: impl IntoIterator<Item = &'a InstalledCsv> + Clone,
    failed: &str,
) -> Option<DependencyMoved> {
    required.into_iter().find_map(|req| {
        let range = VersionRange::parse(&req.version_range).ok()?;
        installed
            .clone()
            .into_iter()
            .filter(|c| c.name != failed && c.package.as_deref() == Some(req.package_name.as_str()))
            .find_map(|c| {
                let version = c.version.as_ref()?;
                (!range.contains(version)).then(|| DependencyMoved {
                    restore: restore.to_owned(),
                    package: req.package_name.clone(),
                    range: req.version_range.clone(),
                    installed: c.name.clone(),
                    version: version.to_string(),
                })
            })
    })
}

/// The mark a rollback left on a Subscription.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedMark {
    pub value: String,
    version: Option<Version>,
}

/// [`FAILED_UPGRADE`] on `sub`, if set.
pub fn failed_mark(sub: &Subscription) -> Option<FailedMark> {
    let value = sub.metadata.annotations.as_ref()?.get(FAILED_UPGRADE)?;
    let value = value.trim().to_owned();
    if value.is_empty() {
        return None;
    }
    Some(FailedMark {
        version: parse_tolerant(&value).ok(),
        value,
    })
}

impl FailedMark {
    /// Whether the mark keeps `entry` from being installed: its version is the failed one or
    /// older (a mark without a version bars only the CSV of that name).
    pub fn bars(&self, entry: &GraphEntry) -> bool {
        match (&self.version, &entry.version) {
            (Some(failed), Some(v)) => compare(v, failed).is_le(),
            _ => entry.name == self.value,
        }
    }

    /// Why `installed` stays although the channel offers `entry`, which the mark bars.
    pub fn held(&self, installed: &str, entry: &GraphEntry) -> Held {
        Held::FailedUpgrade {
            mark: self.value.clone(),
            installed: installed.to_owned(),
            bundle: entry.name.clone(),
            version: entry.version.as_ref().map(Version::to_string),
        }
    }
}

#[cfg(test)]
#[path = "rollback_tests.rs"]
mod tests;

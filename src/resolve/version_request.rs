//! The versions a Subscription accepts (docs/upgrades.md): `olm-rs.io/version`, a range in
//! OLM's own syntax (the blang ranges of `olm.skipRange` and `olm.package.required`, parsed by
//! `catalog::semver_range`), and `olm-rs.io/allow-downgrade`. Both are olm-rs extensions OLM
//! ignores; a Subscription without them resolves exactly as OLM's does.

use std::fmt;

use crate::api::Subscription;
use crate::catalog::index::ChannelIndex;
use crate::catalog::semver_range::{RangeError, Version, VersionRange, compare};
use crate::catalog::upgrade_graph::GraphEntry;

/// The range of versions a Subscription may install; an exact version pins.
pub const VERSION_ANNOTATION: &str = "olm-rs.io/version";
/// `"true"`: a range excluding the installed version installs the newest in-range version
/// below it (docs/upgrades.md, "Downgrade on request").
pub const ALLOW_DOWNGRADE_ANNOTATION: &str = "olm-rs.io/allow-downgrade";

pub use crate::api::keys::DOWNGRADED_FROM_ANNOTATION as DOWNGRADED_FROM;

/// What a Subscription's annotations ask of versions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionRequest {
    pub range: VersionRange,
    pub allow_downgrade: bool,
}

/// `olm-rs.io/version` holds something that is not a range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("annotation {VERSION_ANNOTATION} {value:?} is not a version range: {error}")]
pub struct BadVersionAnnotation {
    pub value: String,
    pub error: Box<RangeError>,
}

/// The Subscription's version request: `None` without `olm-rs.io/version` (OLM's behaviour).
/// `allow-downgrade` alone asks nothing: it only says what a range may do.
pub fn version_request(sub: &Subscription) -> Result<Option<VersionRequest>, BadVersionAnnotation> {
    let annotations = sub.metadata.annotations.as_ref();
    let Some(value) = annotations.and_then(|a| a.get(VERSION_ANNOTATION)) else {
        return Ok(None);
    };
    let range = VersionRange::parse(value.trim()).map_err(|error| BadVersionAnnotation {
        value: value.clone(),
        error: Box::new(error),
    })?;
    let allow_downgrade = annotations
        .and_then(|a| a.get(ALLOW_DOWNGRADE_ANNOTATION))
        .is_some_and(|v| v.trim() == "true");
    Ok(Some(VersionRequest {
        range,
        allow_downgrade,
    }))
}

/// Whether a bundle of this version may be installed: a bundle without a version is in no
/// range.
pub fn admits(request: Option<&VersionRequest>, version: Option<&Version>) -> bool {
    match request {
        None => true,
        Some(r) => version.is_some_and(|v| r.range.contains(v)),
    }
}

/// The in-range entries of `channels` below `installed`, newest first, each bundle once (in
/// the first channel listing it): what a downgrade may install.
pub fn downgrade_entries<'a>(
    channels: &[&'a ChannelIndex],
    installed: &Version,
    request: &VersionRequest,
) -> Vec<(&'a ChannelIndex, &'a GraphEntry)> {
    let mut out: Vec<(&ChannelIndex, &GraphEntry)> = Vec::new();
    for channel in channels {
        for entry in channel.graph().entries() {
            let Some(version) = entry.version.as_ref() else {
                continue;
            };
            if compare(version, installed).is_lt()
                && request.range.contains(version)
                && !out.iter().any(|(_, e)| e.name == entry.name)
            {
                out.push((channel, entry));
            }
        }
    }
    out.sort_by(|(_, a), (_, b)| match (&a.version, &b.version) {
        (Some(x), Some(y)) => compare(y, x),
        _ => std::cmp::Ordering::Equal,
    });
    out
}

/// Why a Subscription stays where it is although its channel offers something else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Held {
    /// The next version along the upgrade path is outside the range; `bundle` is the newest
    /// such version the installed CSV could upgrade to.
    NewerOutsideRange {
        range: String,
        installed: String,
        bundle: String,
        version: Option<String>,
    },
    /// The range no longer holds the installed version (it was narrowed below it), and no
    /// downgrade was asked for, or none is possible (`lower`: the newest in-range version
    /// below it, when there is one).
    InstalledOutsideRange {
        range: String,
        installed: String,
        version: Option<String>,
        downgrade_asked: bool,
        lower: Option<String>,
    },
    /// The next version along the upgrade path is one a rollback marked as failed
    /// (`olm-rs.io/failed-upgrade`, docs/upgrades.md §3), or older.
    FailedUpgrade {
        mark: String,
        installed: String,
        bundle: String,
        version: Option<String>,
    },
}

impl Held {
    /// The reason of the `VersionHeld` condition.
    pub fn reason(&self) -> &'static str {
        match self {
            Held::NewerOutsideRange { .. } => reason::NEWER_VERSION_OUTSIDE_RANGE,
            Held::InstalledOutsideRange { .. } => reason::INSTALLED_VERSION_OUTSIDE_RANGE,
            Held::FailedUpgrade { .. } => reason::FAILED_VERSION_SKIPPED,
        }
    }
}

/// Reasons of the `VersionHeld` condition.
pub mod reason {
    pub const NEWER_VERSION_OUTSIDE_RANGE: &str = "NewerVersionOutsideRange";
    pub const INSTALLED_VERSION_OUTSIDE_RANGE: &str = "InstalledVersionOutsideRange";
    pub const DOWNGRADE_REFUSED: &str = "DowngradeRefused";
    pub const FAILED_VERSION_SKIPPED: &str = "FailedVersionSkipped";
}

fn version_text(version: &Option<String>) -> String {
    version
        .as_deref()
        .map_or_else(|| "no version".to_owned(), |v| format!("version {v}"))
}

impl fmt::Display for Held {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Held::NewerOutsideRange {
                range,
                installed,
                bundle,
                version,
            } => write!(
                f,
                "{installed} is the newest version in range {range:?} ({VERSION_ANNOTATION}); {bundle} ({}) is available but outside the range",
                version_text(version)
            ),
            Held::FailedUpgrade {
                mark,
                installed,
                bundle,
                version,
            } => write!(
                f,
                "{bundle} ({}) is not installed: an upgrade to version {mark} failed and was rolled back ({}: {mark:?}); {installed} stays until the catalog offers a version newer than {mark} or the annotation is removed",
                version_text(version),
                crate::api::keys::FAILED_UPGRADE_ANNOTATION,
            ),
            Held::InstalledOutsideRange {
                range,
                installed,
                version,
                downgrade_asked,
                lower,
            } => {
                write!(
                    f,
                    "installed {installed} ({}) is outside range {range:?} ({VERSION_ANNOTATION}); ",
                    version_text(version)
                )?;
                match (downgrade_asked, lower) {
                    (false, Some(lower)) => write!(
                        f,
                        "it stays installed: olm-rs never downgrades by itself (set {ALLOW_DOWNGRADE_ANNOTATION}: \"true\" to install {lower})"
                    ),
                    (false, None) => write!(
                        f,
                        "it stays installed: no version in range is reachable from it along the channel's upgrade edges, and olm-rs never downgrades by itself"
                    ),
                    (true, _) => write!(
                        f,
                        "it stays installed: the channel offers no version in range below it"
                    ),
                }
            }
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A Subscription of package `p` carrying `annotations` (also the rollback tests' base).
    pub(in crate::resolve) fn sub(annotations: &[(&str, &str)]) -> Subscription {
        let mut sub: Subscription = serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "Subscription",
            "metadata": {"name": "s", "namespace": "ns"},
            "spec": {"name": "p", "source": "c", "sourceNamespace": "ns"},
        }))
        .expect("a valid Subscription");
        if !annotations.is_empty() {
            sub.metadata.annotations = Some(
                annotations
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            );
        }
        sub
    }

    fn v(s: &str) -> Version {
        Version::parse(s).expect("a version")
    }

    #[test]
    fn annotations_read_as_ranges_in_olms_syntax() {
        // (annotations, admitted, refused)
        type Case<'a> = (&'a [(&'a str, &'a str)], &'a [&'a str], &'a [&'a str]);
        let table: &[Case] = &[
            (&[], &["0.0.1", "9.9.9"], &[]),
            (
                &[(VERSION_ANNOTATION, ">=1.2.0 <2.0.0")],
                &["1.2.0", "1.9.9"],
                &["1.1.9", "2.0.0"],
            ),
            (
                &[(VERSION_ANNOTATION, "1.4.x")],
                &["1.4.0", "1.4.7"],
                &["1.5.0", "1.3.9"],
            ),
            (
                &[(VERSION_ANNOTATION, "<1.0.0 || >=3.0.0")],
                &["0.9.0", "3.1.0"],
                &["1.0.0", "2.9.9"],
            ),
            // An exact version pins.
            (
                &[(VERSION_ANNOTATION, "1.1.0")],
                &["1.1.0"],
                &["1.1.1", "1.0.9"],
            ),
            (&[(VERSION_ANNOTATION, " 1.1.0 ")], &["1.1.0"], &["1.2.0"]),
            // allow-downgrade alone asks nothing.
            (&[(ALLOW_DOWNGRADE_ANNOTATION, "true")], &["0.1.0"], &[]),
        ];
        for (annotations, admitted, refused) in table {
            let request = version_request(&sub(annotations)).expect("valid");
            for a in *admitted {
                assert!(
                    admits(request.as_ref(), Some(&v(a))),
                    "{annotations:?} admits {a}"
                );
            }
            for r in *refused {
                assert!(
                    !admits(request.as_ref(), Some(&v(r))),
                    "{annotations:?} refuses {r}"
                );
            }
        }
    }

    #[test]
    fn a_bundle_without_version_is_in_no_range() {
        let request = version_request(&sub(&[(VERSION_ANNOTATION, ">=0.0.0")])).expect("valid");
        assert!(!admits(request.as_ref(), None));
        assert!(admits(None, None));
    }

    #[test]
    fn allow_downgrade_is_only_the_word_true() {
        for (value, allowed) in [
            ("true", true),
            (" true", true),
            ("True", false),
            ("yes", false),
        ] {
            let request = version_request(&sub(&[
                (VERSION_ANNOTATION, "<1.0.0"),
                (ALLOW_DOWNGRADE_ANNOTATION, value),
            ]))
            .expect("valid")
            .expect("a request");
            assert_eq!(request.allow_downgrade, allowed, "{value:?}");
        }
    }

    #[test]
    fn a_malformed_range_names_the_annotation_and_the_parse_error() {
        for value in [">=1.0.0 ||", "~>1.0", ">=banana"] {
            let error = version_request(&sub(&[(VERSION_ANNOTATION, value)]))
                .expect_err("not a range")
                .to_string();
            assert!(error.contains(VERSION_ANNOTATION), "{error}");
            assert!(error.contains(&format!("{value:?}")), "{error}");
            let parse = VersionRange::parse(value)
                .expect_err("blang refuses it")
                .to_string();
            assert!(error.ends_with(&parse), "{error} / {parse}");
        }
    }
}

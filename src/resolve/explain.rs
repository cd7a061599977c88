//! Why a Subscription gets nothing, in plain words (spec README: "Resolution failures are
//! explained in plain words: which package, which constraint, which candidates were tried").
//!
//! Every refusal names the Subscription's catalog, package and channel; the condition reason
//! stays OLM's (`ConstraintsNotSatisfiable` / `ErrorPreventedResolution`, docs/resolution.md §9).

use crate::catalog::upgrade_graph::{GraphError, NoUpdate};

use super::adoption::Foreign;
pub use super::explain_conflict::Unsatisfiable;
use super::version_request::{BadVersionAnnotation, VERSION_ANNOTATION};
use crate::api::CatalogRef;

/// `ResolutionFailed` reason for a refusal nothing but a change of the inputs can fix.
pub const CONSTRAINTS_NOT_SATISFIABLE: &str = "ConstraintsNotSatisfiable";
/// `ResolutionFailed` reason for a refusal caused by an error (catalog down, bad graph, …).
pub const ERROR_PREVENTED_RESOLUTION: &str = "ErrorPreventedResolution";

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Refusal {
    #[error("expected 1 OperatorGroup in the namespace, found {}: {}", .names.len(), operator_groups(.namespace, .names))]
    OperatorGroups {
        namespace: String,
        names: Vec<String>,
    },
    #[error(
        "no operators found from catalog {} in namespace {} referenced by subscription {subscription}: catalog source {catalog} cannot be used from namespace {namespace}: a Subscription may only use catalogs in its own namespace{}",
        .catalog.name, .catalog.namespace, global_note(.global, *.global_excluded)
    )]
    CatalogNotVisible {
        subscription: String,
        catalog: CatalogRef,
        namespace: String,
        global: String,
        global_excluded: bool,
    },
    #[error(
        "no operators found from catalog {} in namespace {} referenced by subscription {subscription}: catalog source {catalog} does not exist, so package {package:?} cannot be looked up in it", .catalog.name, .catalog.namespace
    )]
    CatalogMissing {
        subscription: String,
        catalog: CatalogRef,
        package: String,
    },
    #[error(
        "error using catalogsource {catalog}: {reason}; so package {package:?} cannot be resolved until the catalog can be read"
    )]
    CatalogUnavailable {
        catalog: CatalogRef,
        package: String,
        reason: String,
    },
    #[error("no operators found in package {package} in the catalog referenced by subscription {subscription}; package {package:?} is not in catalog {catalog}{}", suggest(.similar))]
    PackageNotFound {
        subscription: String,
        catalog: CatalogRef,
        package: String,
        similar: Vec<String>,
    },
    #[error(
        "no operators found in channel {channel} of package {package} in the catalog referenced by subscription {subscription}; channel {channel:?} of package {package:?} is not in catalog {catalog}; the package has channel{} {}{}",
        plural(.channels.len()), quoted(.channels), default_note(.default_channel.as_deref())
    )]
    ChannelNotFound {
        subscription: String,
        catalog: CatalogRef,
        package: String,
        channel: String,
        channels: Vec<String>,
        default_channel: Option<String>,
    },
    #[error(
        "no operators found with name {starting_csv} in channel {} of package {package} in the catalog referenced by subscription {subscription}; startingCSV {starting_csv} is not in {} of package {package:?} in catalog {catalog}{}",
        .channel.as_deref().unwrap_or_default(), channel_words(.channel.as_deref()), found_elsewhere(.found_in)
    )]
    StartingCsvNotFound {
        subscription: String,
        catalog: CatalogRef,
        package: String,
        channel: Option<String>,
        starting_csv: String,
        /// Channels of the package that do list it.
        found_in: Vec<String>,
    },
    #[error(
        "channel {channel:?} of package {package:?} in catalog {catalog} cannot be used: {error}"
    )]
    ChannelUnusable {
        catalog: CatalogRef,
        package: String,
        channel: String,
        error: GraphError,
    },
    #[error("{}; {} of package {package:?} in catalog {catalog} has no bundle to install", olm_no_operators(.subscription, .package, .channel.as_deref()), channel_words(.channel.as_deref()))]
    NoBundles {
        subscription: String,
        catalog: CatalogRef,
        package: String,
        channel: Option<String>,
    },
    #[error(
        "the installed operator {installed} cannot move to {} of package {package:?} in catalog {catalog}: {detail}",
        channel_words(Some(.channel))
    )]
    CannotFollowChannel {
        catalog: CatalogRef,
        package: String,
        channel: String,
        installed: String,
        detail: NoUpdate,
    },
    #[error(
        "constraints not satisfiable: {}; every bundle that could be installed from {} of package {package:?} in catalog {catalog} is marked olm.deprecated: {}",
        .bundles.iter().map(|b| format!("bundle {b} is deprecated")).collect::<Vec<_>>().join(", "),
        channel_words(.channel.as_deref()), .bundles.join(", ")
    )]
    AllDeprecated {
        catalog: CatalogRef,
        package: String,
        channel: Option<String>,
        bundles: Vec<String>,
    },
    #[error(
        "constraints not satisfiable: there can be only one operator from package {package}; package {package:?} is already subscribed to by Subscription {other} in this namespace, and only one operator of a package can be installed in a namespace"
    )]
    PackageAlreadySubscribed { package: String, other: String },
    /// An installed CSV no Subscription claims stands where this one would install, and is
    /// not its to adopt (docs/resolution.md §4.2): OLM's sentence first, then why; the CSV is
    /// left as it is.
    #[error(
        "constraints not satisfiable: clusterserviceversion {csv} exists and is not referenced by a subscription; Subscription {subscription} does not adopt it because {}; olm-rs leaves {csv} as it is: delete it for package {package:?} to be installed from catalog {catalog}, or subscribe to what it was installed from",
        foreign_words(.foreign, .package, .channel.as_deref(), .catalog)
    )]
    InstalledInTheWay {
        subscription: String,
        csv: String,
        package: String,
        catalog: CatalogRef,
        /// The Subscription's channel; `None`: it follows any.
        channel: Option<String>,
        foreign: Foreign,
    },
    /// `olm-rs.io/version` is not a range (docs/upgrades.md): nothing else is done.
    #[error(
        "Subscription {subscription}: {error}; nothing is installed or upgraded until it is fixed"
    )]
    BadVersionRange {
        subscription: String,
        error: BadVersionAnnotation,
    },
    /// No bundle of the channel(s) is in the `olm-rs.io/version` range (docs/upgrades.md).
    #[error(
        "{}; no bundle of {} of package {package:?} in catalog {catalog} is in range {range:?} ({VERSION_ANNOTATION}){}",
        olm_no_operators(.subscription, .package, .channel.as_deref()), channel_words(.channel.as_deref()), outside_note(.outside)
    )]
    NothingInRange {
        subscription: String,
        catalog: CatalogRef,
        package: String,
        channel: Option<String>,
        range: String,
        /// The newest bundles offered, `<bundle> (version <v>)`, at most five.
        outside: Vec<String>,
    },
    /// `startingCSV` names a bundle outside the `olm-rs.io/version` range.
    #[error(
        "startingCSV {starting_csv} of Subscription {subscription} has {} and is outside range {range:?} ({VERSION_ANNOTATION}); change one of them",
        .version.as_deref().map_or_else(|| "no version".to_owned(), |v| format!("version {v}"))
    )]
    StartingCsvOutOfRange {
        subscription: String,
        starting_csv: String,
        version: Option<String>,
        range: String,
    },
    /// Every candidate was rejected for the namespace's invariants or its requirements.
    #[error("{0}")]
    Unsatisfiable(Box<Unsatisfiable>),
    /// This Subscription's choice is what another Subscription's needs collide with: both fail,
    /// each naming the other (everything else in the namespace proceeds).
    #[error(
        "constraints not satisfiable: subscription {subscription} exists, subscription {other} exists; Subscription {subscription} would install {bundle}, which Subscription {other} cannot be installed next to, so neither is installed until one of them changes: {detail}"
    )]
    ConflictsWith {
        subscription: String,
        other: String,
        bundle: String,
        /// The other Subscription's explanation.
        detail: String,
    },
}

impl Refusal {
    /// The `ResolutionFailed` reason OLM would give.
    pub fn reason(&self) -> &'static str {
        match self {
            Refusal::OperatorGroups { .. }
            | Refusal::CatalogUnavailable { .. }
            | Refusal::ChannelUnusable { .. }
            | Refusal::BadVersionRange { .. } => ERROR_PREVENTED_RESOLUTION,
            Refusal::Unsatisfiable(u) if u.is_bad_input() => ERROR_PREVENTED_RESOLUTION,
            _ => CONSTRAINTS_NOT_SATISFIABLE,
        }
    }
}

fn outside_note(outside: &[String]) -> String {
    if outside.is_empty() {
        String::new()
    } else {
        format!("; offered outside it: {}", outside.join(", "))
    }
}

/// OLM's sentence when a Subscription's catalog has nothing for it (docs/resolution.md §4).
fn olm_no_operators(subscription: &str, package: &str, channel: Option<&str>) -> String {
    match channel {
        Some(c) => format!(
            "no operators found in channel {c} of package {package} in the catalog referenced by subscription {subscription}"
        ),
        None => format!(
            "no operators found in package {package} in the catalog referenced by subscription {subscription}"
        ),
    }
}

fn operator_groups(namespace: &str, names: &[String]) -> String {
    match names {
        [] => format!(
            "namespace {namespace} has no OperatorGroup: create one (exactly one per namespace) to say which namespaces its operators serve"
        ),
        _ => format!(
            "namespace {namespace} has {} OperatorGroups ({}); exactly one is allowed per namespace, delete the others",
            names.len(),
            names.join(", ")
        ),
    }
}

fn global_note(global: &str, excluded: bool) -> String {
    if excluded {
        format!(
            " (the global catalog namespace {global} is excluded by the OperatorGroup's olm.operatorframework.io/exclude-global-namespace-resolution annotation)"
        )
    } else {
        format!(" or in the global catalog namespace {global}")
    }
}

fn suggest(similar: &[String]) -> String {
    match similar {
        [] => String::new(),
        _ => format!("; did you mean {}?", quoted(similar).replace(", ", " or ")),
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

fn quoted(names: &[String]) -> String {
    if names.is_empty() {
        return "(none)".into();
    }
    names
        .iter()
        .map(|n| format!("{n:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn default_note(default: Option<&str>) -> String {
    default.map_or_else(String::new, |d| format!(" (default {d:?})"))
}

fn foreign_words(
    foreign: &Foreign,
    package: &str,
    channel: Option<&str>,
    catalog: &CatalogRef,
) -> String {
    match foreign {
        Foreign::NotInChannels => format!(
            "it is not in {} of package {package:?} in catalog {catalog}",
            channel_words(channel)
        ),
        Foreign::OtherPackage(other) => format!(
            "it belongs to package {other:?}, though package {package:?} in catalog {catalog} has a bundle of that name"
        ),
    }
}

fn channel_words(channel: Option<&str>) -> String {
    match channel {
        Some(c) => format!("channel {c:?}"),
        None => "any channel".into(),
    }
}

fn found_elsewhere(channels: &[String]) -> String {
    match channels {
        [] => "; no channel of the package lists it".into(),
        _ => format!(
            "; it is listed in channel{} {}",
            plural(channels.len()),
            quoted(channels)
        ),
    }
}

/// Package names close to `wanted` (substring either way, or at most two edits), for
/// "did you mean" hints. At most three, closest first.
pub fn similar_names<'a>(wanted: &str, names: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut scored: Vec<(usize, &str)> = names
        .filter(|n| *n != wanted)
        .filter_map(|n| {
            let d = edit_distance(wanted, n);
            let contains = !wanted.is_empty() && (n.contains(wanted) || wanted.contains(n));
            (d <= 2 || contains).then_some((d, n))
        })
        .collect();
    scored.sort();
    scored
        .into_iter()
        .take(3)
        .map(|(_, n)| n.to_owned())
        .collect()
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut row = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            row[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(row[j] + 1);
        }
        prev = row;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cat() -> CatalogRef {
        CatalogRef::new("olm", "community")
    }

    #[test]
    fn messages_name_catalog_package_and_channel() {
        let r = Refusal::ChannelNotFound {
            subscription: "sub".into(),
            catalog: cat(),
            package: "etcd".into(),
            channel: "beta".into(),
            channels: vec!["alpha".into(), "stable".into()],
            default_channel: Some("stable".into()),
        };
        assert_eq!(
            r.to_string(),
            "no operators found in channel beta of package etcd in the catalog referenced by subscription sub; channel \"beta\" of package \"etcd\" is not in catalog olm/community; the package has channels \"alpha\", \"stable\" (default \"stable\")"
        );
        assert_eq!(r.reason(), CONSTRAINTS_NOT_SATISFIABLE);
        let r = Refusal::PackageNotFound {
            subscription: "sub".into(),
            catalog: cat(),
            package: "etcdd".into(),
            similar: similar_names(
                "etcdd",
                ["etcd", "prometheus", "etcdd-operator"].into_iter(),
            ),
        };
        assert_eq!(
            r.to_string(),
            "no operators found in package etcdd in the catalog referenced by subscription sub; package \"etcdd\" is not in catalog olm/community; did you mean \"etcd\" or \"etcdd-operator\"?"
        );
    }

    #[test]
    fn operator_group_count_is_explained_and_is_an_error() {
        let none = Refusal::OperatorGroups {
            namespace: "ns".into(),
            names: vec![],
        };
        assert!(none.to_string().starts_with(
            "expected 1 OperatorGroup in the namespace, found 0: namespace ns has no OperatorGroup"
        ));
        assert_eq!(none.reason(), ERROR_PREVENTED_RESOLUTION);
        let two = Refusal::OperatorGroups {
            namespace: "ns".into(),
            names: vec!["a".into(), "b".into()],
        };
        assert_eq!(
            two.to_string(),
            "expected 1 OperatorGroup in the namespace, found 2: namespace ns has 2 OperatorGroups (a, b); exactly one is allowed per namespace, delete the others"
        );
    }

    #[test]
    fn starting_csv_hint_names_the_channels_that_have_it() {
        let r = Refusal::StartingCsvNotFound {
            subscription: "sub".into(),
            catalog: cat(),
            package: "etcd".into(),
            channel: Some("stable".into()),
            starting_csv: "etcd.v0.6.1".into(),
            found_in: vec!["alpha".into()],
        };
        assert_eq!(
            r.to_string(),
            "no operators found with name etcd.v0.6.1 in channel stable of package etcd in the catalog referenced by subscription sub; startingCSV etcd.v0.6.1 is not in channel \"stable\" of package \"etcd\" in catalog olm/community; it is listed in channel \"alpha\""
        );
    }
}

//! Candidates for a dependency, in OLM's order (docs/resolution.md §6): by catalog (the
//! dependent's own catalog, then higher priority, then catalogs of the namespace before global
//! ones, then by name), within a catalog default-channel groups first, then package name, then
//! channel name, each channel head first. Installed operators are looked at before any of
//! these (the solver checks them first).

use std::collections::HashSet;

use crate::catalog::CatalogIndex;
use crate::catalog::index::{ChannelIndex, IndexedBundle, PackageIndex};

use super::requirement::{CandidateView, Predicate, Requirement};
use super::solver::Claims;
use super::version_request::{VersionRequest, admits, version_request};
use crate::api::CatalogRef;

/// The `olm-rs.io/version` range of the namespace's Subscription to `package`, with that
/// Subscription's name: a dependency on the package is held to it as to an
/// `olm.package.required` range (docs/upgrades.md). A malformed range holds nothing here: the
/// Subscription itself reports it.
pub fn subscription_range<'c>(
    claims: &Claims<'c>,
    package: &str,
) -> Option<(&'c str, VersionRequest)> {
    claims
        .namespace()
        .subscriptions
        .iter()
        .filter(|s| s.spec.name == package)
        .find_map(|s| {
            let request = version_request(s).ok()??;
            Some((s.metadata.name.as_deref().unwrap_or_default(), request))
        })
}

/// A catalog entry that may satisfy a requirement.
#[derive(Debug, Clone)]
pub struct Candidate<'a> {
    pub catalog: CatalogRef,
    pub package: &'a PackageIndex,
    pub channel: &'a ChannelIndex,
    pub bundle: &'a IndexedBundle,
}

impl Candidate<'_> {
    /// `<bundle> (catalog <ns>/<name>, channel <c>)`.
    pub fn describe(&self) -> String {
        format!(
            "{} (catalog {}, channel {})",
            self.bundle.name(),
            self.catalog,
            self.channel.name()
        )
    }
}

fn view(bundle: &IndexedBundle) -> CandidateView<'_> {
    CandidateView {
        package: bundle.package(),
        version: bundle.version(),
        properties: bundle.properties(),
    }
}

/// Packages of `index` that may hold a match: exact lookups for APIs and packages, every
/// package for labels and constraints.
fn packages_for<'i>(index: &'i CatalogIndex, predicate: &Predicate) -> Vec<&'i PackageIndex> {
    match predicate {
        Predicate::Gvk(gvk) => {
            let mut seen: Vec<&PackageIndex> = Vec::new();
            for (package, _) in index.bundles_that_provide(gvk) {
                if !seen.iter().any(|p| p.name() == package.name()) {
                    seen.push(package);
                }
            }
            seen
        }
        Predicate::Package { name, .. } => index.package(name).into_iter().collect(),
        _ => index.packages().iter().collect(),
    }
}

/// Every entry matching `requirement` of `owner_catalog`'s dependent, in OLM's order, each
/// bundle once.
pub fn dependency_candidates<'a>(
    claims: &Claims<'a>,
    requirement: &Requirement,
    owner_catalog: &CatalogRef,
) -> Vec<Candidate<'a>> {
    let namespace = claims.namespace().namespace;
    let mut catalogs = claims.catalogs().to_vec();
    catalogs.sort_by(|a, b| {
        let key = |c: &crate::resolve::CatalogInput| {
            (
                c.key != *owner_catalog,
                -i64::from(c.priority),
                c.key.namespace != namespace,
                c.key.name.clone(),
                c.key.namespace.clone(),
            )
        };
        key(a).cmp(&key(b))
    });
    let predicate = &requirement.predicate;
    // Ranges of the namespace's Subscriptions, by package, looked up once per package.
    let mut ranges: Vec<(String, Option<VersionRequest>)> = Vec::new();
    let mut in_subscription_range = |b: &IndexedBundle| -> bool {
        let package = b.package();
        let at = match ranges.iter().position(|(p, _)| *p == package) {
            Some(at) => at,
            None => {
                let range = subscription_range(claims, package).map(|(_, r)| r);
                ranges.push((package.to_owned(), range));
                ranges.len() - 1
            }
        };
        admits(ranges[at].1.as_ref(), b.version())
    };
    let mut out = Vec::new();
    for catalog in catalogs {
        let Some(index) = catalog.index() else {
            continue;
        };
        let mut groups: Vec<(bool, &str, &str, &PackageIndex, &ChannelIndex)> = Vec::new();
        let mut matching: HashSet<&str> = HashSet::new();
        for package in packages_for(index, predicate) {
            let hits: Vec<&IndexedBundle> = package
                .bundles()
                .iter()
                .filter(|b| predicate.matches(&view(b)) && in_subscription_range(b))
                .collect();
            if hits.is_empty() {
                continue;
            }
            let default = package.default_channel_name();
            for channel in package.channels() {
                if hits
                    .iter()
                    .any(|b| b.channels().iter().any(|c| c == channel.name()))
                {
                    groups.push((
                        Some(channel.name()) != default,
                        package.name(),
                        channel.name(),
                        package,
                        channel,
                    ));
                }
            }
            matching.extend(hits.iter().map(|b| b.name()));
        }
        groups.sort_by(|a, b| (a.0, a.1, a.2).cmp(&(b.0, b.1, b.2)));
        let mut taken: HashSet<&str> = HashSet::new();
        for (_, _, _, package, channel) in groups {
            // A channel whose order cannot be determined offers nothing (OLM errors out).
            let Ok(order) = channel.graph().channel_order() else {
                continue;
            };
            for entry in order {
                let name = entry.name.as_str();
                if !matching.contains(name) || !taken.insert(name) {
                    continue;
                }
                if let Some(bundle) = package.bundle(name) {
                    out.push(Candidate {
                        catalog: catalog.key.clone(),
                        package,
                        channel,
                        bundle,
                    });
                }
            }
        }
    }
    out
}

/// Bundles that come close to a package requirement (the package, at a version outside the
/// range), or a note that nothing visible provides what is asked, in words. At most five.
pub fn near_misses(claims: &Claims<'_>, requirement: &Requirement) -> Vec<String> {
    let Predicate::Package { name, range } = &requirement.predicate else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let held = subscription_range(claims, name);
    if let Some((subscription, request)) = &held {
        out.push(format!(
            "Subscription {subscription} holds package {name:?} to range {:?} ({})",
            request.range.as_str(),
            super::version_request::VERSION_ANNOTATION
        ));
    }
    for catalog in claims.catalogs() {
        let Some(package) = catalog.index().and_then(|i| i.package(name)) else {
            continue;
        };
        let mut versions: Vec<&IndexedBundle> = package.bundles().iter().collect();
        versions.sort_by(|a, b| b.version().cmp(&a.version()));
        for b in versions.into_iter().take(6 - out.len().min(6)) {
            out.push(match b.version() {
                Some(v) if range.contains(v) && let Some((subscription, request)) = &held => {
                    format!(
                        "{} in catalog {} has version {v}, inside {} but outside range {:?} of Subscription {subscription}",
                        b.name(),
                        catalog.key,
                        range.as_str(),
                        request.range.as_str()
                    )
                }
                Some(v) => format!(
                    "{} in catalog {} has version {v}, outside {}",
                    b.name(),
                    catalog.key,
                    range.as_str()
                ),
                None => format!("{} in catalog {} has no version", b.name(), catalog.key),
            });
        }
    }
    out
}

//! What each `api.Registry` call answers for a catalog index, with opm's semantics and error
//! texts (docs/catalog.md §5.1; opm's file-based cache). Pure: the gRPC server is a thin
//! adapter over these functions, and tests call them directly to check the server.
//!
//! Orders: opm iterates Go maps, so its orders are unspecified; ours are packages by name,
//! channels by name, entries in catalog order — stable answers for the same catalog.

use crate::catalog::properties::GvkValue;
use crate::catalog::{CatalogIndex, ChannelIndex, GraphEntry, IndexedBundle, PackageIndex};

use super::convert::to_api::{self, BundleView};
use super::proto;

/// A query that found nothing or was malformed: the message opm sends (as gRPC status UNKNOWN,
/// since opm returns plain Go errors).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct QueryError(pub String);

type Answer<T> = Result<T, QueryError>;

fn package_not_found(name: &str) -> QueryError {
    QueryError(format!("package {name:?} not found"))
}

fn channel_not_found(package: &str, channel: &str) -> QueryError {
    QueryError(format!(
        "package {package:?}, channel {channel:?} not found"
    ))
}

pub fn list_packages(index: &CatalogIndex) -> Vec<proto::PackageName> {
    index
        .packages()
        .iter()
        .map(|p| proto::PackageName {
            name: p.name().to_owned(),
        })
        .collect()
}

pub fn get_package(index: &CatalogIndex, name: &str) -> Answer<proto::Package> {
    index
        .package(name)
        .map(to_api::package)
        .ok_or_else(|| package_not_found(name))
}

fn package_channel<'a>(
    index: &'a CatalogIndex,
    package: &str,
    channel: &str,
) -> Answer<(&'a PackageIndex, &'a ChannelIndex)> {
    let pkg = index
        .package(package)
        .ok_or_else(|| package_not_found(package))?;
    let ch = pkg
        .channel(channel)
        .ok_or_else(|| channel_not_found(package, channel))?;
    Ok((pkg, ch))
}

/// The bundle behind a channel entry; `None` only for an entry without an `olm.bundle` blob,
/// which a validated catalog never has.
fn bundle_of<'a>(pkg: &'a PackageIndex, entry: &GraphEntry) -> Option<&'a IndexedBundle> {
    pkg.bundle(&entry.name)
}

fn full_bundle(pkg: &PackageIndex, ch: &ChannelIndex, entry: &GraphEntry) -> Answer<proto::Bundle> {
    let b = bundle_of(pkg, entry).ok_or_else(|| {
        QueryError(format!(
            "package {:?}, channel {:?}, bundle {:?} not found",
            pkg.name(),
            ch.name(),
            entry.name
        ))
    })?;
    Ok(to_api::bundle(
        pkg,
        ch.name(),
        Some(entry),
        b,
        BundleView::Full,
    ))
}

pub fn get_bundle(
    index: &CatalogIndex,
    package: &str,
    channel: &str,
    csv_name: &str,
) -> Answer<proto::Bundle> {
    let (pkg, ch) = package_channel(index, package, channel)?;
    let entry = ch.graph().entry(csv_name).ok_or_else(|| {
        QueryError(format!(
            "package {package:?}, channel {channel:?}, bundle {csv_name:?} not found"
        ))
    })?;
    full_bundle(pkg, ch, entry)
}

/// The channel head (deprecated RPC, still called by the package server).
pub fn get_bundle_for_channel(
    index: &CatalogIndex,
    package: &str,
    channel: &str,
) -> Answer<proto::Bundle> {
    let (pkg, ch) = package_channel(index, package, channel)?;
    let head = ch
        .graph()
        .channel_head()
        .map_err(|e| QueryError(format!("package {package:?}, channel {channel:?}: {e}")))?;
    full_bundle(pkg, ch, head)
}

/// Every entry, in any package and channel, whose `replaces` is `csv_name` or whose `skips`
/// contain it; one message per match, `replaces` always the entry's own `replaces` (opm).
pub fn entries_that_replace(
    index: &CatalogIndex,
    csv_name: &str,
) -> Answer<Vec<proto::ChannelEntry>> {
    let mut out = Vec::new();
    for pkg in index.packages() {
        for ch in pkg.channels() {
            for e in ch.graph().entries() {
                let replaces = e.replaces.as_deref().unwrap_or_default();
                let by_replaces = usize::from(replaces == csv_name);
                let by_skips = e
                    .skips
                    .iter()
                    .filter(|s| *s == csv_name && *s != replaces)
                    .count();
                for _ in 0..by_replaces + by_skips {
                    out.push(to_api::channel_entry(
                        pkg.name(),
                        ch.name(),
                        &e.name,
                        replaces,
                    ));
                }
            }
        }
    }
    if out.is_empty() {
        return Err(QueryError(format!(
            "no channel entries found that replace {csv_name}"
        )));
    }
    Ok(out)
}

/// A bundle of (package, channel) that replaces or skips `csv_name`.
pub fn bundle_that_replaces(
    index: &CatalogIndex,
    csv_name: &str,
    package: &str,
    channel: &str,
) -> Answer<proto::Bundle> {
    // opm quotes the package here with %s, not %q.
    let pkg = index
        .package(package)
        .ok_or_else(|| QueryError(format!("package {package} not found")))?;
    let ch = pkg
        .channel(channel)
        .ok_or_else(|| channel_not_found(package, channel))?;
    let entry = ch
        .graph()
        .entries()
        .iter()
        .find(|e| e.replaces.as_deref() == Some(csv_name) || e.skips.iter().any(|s| s == csv_name))
        .ok_or_else(|| {
            QueryError(format!(
                "no entry found for package {package:?}, channel {channel:?}"
            ))
        })?;
    full_bundle(pkg, ch, entry)
}

fn provides(b: &IndexedBundle, gvk: &GvkValue) -> bool {
    b.provided_gvks().any(|g| g == *gvk)
}

/// One entry with the bundle's `replaces`, plus one per skipped name (other than `replaces`);
/// `only_in_channel` keeps only skipped names that are entries of the same channel.
fn entries_for(
    pkg: &PackageIndex,
    ch: &ChannelIndex,
    e: &GraphEntry,
    only_in_channel: bool,
) -> impl Iterator<Item = proto::ChannelEntry> {
    let replaces = e.replaces.as_deref().unwrap_or_default();
    let first = to_api::channel_entry(pkg.name(), ch.name(), &e.name, replaces);
    let skipped: Vec<proto::ChannelEntry> = e
        .skips
        .iter()
        .filter(|s| *s != replaces && (!only_in_channel || ch.graph().entry(s).is_some()))
        .map(|s| to_api::channel_entry(pkg.name(), ch.name(), &e.name, s))
        .collect();
    std::iter::once(first).chain(skipped)
}

fn no_provider(gvk: &GvkValue) -> QueryError {
    QueryError(format!(
        "no channel entries found that provide group:{:?} version:{:?} kind:{:?}",
        gvk.group, gvk.version, gvk.kind
    ))
}

pub fn entries_that_provide(
    index: &CatalogIndex,
    gvk: &GvkValue,
) -> Answer<Vec<proto::ChannelEntry>> {
    let mut out = Vec::new();
    for pkg in index.packages() {
        for ch in pkg.channels() {
            for e in ch.graph().entries() {
                if bundle_of(pkg, e).is_some_and(|b| provides(b, gvk)) {
                    out.extend(entries_for(pkg, ch, e, false));
                }
            }
        }
    }
    if out.is_empty() {
        return Err(no_provider(gvk));
    }
    Ok(out)
}

/// Only channel heads that provide the API.
pub fn latest_entries_that_provide(
    index: &CatalogIndex,
    gvk: &GvkValue,
) -> Answer<Vec<proto::ChannelEntry>> {
    let mut out = Vec::new();
    for pkg in index.packages() {
        for ch in pkg.channels() {
            let Ok(head) = ch.graph().channel_head() else {
                continue;
            };
            if bundle_of(pkg, head).is_some_and(|b| provides(b, gvk)) {
                out.extend(entries_for(pkg, ch, head, true));
            }
        }
    }
    if out.is_empty() {
        return Err(no_provider(gvk));
    }
    Ok(out)
}

/// Among the latest providers (by package name), the first in its package's default channel.
pub fn default_bundle_that_provides(index: &CatalogIndex, gvk: &GvkValue) -> Answer<proto::Bundle> {
    let not_found = || {
        QueryError(format!(
            "no entry found that provides group:{:?} version:{:?} kind:{:?}",
            gvk.group, gvk.version, gvk.kind
        ))
    };
    let mut latest = latest_entries_that_provide(index, gvk).map_err(|_| not_found())?;
    latest.sort_by(|a, b| a.package_name.cmp(&b.package_name));
    for entry in latest {
        let Some(pkg) = index.package(&entry.package_name) else {
            continue;
        };
        if pkg.default_channel_name() == Some(entry.channel_name.as_str()) {
            return get_bundle(
                index,
                &entry.package_name,
                &entry.channel_name,
                &entry.bundle_name,
            );
        }
    }
    Err(not_found())
}

/// Every (bundle, channel) membership, lazily, in package/channel/entry order.
pub fn list_bundles(index: &CatalogIndex) -> impl Iterator<Item = proto::Bundle> + '_ {
    index.packages().iter().flat_map(|pkg| {
        pkg.channels().iter().flat_map(move |ch| {
            ch.graph().entries().iter().filter_map(move |e| {
                bundle_of(pkg, e)
                    .map(|b| to_api::bundle(pkg, ch.name(), Some(e), b, BundleView::Listed))
            })
        })
    })
}

/// The GVK of a provider request: `plural` is ignored by FBC servers.
pub fn requested_gvk(group: &str, version: &str, kind: &str) -> GvkValue {
    GvkValue {
        group: group.to_owned(),
        kind: kind.to_owned(),
        version: version.to_owned(),
    }
}

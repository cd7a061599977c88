//! Replacement chains between CSVs of one namespace (docs/csv-phases.md §9): who replaces whom, the chain
//! a CSV belongs to, and where it ends.

use std::collections::BTreeSet;

use crate::api::ClusterServiceVersion;

use super::identity::{name, replaces};
use super::observed::Observed;
use crate::operator_group::is_copied;

/// The CSV this one replaces, if it exists in the namespace (and is not a copy).
pub fn replaced_csv<'a>(
    csv: &ClusterServiceVersion,
    seen: &'a Observed,
) -> Option<&'a ClusterServiceVersion> {
    let target = replaces(csv)?;
    seen.csv(target).filter(|c| !is_copied(c))
}

/// A CSV that names this one in `spec.replaces` (docs/csv-phases.md §3.1 Succeeded step 1). With several
/// candidates the first by name wins, so the answer does not depend on cache order.
pub fn replacement_of<'a>(
    csv: &ClusterServiceVersion,
    seen: &'a Observed,
) -> Option<&'a ClusterServiceVersion> {
    let me = name(csv);
    seen.csvs
        .iter()
        .map(|c| c.as_ref())
        .filter(|c| !is_copied(c) && name(c) != me && replaces(c) == Some(me))
        .min_by(|a, b| name(a).cmp(name(b)))
}

/// The CSVs this one (transitively) replaces that still exist, nearest first.
pub fn ancestors<'a>(
    csv: &ClusterServiceVersion,
    seen: &'a Observed,
) -> Vec<&'a ClusterServiceVersion> {
    let mut out = Vec::new();
    let mut visited = BTreeSet::from([name(csv).to_owned()]);
    let mut current = replaced_csv(csv, seen);
    while let Some(prev) = current {
        if !visited.insert(name(prev).to_owned()) {
            break; // a cycle
        }
        out.push(prev);
        current = replaced_csv(prev, seen);
    }
    out
}

/// The newest CSV reached by following replacements forward from `csv` (itself if nothing
/// replaces it).
pub fn newest_in_chain<'a>(
    csv: &'a ClusterServiceVersion,
    seen: &'a Observed,
) -> &'a ClusterServiceVersion {
    let mut visited = BTreeSet::from([name(csv).to_owned()]);
    let mut current = csv;
    while let Some(next) = replacement_of(current, seen) {
        if !visited.insert(name(next).to_owned()) {
            break;
        }
        current = next;
    }
    current
}

/// Names of every CSV in this one's replacement chain, both directions, itself included
/// (docs/csv-phases.md §6.3: CSVs of one chain may own the same CRDs).
pub fn chain_names(csv: &ClusterServiceVersion, seen: &Observed) -> BTreeSet<String> {
    let mut chain = BTreeSet::from([name(csv).to_owned()]);
    let mut current = csv;
    while let Some(next) = replacement_of(current, seen) {
        if !chain.insert(name(next).to_owned()) {
            break;
        }
        current = next;
    }
    // OLM includes the name in `replaces` even when walking stops there.
    if let Some(prev) = replaces(csv) {
        chain.insert(prev.to_owned());
    }
    for prev in ancestors(csv, seen) {
        chain.insert(name(prev).to_owned());
        if let Some(older) = replaces(prev) {
            chain.insert(older.to_owned());
        }
    }
    chain
}

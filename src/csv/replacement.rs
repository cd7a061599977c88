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
    seen.csv(target)
        .filter(|c| !is_copied(c))
        // A downgrade's pair: the newer CSV's link to the older one is stale.
        .filter(|c| !mutual_and_older(c, csv))
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
        .filter(|c| !mutual_and_older(csv, c))
        .min_by(|a, b| name(a).cmp(name(b)))
}

/// Whether `other` names `csv` in `spec.replaces` and `csv` names `other` in its own, and
/// `other` came first. Only a downgrade makes such a pair (docs/upgrades.md): the older
/// version installed again replaces the newer one, which still names it. The CSV created
/// later is the replacer; created in the same second, the one marked as a downgrade from the
/// other (else the higher version). (OLM never downgrades, so never sees a pair: both would stay `Replacing`.)
fn mutual_and_older(csv: &ClusterServiceVersion, other: &ClusterServiceVersion) -> bool {
    if replaces(csv) != Some(name(other)) {
        return false;
    }
    let created = |c: &ClusterServiceVersion| c.metadata.creation_timestamp.as_ref().map(|t| t.0);
    match created(other).cmp(&created(csv)) {
        std::cmp::Ordering::Less => true,
        std::cmp::Ordering::Greater => false,
        std::cmp::Ordering::Equal if downgraded_from(csv) == Some(name(other)) => true,
        std::cmp::Ordering::Equal if downgraded_from(other) == Some(name(csv)) => false,
        // Neither marked (made by hand): the higher version replaces, as an upgrade would.
        std::cmp::Ordering::Equal => version(other) < version(csv),
    }
}

fn version(csv: &ClusterServiceVersion) -> Option<crate::catalog::semver_range::Version> {
    let text = csv.spec.version.as_deref()?;
    crate::catalog::semver_range::parse_tolerant(text).ok()
}

fn downgraded_from(csv: &ClusterServiceVersion) -> Option<&str> {
    csv.metadata
        .annotations
        .as_ref()?
        .get(crate::api::keys::DOWNGRADED_FROM_ANNOTATION)
        .map(String::as_str)
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

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;
    use crate::api::keys::DOWNGRADED_FROM_ANNOTATION;
    use crate::csv::fixtures::{csv, observed, replacing, t};

    fn created(mut c: ClusterServiceVersion, second: i64) -> ClusterServiceVersion {
        c.metadata.creation_timestamp = Some(Time(t(second)));
        let version = if c.metadata.name.as_deref() == Some("op.v2") {
            "2.0.0"
        } else {
            "1.0.0"
        };
        c.spec.version = Some(version.to_owned());
        c
    }

    fn marked(mut c: ClusterServiceVersion, from: &str) -> ClusterServiceVersion {
        c.metadata.annotations =
            Some([(DOWNGRADED_FROM_ANNOTATION.to_owned(), from.to_owned())].into());
        c
    }

    #[test]
    fn in_a_downgrades_pair_the_later_csv_replaces_the_earlier_one() {
        // (v2's creation, v1's creation, v1 marked as a downgrade from v2, v1 replaces v2)
        let table = [
            (10, 20, false, true),
            (10, 20, true, true),
            // The re-upgrade: v2 made again after v1 (still marked): v2 replaces v1.
            (30, 20, true, false),
            // Same second: the mark decides, else the higher version.
            (10, 10, true, true),
            (10, 10, false, false),
        ];
        for (v2_at, v1_at, mark, v1_replaces_v2) in table {
            let v2 = created(replacing(csv("op.v2"), "op.v1"), v2_at);
            let mut v1 = created(replacing(csv("op.v1"), "op.v2"), v1_at);
            if mark {
                v1 = marked(v1, "op.v2");
            }
            let seen = observed(&[&v1, &v2]);
            let case = format!("{v2_at} {v1_at} {mark}");
            let (replacer, stale) = if v1_replaces_v2 {
                ("op.v1", &v2)
            } else {
                ("op.v2", &v1)
            };
            assert_eq!(
                replacement_of(stale, &seen).map(name),
                Some(replacer),
                "{case}"
            );
            assert_eq!(
                replaced_csv(stale, &seen).map(name),
                None,
                "{case}: the stale link"
            );
            let fresh = if v1_replaces_v2 { &v1 } else { &v2 };
            assert_eq!(replacement_of(fresh, &seen).map(name), None, "{case}");
            assert_eq!(
                newest_in_chain(stale, &seen).metadata.name.as_deref(),
                Some(replacer),
                "{case}"
            );
        }
    }

    #[test]
    fn an_ordinary_chain_is_unchanged() {
        let v1 = created(csv("op.v1"), 10);
        let v2 = created(replacing(csv("op.v2"), "op.v1"), 20);
        let seen = observed(&[&v1, &v2]);
        assert_eq!(replacement_of(&v1, &seen).map(name), Some("op.v2"));
        assert_eq!(replaced_csv(&v2, &seen).map(name), Some("op.v1"));
    }
}

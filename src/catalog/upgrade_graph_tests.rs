use super::*;
use crate::catalog::semver_range::parse_strict;

fn entry(
    name: &str,
    replaces: Option<&str>,
    skips: &[&str],
    range: Option<&str>,
    version: &str,
) -> GraphEntry {
    GraphEntry::new(
        &ChannelEntry {
            name: name.to_string(),
            replaces: replaces.map(str::to_string),
            skips: skips.iter().map(|s| s.to_string()).collect(),
            skip_range: range.map(str::to_string),
        },
        Some(parse_strict(version).unwrap()),
    )
}

fn names<'a>(path: &UpgradePath<'a>) -> Vec<&'a str> {
    path.steps.iter().map(|c| c.entry.name.as_str()).collect()
}

fn linear() -> UpgradeGraph {
    UpgradeGraph::new(
        "op",
        "stable",
        [
            entry("op.v1", None, &[], None, "1.0.0"),
            entry("op.v2", Some("op.v1"), &[], None, "2.0.0"),
            entry("op.v3", Some("op.v2"), &[], None, "3.0.0"),
        ],
    )
}

#[test]
fn linear_chain_moves_one_edge_per_plan() {
    let g = linear();
    assert_eq!(g.channel_head().unwrap().name, "op.v3");
    let order: Vec<_> = g
        .channel_order()
        .unwrap()
        .iter()
        .map(|e| e.name.clone())
        .collect();
    assert_eq!(order, ["op.v3", "op.v2", "op.v1"]);
    assert_eq!(
        g.next_bundle_for("op.v1", None).unwrap().entry.name,
        "op.v2"
    );
    let path = g.upgrade_path("op.v1", None);
    assert_eq!(names(&path), ["op.v2", "op.v3"]);
    assert!(path.stopped.is_none());
    assert_eq!(g.fresh_install().unwrap().name, "op.v3");
}

#[test]
fn at_head_says_so() {
    let g = linear();
    let err = g.next_bundle_for("op.v3", None).unwrap_err();
    assert!(matches!(err, NoUpdate::AtHead { .. }));
    assert_eq!(
        err.to_string(),
        "op.v3 is the head of channel \"stable\": nothing newer to install"
    );
    let path = g.upgrade_path("op.v3", None);
    assert!(path.steps.is_empty());
    assert!(path.stopped.is_some());
}

#[test]
fn nearest_head_candidate_wins_and_skipped_entries_are_not_candidates() {
    // v4 skips v3 and replaces v2; v3 replaces v2 too but is skipped.
    let g = UpgradeGraph::new(
        "op",
        "stable",
        [
            entry("op.v1", None, &[], None, "1.0.0"),
            entry("op.v2", Some("op.v1"), &[], None, "2.0.0"),
            entry("op.v3", Some("op.v2"), &[], None, "3.0.0"),
            entry("op.v4", Some("op.v3"), &["op.v2"], None, "4.0.0"),
        ],
    );
    let order: Vec<_> = g
        .channel_order()
        .unwrap()
        .iter()
        .map(|e| e.name.clone())
        .collect();
    assert_eq!(order, ["op.v4", "op.v3", "op.v1"]);
    let next = g.next_bundle_for("op.v2", None).unwrap();
    assert_eq!(next.entry.name, "op.v4");
    assert_eq!(next.via, EdgeKind::Skips);
    // v1's only replacer (v2) is skipped, so OLM offers nothing from v1; the reason says why.
    let stuck = g.upgrade_path("op.v1", None);
    assert!(stuck.steps.is_empty());
    let reason = stuck.stopped.unwrap().to_string();
    assert!(reason.contains("op.v2 would, but is skipped"), "{reason}");
}

#[test]
fn skip_range_reaches_head_and_needs_a_version_for_unknown_bundles() {
    let g = UpgradeGraph::new(
        "op",
        "stable",
        [
            entry("op.v1.1", None, &[], None, "1.1.0"),
            entry(
                "op.v1.2",
                Some("op.v1.1"),
                &[],
                Some(">=1.0.0 <1.2.0"),
                "1.2.0",
            ),
            entry(
                "op.v2.0",
                Some("op.v1.2"),
                &[],
                Some(">=1.0.0 <1.1.5"),
                "2.0.0",
            ),
        ],
    );
    // Installed 1.0.5, not in the catalog: the head's range includes it.
    let v = parse_strict("1.0.5").unwrap();
    let next = g.next_bundle_for("op.v1.0.5", Some(&v)).unwrap();
    assert_eq!(
        (next.entry.name.as_str(), next.via),
        ("op.v2.0", EdgeKind::SkipRange)
    );
    // Installed 1.1.7: the head's range excludes it, so the next entry down is taken.
    let v = parse_strict("1.1.7").unwrap();
    assert_eq!(
        names(&g.upgrade_path("op.v1.1.7", Some(&v))),
        ["op.v1.2", "op.v2.0"]
    );
    // Without a version only replaces/skips count, and the reason says so.
    let err = g.next_bundle_for("op.v1.0.5", None).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("skipRanges were not checked"), "{text}");
    assert!(text.contains("not an entry of this channel"), "{text}");
}

#[test]
fn invalid_skip_range_is_ignored_like_olm() {
    let g = UpgradeGraph::new(
        "op",
        "stable",
        [
            entry("op.v1", None, &[], None, "1.0.0"),
            entry("op.v2", Some("op.v1"), &[], Some("~1.0.0"), "2.0.0"),
        ],
    );
    assert!(g.entry("op.v2").unwrap().skip_range_error().is_some());
    let v = parse_strict("0.5.0").unwrap();
    assert!(matches!(
        g.next_bundle_for("op.v0.5", Some(&v)),
        Err(NoUpdate::NoEdge { .. })
    ));
}

#[test]
fn several_heads_are_named() {
    let g = UpgradeGraph::new(
        "op",
        "stable",
        [
            entry("b", None, &[], None, "1.0.0"),
            entry("a", None, &[], None, "2.0.0"),
        ],
    );
    assert_eq!(
        g.channel_head().unwrap_err().to_string(),
        "multiple channel heads found in graph: a, b"
    );
    assert_eq!(
        g.channel_order().unwrap_err().to_string(),
        "a unique replacement chain within a channel is required to determine the relative order between channel entries, but 2 replacement chains were found in channel \"stable\" of package \"op\": b, a"
    );
    assert!(matches!(
        g.next_bundle_for("b", None),
        Err(NoUpdate::Channel { .. })
    ));
}

#[test]
fn replaces_cycle_and_stranded_entries_like_opm() {
    let cycle = UpgradeGraph::new(
        "op",
        "stable",
        [
            entry("a", Some("b"), &[], None, "3.0.0"),
            entry("b", Some("c"), &[], None, "2.0.0"),
            entry("c", Some("b"), &[], None, "1.0.0"),
        ],
    );
    assert_eq!(
        cycle.check_replaces_chain().unwrap_err().to_string(),
        "detected cycle in replaces chain of upgrade graph: b -> c -> b"
    );
    assert!(matches!(
        cycle.channel_order(),
        Err(GraphError::ChainCycle { .. })
    ));

    let stranded = UpgradeGraph::new(
        "op",
        "stable",
        [
            entry("a", Some("b"), &["x"], None, "3.0.0"),
            entry("b", None, &[], None, "2.0.0"),
            entry("x", None, &[], None, "1.0.0"),
            entry("y", Some("gone"), &[], None, "1.5.0"),
        ],
    );
    // y is another head, so M6 fails first.
    assert!(matches!(
        stranded.check_replaces_chain(),
        Err(GraphError::MultipleHeads { .. })
    ));
    let stranded = UpgradeGraph::new(
        "op",
        "stable",
        [
            entry("a", Some("b"), &["x", "y"], None, "3.0.0"),
            entry("b", None, &[], None, "2.0.0"),
            entry("x", None, &[], None, "1.0.0"),
            entry("z", Some("y"), &["w"], None, "1.5.0"),
            entry("w", None, &[], None, "0.5.0"),
            entry("y", None, &[], None, "0.9.0"),
        ],
    );
    assert!(stranded.channel_head().is_err(), "z is a second head");
}

#[test]
fn edges_include_skip_range_targets() {
    let g = UpgradeGraph::new(
        "op",
        "stable",
        [
            entry("op.v1", Some("op.v0"), &[], None, "1.0.0"),
            entry("op.v2", Some("op.v1"), &[], Some("<2.0.0"), "2.0.0"),
        ],
    );
    let edges = g.edges();
    assert!(edges.contains(&GraphEdge {
        from: "op.v1",
        to: "op.v0",
        kind: EdgeKind::Replaces,
        to_in_channel: false
    }));
    assert!(edges.contains(&GraphEdge {
        from: "op.v2",
        to: "op.v1",
        kind: EdgeKind::SkipRange,
        to_in_channel: true
    }));
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    /// A replaces chain `op.v1 … op.vN` where each entry may also skip earlier entries and
    /// carry a skipRange over the versions below it, listed in a shuffled order.
    fn chain() -> impl Strategy<Value = (Vec<GraphEntry>, Vec<GraphEntry>)> {
        (2usize..10)
            .prop_flat_map(|n| {
                (
                    Just(n),
                    proptest::collection::vec(proptest::collection::vec(any::<bool>(), n), n),
                    proptest::collection::vec(proptest::option::of(1usize..10), n),
                    Just(()).prop_perturb(move |_, mut rng| {
                        let mut order: Vec<usize> = (0..n).collect();
                        for i in (1..n).rev() {
                            order.swap(i, rng.random_range(0..=i));
                        }
                        order
                    }),
                )
            })
            .prop_map(|(n, skips, ranges, order)| {
                let name = |i: usize| format!("op.v{}", i + 1);
                let entries: Vec<GraphEntry> = (0..n)
                    .map(|i| {
                        let replaces = (i > 0).then(|| name(i - 1));
                        let skipped: Vec<String> = (0..i.saturating_sub(1))
                            .filter(|&j| skips[i][j])
                            .map(name)
                            .collect();
                        let skipped: Vec<&str> = skipped.iter().map(String::as_str).collect();
                        let range = ranges[i]
                            .filter(|&low| low <= i)
                            .map(|low| format!(">={}.0.0 <{}.0.0", i + 1 - low, i + 1));
                        entry(
                            &name(i),
                            replaces.as_deref(),
                            &skipped,
                            range.as_deref(),
                            &format!("{}.0.0", i + 1),
                        )
                    })
                    .collect();
                let shuffled = order.iter().map(|&i| entries[i].clone()).collect();
                (entries, shuffled)
            })
    }

    fn path_names(g: &UpgradeGraph, from: &str) -> (Vec<String>, bool) {
        let path = g.upgrade_path(from, None);
        let names = path.steps.iter().map(|c| c.entry.name.clone()).collect();
        // Reaching the head is the normal end of a path: nothing stopped it.
        (names, path.stopped.is_none())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Neither the head, nor the channel order, nor any upgrade path depends on the order
        /// in which the catalog lists the entries; every path climbs strictly newer versions,
        /// never loops, and ends at the head unless it says why it stopped (an entry only a
        /// skipped bundle replaces is stranded, as in OLM — docs/catalog.md §9.2).
        #[test]
        fn paths_climb_to_the_head_whatever_the_listing_order((entries, shuffled) in chain()) {
            let n = entries.len();
            let head = format!("op.v{n}");
            let g = UpgradeGraph::new("op", "stable", entries.clone());
            let h = UpgradeGraph::new("op", "stable", shuffled);
            prop_assert_eq!(&g.channel_head().unwrap().name, &head);
            prop_assert_eq!(&h.channel_head().unwrap().name, &head);
            let order = |g: &UpgradeGraph| -> Vec<String> {
                g.channel_order().unwrap().iter().map(|e| e.name.clone()).collect()
            };
            prop_assert_eq!(order(&g), order(&h));
            for e in &entries[..n - 1] {
                let (steps, reached) = path_names(&g, &e.name);
                if reached {
                    prop_assert_eq!(steps.last(), Some(&head));
                }
                prop_assert!(steps.len() < n);
                let versions: Vec<usize> = std::iter::once(&e.name)
                    .chain(&steps)
                    .map(|s| s.trim_start_matches("op.v").parse().unwrap())
                    .collect();
                prop_assert!(versions.windows(2).all(|w| w[0] < w[1]), "{:?}", versions);
                prop_assert_eq!(path_names(&h, &e.name), (steps, reached));
            }
        }

        /// Without skips every entry reaches the head.
        #[test]
        fn a_replaces_chain_always_reaches_the_head(n in 2usize..12) {
            let entries: Vec<GraphEntry> = (0..n)
                .map(|i| {
                    let replaces = (i > 0).then(|| format!("op.v{i}"));
                    entry(&format!("op.v{}", i + 1), replaces.as_deref(), &[], None, &format!("{}.0.0", i + 1))
                })
                .collect();
            let g = UpgradeGraph::new("op", "stable", entries.clone());
            for e in &entries[..n - 1] {
                let (steps, reached) = path_names(&g, &e.name);
                prop_assert!(reached, "{} stopped", e.name);
                prop_assert_eq!(steps.last().cloned(), Some(format!("op.v{n}")));
            }
        }
    }
}

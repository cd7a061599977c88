//! Table tests the solver passes only when its search is complete: it backtracks across
//! sibling requirements and deep conflicts, upgrades installed operators together, and moves an
//! API from one package to another in one resolution.

use crate::api::CatalogRef;
use serde_json::json;

use super::*;

fn provides_in(kinds: &[&str]) -> Vec<Property> {
    kinds.iter().map(|k| provides(k)).collect()
}

fn with(mut props: Vec<Property>, more: Vec<Property>) -> Vec<Property> {
    props.extend(more);
    props
}

fn cat_with_skip_ranges(bundles: Vec<Bundle>, skip_ranges: &[(&str, &str)]) -> CatalogInput {
    CatalogInput {
        key: CatalogRef::new("olm", "apps"),
        priority: 0,
        uid: None,
        content: CatalogContent::Ready(index_with_skip_ranges(bundles, skip_ranges)),
        healthy: true,
    }
}

/// Subscriptions created one minute apart, in the order given (the first is the oldest).
fn aged(mut subs: Vec<Subscription>) -> Vec<Subscription> {
    for (i, s) in subs.iter_mut().enumerate() {
        let at = jiff::Timestamp::from_second(60 * i as i64).unwrap();
        s.metadata.creation_timestamp = Some(Time(at));
    }
    subs
}

#[test]
fn backtracking_across_sibling_requirements() {
    // app needs X and Y. The first X candidate (xa) also provides Z, and the only Y provider
    // provides Z too: taking xa makes Y impossible, so xb must be taken instead.
    let catalogs = [cat(
        "olm",
        "apps",
        0,
        vec![
            b("app", "1.0.0", vec![needs("X"), needs("Y")]),
            b("xa", "1.0.0", provides_in(&["X", "Z"])),
            b("xb", "1.0.0", provides_in(&["X"])),
            b("y", "1.0.0", provides_in(&["Y", "Z"])),
        ],
    )];
    let d = run(&[sub("app", "app", "apps", None)], &[], &catalogs);
    assert_eq!(show(&d[0]), "app.v1.0.0 [xb.v1.0.0@apps y.v1.0.0@apps]");
}

#[test]
fn a_conflict_deep_in_a_chain_forces_a_different_choice_higher_up() {
    // app needs A and E. a1 (first A candidate) pulls in b, which pulls in d, which provides Q;
    // e, the only E provider, provides Q too. Only a2 (with its own chain to c) fits next to e.
    let catalogs = [cat(
        "olm",
        "apps",
        0,
        vec![
            b("app", "1.0.0", vec![needs("A"), needs("E")]),
            b("a1", "1.0.0", with(provides_in(&["A"]), vec![needs("B")])),
            b("a2", "1.0.0", with(provides_in(&["A"]), vec![needs("C")])),
            b("b", "1.0.0", with(provides_in(&["B"]), vec![needs("D")])),
            b("c", "1.0.0", provides_in(&["C"])),
            b("d", "1.0.0", provides_in(&["D", "Q"])),
            b("e", "1.0.0", provides_in(&["E", "Q"])),
        ],
    )];
    let d = run(&[sub("app", "app", "apps", None)], &[], &catalogs);
    assert_eq!(
        show(&d[0]),
        "app.v1.0.0 [a2.v1.0.0@apps c.v1.0.0@apps e.v1.0.0@apps]"
    );
}

/// app v2 and db v2 need each other; db v3 (reachable from db v1 through its skipRange, so
/// tried first) is too new for the installed operator x, which needs db in `x_range`.
fn co_upgrade_catalog_and_cluster(x_range: &str) -> (Vec<CatalogInput>, Vec<InstalledCsv>) {
    let catalogs = vec![cat_with_skip_ranges(
        vec![
            b("app", "1.0.0", vec![needs_package("db", ">=1.0.0")]),
            b("app", "2.0.0", vec![needs_package("db", ">=2.0.0")]),
            b("db", "1.0.0", vec![]),
            b("db", "2.0.0", vec![needs_package("app", ">=2.0.0")]),
            b("db", "3.0.0", vec![needs_package("app", ">=2.0.0")]),
        ],
        &[("db.v3.0.0", ">=1.0.0 <3.0.0")],
    )];
    let existing = vec![
        installed("app", "1.0.0", vec![needs_package("db", ">=1.0.0")]),
        installed("db", "1.0.0", vec![]),
        installed("x", "1.0.0", vec![needs_package("db", x_range)]),
    ];
    (catalogs, existing)
}

#[test]
fn an_installed_dependency_is_co_upgraded_to_a_version_every_installed_dependent_accepts() {
    let (catalogs, existing) = co_upgrade_catalog_and_cluster("<3.0.0");
    let subs = aged(vec![
        sub("app", "app", "apps", Some("app.v1.0.0")),
        sub("db", "db", "apps", Some("db.v1.0.0")),
    ]);
    let d = run(&subs, &existing, &catalogs);
    assert_eq!(show(&d[0]), "app.v2.0.0 []");
    assert_eq!(
        show(&d[1]),
        "db.v2.0.0 []",
        "db.v3.0.0 would break x.v1.0.0"
    );
}

#[test]
fn a_co_upgrade_that_would_break_an_installed_dependent_is_refused_naming_it() {
    let (catalogs, existing) = co_upgrade_catalog_and_cluster("<2.0.0");
    let subs = aged(vec![
        sub("app", "app", "apps", Some("app.v1.0.0")),
        sub("db", "db", "apps", Some("db.v1.0.0")),
    ]);
    let d = run(&subs, &existing, &catalogs);
    for decision in &d {
        let message = show(decision);
        assert!(message.starts_with("refused: "), "{message}");
        assert!(message.contains("installed operator x.v1.0.0"), "{message}");
    }
}

#[test]
fn owned_api_transfer_to_the_operator_that_now_depends_on_it() {
    // a v2 gives Shared up and now needs it; b v2 takes it over. Neither upgrade fits alone:
    // b v2 next to a v1 is a second provider, a v2 next to b v1 has no provider.
    let catalogs = [cat(
        "olm",
        "apps",
        0,
        vec![
            b("a", "1.0.0", provides_in(&["Shared"])),
            b("a", "2.0.0", vec![needs("Shared")]),
            b("b", "1.0.0", vec![]),
            b("b", "2.0.0", provides_in(&["Shared"])),
        ],
    )];
    let existing = [
        installed("a", "1.0.0", provides_in(&["Shared"])),
        installed("b", "1.0.0", vec![]),
    ];
    let subs = aged(vec![
        sub("b", "b", "apps", Some("b.v1.0.0")),
        sub("a", "a", "apps", Some("a.v1.0.0")),
    ]);
    let d = run(&subs, &existing, &catalogs);
    assert_eq!(show(&d[0]), "b.v2.0.0 []");
    assert_eq!(show(&d[1]), "a.v2.0.0 []");
}

#[test]
fn a_satisfiable_cycle_with_a_choice_inside_it_resolves() {
    // app → B → A (app itself) and app → D → B: a cycle. The first B provider also provides Q,
    // which dee (the only D provider) provides as well; the cycle closes with bee-b.
    let catalogs = [cat(
        "olm",
        "apps",
        0,
        vec![
            b(
                "app",
                "1.0.0",
                with(provides_in(&["A"]), vec![needs("B"), needs("D")]),
            ),
            b(
                "bee-a",
                "1.0.0",
                with(provides_in(&["B", "Q"]), vec![needs("A")]),
            ),
            b(
                "bee-b",
                "1.0.0",
                with(provides_in(&["B"]), vec![needs("A")]),
            ),
            b(
                "dee",
                "1.0.0",
                with(provides_in(&["D", "Q"]), vec![needs("B")]),
            ),
        ],
    )];
    let d = run(&[sub("app", "app", "apps", None)], &[], &catalogs);
    assert_eq!(
        show(&d[0]),
        "app.v1.0.0 [bee-b.v1.0.0@apps dee.v1.0.0@apps]"
    );
}

#[test]
fn the_same_inputs_twice_give_the_same_answer() {
    // Many equally good choices: the answer must not depend on anything but the inputs.
    let mut bundles = vec![b(
        "app",
        "1.0.0",
        vec![
            needs("X"),
            needs("Y"),
            p("olm.label.required", json!({"label": "fast"})),
        ],
    )];
    for i in 0..6 {
        let pkg = format!("x{i}");
        bundles.push(b(
            &pkg,
            "1.0.0",
            with(provides_in(&["X"]), vec![needs("Y")]),
        ));
        bundles.push(b(
            &pkg,
            "2.0.0",
            with(provides_in(&["X"]), vec![needs("Y")]),
        ));
        let pkg = format!("y{i}");
        bundles.push(b(
            &pkg,
            "1.0.0",
            with(
                provides_in(&["Y"]),
                vec![p("olm.label", json!({"label": "fast"}))],
            ),
        ));
    }
    let catalogs = [
        cat("olm", "apps", 0, bundles.clone()),
        cat("olm", "mirror", 0, bundles),
    ];
    let subs = aged(vec![
        sub("app", "app", "apps", None),
        sub("x3", "x3", "mirror", None),
    ]);
    let first = run(&subs, &[], &catalogs);
    let second = run(&subs, &[], &catalogs);
    assert_eq!(first, second);
    assert!(
        matches!(first[0].outcome, Outcome::Install(_)),
        "{}",
        show(&first[0])
    );
}

#[test]
fn a_co_upgrade_still_happens_next_to_two_conflicting_subscriptions() {
    let catalogs = [cat(
        "olm",
        "apps",
        0,
        vec![
            b("a", "1.0.0", provides_in(&["Shared"])),
            b("a", "2.0.0", vec![needs("Shared")]),
            b("b", "1.0.0", vec![]),
            b("b", "2.0.0", provides_in(&["Shared"])),
            b("one", "1.0.0", provides_in(&["Api"])),
            b("two", "1.0.0", provides_in(&["Api"])),
            b("three", "1.0.0", vec![]),
        ],
    )];
    let existing = [
        installed("a", "1.0.0", provides_in(&["Shared"])),
        installed("b", "1.0.0", vec![]),
    ];
    let subs = aged(vec![
        sub("one", "one", "apps", None),
        sub("b", "b", "apps", Some("b.v1.0.0")),
        sub("two", "two", "apps", None),
        sub("a", "a", "apps", Some("a.v1.0.0")),
        sub("three", "three", "apps", None),
    ]);
    let d = run(&subs, &existing, &catalogs);
    let shown: Vec<String> = d.iter().map(show).collect();
    assert!(shown[0].contains("Subscription two"), "{}", shown[0]);
    assert_eq!(shown[1], "b.v2.0.0 []");
    assert!(shown[2].contains("Subscription one"), "{}", shown[2]);
    assert_eq!(shown[3], "a.v2.0.0 []");
    assert_eq!(shown[4], "three.v1.0.0 []");
}

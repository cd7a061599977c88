//! Issue 36's co-upgrade: `app` v1 needs `base` `<2.0.0`, `app` v2 needs `base >=2.0.0`. Both
//! upgrade together, `base.v2.0.0` replacing the installed `base.v1.1.0`, never installed next
//! to it as a fresh dependency.

use super::*;

fn catalog() -> [CatalogInput; 1] {
    [cat(
        "olm",
        "apps",
        0,
        vec![
            b(
                "app",
                "1.0.0",
                vec![needs_package("base", ">=1.0.0 <2.0.0")],
            ),
            b("app", "2.0.0", vec![needs_package("base", ">=2.0.0")]),
            b("base", "1.0.0", vec![provides("Gear")]),
            b("base", "1.1.0", vec![provides("Gear")]),
            b("base", "2.0.0", vec![provides("Gear")]),
        ],
    )]
}

fn cluster() -> [InstalledCsv; 2] {
    [
        installed(
            "app",
            "1.0.0",
            vec![needs_package("base", ">=1.0.0 <2.0.0")],
        ),
        installed("base", "1.1.0", vec![provides("Gear")]),
    ]
}

fn together(d: &Decision) -> Vec<String> {
    match &d.outcome {
        Outcome::Install(t) => t.together.clone(),
        _ => Vec::new(),
    }
}

#[test]
fn two_installed_subscriptions_that_need_each_others_upgrade_are_tied() {
    let subs = [
        sub("app", "app", "apps", Some("app.v1.0.0")),
        sub("base", "base", "apps", Some("base.v1.1.0")),
    ];
    let d = run(&subs, &cluster(), &catalog());
    assert_eq!(show(&d[0]), "app.v2.0.0 []");
    assert_eq!(show(&d[1]), "base.v2.0.0 []");
    let Outcome::Install(base) = &d[1].outcome else {
        unreachable!()
    };
    assert_eq!(base.replaces.as_deref(), Some("base.v1.1.0"));
    assert_eq!(together(&d[0]), ["base"]);
    assert_eq!(together(&d[1]), ["app"], "tied in both directions");
}

#[test]
fn upgrades_that_need_nothing_of_each_other_are_not_tied() {
    let subs = [
        sub("app", "app", "apps", Some("app.v1.0.0")),
        sub("base", "base", "apps", Some("base.v1.0.0")),
    ];
    let existing = [
        installed("app", "1.0.0", vec![needs_package("base", ">=1.0.0")]),
        installed("base", "1.0.0", vec![provides("Gear")]),
    ];
    let catalogs = [cat(
        "olm",
        "apps",
        0,
        vec![
            b("app", "1.0.0", vec![needs_package("base", ">=1.0.0")]),
            b("app", "1.1.0", vec![]),
            b("base", "1.0.0", vec![provides("Gear")]),
            b("base", "1.1.0", vec![provides("Gear")]),
        ],
    )];
    let d = run(&subs, &existing, &catalogs);
    assert_eq!(show(&d[0]), "app.v1.1.0 []");
    assert_eq!(show(&d[1]), "base.v1.1.0 []");
    assert!(together(&d[0]).is_empty() && together(&d[1]).is_empty());
}

/// The decision that went wrong: the dependency's Subscription, just created by the first plan,
/// has installed nothing yet. `base.v1.1.0` was then left out of the namespace as "an older CSV
/// of a subscribed package", so `app.v2.0.0` took `base.v2.0.0` as a fresh dependency next to it
/// (a second owner of the Gear CRD). It stays, and is adopted: nothing is installed next to it.
#[test]
fn a_csv_whose_subscription_installed_nothing_yet_is_not_installed_again_as_a_dependency() {
    let mut base = sub("base", "base", "apps", None);
    base.spec.starting_csv = Some("base.v1.1.0".into());
    let subs = [sub("app", "app", "apps", Some("app.v1.0.0")), base];
    let d = run(&subs, &cluster(), &catalog());
    assert_eq!(show(&d[1]), "adopts base.v1.1.0");
    // Until base's Subscription has adopted it, app cannot upgrade (the namespace sync holds
    // this answer back for one sync, docs/subscription-plans.md "Co-upgrades").
    let shown = show(&d[0]);
    assert!(
        shown.starts_with("refused: ") && shown.contains("installed operator base.v1.1.0 is one"),
        "base.v2.0.0 would be a second base next to base.v1.1.0: {shown}"
    );
}

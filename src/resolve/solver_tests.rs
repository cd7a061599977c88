//! Table tests of dependency resolution, one per behaviour OLM's resolver is known for.

use crate::api::CatalogRef;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::api::{Subscription, SubscriptionSpec, SubscriptionStatus};
use crate::catalog::CatalogIndex;
use crate::catalog::model::{Bundle, Channel, ChannelEntry, DeclarativeConfig, Package, Property};
use crate::catalog::semver_range::parse_tolerant;

fn gvk(kind: &str) -> Value {
    json!({"group": "example.com", "kind": kind, "version": "v1"})
}

fn p(t: &str, v: Value) -> Property {
    Property::from_value(t, &v).unwrap()
}

fn provides(kind: &str) -> Property {
    p("olm.gvk", gvk(kind))
}

fn needs(kind: &str) -> Property {
    p("olm.gvk.required", gvk(kind))
}

fn needs_package(pkg: &str, range: &str) -> Property {
    p(
        "olm.package.required",
        json!({"packageName": pkg, "versionRange": range}),
    )
}

/// `pkg.v<version>` with the given extra properties.
fn b(pkg: &str, version: &str, props: Vec<Property>) -> Bundle {
    let mut properties = vec![p(
        "olm.package",
        json!({"packageName": pkg, "version": version}),
    )];
    properties.extend(props);
    Bundle {
        package: pkg.into(),
        name: format!("{pkg}.v{version}"),
        image: String::new(),
        properties,
        ..Bundle::default()
    }
}

/// One channel `stable` per package; bundles listed oldest first, each replacing the one
/// before.
fn index(bundles: Vec<Bundle>) -> Arc<CatalogIndex> {
    index_with_skip_ranges(bundles, &[])
}

/// As `index`, with `olm.skipRange`s: `(bundle, range)`.
fn index_with_skip_ranges(bundles: Vec<Bundle>, skip_ranges: &[(&str, &str)]) -> Arc<CatalogIndex> {
    let mut config = DeclarativeConfig::default();
    let mut packages: Vec<String> = bundles.iter().map(|b| b.package.clone()).collect();
    packages.dedup();
    for pkg in &packages {
        config.packages.push(Package {
            name: pkg.clone(),
            default_channel: Some("stable".into()),
            ..Package::default()
        });
        let mut entries = Vec::new();
        let mut previous: Option<String> = None;
        for bundle in bundles.iter().filter(|b| &b.package == pkg) {
            entries.push(ChannelEntry {
                name: bundle.name.clone(),
                replaces: previous.replace(bundle.name.clone()),
                skips: vec![],
                skip_range: skip_ranges
                    .iter()
                    .find(|(name, _)| *name == bundle.name)
                    .map(|(_, range)| (*range).to_owned()),
            });
        }
        config.channels.push(Channel {
            package: pkg.clone(),
            name: "stable".into(),
            entries,
            ..Channel::default()
        });
    }
    config.bundles = bundles;
    Arc::new(CatalogIndex::new(config))
}

fn cat(namespace: &str, name: &str, priority: i32, bundles: Vec<Bundle>) -> CatalogInput {
    CatalogInput {
        key: CatalogRef::new(namespace, name),
        priority,
        uid: None,
        content: CatalogContent::Ready(index(bundles)),
        healthy: true,
    }
}

fn sub(name: &str, pkg: &str, catalog: &str, installed: Option<&str>) -> Subscription {
    let mut s = Subscription::new(
        name,
        SubscriptionSpec {
            source: catalog.into(),
            source_namespace: "olm".into(),
            name: pkg.into(),
            channel: Some("stable".into()),
            starting_csv: None,
            install_plan_approval: None,
            config: None,
        },
    );
    s.metadata.namespace = Some("ns".into());
    if let Some(csv) = installed {
        let mut status = SubscriptionStatus::new(Time(jiff::Timestamp::UNIX_EPOCH));
        status.installed_csv = Some(csv.into());
        status.current_csv = Some(csv.into());
        s.status = Some(status);
    }
    s
}

fn installed(pkg: &str, version: &str, props: Vec<Property>) -> InstalledCsv {
    let bundle = b(pkg, version, props);
    InstalledCsv {
        name: bundle.name.clone(),
        version: parse_tolerant(version).ok(),
        package: Some(pkg.into()),
        provided: crate::catalog::properties::provided_gvks(&bundle.properties).collect(),
        phase: "Succeeded".into(),
        properties: bundle.properties,
    }
}

fn run(
    subs: &[Subscription],
    installed: &[InstalledCsv],
    catalogs: &[CatalogInput],
) -> Vec<Decision> {
    let groups = OperatorGroups {
        names: vec!["og".into()],
        exclude_global_catalogs: false,
    };
    decide(&NamespaceInput {
        namespace: "ns",
        subscriptions: subs,
        installed,
        catalogs,
        operator_groups: &groups,
        global_catalog_namespace: "olm",
    })
}

/// `bundle [dep@catalog …]` for an install, the message for a refusal.
fn show(d: &Decision) -> String {
    match &d.outcome {
        Outcome::Install(t) => {
            let deps: Vec<String> = t
                .dependencies
                .iter()
                .map(|d| format!("{}@{}", d.bundle, d.catalog.name))
                .collect();
            format!("{} [{}]", t.bundle, deps.join(" "))
        }
        Outcome::Refused(r) => format!("refused: {r}"),
        Outcome::UpToDate { installed, .. } => format!("stays {installed}"),
        Outcome::Adopt { csv } => format!("adopts {csv}"),
    }
}

#[test]
fn a_dependency_is_found_in_another_catalog() {
    let catalogs = [
        cat("olm", "apps", 0, vec![b("app", "1.0.0", vec![needs("Db")])]),
        cat(
            "olm",
            "infra",
            0,
            vec![b("db", "2.0.0", vec![provides("Db")])],
        ),
    ];
    let d = run(&[sub("app", "app", "apps", None)], &[], &catalogs);
    assert_eq!(show(&d[0]), "app.v1.0.0 [db.v2.0.0@infra]");
    let Outcome::Install(t) = &d[0].outcome else {
        unreachable!()
    };
    assert_eq!(t.dependencies[0].required_by, "app.v1.0.0");
    assert_eq!(t.dependencies[0].channel, "stable");
}

#[test]
fn the_dependents_own_catalog_is_preferred() {
    let catalogs = [
        cat(
            "olm",
            "a-other",
            5,
            vec![b("db", "9.0.0", vec![provides("Db")])],
        ),
        cat(
            "olm",
            "apps",
            0,
            vec![
                b("app", "1.0.0", vec![needs("Db")]),
                b("db2", "1.0.0", vec![provides("Db")]),
            ],
        ),
    ];
    let d = run(&[sub("app", "app", "apps", None)], &[], &catalogs);
    assert_eq!(show(&d[0]), "app.v1.0.0 [db2.v1.0.0@apps]");
}

#[test]
fn catalog_priority_then_namespace_then_name_orders_other_catalogs() {
    let db = || vec![b("db", "1.0.0", vec![provides("Db")])];
    let apps = cat("olm", "apps", 0, vec![b("app", "1.0.0", vec![needs("Db")])]);
    let catalogs = [
        apps.clone(),
        cat("olm", "a-low", 0, db()),
        cat("olm", "z-high", 10, db()),
    ];
    let d = run(&[sub("app", "app", "apps", None)], &[], &catalogs);
    assert_eq!(show(&d[0]), "app.v1.0.0 [db.v1.0.0@z-high]");
    // Same priority: the namespace's own catalog before the global one, then by name.
    let catalogs = [
        apps.clone(),
        cat("olm", "a-global", 0, db()),
        cat("ns", "z-local", 0, db()),
    ];
    let d = run(&[sub("app", "app", "apps", None)], &[], &catalogs);
    assert_eq!(show(&d[0]), "app.v1.0.0 [db.v1.0.0@z-local]");
    let catalogs = [apps, cat("olm", "b", 0, db()), cat("olm", "a", 0, db())];
    let d = run(&[sub("app", "app", "apps", None)], &[], &catalogs);
    assert_eq!(show(&d[0]), "app.v1.0.0 [db.v1.0.0@a]");
}

#[test]
fn an_existing_provider_is_reused() {
    let catalogs = [cat(
        "olm",
        "apps",
        0,
        vec![
            b("app", "1.0.0", vec![needs("Db")]),
            b("db", "2.0.0", vec![provides("Db")]),
        ],
    )];
    // An installed CSV without a Subscription provides Db: nothing new is pulled in.
    let existing = [installed("hand-made-db", "0.1.0", vec![provides("Db")])];
    let d = run(&[sub("app", "app", "apps", None)], &existing, &catalogs);
    assert_eq!(show(&d[0]), "app.v1.0.0 []");
}

#[test]
fn a_provider_is_not_upgraded_to_a_version_that_drops_an_api_an_installed_operator_needs() {
    let catalogs = [cat(
        "olm",
        "apps",
        0,
        vec![
            b("db", "1.0.0", vec![provides("Db"), provides("OldApi")]),
            b("db", "2.0.0", vec![provides("Db")]),
        ],
    )];
    let existing = [
        installed("db", "1.0.0", vec![provides("Db"), provides("OldApi")]),
        installed("app", "1.0.0", vec![needs("OldApi")]),
    ];
    let d = run(
        &[sub("db", "db", "apps", Some("db.v1.0.0"))],
        &existing,
        &catalogs,
    );
    let message = show(&d[0]);
    assert!(
        message.contains("would replace the only provider of what installed operator app.v1.0.0 needs (an operator providing OldApi (example.com/v1))"),
        "{message}"
    );
    assert!(
        message.contains("bundle app.v1.0.0 requires an operator providing an API with group: example.com, version: v1, kind: OldApi"),
        "{message}"
    );
}

#[test]
fn a_package_cannot_satisfy_itself() {
    let catalogs = [cat(
        "olm",
        "apps",
        0,
        vec![
            b("app", "1.0.0", vec![needs("Extra")]),
            b("app", "2.0.0", vec![provides("Extra"), needs("Extra")]),
        ],
    )];
    // v2 provides what it needs itself; v1 would need v2, a second bundle of its own package.
    let mut s = sub("app", "app", "apps", None);
    s.spec.starting_csv = Some("app.v1.0.0".into());
    let d = run(&[s], &[], &catalogs);
    let message = show(&d[0]);
    assert!(
        message.contains("only one operator of package app may be installed in a namespace, and bundle app.v1.0.0 chosen for Subscription app is one"),
        "{message}"
    );
    assert!(
        message.contains("there can be only one operator from package app"),
        "{message}"
    );
    let d = run(&[sub("app", "app", "apps", None)], &[], &catalogs);
    assert_eq!(
        show(&d[0]),
        "app.v2.0.0 []",
        "a bundle may satisfy its own requirement"
    );
}

#[test]
fn two_providers_of_one_api_are_refused() {
    let catalogs = [cat(
        "olm",
        "apps",
        0,
        vec![
            b("app", "1.0.0", vec![needs("Db")]),
            b("db", "1.0.0", vec![provides("Db"), provides("Cache")]),
        ],
    )];
    let existing = [installed("cache", "1.0.0", vec![provides("Cache")])];
    let d = run(&[sub("app", "app", "apps", None)], &existing, &catalogs);
    let message = show(&d[0]);
    assert!(message.starts_with("refused: constraints not satisfiable: subscription app exists, subscription app requires apps/olm/stable/app.v1.0.0, bundle app.v1.0.0 requires an operator providing an API with group: example.com, version: v1, kind: Db, there can be only one provider of Cache (example.com/v1); "), "{message}");
    assert!(
        message.ends_with("bundle app.v1.0.0 needs an operator providing Db (example.com/v1), and every candidate was rejected: db.v1.0.0 (catalog olm/apps, channel stable) would be a second provider of Cache (example.com/v1) next to installed operator cache.v1.0.0"),
        "{message}"
    );
}

#[test]
fn owned_api_transfer_upgrades_both_operators_together() {
    // a v2 gives up Shared, b v2 takes it over: b alone would be a second provider.
    let catalogs = [cat(
        "olm",
        "apps",
        0,
        vec![
            b("a", "1.0.0", vec![provides("Shared")]),
            b("a", "2.0.0", vec![]),
            b("b", "1.0.0", vec![]),
            b("b", "2.0.0", vec![provides("Shared")]),
        ],
    )];
    let existing = [
        installed("a", "1.0.0", vec![provides("Shared")]),
        installed("b", "1.0.0", vec![]),
    ];
    // b is older, so it is decided first and runs into a v1 on the first pass.
    let mut sb = sub("b", "b", "apps", Some("b.v1.0.0"));
    sb.metadata.creation_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
    let mut sa = sub("a", "a", "apps", Some("a.v1.0.0"));
    sa.metadata.creation_timestamp = Some(Time(jiff::Timestamp::from_second(60).unwrap()));
    let d = run(&[sa, sb], &existing, &catalogs);
    assert_eq!(show(&d[0]), "a.v2.0.0 []");
    assert_eq!(show(&d[1]), "b.v2.0.0 []");
}

#[test]
fn transitive_chains_three_deep_are_installed_whole() {
    let catalogs = [cat(
        "olm",
        "apps",
        0,
        vec![
            b("app", "1.0.0", vec![needs("L1")]),
            b(
                "l1",
                "1.0.0",
                vec![provides("L1"), needs_package("l2", ">=1.0.0")],
            ),
            b("l2", "1.0.0", vec![needs("L3")]),
            b("l3", "1.0.0", vec![provides("L3")]),
        ],
    )];
    let d = run(&[sub("app", "app", "apps", None)], &[], &catalogs);
    assert_eq!(
        show(&d[0]),
        "app.v1.0.0 [l1.v1.0.0@apps l2.v1.0.0@apps l3.v1.0.0@apps]"
    );
}

#[test]
fn dependency_cycles_resolve() {
    let catalogs = [cat(
        "olm",
        "apps",
        0,
        vec![
            b("app", "1.0.0", vec![provides("A"), needs("B")]),
            b("bee", "1.0.0", vec![provides("B"), needs("A")]),
        ],
    )];
    let d = run(&[sub("app", "app", "apps", None)], &[], &catalogs);
    assert_eq!(show(&d[0]), "app.v1.0.0 [bee.v1.0.0@apps]");
}

#[test]
fn olm_constraint_any_all_not_and_cel_choose_the_matching_provider() {
    let constraint = json!({"failureMessage": "needs a certified db 2.x", "all": {"constraints": [
        {"any": {"constraints": [
            {"gvk": {"group": "example.com", "kind": "Db", "version": "v1"}},
            {"package": {"packageName": "legacy-db", "versionRange": ">=0.0.0"}}
        ]}},
        {"not": {"constraints": [{"package": {"packageName": "db", "versionRange": "<2.0.0"}}]}},
        {"cel": {"rule": "properties.exists(p, p.type == \"certified\" && p.value == true)"}}
    ]}});
    let catalogs = [cat(
        "olm",
        "apps",
        0,
        vec![
            b("app", "1.0.0", vec![p("olm.constraint", constraint)]),
            b(
                "db",
                "1.0.0",
                vec![provides("Db"), p("certified", json!(true))],
            ),
            b(
                "db",
                "2.0.0",
                vec![provides("Db"), p("certified", json!(true))],
            ),
            b("db", "3.0.0", vec![provides("Db")]),
        ],
    )];
    // Head db.v3.0.0 is not certified, db.v2.0.0 is: the channel is walked down to it.
    let d = run(&[sub("app", "app", "apps", None)], &[], &catalogs);
    assert_eq!(show(&d[0]), "app.v1.0.0 [db.v2.0.0@apps]");
}

#[test]
fn a_cel_runtime_error_rejects_the_candidate_and_is_explained() {
    let rule = json!({"failureMessage": "needs a tier", "cel": {"rule": "properties.exists(p, p.value.tier == \"gold\")"}});
    let catalogs = [cat(
        "olm",
        "apps",
        0,
        vec![
            b("app", "1.0.0", vec![p("olm.constraint", rule)]),
            b("db", "1.0.0", vec![provides("Db")]),
        ],
    )];
    let d = run(&[sub("app", "app", "apps", None)], &[], &catalogs);
    let message = show(&d[0]);
    assert!(message.contains("bundle app.v1.0.0 requires an operator with constraint: \"properties.exists(p, p.value.tier == \\\"gold\\\")\" and message: \"needs a tier\""), "{message}");
    assert!(
        message.contains("(needs a tier), and no catalog this namespace can see has one"),
        "{message}"
    );
}

#[test]
fn deprecated_candidates_are_skipped() {
    let catalogs = [cat(
        "olm",
        "apps",
        0,
        vec![
            b("app", "1.0.0", vec![needs("Db")]),
            b("db", "1.0.0", vec![provides("Db")]),
            b(
                "db",
                "2.0.0",
                vec![provides("Db"), p("olm.deprecated", json!({}))],
            ),
        ],
    )];
    let d = run(&[sub("app", "app", "apps", None)], &[], &catalogs);
    assert_eq!(show(&d[0]), "app.v1.0.0 [db.v1.0.0@apps]");
}

#[test]
fn a_version_outside_the_range_is_named() {
    let catalogs = [cat(
        "olm",
        "apps",
        0,
        vec![
            b("topology", "1.0.0", vec![needs_package("rabbit", ">2.0.0")]),
            b("rabbit", "1.9.0", vec![]),
        ],
    )];
    let d = run(&[sub("t", "topology", "apps", None)], &[], &catalogs);
    let message = show(&d[0]);
    assert!(message.contains("bundle topology.v1.0.0 requires an operator with package: rabbit and with version in range: >2.0.0"), "{message}");
    assert!(message.contains("needs package rabbit at a version in >2.0.0, and no bundle matches: rabbit.v1.9.0 in catalog olm/apps has version 1.9.0, outside >2.0.0"), "{message}");
}

#[test]
fn two_conflicting_subscriptions_fail_each_naming_the_other_and_a_third_proceeds() {
    let catalogs = [cat(
        "olm",
        "apps",
        0,
        vec![
            b("one", "1.0.0", vec![provides("Api")]),
            b("two", "1.0.0", vec![provides("Api")]),
            b("three", "1.0.0", vec![]),
        ],
    )];
    let subs = [
        sub("one", "one", "apps", None),
        sub("two", "two", "apps", None),
        sub("three", "three", "apps", None),
    ];
    let d = run(&subs, &[], &catalogs);
    let one = show(&d[0]);
    let two = show(&d[1]);
    assert!(one.contains("Subscription one would install one.v1.0.0, which Subscription two cannot be installed next to"), "{one}");
    assert!(
        two.contains("next to bundle one.v1.0.0 chosen for Subscription one"),
        "{two}"
    );
    assert_eq!(show(&d[2]), "three.v1.0.0 []");
}

#[test]
fn an_unparsable_constraint_fails_only_the_subscriptions_whose_candidates_carry_it() {
    let catalogs = [cat(
        "olm",
        "apps",
        0,
        vec![
            b(
                "bad",
                "1.0.0",
                vec![p("olm.constraint", json!({"gvk": gvk("X"), "extra": 1}))],
            ),
            b("good", "1.0.0", vec![]),
        ],
    )];
    let subs = [
        sub("bad", "bad", "apps", None),
        sub("good", "good", "apps", None),
    ];
    let d = run(&subs, &[], &catalogs);
    let Outcome::Refused(r) = &d[0].outcome else {
        panic!("{}", show(&d[0]))
    };
    assert_eq!(r.reason(), ERROR_PREVENTED_RESOLUTION);
    assert!(r.to_string().starts_with("bundle bad.v1.0.0: property olm.constraint (#1) cannot be used: parse olm.constraint: json: unknown field \"extra\""), "{r}");
    assert_eq!(show(&d[1]), "good.v1.0.0 []");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]
    /// The answer depends on what is there, not on the order it is listed in.
    #[test]
    fn the_answer_does_not_depend_on_input_order(seed in any::<u64>()) {
        let db = |name: &str| cat("olm", name, 0, vec![b("db", "1.0.0", vec![provides("Db")]), b("db2", "1.0.0", vec![provides("Db")])]);
        let mut catalogs = vec![
            cat("olm", "apps", 0, vec![
                b("app", "1.0.0", vec![needs("Db")]),
                b("app2", "1.0.0", vec![needs("Db"), provides("Other")]),
                b("rival", "1.0.0", vec![provides("Other")]),
            ]),
            db("x"), db("y"),
        ];
        let mut subs = vec![
            sub("app", "app", "apps", None),
            sub("app2", "app2", "apps", None),
            sub("rival", "rival", "apps", None),
        ];
        let mut existing = vec![installed("hand", "1.0.0", vec![]), installed("other", "1.0.0", vec![])];
        let expected: Vec<(String, String)> = {
            let mut d: Vec<_> = run(&subs, &existing, &catalogs).iter().map(|d| (d.subscription.clone(), show(d))).collect();
            d.sort();
            d
        };
        let mut s = seed;
        let mut next = || { s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407); (s >> 33) as usize };
        for i in (1..catalogs.len()).rev() { let j = next() % (i + 1); catalogs.swap(i, j); }
        for i in (1..subs.len()).rev() { let j = next() % (i + 1); subs.swap(i, j); }
        for i in (1..existing.len()).rev() { let j = next() % (i + 1); existing.swap(i, j); }
        let mut got: Vec<_> = run(&subs, &existing, &catalogs).iter().map(|d| (d.subscription.clone(), show(d))).collect();
        got.sort();
        prop_assert_eq!(got, expected);
    }
}

mod co_upgrade;
mod complete_search;
mod version_ranges;

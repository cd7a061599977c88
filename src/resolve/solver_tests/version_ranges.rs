//! `olm-rs.io/version` and `olm-rs.io/allow-downgrade` (docs/upgrades.md), as resolution sees
//! them: one table over one package, then ranges on a dependency's own Subscription.

use super::*;
use crate::resolve::version_request::{ALLOW_DOWNGRADE_ANNOTATION, Held, VERSION_ANNOTATION};

/// `etcd` 1.0.0 ← 1.1.0 ← 2.0.0 ← 3.0.0, each replacing the one before.
fn etcd() -> CatalogInput {
    cat(
        "olm",
        "c",
        0,
        vec![
            b("etcd", "1.0.0", vec![]),
            b("etcd", "1.1.0", vec![]),
            b("etcd", "2.0.0", vec![]),
            b("etcd", "3.0.0", vec![]),
        ],
    )
}

fn annotated(mut s: Subscription, range: Option<&str>, downgrade: bool) -> Subscription {
    let mut annotations = std::collections::BTreeMap::new();
    if let Some(range) = range {
        annotations.insert(VERSION_ANNOTATION.to_owned(), range.to_owned());
    }
    if downgrade {
        annotations.insert(ALLOW_DOWNGRADE_ANNOTATION.to_owned(), "true".to_owned());
    }
    s.metadata.annotations = Some(annotations);
    s
}

/// The decision in a word: `install <bundle> <why>`, `held <reason> <bundle>`, `stays`, or
/// the refusal's variant.
fn word(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Install(t) => format!(
            "install {} {:?}{}",
            t.bundle,
            t.why,
            t.replaces
                .as_ref()
                .map_or(String::new(), |r| format!(" over {r}"))
        ),
        Outcome::UpToDate { held: None, .. } => "stays".into(),
        Outcome::UpToDate {
            held: Some(Held::NewerOutsideRange { bundle, .. }),
            ..
        } => format!("held: {bundle} outside"),
        Outcome::UpToDate {
            held: Some(Held::InstalledOutsideRange { lower, .. }),
            ..
        } => format!("held: installed outside, lower {lower:?}"),
        Outcome::UpToDate {
            held: Some(Held::FailedUpgrade { bundle, .. }),
            ..
        } => format!("held: {bundle} failed before"),
        Outcome::Refused(r) => {
            let debug = format!("{r:?}");
            format!(
                "refused {}",
                debug.split([' ', '(', '{']).next().unwrap_or_default()
            )
        }
        Outcome::Adopt { csv } => format!("adopts {csv}"),
    }
}

#[test]
fn a_range_bounds_install_upgrade_and_downgrade() {
    // (range, allow-downgrade, installed version, startingCSV, expected)
    type Case<'a> = (
        Option<&'a str>,
        bool,
        Option<&'a str>,
        Option<&'a str>,
        &'a str,
    );
    let table: &[Case] = &[
        // Without the annotation: OLM's behaviour.
        (None, false, None, None, "install etcd.v3.0.0 ChannelHead"),
        (
            None,
            false,
            Some("2.0.0"),
            None,
            "install etcd.v3.0.0 Upgrade(Replaces) over etcd.v2.0.0",
        ),
        (
            None,
            true,
            Some("2.0.0"),
            None,
            "install etcd.v3.0.0 Upgrade(Replaces) over etcd.v2.0.0",
        ),
        // Install picks the newest in range; an exact version pins; `x` wildcards.
        (
            Some(">=1.0.0 <2.0.0"),
            false,
            None,
            None,
            "install etcd.v1.1.0 ChannelHead",
        ),
        (
            Some("1.0.0"),
            false,
            None,
            None,
            "install etcd.v1.0.0 ChannelHead",
        ),
        (
            Some("2.x"),
            false,
            None,
            None,
            "install etcd.v2.0.0 ChannelHead",
        ),
        (
            Some("<1.0.0 || >=3.0.0"),
            false,
            None,
            None,
            "install etcd.v3.0.0 ChannelHead",
        ),
        (Some(">=9.0.0"), false, None, None, "refused NothingInRange"),
        // startingCSV must be in range.
        (
            Some("<2.0.0"),
            false,
            None,
            Some("etcd.v1.0.0"),
            "install etcd.v1.0.0 StartingCsv",
        ),
        (
            Some(">=2.0.0"),
            false,
            None,
            Some("etcd.v1.0.0"),
            "refused StartingCsvOutOfRange",
        ),
        // Upgrades stay in range; the next version outside holds at the newest in range.
        (
            Some("<2.0.0"),
            false,
            Some("1.0.0"),
            None,
            "install etcd.v1.1.0 Upgrade(Replaces) over etcd.v1.0.0",
        ),
        (
            Some("<2.0.0"),
            false,
            Some("1.1.0"),
            None,
            "held: etcd.v2.0.0 outside",
        ),
        (
            Some("1.1.0"),
            false,
            Some("1.1.0"),
            None,
            "held: etcd.v2.0.0 outside",
        ),
        (Some("<=3.0.0"), false, Some("3.0.0"), None, "stays"),
        // Widening upgrades.
        (
            Some("<3.0.0"),
            false,
            Some("1.1.0"),
            None,
            "install etcd.v2.0.0 Upgrade(Replaces) over etcd.v1.1.0",
        ),
        // Narrowing below the installed version holds, never downgrades by itself.
        (
            Some("<2.0.0"),
            false,
            Some("3.0.0"),
            None,
            "held: installed outside, lower Some(\"etcd.v1.1.0\")",
        ),
        // ... unless asked: the newest in-range version below.
        (
            Some("<2.0.0"),
            true,
            Some("3.0.0"),
            None,
            "install etcd.v1.1.0 Downgrade over etcd.v3.0.0",
        ),
        (
            Some("1.0.0"),
            true,
            Some("2.0.0"),
            None,
            "install etcd.v1.0.0 Downgrade over etcd.v2.0.0",
        ),
        (
            Some("<1.0.0"),
            true,
            Some("2.0.0"),
            None,
            "held: installed outside, lower None",
        ),
        // A range above the installed version with no edge into it holds too.
        (
            Some(">=3.0.0"),
            false,
            Some("1.0.0"),
            None,
            "held: installed outside, lower None",
        ),
        // A malformed range does nothing else, installed or not.
        (
            Some(">=1.0.0 ||"),
            false,
            None,
            None,
            "refused BadVersionRange",
        ),
        (
            Some("~1.0"),
            true,
            Some("2.0.0"),
            None,
            "refused BadVersionRange",
        ),
    ];
    let catalogs = [etcd()];
    for (range, downgrade, version, starting, expected) in table {
        let installed_csv = version.map(|v| installed("etcd", v, vec![]));
        let mut s = sub(
            "etcd",
            "etcd",
            "c",
            installed_csv.as_ref().map(|c| c.name.as_str()),
        );
        s.spec.starting_csv = starting.map(str::to_owned);
        let s = annotated(s, *range, *downgrade);
        let installed: Vec<InstalledCsv> = installed_csv.into_iter().collect();
        let decisions = run(std::slice::from_ref(&s), &installed, &catalogs);
        assert_eq!(
            word(&decisions[0].outcome),
            *expected,
            "range {range:?}, downgrade {downgrade}, installed {version:?}, starting {starting:?}"
        );
    }
}

#[test]
fn held_and_refused_words_name_the_range_and_the_version_left_out() {
    let catalogs = [etcd()];
    let installed_csv = installed("etcd", "1.1.0", vec![]);
    let s = annotated(
        sub("etcd", "etcd", "c", Some("etcd.v1.1.0")),
        Some("<2.0.0"),
        false,
    );
    let decisions = run(&[s], &[installed_csv], &catalogs);
    let Outcome::UpToDate {
        held: Some(held), ..
    } = &decisions[0].outcome
    else {
        panic!("{:?}", decisions[0].outcome);
    };
    assert_eq!(
        held.to_string(),
        "etcd.v1.1.0 is the newest version in range \"<2.0.0\" (olm-rs.io/version); etcd.v2.0.0 (version 2.0.0) is available but outside the range"
    );

    let s = annotated(sub("etcd", "etcd", "c", None), Some(">=1.0.0 ||"), false);
    let decisions = run(&[s], &[], &catalogs);
    let message = show(&decisions[0]);
    assert_eq!(
        message,
        "refused: Subscription etcd: annotation olm-rs.io/version \">=1.0.0 ||\" is not a version range: Last element in range is '||'; nothing is installed or upgraded until it is fixed"
    );
}

/// `app` 1.0.0 requires `base` >=1.0.0; `base` 1.0.0 ← 2.0.0.
fn app_and_base(app_needs: &str) -> CatalogInput {
    cat(
        "olm",
        "c",
        0,
        vec![
            b("app", "1.0.0", vec![needs_package("base", app_needs)]),
            b("base", "1.0.0", vec![]),
            b("base", "2.0.0", vec![]),
        ],
    )
}

#[test]
fn a_range_on_a_dependencys_own_subscription_constrains_the_dependency() {
    let catalogs = [app_and_base(">=1.0.0")];
    let base = annotated(sub("base", "base", "c", None), Some("<2.0.0"), false);
    let app = sub("app", "app", "c", None);
    let decisions = run(&[base, app], &[], &catalogs);
    let shown: Vec<String> = decisions.iter().map(show).collect();
    // Without the range, app would pull base 2.0.0 (the head); with it, both agree on 1.0.0.
    assert_eq!(shown, ["base.v1.0.0 []", "app.v1.0.0 []"], "{shown:?}");

    // No Subscription to base, no range: the head.
    let decisions = run(&[sub("app", "app", "c", None)], &[], &catalogs);
    assert_eq!(show(&decisions[0]), "app.v1.0.0 [base.v2.0.0@c]");
}

#[test]
fn an_unsatisfiable_dependency_range_names_both_subscription_and_requirement() {
    let catalogs = [app_and_base(">=2.0.0")];
    let base = annotated(sub("base", "base", "c", None), Some("<2.0.0"), false);
    let app = sub("app", "app", "c", None);
    let decisions = run(&[base, app], &[], &catalogs);
    assert_eq!(show(&decisions[0]), "base.v1.0.0 []");
    let refused = show(&decisions[1]);
    assert!(refused.starts_with("refused: "), "{refused}");
    for words in [
        "app.v1.0.0",
        ">=2.0.0",
        "Subscription base holds package \"base\" to range \"<2.0.0\" (olm-rs.io/version)",
    ] {
        assert!(refused.contains(words), "{words:?} in {refused}");
    }
}

#[test]
fn the_preview_path_stops_at_the_newest_version_in_range() {
    let catalogs = [etcd()];
    let s = annotated(sub("etcd", "etcd", "c", None), Some("1.x"), false);
    let mut s = s;
    s.spec.starting_csv = Some("etcd.v1.0.0".into());
    let groups = OperatorGroups {
        names: vec!["og".into()],
        exclude_global_catalogs: false,
    };
    let ns = NamespaceInput {
        namespace: "ns",
        subscriptions: std::slice::from_ref(&s),
        installed: &[],
        catalogs: &catalogs,
        operator_groups: &groups,
        global_catalog_namespace: "olm",
    };
    let p = crate::resolve::preview(&ns, &s);
    let path: Vec<&str> = p.path.iter().map(|step| step.bundle.as_str()).collect();
    assert_eq!(path, ["etcd.v1.0.0", "etcd.v1.1.0"]);
    assert_eq!(
        p.stopped.as_deref(),
        Some(
            "etcd.v1.1.0 is the newest version in range \"1.x\" (olm-rs.io/version); etcd.v2.0.0 (version 2.0.0) is available but outside the range"
        )
    );
}

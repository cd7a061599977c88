//! The co-upgrade of issue 36 in one sync: `app` v1.0.0 needs `base >=1.0.0 <2.0.0`, `app`
//! v2.0.0 needs `base >=2.0.0`; both Subscriptions have installed their v1 CSV, so their
//! upgrades are tied (docs/subscription-plans.md, "Co-upgrades").

use jiff::Timestamp;
use serde_json::json;

use crate::api::{Approval, InstallPlan, Subscription};
use crate::catalog::CatalogIndex;
use crate::catalog::model::{Bundle, Channel, ChannelEntry, DeclarativeConfig, Package, Property};
use crate::catalog::semver_range::parse_tolerant;
use crate::resolve::input::{InstalledCsv, NamespaceInput};
use crate::resolve::subscription::{NamespaceState, RollbackInput, decide_namespace};

fn properties(pkg: &str, version: &str, needs: Option<&str>) -> Vec<Property> {
    let mut out = vec![
        Property::from_value(
            "olm.package",
            &json!({"packageName": pkg, "version": version}),
        )
        .unwrap(),
    ];
    if let Some(range) = needs {
        out.push(
            Property::from_value(
                "olm.package.required",
                &json!({"packageName": "base", "versionRange": range}),
            )
            .unwrap(),
        );
    }
    out
}

fn bundle(pkg: &str, version: &str, needs: Option<&str>) -> Bundle {
    let name = format!("{pkg}.v{version}");
    let csv = json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": name}, "spec": {"install": {"strategy": "deployment", "spec": {"deployments": []}}}});
    Bundle {
        package: pkg.into(),
        name,
        properties: properties(pkg, version, needs),
        objects: vec![serde_json::value::to_raw_value(&csv).unwrap()],
        ..Bundle::default()
    }
}

fn index() -> CatalogIndex {
    let mut config = DeclarativeConfig::default();
    for (pkg, versions) in [
        ("app", &["1.0.0", "2.0.0"][..]),
        ("base", &["1.0.0", "1.1.0", "2.0.0"][..]),
    ] {
        config.packages.push(Package {
            name: pkg.into(),
            default_channel: Some("stable".into()),
            ..Package::default()
        });
        let mut entries: Vec<ChannelEntry> = Vec::new();
        for version in versions {
            entries.push(ChannelEntry {
                name: format!("{pkg}.v{version}"),
                replaces: entries.last().map(|e| e.name.clone()),
                ..ChannelEntry::default()
            });
        }
        config.channels.push(Channel {
            package: pkg.into(),
            name: "stable".into(),
            entries,
            ..Channel::default()
        });
    }
    config.bundles = vec![
        bundle("app", "1.0.0", Some(">=1.0.0 <2.0.0")),
        bundle("app", "2.0.0", Some(">=2.0.0")),
        bundle("base", "1.0.0", None),
        bundle("base", "1.1.0", None),
        bundle("base", "2.0.0", None),
    ];
    CatalogIndex::new(config)
}

fn installed(pkg: &str, version: &str, needs: Option<&str>) -> InstalledCsv {
    InstalledCsv {
        name: format!("{pkg}.v{version}"),
        version: parse_tolerant(version).ok(),
        package: Some(pkg.into()),
        provided: vec![],
        phase: "Succeeded".into(),
        properties: properties(pkg, version, needs),
    }
}

/// A Subscription to `pkg` that has installed `csv` and wants `current`, through plan `plan`
/// when one is named.
fn sub(
    name: &str,
    pkg: &str,
    (csv, current): (&str, &str),
    plan: Option<&str>,
    approval: Approval,
) -> Subscription {
    let state = if csv == current {
        "AtLatestKnown"
    } else {
        "UpgradePending"
    };
    let mut status = json!({"lastUpdated": "1970-01-01T00:10:00Z", "state": state,
                            "currentCSV": current, "installedCSV": csv});
    if let Some(plan) = plan {
        status["installPlanRef"] = json!({"kind": "InstallPlan", "namespace": "ns", "name": plan});
        status["installplan"] = json!({"kind": "InstallPlan", "name": plan,
                                       "apiVersion": "operators.coreos.com/v1alpha1", "uuid": "u"});
    }
    serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"),
                     "creationTimestamp": format!("1970-01-01T00:0{}:00Z", name.len() % 10)},
        "spec": {"source": "cat", "sourceNamespace": "olm", "name": pkg, "channel": "stable",
                 "installPlanApproval": approval},
        "status": status,
    }))
    .unwrap()
}

fn plan(name: &str, csvs: &[&str], phase: &str) -> InstallPlan {
    serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"clusterServiceVersionNames": csvs, "approval": "Automatic", "approved": true},
        "status": {"phase": phase, "catalogSources": []},
    }))
    .unwrap()
}

/// app's plan: the CSV app wants through it, the plan's CSVs and phase.
struct AppPlan<'a> {
    current: &'a str,
    csvs: &'a [&'a str],
    phase: &'a str,
}

const FIRST: [&str; 2] = ["app.v1.0.0", "base.v1.1.0"];
const BOTH: [&str; 2] = ["app.v2.0.0", "base.v2.0.0"];

/// What each Subscription plans in one sync: the CSVs of its plan, or nothing.
fn planned(app: AppPlan<'_>, base_approval: Approval) -> Planned {
    let (catalogs, groups) = super::super::tests::one_catalog_and_group(index());
    // base's Subscription was made by app's first plan and has just adopted base.v1.1.0.
    let subs = [
        sub(
            "app",
            "app",
            ("app.v1.0.0", app.current),
            Some("install-1"),
            Approval::Automatic,
        ),
        sub(
            "base",
            "base",
            ("base.v1.1.0", "base.v1.1.0"),
            None,
            base_approval,
        ),
    ];
    let installed = [
        installed("app", "1.0.0", Some(">=1.0.0 <2.0.0")),
        installed("base", "1.1.0", None),
    ];
    let plans = [plan("install-1", app.csvs, app.phase)];
    decide_namespace(&NamespaceState {
        input: NamespaceInput {
            namespace: "ns",
            subscriptions: &subs,
            installed: &installed,
            catalogs: &catalogs,
            operator_groups: &groups,
            global_catalog_namespace: "olm",
        },
        plans: &plans,
        crds: &[],
        rollback: &RollbackInput::default(),
        now: Timestamp::from_second(1_000).unwrap(),
    })
    .into_iter()
    .map(|u| {
        u.plan.map(|p| {
            let mut csvs: Vec<String> = p
                .draft
                .steps
                .iter()
                .filter(|s| s.object.kind == "ClusterServiceVersion")
                .map(|s| s.object.name.clone())
                .collect();
            csvs.sort();
            csvs
        })
    })
    .collect()
}

/// What each Subscription of the namespace plans: the CSVs of its plan, or nothing.
type Planned = Vec<Option<Vec<String>>>;

fn csvs(names: &[&str]) -> Option<Vec<String>> {
    Some(names.iter().map(|n| (*n).to_owned()).collect())
}

/// The first decision that was wrong: while app's first plan still installed (the stores had
/// not yet seen it `Complete`), base — free, and tied to app — planned `base.v2.0.0` alone; the
/// co-upgrade's plan then installed it a second time. Now base waits for the one plan.
#[test]
fn a_tied_subscription_waits_while_its_partner_still_installs_its_previous_hop() {
    let first = |phase| AppPlan {
        current: "app.v1.0.0",
        csvs: &FIRST,
        phase,
    };
    let both = csvs(&BOTH);
    let table: [(AppPlan<'_>, Approval, Planned); 3] = [
        // app waits on its plan, and base waits for app: no plan at all.
        (first("Installing"), Approval::Automatic, vec![None, None]),
        // app's plan is done: one plan installs both, each Subscription asks for that plan.
        (
            first("Complete"),
            Approval::Automatic,
            vec![both.clone(), both],
        ),
        // Another approval never shares a plan (each keeps its own), so base does not wait.
        (
            first("Installing"),
            Approval::Manual,
            vec![None, csvs(&["base.v2.0.0"])],
        ),
    ];
    for (app, approval, want) in table {
        let shown = format!("app's plan {}, base {approval:?}", app.phase);
        assert_eq!(planned(app, approval), want, "{shown}");
    }
}

/// The second: app created the co-upgrade's plan and waits on it, but base's attachment to it
/// was refused (its status had changed meanwhile). Deciding again, base drafted its half alone
/// and created a plan of `base.v2.0.0`; now its draft is the co-upgrade's, which it attaches.
#[test]
fn a_tied_subscription_joins_the_co_upgrade_plan_its_partner_waits_on() {
    let waiting = |phase| AppPlan {
        current: "app.v2.0.0",
        csvs: &BOTH,
        phase,
    };
    for phase in ["Installing", "RequiresApproval"] {
        let got = planned(waiting(phase), Approval::Automatic);
        assert_eq!(got, [None, csvs(&BOTH)], "app's co-upgrade plan {phase}");
    }
}

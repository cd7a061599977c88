use serde_json::json;

use super::*;

fn sub(annotations: &[(&str, &str)], installed: Option<&str>) -> Subscription {
    let mut sub = crate::resolve::version_request::tests::sub(annotations);
    if let Some(name) = installed {
        sub.status = Some(
            serde_json::from_value(json!({
                "lastUpdated": "2027-01-01T00:00:00Z",
                "installedCSV": name, "currentCSV": name, "state": "AtLatestKnown"
            }))
            .expect("a status"),
        );
    }
    sub
}

fn csv(name: &str, version: &str, replaces: Option<&str>, phases: &[(&str, &str)]) -> CsvFacts {
    let history: Vec<_> = phases
        .iter()
        .map(|(p, r)| json!({"phase": p, "reason": r}))
        .collect();
    let (phase, reason) = phases.last().copied().unwrap_or(("", ""));
    let csv: ClusterServiceVersion = serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": name, "namespace": "ns", "resourceVersion": "7"},
        "spec": {"version": version, "replaces": replaces, "displayName": name,
                 "install": {"strategy": "deployment", "spec": {"deployments": []}}},
        "status": {"phase": phase, "reason": reason, "message": "deployment \"op\" exceeded its progress deadline",
                   "conditions": history},
    }))
    .expect("a CSV");
    CsvFacts::of(&csv)
}

const OK: (&str, &str) = ("Succeeded", "InstallSucceeded");
const REPLACING: (&str, &str) = ("Replacing", "BeingReplaced");
const INSTALLING: (&str, &str) = ("Installing", "InstallWaiting");

#[test]
fn the_policy_is_the_subscriptions_else_the_groups() {
    let group = Some(("og", "rollback"));
    type Case<'a> = (
        &'a [(&'a str, &'a str)],
        Option<(&'a str, &'a str)>,
        Result<bool, &'a str>,
    );
    let table: &[Case] = &[
        (&[], None, Ok(false)),
        (&[], group, Ok(true)),
        (&[(ON_FAILED_UPGRADE, "rollback")], None, Ok(true)),
        (&[(ON_FAILED_UPGRADE, " rollback ")], None, Ok(true)),
        // The Subscription's own value wins, either way.
        (
            &[(ON_FAILED_UPGRADE, "rollback")],
            Some(("og", "x")),
            Ok(true),
        ),
        (
            &[(ON_FAILED_UPGRADE, "Rollback")],
            group,
            Err(
                "annotation olm-rs.io/on-failed-upgrade \"Rollback\" on Subscription s is not a policy",
            ),
        ),
        (
            &[],
            Some(("og", "retry")),
            Err(
                "annotation olm-rs.io/on-failed-upgrade \"retry\" on OperatorGroup og is not a policy",
            ),
        ),
    ];
    for (annotations, group, want) in table {
        let got = rollback_wanted(&sub(annotations, None), *group).map_err(|e| e.to_string());
        match (got, want) {
            (Ok(got), Ok(want)) => assert_eq!(got, *want, "{annotations:?} {group:?}"),
            (Err(got), Err(want)) => assert!(got.starts_with(want), "{got}"),
            (got, want) => panic!("{annotations:?} {group:?}: {got:?}, wanted {want:?}"),
        }
    }
}

#[test]
fn only_a_new_csv_failed_before_succeeding_over_a_replaced_succeeded_one_is_rolled_back() {
    let v1 = |phases: &[(&str, &str)]| csv("op.v1", "1.0.0", None, phases);
    let v2 = |phases: &[(&str, &str)]| csv("op.v2", "2.0.0", Some("op.v1"), phases);
    let failed = [INSTALLING, ("Failed", "InstallCheckFailed")];
    let table: Vec<(&str, Vec<CsvFacts>, bool)> = vec![
        (
            "install check failed",
            vec![v1(&[OK, REPLACING]), v2(&failed)],
            true,
        ),
        (
            "components unhealthy",
            vec![
                v1(&[OK, REPLACING]),
                v2(&[INSTALLING, ("Failed", "ComponentUnhealthy")]),
            ],
            true,
        ),
        (
            "still installing",
            vec![v1(&[OK, REPLACING]), v2(&[INSTALLING])],
            false,
        ),
        (
            "failed for a group problem",
            vec![v1(&[OK, REPLACING]), v2(&[("Failed", "NoOperatorGroup")])],
            false,
        ),
        (
            "failed after it had succeeded: outside the window",
            vec![
                v1(&[OK, REPLACING]),
                v2(&[OK, ("Failed", "ComponentUnhealthy")]),
            ],
            false,
        ),
        (
            "the replaced CSV never succeeded",
            vec![v1(&[INSTALLING, REPLACING]), v2(&failed)],
            false,
        ),
        ("the replaced CSV is gone", vec![v2(&failed)], false),
        (
            "the replaced CSV is not waiting for it",
            vec![v1(&[OK]), v2(&failed)],
            false,
        ),
    ];
    let s = sub(&[], Some("op.v2"));
    for (what, csvs, rolled_back) in table {
        let got = failed_upgrade(&s, &csvs);
        assert_eq!(got.is_some(), rolled_back, "{what}");
        if let Some(up) = got {
            assert_eq!(up.failed.name, "op.v2");
            assert_eq!(up.restore.name, "op.v1");
            assert_eq!(up.mark(), "2.0.0");
        }
    }
    assert_eq!(
        failed_upgrade(&sub(&[], None), &[v1(&[OK, REPLACING]), v2(&failed)]),
        None,
        "a Subscription without an installed CSV"
    );
}

#[test]
fn the_words_name_the_failed_version_its_reason_and_the_version_restored() {
    let up = FailedUpgrade {
        failed: csv(
            "op.v2",
            "2.0.0",
            Some("op.v1"),
            &[("Failed", "InstallCheckFailed")],
        ),
        restore: csv("op.v1", "1.0.0", None, &[OK, REPLACING]),
    };
    assert_eq!(up.reason(), "InstallCheckFailed");
    assert_eq!(
        up.to_string(),
        "upgrade to op.v2 (version 2.0.0) failed (InstallCheckFailed: deployment \"op\" exceeded its progress deadline); rolled back to op.v1 (version 1.0.0); olm-rs.io/failed-upgrade: \"2.0.0\" keeps it from being tried again until the catalog offers a newer version or the annotation is removed"
    );
    let refused = RollbackRefused::new(&up, &"downgrade to op.v1 refused: …");
    assert!(
        refused
            .to_string()
            .ends_with("rollback to op.v1 (version 1.0.0) refused: downgrade to op.v1 refused: …"),
        "{refused}"
    );
}

#[test]
fn the_mark_bars_the_failed_version_and_older_only() {
    let entry = |name: &str, version: Option<&str>| {
        let channel_entry = crate::catalog::model::ChannelEntry {
            name: name.to_owned(),
            ..Default::default()
        };
        GraphEntry::new(
            &channel_entry,
            version.map(|v| parse_tolerant(v).expect("a version")),
        )
    };
    let mark = failed_mark(&sub(&[(FAILED_UPGRADE, "2.0.0")], None)).expect("a mark");
    assert!(mark.bars(&entry("op.v2", Some("2.0.0"))));
    assert!(mark.bars(&entry("op.v1.5", Some("1.5.0"))));
    assert!(!mark.bars(&entry("op.v2.0.1", Some("2.0.1"))));
    let by_name = failed_mark(&sub(&[(FAILED_UPGRADE, "op.nightly")], None)).expect("a mark");
    assert!(by_name.bars(&entry("op.nightly", None)));
    assert!(!by_name.bars(&entry("op.v2", Some("2.0.0"))));
    assert_eq!(failed_mark(&sub(&[(FAILED_UPGRADE, " ")], None)), None);
    assert_eq!(failed_mark(&sub(&[], None)), None);
}

fn installed_csv(name: &str, package: &str, version: &str) -> InstalledCsv {
    InstalledCsv {
        name: name.to_owned(),
        version: parse_tolerant(version).ok(),
        package: Some(package.to_owned()),
        provided: Vec::new(),
        phase: "Succeeded".to_owned(),
        properties: Vec::new(),
    }
}

fn requires(package: &str, range: &str) -> PackageRequiredValue {
    PackageRequiredValue {
        package_name: package.to_owned(),
        version_range: range.to_owned(),
    }
}

#[test]
fn a_rollback_whose_dependency_a_co_upgrade_moved_on_is_refused() {
    let base_v2 = installed_csv("base.v2.0.0", "base", "2.0.0");
    let base_v1 = installed_csv("base.v1.1.0", "base", "1.1.0");
    let app_v2 = installed_csv("app.v2.0.0", "app", "2.0.0");
    let other = installed_csv("other.v9.0.0", "other", "9.0.0");
    let below_two = || vec![requires("base", ">=1.0.0 <2.0.0")];
    type Case<'a> = (
        Vec<PackageRequiredValue>,
        Vec<&'a InstalledCsv>,
        Option<&'a str>,
    );
    let table: Vec<Case> = vec![
        // The co-upgrade moved base to 2.0.0: app.v1.0.0 needs it below 2.
        (below_two(), vec![&app_v2, &base_v2], Some("base.v2.0.0")),
        // base still in range: the rollback goes ahead.
        (below_two(), vec![&app_v2, &base_v1], None),
        // Nothing of base installed, or no requirement: left to resolution.
        (below_two(), vec![&app_v2, &other], None),
        (Vec::new(), vec![&app_v2, &base_v2], None),
        // A range that does not parse is resolution's to report.
        (vec![requires("base", "not a range")], vec![&base_v2], None),
        // The failed CSV itself never counts, even of the required package.
        (vec![requires("app", "<2.0.0")], vec![&app_v2], None),
    ];
    for (i, (required, installed, moved)) in table.into_iter().enumerate() {
        let found = dependency_moved("app.v1.0.0", required, installed, "app.v2.0.0");
        assert_eq!(
            found.as_ref().map(|m| m.installed.as_str()),
            moved,
            "row {i}: {found:?}"
        );
    }
    let refused = dependency_moved("app.v1.0.0", below_two(), [&app_v2, &base_v2], "app.v2.0.0")
        .expect("refused");
    let words = refused.to_string();
    for part in [
        "app.v1.0.0 requires package \"base\" in range \">=1.0.0 <2.0.0\"",
        "base.v2.0.0 (version 2.0.0) is installed",
        "downgrade \"base\" first",
        "nothing was changed",
    ] {
        assert!(words.contains(part), "{words:?} lacks {part:?}");
    }
}

//! `olm-rs resolve` end to end: the binary, real catalogs from the shared data, text and JSON.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn catalogs() -> PathBuf {
    common::shared_dir().join("data/catalogs/community-operators-prod")
}

fn subscription(
    dir: &Path,
    package: &str,
    channel: Option<&str>,
    starting: Option<&str>,
    installed: Option<&str>,
) -> PathBuf {
    let mut yaml = format!(
        "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata:\n  name: {package}\n  namespace: demo\nspec:\n  source: community\n  sourceNamespace: olm\n  name: {package}\n"
    );
    if let Some(c) = channel {
        yaml.push_str(&format!("  channel: {c}\n"));
    }
    if let Some(s) = starting {
        yaml.push_str(&format!("  startingCSV: {s}\n"));
    }
    if let Some(i) = installed {
        yaml.push_str(&format!(
            "status:\n  installedCSV: {i}\n  lastUpdated: \"2026-01-01T00:00:00Z\"\n"
        ));
    }
    let path = dir.join(format!("{package}-{}.yaml", installed.unwrap_or("new")));
    std::fs::write(&path, yaml).unwrap();
    path
}

fn resolve(sub: &Path, catalog: &Path, json: bool) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_olm-rs"));
    cmd.arg("resolve")
        .arg("-f")
        .arg(sub)
        .arg("--catalog")
        .arg(catalog);
    if json {
        cmd.args(["-o", "json"]);
    }
    let out = cmd.output().expect("runs olm-rs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn json(sub: &Path, catalog: &Path) -> (i32, Value) {
    let (code, stdout, stderr) = resolve(sub, catalog, true);
    let value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}\n{stderr}"));
    (code, value)
}

fn bundles(report: &Value) -> Vec<String> {
    report["path"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["bundle"].as_str().unwrap().to_owned())
        .collect()
}

fn starting_csv_then_every_hop_to_the_head_from_bundle_directories() {
    let dir = tempfile::tempdir().unwrap();
    let sub = subscription(
        dir.path(),
        "etcd",
        Some("singlenamespace-alpha"),
        Some("etcdoperator.v0.9.0"),
        None,
    );
    let catalog = catalogs().join("operators/etcd");
    let (code, report) = json(&sub, &catalog);
    assert_eq!(code, 0);
    assert_eq!(report["outcome"], "install");
    assert_eq!(report["install"]["bundle"], "etcdoperator.v0.9.0");
    assert_eq!(report["install"]["via"], "startingCSV");
    assert_eq!(
        bundles(&report),
        [
            "etcdoperator.v0.9.0",
            "etcdoperator.v0.9.2",
            "etcdoperator.v0.9.4"
        ]
    );
    assert_eq!(report["path"][2]["replaces"], "etcdoperator.v0.9.2");
    assert_eq!(report["path"][2]["version"], "0.9.4");

    let (code, text, _) = resolve(&sub, &catalog, false);
    assert_eq!(code, 0);
    assert!(
        text.contains("Would install: etcdoperator.v0.9.0 (version 0.9.0)"),
        "{text}"
    );
    assert!(
        text.contains("3. etcdoperator.v0.9.4  version 0.9.4  replaces etcdoperator.v0.9.2"),
        "{text}"
    );
}

fn installed_operator_upgrades_hop_by_hop_in_the_file_based_catalog() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = catalogs().join("catalogs/v4.20");
    let sub = subscription(
        dir.path(),
        "kube-green",
        None,
        None,
        Some("kube-green.v0.5.0"),
    );
    let (code, report) = json(&sub, &catalog);
    assert_eq!(code, 0);
    assert_eq!(report["installed"], "kube-green.v0.5.0");
    let path = bundles(&report);
    assert_eq!(
        path.first().map(String::as_str),
        Some("kube-green.v0.5.1"),
        "one hop per plan: next is the direct replacement"
    );
    assert_eq!(
        path.last().map(String::as_str),
        Some("kube-green.v0.7.1"),
        "ends at the channel head"
    );
    assert_eq!(path.len(), 5);
    // Every bundle of this catalog is only an image: resolve names the one it would pull.
    for step in report["path"].as_array().unwrap() {
        let image = step["image"].as_str().unwrap_or_default();
        assert!(
            image.starts_with("quay.io/") && image.contains("/kube-green@sha256:"),
            "{step}"
        );
    }
    for pair in report["path"].as_array().unwrap().windows(2) {
        assert_eq!(
            pair[1]["replaces"], pair[0]["bundle"],
            "each plan replaces the previous one"
        );
    }
}

fn channel_switch_reaches_the_head_through_a_skip_range() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = catalogs().join("catalogs/v4.20");
    let sub = subscription(
        dir.path(),
        "sailoperator",
        Some("stable"),
        None,
        Some("sailoperator.v1.26.1"),
    );
    let (code, report) = json(&sub, &catalog);
    assert_eq!(code, 0);
    assert_eq!(report["install"]["bundle"], "sailoperator.v1.30.3");
    assert_eq!(report["install"]["via"], "skipRange");
    assert_eq!(report["install"]["replaces"], "sailoperator.v1.26.1");
    assert_eq!(bundles(&report).len(), 1);
}

fn at_the_head_nothing_is_installed_and_refusals_explain_themselves() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = catalogs().join("catalogs/v4.20");
    let sub = subscription(
        dir.path(),
        "kube-green",
        Some("alpha"),
        None,
        Some("kube-green.v0.7.1"),
    );
    let (code, report) = json(&sub, &catalog);
    assert_eq!((code, report["outcome"].as_str()), (0, Some("upToDate")));
    assert!(
        report["message"]
            .as_str()
            .unwrap()
            .contains("head of channel \"alpha\""),
        "{report}"
    );

    let sub = subscription(dir.path(), "kube-green", Some("beta"), None, None);
    let (code, report) = json(&sub, &catalog);
    assert_eq!(code, 1);
    assert_eq!(report["outcome"], "refused");
    assert_eq!(report["reason"], "ConstraintsNotSatisfiable");
    assert_eq!(
        report["message"],
        "no operators found in channel beta of package kube-green in the catalog referenced by subscription kube-green; channel \"beta\" of package \"kube-green\" is not in catalog olm/community; the package has channel \"alpha\" (default \"alpha\")"
    );
    let (code, text, _) = resolve(&sub, &catalog, false);
    assert_eq!(code, 1);
    assert!(
        text.contains("Nothing would be installed (ConstraintsNotSatisfiable): no operators found in channel beta of package kube-green"),
        "{text}"
    );

    let sub = subscription(dir.path(), "kube-grean", None, None, None);
    let (_, report) = json(&sub, &catalog);
    assert!(
        report["message"]
            .as_str()
            .unwrap()
            .ends_with("did you mean \"kube-green\"?"),
        "{report}"
    );
}

fn bad_input_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cm.yaml");
    std::fs::write(
        &path,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
    )
    .unwrap();
    let (code, _, stderr) = resolve(&path, &catalogs().join("operators/etcd"), false);
    assert_ne!(code, 0);
    assert!(
        stderr.contains("cm.yaml: kind must be Subscription"),
        "{stderr}"
    );
    let sub = subscription(dir.path(), "etcd", None, None, None);
    let (code, _, stderr) = resolve(&sub, &dir.path().join("missing"), false);
    assert_ne!(code, 0);
    assert!(stderr.contains("missing"), "{stderr}");
}

fn the_dependency_preview_lists_what_the_plan_would_install_besides_the_bundle() {
    let dir = tempfile::tempdir().unwrap();
    let sub = subscription(
        dir.path(),
        "rabbitmq-messaging-topology-operator",
        None,
        None,
        None,
    );
    let catalog = catalogs().join("catalogs/v4.20");
    let (code, report) = json(&sub, &catalog);
    assert_eq!(code, 0, "{report}");
    let deps = report["dependencies"].as_array().expect("dependencies");
    let dep = deps
        .iter()
        .find(|d| d["package"] == "rabbitmq-cluster-operator")
        .unwrap_or_else(|| panic!("{report}"));
    assert_eq!(dep["requiredBy"], report["install"]["bundle"]);
    assert_eq!(
        dep["subscription"],
        format!(
            "rabbitmq-cluster-operator-{}-community-olm",
            dep["channel"].as_str().unwrap()
        )
    );
    let (_, text, _) = resolve(&sub, &catalog, false);
    assert!(
        text.contains(
            "With its dependencies, in the same InstallPlan:\n  - rabbitmq-cluster-operator."
        ),
        "{text}"
    );
}

crate::trials! {
    sync starting_csv_then_every_hop_to_the_head_from_bundle_directories,
    sync installed_operator_upgrades_hop_by_hop_in_the_file_based_catalog,
    sync channel_switch_reaches_the_head_through_a_skip_range,
    sync at_the_head_nothing_is_installed_and_refusals_explain_themselves,
    sync bad_input_is_named,
    sync the_dependency_preview_lists_what_the_plan_would_install_besides_the_bundle,
}

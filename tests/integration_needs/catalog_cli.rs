//! `olm-rs catalog …` as scripts use it: exit codes and the stable JSON shapes.

use crate::common;

use std::process::Command;

use serde_json::Value;

fn olm_rs(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_olm-rs"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn validate_exit_codes_and_json() {
    let v420 = common::fbc_v420();
    let (code, stdout, _) = olm_rs(&["catalog", "validate", v420.to_str().unwrap(), "-o", "json"]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["valid"], true);
    assert_eq!(v["bundles"], 803);
    assert_eq!(v["problems"], serde_json::json!([]));

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("index.yaml"),
        "schema: olm.package\nname: Bad_Name\n",
    )
    .unwrap();
    let (code, stdout, _) = olm_rs(&["catalog", "validate", dir.path().to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(
        stdout.contains("index.yaml:1: package \"Bad_Name\": invalid package name"),
        "{stdout}"
    );
    assert!(stdout.contains("default channel must be set"), "{stdout}");
    assert!(stdout.contains("is invalid: 3 problem(s)"), "{stdout}");
}

fn upgrade_path_json_shape() {
    let v420 = common::fbc_v420();
    let (code, stdout, stderr) = olm_rs(&[
        "catalog",
        "upgrade-path",
        v420.to_str().unwrap(),
        "--package",
        "sailoperator",
        "--from",
        "sailoperator.v1.25.0",
        "-o",
        "json",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        ["package", "channel", "from", "path", "head", "reason"]
    );
    assert_eq!(v["channel"], "stable");
    assert_eq!(v["path"], serde_json::json!(["sailoperator.v1.30.3"]));
    assert_eq!(v["head"], "sailoperator.v1.30.3");
    assert_eq!(v["reason"], Value::Null);

    let (_, stdout, _) = olm_rs(&[
        "catalog",
        "upgrade-path",
        v420.to_str().unwrap(),
        "--package",
        "sailoperator",
        "--from",
        "sailoperator.v1.30.3",
        "-o",
        "json",
    ]);
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["path"], serde_json::json!([]));
    assert!(v["reason"].as_str().unwrap().contains("head of channel"));

    let (_, stdout, _) = olm_rs(&[
        "catalog",
        "upgrade-path",
        v420.to_str().unwrap(),
        "--package",
        "sailoperator",
        "-o",
        "json",
    ]);
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["from"], Value::Null);
    assert_eq!(v["path"], serde_json::json!(["sailoperator.v1.30.3"]));
}

/// `--from` names a bundle of another channel of the package: its version comes from the
/// catalog, so the head's skipRange applies as it would on a cluster (issue #18 item 7).
fn upgrade_path_from_another_channel_uses_the_catalog_version() {
    let v420 = common::fbc_v420();
    let run = |extra: &[&str]| {
        let mut args = vec![
            "catalog",
            "upgrade-path",
            v420.to_str().unwrap(),
            "--package",
            "sailoperator",
            "--channel",
            "1.31-nightly",
            "--from",
            "sailoperator.v1.30.3",
        ];
        args.extend_from_slice(extra);
        let (code, stdout, stderr) = olm_rs(&args);
        assert_eq!(code, 0, "{stderr}");
        stdout
    };
    let v: Value = serde_json::from_str(&run(&["-o", "json"])).unwrap();
    let head = "sailoperator.v1.31.0-nightly-2026-08-22";
    assert_eq!(v["head"], head);
    assert_eq!(v["path"], serde_json::json!([head]));
    assert_eq!(v["reason"], Value::Null);

    let text = run(&[]);
    assert!(
        text.contains(&format!("1. {head} (via skipRange")),
        "{text}"
    );
    assert!(!text.contains("unknown"), "{text}");

    // An explicit --from-version still wins over the catalog's: 0.9.0 is below every
    // skipRange of the channel.
    let v: Value = serde_json::from_str(&run(&["--from-version", "0.9.0", "-o", "json"])).unwrap();
    assert_eq!(v["path"], serde_json::json!([]));
    assert!(
        v["reason"]
            .as_str()
            .unwrap()
            .contains("skipRange containing 0.9.0"),
        "{v}"
    );
}

fn graph_and_render() {
    let etcd = common::operators_dir().join("etcd");
    let (code, stdout, _) = olm_rs(&[
        "catalog",
        "graph",
        etcd.to_str().unwrap(),
        "--package",
        "etcd",
        "-o",
        "dot",
    ]);
    assert_eq!(code, 0);
    assert!(stdout.starts_with("digraph"));
    assert!(stdout.contains("\"singlenamespace-alpha/etcdoperator.v0.9.2\" -> \"singlenamespace-alpha/etcdoperator.v0.9.4\""), "{stdout}");
    let (code, stdout, _) = olm_rs(&[
        "catalog",
        "graph",
        etcd.to_str().unwrap(),
        "--package",
        "etcd",
        "-o",
        "json",
    ]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["defaultChannel"], "singlenamespace-alpha");
    let (code, stdout, _) = olm_rs(&["catalog", "render", etcd.join("0.9.4").to_str().unwrap()]);
    assert_eq!(code, 0);
    let blob: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(blob["schema"], "olm.bundle");
    assert_eq!(blob["package"], "etcd");
    assert!(stdout.contains("\n    \"name\""), "4-space indent like opm");
    let (code, _, stderr) = olm_rs(&[
        "catalog",
        "graph",
        etcd.to_str().unwrap(),
        "--package",
        "nope",
    ]);
    assert_eq!(code, 2);
    assert!(stderr.contains("package \"nope\" not found"), "{stderr}");
}

crate::trials! {
    sync validate_exit_codes_and_json,
    sync upgrade_path_json_shape,
    sync upgrade_path_from_another_channel_uses_the_catalog_version,
    sync graph_and_render,
}

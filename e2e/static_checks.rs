//! Checks that need no cluster and run on every `cargo test` (CI included): the e2e catalog and
//! scripts are sound, so a journey on a real cluster fails only for reasons worth knowing.

use std::process::Command;

use anyhow::{Context as _, bail, ensure};
use serde_json::Value;

use crate::configmap_catalog::{self, yaml_documents};
use crate::fixtures::{self, e2e_dir};

pub type Check = fn() -> anyhow::Result<()>;

pub const ALL: &[(&str, Check)] = &[
    (
        "bundles_hold_the_versions_the_journeys_use",
        bundles_hold_the_versions_the_journeys_use,
    ),
    (
        "configmap_catalog_offers_the_fbc_channels",
        configmap_catalog_offers_the_fbc_channels,
    ),
    ("scripts_parse", scripts_parse),
];

/// Every journey constant names a CSV of `e2e/bundles`, and each upgrade edge of the CSVs is
/// the one the catalog's channels declare.
fn bundles_hold_the_versions_the_journeys_use() -> anyhow::Result<()> {
    let mut found = Vec::new();
    for version in ["0.1.0", "0.2.0", "0.3.0"] {
        let path = e2e_dir()
            .join("bundles")
            .join(fixtures::PACKAGE)
            .join(version)
            .join("manifests")
            .join(format!("{}.clusterserviceversion.yaml", fixtures::PACKAGE));
        let csv = yaml_documents(&path)?
            .into_iter()
            .next()
            .with_context(|| format!("{}: empty", path.display()))?;
        ensure!(
            csv["spec"]["version"] == version,
            "{}: spec.version is {}, expected {version}",
            path.display(),
            csv["spec"]["version"]
        );
        let deployment = &csv["spec"]["install"]["spec"]["deployments"][0];
        ensure!(
            deployment["name"] == fixtures::DEPLOYMENT,
            "{}: the install strategy's deployment must be named {}",
            path.display(),
            fixtures::DEPLOYMENT
        );
        found.push((
            csv["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            csv["spec"]["replaces"].as_str().map(str::to_owned),
        ));
    }
    let expected = [
        (fixtures::V010.to_owned(), None),
        (fixtures::V020.to_owned(), Some(fixtures::V010.to_owned())),
        (fixtures::V030.to_owned(), Some(fixtures::V020.to_owned())),
    ];
    ensure!(
        found == expected,
        "CSV names and replaces {found:?}, expected {expected:?}"
    );
    Ok(())
}

/// The ConfigMap catalog built from the bundles offers the same channel heads as the FBC, one
/// CRD and every CSV.
fn configmap_catalog_offers_the_fbc_channels() -> anyhow::Result<()> {
    let data = configmap_catalog::data(
        &e2e_dir().join("bundles"),
        &e2e_dir().join("catalog"),
        fixtures::PACKAGE,
    )?;
    let list = |key: &str| -> anyhow::Result<Vec<Value>> {
        let text = data.get(key).with_context(|| format!("no key {key}"))?;
        match serde_yaml_ng::from_str(text)? {
            Value::Array(items) => Ok(items),
            other => bail!("{key} is not a list: {other}"),
        }
    };
    let packages = list("packages")?;
    ensure!(packages.len() == 1, "one package expected: {packages:?}");
    let package = &packages[0];
    ensure!(package["packageName"] == fixtures::PACKAGE && package["defaultChannel"] == "stable");
    let channels = serde_json::json!([
        {"name": "fast", "currentCSV": fixtures::V030},
        {"name": "stable", "currentCSV": fixtures::V020},
    ]);
    ensure!(
        package["channels"] == channels,
        "channels {}",
        package["channels"]
    );
    let crds = list("customResourceDefinitions")?;
    ensure!(
        crds.len() == 1 && crds[0]["metadata"]["name"] == fixtures::CRD,
        "CRDs {crds:?}"
    );
    ensure!(list("clusterServiceVersions")?.len() == 3);
    Ok(())
}

/// `e2e/kind.sh` is valid bash (`bash -n`), and so is every other script under `e2e/`.
fn scripts_parse() -> anyhow::Result<()> {
    let script = e2e_dir().join("kind.sh");
    ensure!(script.is_file(), "{} is missing", script.display());
    let output = Command::new("bash")
        .arg("-n")
        .arg(&script)
        .output()
        .context("running bash -n (is bash installed?)")?;
    ensure!(
        output.status.success(),
        "bash -n {}: {}",
        script.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(())
}

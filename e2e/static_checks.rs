//! Checks that need no cluster and run on every `cargo test` (CI included): the e2e catalog and
//! scripts are sound, so a journey on a real cluster fails only for reasons worth knowing.

use std::process::Command;

use anyhow::{Context as _, bail, ensure};
use serde_json::Value;

use crate::configmap_catalog::{self, yaml_documents};
use crate::fixtures::{self, e2e_dir};

pub type Check = fn() -> anyhow::Result<()>;

pub const ALL: &[(&str, Check)] = &[
    ("catalog_validates", catalog_validates),
    (
        "bundles_yaml_is_rendered_from_the_bundles",
        bundles_yaml_is_rendered_from_the_bundles,
    ),
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

/// `olm-rs catalog validate e2e/catalog`: the catalog image would serve it.
fn catalog_validates() -> anyhow::Result<()> {
    use olm_rs::catalog::{load_catalog, validate};
    let dir = e2e_dir().join("catalog");
    let (_kind, config, mut problems) = load_catalog(&dir)?;
    problems.extend(validate::validate(&config));
    let errors: Vec<String> = problems
        .iter()
        .filter(|p| !p.rule.is_warning())
        .map(ToString::to_string)
        .collect();
    ensure!(
        errors.is_empty(),
        "{} is invalid:\n{}",
        dir.display(),
        errors.join("\n")
    );
    let counts = (
        config.packages.len(),
        config.channels.len(),
        config.bundles.len(),
    );
    ensure!(
        counts == (1, 2, 3),
        "packages, channels, bundles: {counts:?}, expected (1, 2, 3)"
    );
    Ok(())
}

/// `e2e/catalog/<package>/bundles.yaml` is exactly what `olm-rs catalog render` makes of the
/// bundle directories (compared as JSON values). `OLM_RS_UPDATE_E2E_CATALOG=1` rewrites it.
fn bundles_yaml_is_rendered_from_the_bundles() -> anyhow::Result<()> {
    use olm_rs::catalog::bundle_dir::{self, render};
    let package_dir = e2e_dir().join("bundles").join(fixtures::PACKAGE);
    let mut dirs: Vec<_> = std::fs::read_dir(&package_dir)?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    dirs.sort();
    let mut rendered = Vec::new();
    for dir in dirs {
        let bundle =
            bundle_dir::read(&dir).with_context(|| format!("reading {}", dir.display()))?;
        let out =
            render::render(&bundle, "").with_context(|| format!("rendering {}", dir.display()))?;
        ensure!(
            out.warnings.is_empty(),
            "{}: {:?}",
            dir.display(),
            out.warnings
        );
        rendered.push(render::bundle_blob(&out.bundle));
    }
    let path = e2e_dir()
        .join("catalog")
        .join(fixtures::PACKAGE)
        .join("bundles.yaml");
    if std::env::var_os("OLM_RS_UPDATE_E2E_CATALOG").is_some() {
        let mut text = format!(
            "# Rendered from e2e/bundles/{}/*/ (olm-rs catalog render, as opm render does).\n\
             # Do not edit: OLM_RS_UPDATE_E2E_CATALOG=1 cargo test --test e2e rewrites it.\n",
            fixtures::PACKAGE
        );
        for blob in &rendered {
            text.push_str("---\n");
            text.push_str(&serde_yaml_ng::to_string(blob)?);
        }
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    let committed = yaml_documents(&path)?;
    ensure!(
        committed == rendered,
        "{} is not what the bundle directories render to; regenerate it with \
         OLM_RS_UPDATE_E2E_CATALOG=1 cargo test --test e2e",
        path.display()
    );
    Ok(())
}

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

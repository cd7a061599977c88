//! The same demo package as a `sourceType: configmap` catalog: the historical "package
//! manifests" ConfigMap (`customResourceDefinitions`, `clusterServiceVersions`, `packages`,
//! each a YAML list), built from the bundle directories in `e2e/bundles/` and the channels of
//! `e2e/catalog/`, so both catalogs always offer the same thing.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context as _, bail};
use serde::Deserialize as _;
use serde_json::{Value, json};

/// Every YAML document of `path` as JSON.
pub fn yaml_documents(path: &Path) -> anyhow::Result<Vec<Value>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut docs = Vec::new();
    for doc in serde_yaml_ng::Deserializer::from_str(&text) {
        let value =
            Value::deserialize(doc).with_context(|| format!("parsing {}", path.display()))?;
        if !value.is_null() {
            docs.push(value);
        }
    }
    Ok(docs)
}

/// The manifests of every bundle directory of `package` under `bundles_dir`, in directory-name
/// order.
fn bundle_manifests(bundles_dir: &Path, package: &str) -> anyhow::Result<Vec<Value>> {
    let mut dirs: Vec<_> = std::fs::read_dir(bundles_dir.join(package))
        .with_context(|| format!("reading {}", bundles_dir.join(package).display()))?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    dirs.sort();
    let mut manifests = Vec::new();
    for dir in dirs {
        let mut files: Vec<_> = std::fs::read_dir(dir.join("manifests"))
            .with_context(|| format!("reading {}/manifests", dir.display()))?
            .map(|entry| entry.map(|e| e.path()))
            .collect::<Result<_, _>>()?;
        files.sort();
        for file in files {
            manifests.extend(yaml_documents(&file)?);
        }
    }
    Ok(manifests)
}

/// The channel heads and default channel of `package` in the FBC directory `catalog_dir`: the
/// entry of each channel that no other entry replaces or skips.
fn channels(
    catalog_dir: &Path,
    package: &str,
) -> anyhow::Result<(String, BTreeMap<String, String>)> {
    let path = catalog_dir.join(package).join("package.yaml");
    let mut default_channel = None;
    let mut heads = BTreeMap::new();
    for blob in yaml_documents(&path)? {
        match blob["schema"].as_str() {
            Some("olm.package") => {
                default_channel = blob["defaultChannel"].as_str().map(str::to_owned);
            }
            Some("olm.channel") => {
                let name = blob["name"].as_str().unwrap_or_default().to_owned();
                let entries = blob["entries"].as_array().cloned().unwrap_or_default();
                let superseded: Vec<&str> = entries
                    .iter()
                    .flat_map(|e| {
                        let skips = e["skips"].as_array().into_iter().flatten();
                        e["replaces"]
                            .as_str()
                            .into_iter()
                            .chain(skips.filter_map(Value::as_str))
                    })
                    .collect();
                let tips: Vec<&str> = entries
                    .iter()
                    .filter_map(|e| e["name"].as_str())
                    .filter(|n| !superseded.contains(n))
                    .collect();
                let [head] = tips.as_slice() else {
                    bail!(
                        "{}: channel {name} has heads {tips:?}, expected one",
                        path.display()
                    );
                };
                heads.insert(name, (*head).to_owned());
            }
            _ => {}
        }
    }
    let default_channel =
        default_channel.with_context(|| format!("{}: no olm.package blob", path.display()))?;
    Ok((default_channel, heads))
}

/// The ConfigMap's `data`.
pub fn data(
    bundles_dir: &Path,
    catalog_dir: &Path,
    package: &str,
) -> anyhow::Result<BTreeMap<String, String>> {
    let mut crds: BTreeMap<String, Value> = BTreeMap::new();
    let mut csvs = Vec::new();
    for manifest in bundle_manifests(bundles_dir, package)? {
        match manifest["kind"].as_str() {
            // Every bundle carries the CRD; the last (newest) version of it wins.
            Some("CustomResourceDefinition") => {
                let name = manifest["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                crds.insert(name, manifest);
            }
            Some("ClusterServiceVersion") => csvs.push(manifest),
            other => bail!("unexpected {other:?} in the bundles of {package}"),
        }
    }
    let (default_channel, heads) = channels(catalog_dir, package)?;
    let packages = json!([{
        "packageName": package,
        "defaultChannel": default_channel,
        "channels": heads
            .iter()
            .map(|(name, head)| json!({"name": name, "currentCSV": head}))
            .collect::<Vec<_>>(),
    }]);
    let yaml = |value: &Value| serde_yaml_ng::to_string(value).context("writing YAML");
    Ok(BTreeMap::from([
        (
            "customResourceDefinitions".to_owned(),
            yaml(&Value::Array(crds.into_values().collect()))?,
        ),
        (
            "clusterServiceVersions".to_owned(),
            yaml(&Value::Array(csvs))?,
        ),
        ("packages".to_owned(), yaml(&packages)?),
    ]))
}

/// The whole ConfigMap object.
pub fn config_map(namespace: &str, name: &str, data: &BTreeMap<String, String>) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": data,
    })
}

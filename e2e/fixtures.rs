//! The demo package of `e2e/catalog` and the objects a user writes to install it.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

pub const PACKAGE: &str = "olm-rs-e2e-demo";
pub const V010: &str = "olm-rs-e2e-demo.v0.1.0";
pub const V020: &str = "olm-rs-e2e-demo.v0.2.0";
pub const V030: &str = "olm-rs-e2e-demo.v0.3.0";
/// The operator Deployment every version installs.
pub const DEPLOYMENT: &str = "olm-rs-e2e-demo";
/// The API the operator owns (cluster-scoped; OLM leaves CRDs behind on uninstall).
pub const CRD: &str = "widgets.e2e.olm-rs.dev";

/// `e2e/` in the source tree.
pub fn e2e_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("e2e")
}

/// An OperatorGroup targeting its own namespace.
pub fn operator_group(namespace: &str) -> Value {
    json!({
        "apiVersion": "operators.coreos.com/v1",
        "kind": "OperatorGroup",
        "metadata": {"name": "e2e", "namespace": namespace},
        "spec": {"targetNamespaces": [namespace]},
    })
}

/// A catalog served from an image (a registry pod runs it: the image is loaded into the
/// cluster's nodes, not pushed to a registry the controller could pull from).
pub fn image_catalog(namespace: &str, name: &str, image: &str) -> Value {
    json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "CatalogSource",
        "metadata": {"name": name, "namespace": namespace,
                     "annotations": {"olm-rs.io/catalog-serving": "pod"}},
        "spec": {
            "sourceType": "grpc",
            "image": image,
            "displayName": "olm-rs e2e (image)",
            "publisher": "olm-rs",
        },
    })
}

/// A catalog read from a ConfigMap in the same namespace.
pub fn configmap_catalog(namespace: &str, name: &str, config_map: &str) -> Value {
    json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "CatalogSource",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "sourceType": "configmap",
            "configMap": config_map,
            "displayName": "olm-rs e2e (ConfigMap)",
            "publisher": "olm-rs",
        },
    })
}

/// A Subscription to the demo package.
pub fn subscription(
    namespace: &str,
    catalog: &str,
    channel: &str,
    approval: &str,
    starting_csv: Option<&str>,
) -> Value {
    let mut spec = json!({
        "name": PACKAGE,
        "channel": channel,
        "source": catalog,
        "sourceNamespace": namespace,
        "installPlanApproval": approval,
    });
    if let Some(csv) = starting_csv {
        spec["startingCSV"] = json!(csv);
    }
    json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "Subscription",
        "metadata": {"name": "demo", "namespace": namespace},
        "spec": spec,
    })
}

/// The demo catalog (e2e/catalog/) with every bundle's manifests removed and its image in
/// `registry` (`<host>/<repo>:v<version>`), as production catalogs are.
#[allow(dead_code)] // the real-cluster harnesses' (tests/e2e_real, tests/e2e_node)
pub fn image_only_catalog(registry: &str, repo: &str) -> anyhow::Result<String> {
    use anyhow::Context as _;
    let source = e2e_dir().join("catalog/olm-rs-e2e-demo");
    let mut out = String::new();
    for file in ["package.yaml", "bundles.yaml"] {
        let text = std::fs::read_to_string(source.join(file))
            .with_context(|| format!("reading {}", source.join(file).display()))?;
        for document in serde_yaml_ng::Deserializer::from_str(&text) {
            let mut doc: Value = serde::Deserialize::deserialize(document)?;
            if !doc.is_object() {
                continue;
            }
            if doc["schema"] == "olm.bundle" {
                let version = doc["properties"]
                    .as_array()
                    .and_then(|props| {
                        props
                            .iter()
                            .find(|p| p["type"] == "olm.package")
                            .and_then(|p| p["value"]["version"].as_str())
                    })
                    .context("a bundle without an olm.package property")?
                    .to_owned();
                doc["image"] = json!(format!("{registry}/{repo}:v{version}"));
                if let Some(props) = doc["properties"].as_array_mut() {
                    props.retain(|p| p["type"] != "olm.bundle.object");
                }
            }
            out.push_str("---\n");
            out.push_str(&serde_yaml_ng::to_string(&doc)?);
        }
    }
    anyhow::ensure!(out.contains(registry), "no bundle in the demo catalog");
    Ok(out)
}

/// The package of [`dependent_catalog`].
#[allow(dead_code)] // the real-node harnesses'
pub const DEPENDENT: &str = "olm-rs-e2e-dependent";

/// The demo catalog plus a package `olm-rs-e2e-dependent` (one bundle, v1.0.0): the demo
/// v0.2.0 CSV renamed, owning no API but requiring the Widget API and the demo package.
#[allow(dead_code)] // the real-node harnesses'
pub fn dependent_catalog(from: &Path, to: &Path) -> anyhow::Result<()> {
    use anyhow::Context as _;
    use base64::Engine as _;
    let demo = to.join("olm-rs-e2e-demo");
    std::fs::create_dir_all(&demo)?;
    for file in ["package.yaml", "bundles.yaml"] {
        std::fs::copy(from.join("olm-rs-e2e-demo").join(file), demo.join(file))?;
    }
    let text = std::fs::read_to_string(from.join("olm-rs-e2e-demo/bundles.yaml"))?;
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut csv = None;
    for document in serde_yaml_ng::Deserializer::from_str(&text) {
        let doc: Value = serde::Deserialize::deserialize(document)?;
        if doc["name"] != V020 {
            continue;
        }
        for property in doc["properties"].as_array().into_iter().flatten() {
            if property["type"] == "olm.bundle.object" {
                let data = property["value"]["data"].as_str().unwrap_or_default();
                let object: Value = serde_json::from_slice(&b64.decode(data)?)?;
                if object["kind"] == "ClusterServiceVersion" {
                    csv = Some(object);
                }
            }
        }
    }
    let mut csv = csv.context("no v0.2.0 CSV in the demo catalog")?;
    let name = format!("{DEPENDENT}.v1.0.0");
    csv["metadata"]["name"] = json!(name);
    csv["metadata"]["annotations"]
        .as_object_mut()
        .map(|a| a.remove("olm.skipRange"));
    csv["spec"]["version"] = json!("1.0.0");
    csv["spec"]["displayName"] = json!("olm-rs e2e dependent");
    if let Some(spec) = csv["spec"].as_object_mut() {
        spec.remove("replaces");
    }
    csv["spec"]["customresourcedefinitions"] = json!({"required": [{
        "name": "widgets.e2e.olm-rs.dev", "version": "v1", "kind": "Widget",
        "displayName": "Widget", "description": "The demo operator's API."}]});
    let strategy = &mut csv["spec"]["install"]["spec"];
    strategy["permissions"][0]["serviceAccountName"] = json!(DEPENDENT);
    let deployment = &mut strategy["deployments"][0];
    deployment["name"] = json!(DEPENDENT);
    let labels = json!({"app.kubernetes.io/name": DEPENDENT});
    deployment["spec"]["selector"]["matchLabels"] = labels.clone();
    deployment["spec"]["template"]["metadata"]["labels"] = labels;
    deployment["spec"]["template"]["spec"]["serviceAccountName"] = json!(DEPENDENT);
    let bundle = json!({
        "schema": "olm.bundle",
        "name": name,
        "package": DEPENDENT,
        "image": "",
        "properties": [
            {"type": "olm.package", "value": {"packageName": DEPENDENT, "version": "1.0.0"}},
            {"type": "olm.package.required",
             "value": {"packageName": PACKAGE, "versionRange": ">=0.2.0 <0.3.0"}},
            {"type": "olm.gvk.required",
             "value": {"group": "e2e.olm-rs.dev", "version": "v1", "kind": "Widget"}},
            {"type": "olm.bundle.object",
             "value": {"data": b64.encode(serde_json::to_vec(&csv)?)}},
        ],
    });
    let package = json!({"schema": "olm.package", "name": DEPENDENT, "defaultChannel": "stable"});
    let channel = json!({"schema": "olm.channel", "package": DEPENDENT, "name": "stable",
                         "entries": [{"name": name}]});
    let out = to.join(DEPENDENT);
    std::fs::create_dir_all(&out)?;
    let docs: Vec<String> = [package, channel, bundle]
        .iter()
        .map(serde_yaml_ng::to_string)
        .collect::<Result<_, _>>()?;
    std::fs::write(out.join("catalog.yaml"), docs.join("---\n"))?;
    Ok(())
}

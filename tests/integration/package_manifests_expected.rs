//! The PackageManifest OLM v0.31's package server builds for the demo catalog
//! (examples/catalog/greeter-operator), written by hand from its rules
//! (docs/packagemanifests.md §2–§3). Shared by the sandbox test and the real aggregation-layer
//! check (tests/e2e_real/package_manifests.rs).

use serde_json::{Value, json};

/// What a PackageManifest shows of the CatalogSource it comes from.
pub struct CatalogSeen {
    pub name: String,
    pub namespace: String,
    pub display_name: String,
    pub publisher: String,
    /// The CatalogSource's labels (a JSON object).
    pub labels: Value,
    pub created: Value,
}

pub fn greeter_description(version: &str) -> Value {
    let mut desc = json!({
        "displayName": "Greeter Operator",
        "version": version,
        "provider": {"name": "olm-rs examples"},
        "annotations": {
            "capabilities": "Basic Install",
            "categories": "Developer Tools",
            "containerImage": format!("quay.io/olm-rs-examples/greeter-operator:v{version}"),
            "description": "A sample operator for olm-rs sandbox; it owns the Greeter API.",
        },
        "keywords": ["olm-rs", "example", "greeter"],
        "links": [{"name": "Source", "url": "https://example.invalid/olm-rs/examples/catalog"}],
        "maintainers": [{"name": "olm-rs", "email": "dev@olm-rs.invalid"}],
        "maturity": "stable",
        "description": "A sample operator shipped with olm-rs (examples/catalog). It owns the Greeter API and runs\none Deployment. In `olm-rs sandbox` no pod runs: a simulator marks the Deployment available.\n",
        "installModes": [
            {"supported": true, "type": "OwnNamespace"},
            {"supported": true, "type": "SingleNamespace"},
            {"supported": false, "type": "MultiNamespace"},
            {"supported": true, "type": "AllNamespaces"},
        ],
        "customresourcedefinitions": {"owned": [{
            "name": "greeters.demo.olm-rs.dev", "version": "v1", "kind": "Greeter",
            "displayName": "Greeter", "description": "A greeting the operator keeps up to date.",
        }]},
        "apiservicedefinitions": {},
        "minKubeVersion": "1.27.0",
        "relatedImages": [format!("quay.io/olm-rs-examples/greeter-operator:v{version}")],
    });
    // Every CSV annotation is shown; 2.0.0 carries its skipRange as one.
    if version == "2.0.0" {
        desc["annotations"]["olm.skipRange"] = json!(">=1.1.0 <2.0.0");
    }
    desc
}

/// What OLM v0.31's package server shows for the demo catalog's package from `catalog`, asked
/// in `namespace`.
pub fn expected_greeter(namespace: &str, catalog: &CatalogSeen) -> Value {
    let entries = |versions: &[&str]| -> Value {
        versions
            .iter()
            .map(|v| json!({"name": format!("greeter-operator.v{v}"), "version": v}))
            .collect()
    };
    // The CatalogSource's labels, then OLM's own, then the head CSV's (none), then os/arch.
    let mut labels = catalog.labels.clone();
    for (k, v) in [
        ("catalog", catalog.name.as_str()),
        ("catalog-namespace", catalog.namespace.as_str()),
        ("provider", "olm-rs examples"),
        ("provider-url", ""),
        ("operatorframework.io/os.linux", "supported"),
        ("operatorframework.io/arch.amd64", "supported"),
    ] {
        labels[k] = json!(v);
    }
    json!({
        "apiVersion": "packages.operators.coreos.com/v1",
        "kind": "PackageManifest",
        "metadata": {
            "name": "greeter-operator",
            "namespace": namespace,
            "labels": labels,
            "creationTimestamp": catalog.created,
        },
        "spec": {},
        "status": {
            "catalogSource": catalog.name,
            "catalogSourceDisplayName": catalog.display_name,
            "catalogSourcePublisher": catalog.publisher,
            "catalogSourceNamespace": catalog.namespace,
            "provider": {"name": "olm-rs examples"},
            "packageName": "greeter-operator",
            "channels": [
                {
                    "name": "fast",
                    "currentCSV": "greeter-operator.v2.0.0",
                    "currentCSVDesc": greeter_description("2.0.0"),
                    "entries": entries(&["2.0.0", "1.2.0", "1.1.1", "1.1.0", "1.0.0"]),
                },
                {
                    "name": "stable",
                    "currentCSV": "greeter-operator.v1.2.0",
                    "currentCSVDesc": greeter_description("1.2.0"),
                    "entries": entries(&["1.2.0", "1.1.1", "1.1.0", "1.0.0"]),
                },
            ],
            "defaultChannel": "stable",
        },
    })
}

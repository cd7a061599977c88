//! The stand-in ClusterServiceVersion opm serves as `csvJson` for a bundle that carries an
//! `olm.csv.metadata` property instead of its manifests (spec/catalog.md §6.3). UIs (the
//! package server) read descriptions, icons and CRD descriptions from it; nothing installs it.

use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use crate::catalog::{Package, RelatedImage};

/// Members of `olm.csv.metadata` and where each goes in the CSV, in the CSV spec's member order.
const SPEC_MEMBERS: &[(&str, &str)] = &[
    ("maturity", "maturity"),
    ("crdDescriptions", "customresourcedefinitions"),
    ("apiServiceDefinitions", "apiservicedefinitions"),
    ("nativeAPIs", "nativeAPIs"),
    ("minKubeVersion", "minKubeVersion"),
    ("displayName", "displayName"),
    ("description", "description"),
    ("keywords", "keywords"),
    ("maintainers", "maintainers"),
    ("provider", "provider"),
    ("links", "links"),
    ("installModes", "installModes"),
];

/// Builds the stub CSV JSON. `metadata` is the raw `olm.csv.metadata` value; a value that is
/// not a JSON object yields a CSV with only the derived fields.
pub(super) fn csv_from_metadata(
    bundle_name: &str,
    metadata: &RawValue,
    package: &Package,
    version: Option<&str>,
    related_images: &[RelatedImage],
) -> String {
    let meta: Map<String, Value> = serde_json::from_str(metadata.get()).unwrap_or_default();
    let mut object_meta = Map::new();
    object_meta.insert("name".into(), Value::String(bundle_name.to_owned()));
    for key in ["labels", "annotations"] {
        if let Some(v) = meta.get(key).filter(|v| is_present(v)) {
            object_meta.insert(key.into(), v.clone());
        }
    }

    let mut spec = Map::new();
    // The package server writes into the strategy's map and panics on a nil one: opm always
    // sends a named (empty) deployment strategy.
    spec.insert(
        "install".into(),
        json!({"strategy": "deployment", "spec": {"deployments": null}}),
    );
    if let Some(version) = version.filter(|v| !v.is_empty()) {
        spec.insert("version".into(), Value::String(version.to_owned()));
    }
    for (from, to) in SPEC_MEMBERS {
        if let Some(v) = meta.get(*from).filter(|v| is_present(v)) {
            spec.insert((*to).into(), v.clone());
        }
    }
    let described = spec.get("description").is_some_and(is_present);
    if !described
        && let Some(description) = package.description.as_deref().filter(|d| !d.is_empty())
    {
        spec.insert("description".into(), Value::String(description.to_owned()));
    }
    spec.entry("displayName")
        .or_insert_with(|| Value::String(String::new()));
    if let Some(icon) = &package.icon {
        spec.insert(
            "icon".into(),
            json!([{"base64data": icon.base64data, "mediatype": icon.mediatype}]),
        );
    }
    if !related_images.is_empty() {
        let images: Vec<Value> = related_images
            .iter()
            .map(|r| json!({"name": r.name, "image": r.image}))
            .collect();
        spec.insert("relatedImages".into(), Value::Array(images));
    }

    let csv = json!({
        "kind": "ClusterServiceVersion",
        "apiVersion": "operators.coreos.com/v1alpha1",
        "metadata": object_meta,
        "spec": spec,
    });
    super::go_json_text(&csv)
}

fn is_present(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Icon;

    #[test]
    fn stub_carries_metadata_icon_version_and_falls_back_to_package_description() {
        let metadata = serde_json::value::to_raw_value(&json!({
            "annotations": {"capabilities": "Basic Install"},
            "crdDescriptions": {"owned": [{"name": "foos.example.com", "version": "v1", "kind": "Foo"}]},
            "displayName": "Foo Operator",
            "installModes": [{"type": "AllNamespaces", "supported": true}],
            "provider": {"name": "Example"}
        }))
        .unwrap();
        let package = Package {
            name: "foo".into(),
            description: Some("The foo package".into()),
            icon: Some(Icon {
                base64data: "aWNvbg==".into(),
                mediatype: "image/png".into(),
            }),
            ..Package::default()
        };
        let images = [RelatedImage {
            name: "op".into(),
            image: "quay.io/foo/op:1".into(),
        }];
        let csv: Value = serde_json::from_str(&csv_from_metadata(
            "foo.v1.0.0",
            &metadata,
            &package,
            Some("1.0.0"),
            &images,
        ))
        .unwrap();
        assert_eq!(csv["kind"], "ClusterServiceVersion");
        assert_eq!(csv["metadata"]["name"], "foo.v1.0.0");
        assert_eq!(
            csv["metadata"]["annotations"]["capabilities"],
            "Basic Install"
        );
        assert_eq!(csv["spec"]["install"]["strategy"], "deployment");
        assert_eq!(csv["spec"]["version"], "1.0.0");
        assert_eq!(csv["spec"]["displayName"], "Foo Operator");
        assert_eq!(csv["spec"]["description"], "The foo package");
        assert_eq!(
            csv["spec"]["customresourcedefinitions"]["owned"][0]["kind"],
            "Foo"
        );
        assert_eq!(csv["spec"]["icon"][0]["mediatype"], "image/png");
        assert_eq!(csv["spec"]["relatedImages"][0]["image"], "quay.io/foo/op:1");
        assert_eq!(csv["spec"]["installModes"][0]["type"], "AllNamespaces");
    }
}

//! How a bundle is projected onto the registry API's `api.Bundle` (docs/catalog.md §5.3):
//! `properties` without inline manifests, `dependencies` from the required properties, and
//! `csvJson` / `object`: the inline CSV when the bundle carries one, else a stub CSV built from its `olm.csv.metadata` property the
//! way opm builds it (name, metadata fields, package icon, install strategy `deployment`,
//! version, related images, description falling back to the package's).
//!
//! Keys follow the field order of the Go types (`v1alpha1.ClusterServiceVersion`), so the stub
//! reads like opm's; consumers should still compare it as JSON, not bytes.

use std::borrow::Cow;

use serde_json::{Map, Value, json};

use super::index::IndexedBundle;
use super::model::Package;
use super::properties::{self, TypedProperty};
use super::semver_range::parse_strict;

/// The CSV manifest of `bundle` as JSON, inline or synthesised; `None` when it has neither an
/// inline CSV nor exactly one `olm.csv.metadata` property.
pub fn csv_json<'a>(package: &Package, bundle: &'a IndexedBundle) -> Option<Cow<'a, str>> {
    if let Some(inline) = bundle.csv_json() {
        return Some(Cow::Borrowed(inline));
    }
    let metadata: Vec<Cow<'_, serde_json::value::RawValue>> = bundle
        .properties()
        .iter()
        .filter(|p| p.type_ == properties::CSV_METADATA)
        .filter_map(|p| match p.typed() {
            Ok(TypedProperty::CsvMetadata(raw)) => Some(raw),
            _ => None,
        })
        .collect();
    let [raw] = metadata.as_slice() else {
        return None;
    };
    let m: Map<String, Value> = serde_json::from_str(raw.get()).ok()?;
    Some(Cow::Owned(stub(package, bundle, &m).to_string()))
}

/// Every manifest of the bundle (`object` on the wire): the inline objects, or the stub CSV
/// alone when there are none.
pub fn objects<'a>(package: &Package, bundle: &'a IndexedBundle) -> Vec<Cow<'a, str>> {
    let inline: Vec<Cow<'a, str>> = bundle.objects().map(Cow::Borrowed).collect();
    if !inline.is_empty() {
        return inline;
    }
    csv_json(package, bundle).into_iter().collect()
}

/// `properties` on the wire: every property except `olm.bundle.object` and `olm.csv.metadata`
/// (those are never projected into CSV annotations), as (type, JSON value).
pub fn api_properties(bundle: &IndexedBundle) -> impl Iterator<Item = (&str, &str)> {
    bundle
        .properties()
        .iter()
        .filter(|p| p.type_ != properties::BUNDLE_OBJECT && p.type_ != properties::CSV_METADATA)
        .map(|p| (p.type_.as_str(), p.value.get()))
}

/// `dependencies` on the wire: `olm.gvk.required` → `olm.gvk` (same value),
/// `olm.package.required` → `olm.package` with `{"packageName", "version": <versionRange>}`.
pub fn api_dependencies(bundle: &IndexedBundle) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    for p in bundle.properties() {
        match p.type_.as_str() {
            properties::GVK_REQUIRED => out.push((properties::GVK, p.value.get().to_string())),
            properties::PACKAGE_REQUIRED => {
                if let Ok(TypedProperty::PackageRequired(r)) = p.typed() {
                    let value = json!({"packageName": r.package_name, "version": r.version_range});
                    out.push((properties::PACKAGE, value.to_string()));
                }
            }
            _ => {}
        }
    }
    out
}

fn stub(package: &Package, bundle: &IndexedBundle, m: &Map<String, Value>) -> Value {
    let get = |k: &str| m.get(k).cloned().filter(|v| !v.is_null());
    let mut metadata = Map::new();
    metadata.insert("name".into(), bundle.name().into());
    metadata.insert("creationTimestamp".into(), Value::Null);
    for key in ["labels", "annotations"] {
        if let Some(v) = get(key).filter(|v| v.as_object().is_some_and(|o| !o.is_empty())) {
            metadata.insert(key.into(), v);
        }
    }
    let mut spec = Map::new();
    spec.insert(
        "install".into(),
        json!({"strategy": "deployment", "spec": {"deployments": null}}),
    );
    if let Some(v) = bundle.version_string().and_then(|v| parse_strict(&v).ok()) {
        spec.insert("version".into(), v.to_string().into());
    }
    let non_empty = |v: &Value| match v {
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
        _ => true,
    };
    let put = |spec: &mut Map<String, Value>, key: &str, value: Option<Value>, always: bool| {
        match value {
            Some(v) if always || non_empty(&v) => {
                spec.insert(key.into(), v);
            }
            None if always => {
                spec.insert(key.into(), json!({}));
            }
            _ => {}
        }
    };
    put(&mut spec, "maturity", get("maturity"), false);
    put(
        &mut spec,
        "customresourcedefinitions",
        get("crdDescriptions"),
        true,
    );
    put(
        &mut spec,
        "apiservicedefinitions",
        get("apiServiceDefinitions"),
        true,
    );
    put(&mut spec, "nativeAPIs", get("nativeAPIs"), false);
    put(&mut spec, "minKubeVersion", get("minKubeVersion"), false);
    spec.insert(
        "displayName".into(),
        get("displayName").unwrap_or_else(|| "".into()),
    );
    let description = get("description")
        .filter(non_empty)
        .or_else(|| package.description.clone().map(Value::from));
    put(&mut spec, "description", description, false);
    put(&mut spec, "keywords", get("keywords"), false);
    put(&mut spec, "maintainers", get("maintainers"), false);
    put(&mut spec, "provider", get("provider"), true);
    put(&mut spec, "links", get("links"), false);
    if let Some(icon) = &package.icon {
        spec.insert(
            "icon".into(),
            json!([{"base64data": icon.base64data, "mediatype": icon.mediatype}]),
        );
    }
    put(&mut spec, "installModes", get("installModes"), false);
    spec.insert("cleanup".into(), json!({"enabled": false}));
    let related = &bundle.bundle().related_images;
    if !related.is_empty() {
        spec.insert(
            "relatedImages".into(),
            serde_json::to_value(related).unwrap_or(Value::Null),
        );
    }
    json!({
        "kind": "ClusterServiceVersion",
        "apiVersion": "operators.coreos.com/v1alpha1",
        "metadata": metadata,
        "spec": spec,
        "status": {"cleanup": {}},
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::model::{Bundle, Channel, ChannelEntry, DeclarativeConfig, Icon, Property};
    use crate::catalog::{CatalogIndex, properties};

    #[test]
    fn stub_from_csv_metadata() {
        let index = CatalogIndex::new(DeclarativeConfig {
            packages: vec![Package {
                name: "p".into(),
                description: Some("package description".into()),
                icon: Some(Icon { base64data: "aWNvbg==".into(), mediatype: "image/png".into() }),
                ..Package::default()
            }],
            channels: vec![Channel {
                package: "p".into(),
                name: "stable".into(),
                entries: vec![ChannelEntry { name: "p.v1.0.0".into(), ..ChannelEntry::default() }],
                ..Channel::default()
            }],
            bundles: vec![Bundle {
                package: "p".into(),
                name: "p.v1.0.0".into(),
                image: "quay.io/p/bundle:v1".into(),
                properties: vec![
                    Property::from_value(properties::PACKAGE, &json!({"packageName": "p", "version": "1.0.0"})).unwrap(),
                    Property::from_value(
                        properties::CSV_METADATA,
                        &json!({"displayName": "P", "annotations": {"a": "b"}, "installModes": [{"type": "AllNamespaces", "supported": true}]}),
                    )
                    .unwrap(),
                ],
                ..Bundle::default()
            }],
            ..DeclarativeConfig::default()
        });
        let p = index.package("p").unwrap();
        let b = p.bundle("p.v1.0.0").unwrap();
        let csv: Value = serde_json::from_str(&csv_json(p.package(), b).unwrap()).unwrap();
        assert_eq!(csv["metadata"]["name"], "p.v1.0.0");
        assert_eq!(csv["metadata"]["annotations"]["a"], "b");
        assert_eq!(csv["spec"]["version"], "1.0.0");
        assert_eq!(csv["spec"]["install"]["strategy"], "deployment");
        assert_eq!(csv["spec"]["description"], "package description");
        assert_eq!(csv["spec"]["icon"][0]["mediatype"], "image/png");
        assert_eq!(csv["spec"]["installModes"][0]["type"], "AllNamespaces");
        assert_eq!(objects(p.package(), b).len(), 1);
        let props: Vec<_> = api_properties(b).map(|(t, _)| t).collect();
        assert_eq!(props, ["olm.package"], "csv metadata is not projected");
    }

    #[test]
    fn dependencies_use_wire_types() {
        let bundle = Bundle {
            package: "p".into(),
            name: "p.v1".into(),
            properties: vec![
                Property::from_value(
                    properties::PACKAGE_REQUIRED,
                    &json!({"packageName": "q", "versionRange": ">=1.0.0"}),
                )
                .unwrap(),
                Property::from_value(
                    properties::GVK_REQUIRED,
                    &json!({"group": "g", "kind": "K", "version": "v1"}),
                )
                .unwrap(),
            ],
            ..Bundle::default()
        };
        let index = CatalogIndex::new(DeclarativeConfig {
            bundles: vec![bundle],
            ..DeclarativeConfig::default()
        });
        let b = index.bundle("p", "p.v1").unwrap();
        let deps = api_dependencies(b);
        assert_eq!(
            deps[0],
            (
                "olm.package",
                r#"{"packageName":"q","version":">=1.0.0"}"#.to_string()
            )
        );
        assert_eq!(
            deps[1],
            (
                "olm.gvk",
                r#"{"group":"g","kind":"K","version":"v1"}"#.to_string()
            )
        );
    }
}

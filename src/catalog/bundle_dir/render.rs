//! registry+v1 bundle directory → `olm.bundle`, as `opm render` (v1.50.0) derives it
//! (docs/catalog.md §8.3).

use base64::Engine;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use super::super::go_json;
use super::super::model::{Bundle, Origin, Property, RelatedImage, SCHEMA_BUNDLE};
use super::super::properties::{self as props, GvkValue};
use super::{BundleDir, BundleDirError};

/// Served versions of a CRD: v1 `spec.versions[].name`, v1beta1 also `spec.version`.
pub fn crd_versions(crd: &Value) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    if let Some(v) = crd["spec"]["version"].as_str() {
        out.push(v.to_string());
    }
    for v in crd["spec"]["versions"].as_array().into_iter().flatten() {
        if let Some(name) = v["name"].as_str()
            && !out.iter().any(|o| o == name)
        {
            out.push(name.to_string());
        }
    }
    out
}

fn str_of(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

/// A value opm builds itself (plain `encoding/json` of its struct; compact).
fn built(type_: &str, value: &impl serde::Serialize) -> Result<Property, BundleDirError> {
    Property::from_value(type_, value).map_err(|e| BundleDirError::BadField {
        file: Default::default(),
        field: type_.to_string(),
        message: e.to_string(),
    })
}

/// A value passed through from YAML: Go marshals the decoded map (sorted keys, HTML-escaped).
fn passed_through(type_: &str, value: &Value) -> Property {
    let text = go_json::marshal_sorted(value);
    // marshal_sorted always yields valid JSON text.
    let raw = RawValue::from_string(text).unwrap_or_else(|_| RawValue::NULL.to_owned());
    Property::new(type_, raw)
}

fn gvk_of(v: &Value) -> GvkValue {
    GvkValue {
        group: str_of(&v["group"]),
        kind: str_of(&v["kind"]),
        version: str_of(&v["version"]),
    }
}

fn type_value_list(list: &[Value]) -> Vec<(String, Value)> {
    list.iter()
        .filter_map(|p| {
            Some((
                p.get("type")?.as_str()?.to_string(),
                p.get("value").cloned().unwrap_or(Value::Null),
            ))
        })
        .collect()
}

/// The rendered bundle plus opm's warnings.
#[derive(Debug)]
pub struct Rendered {
    pub bundle: Bundle,
    pub warnings: Vec<String>,
}

/// Renders a bundle directory into an `olm.bundle` (image `""` unless given).
pub fn render(dir: &BundleDir, image: &str) -> Result<Rendered, BundleDirError> {
    let csv = dir.csv();
    let csv_name = dir.csv_name().to_string();
    let package = dir.package().to_string();
    let mut warnings = dir.warnings.clone();
    let version = str_of(&csv["spec"]["version"]);

    // Provided and required APIs.
    let mut provided: Vec<GvkValue> = Vec::new();
    let push_unique = |list: &mut Vec<GvkValue>, g: GvkValue| {
        if !list.contains(&g) {
            list.push(g);
        }
    };
    for m in &dir.manifests {
        if m.object["kind"] == "CustomResourceDefinition" {
            let group = str_of(&m.object["spec"]["group"]);
            let kind = str_of(&m.object["spec"]["names"]["kind"]);
            for v in crd_versions(&m.object) {
                push_unique(
                    &mut provided,
                    GvkValue {
                        group: group.clone(),
                        kind: kind.clone(),
                        version: v,
                    },
                );
            }
        }
    }
    let apis = &csv["spec"]["apiservicedefinitions"];
    for a in apis["owned"].as_array().into_iter().flatten() {
        push_unique(&mut provided, gvk_of(a));
    }
    let mut required: Vec<GvkValue> = Vec::new();
    for r in csv["spec"]["customresourcedefinitions"]["required"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let name = r["name"].as_str().unwrap_or_default();
        let group = name
            .split_once('.')
            .map(|(_, g)| g)
            .unwrap_or_default()
            .to_string();
        push_unique(
            &mut required,
            GvkValue {
                group,
                kind: str_of(&r["kind"]),
                version: str_of(&r["version"]),
            },
        );
    }
    for a in apis["required"].as_array().into_iter().flatten() {
        push_unique(&mut required, gvk_of(a));
    }

    // Dependencies file.
    let mut package_required = Vec::new();
    let mut dependency_passthrough = Vec::new();
    for (type_, value) in type_value_list(&dir.dependencies) {
        match type_.as_str() {
            props::PACKAGE => package_required.push(built(
                props::PACKAGE_REQUIRED,
                &props::PackageRequiredValue {
                    package_name: str_of(&value["packageName"]),
                    version_range: str_of(&value["version"]),
                },
            )?),
            props::GVK => push_unique(&mut required, gvk_of(&value)),
            _ => dependency_passthrough.push(passed_through(&type_, &value)),
        }
    }

    // properties.yaml, then derived, then the CSV `olm.properties` annotation.
    let mut listed: Vec<Property> = Vec::new();
    for (type_, value) in type_value_list(&dir.properties) {
        if type_ == props::GVK {
            push_unique(&mut provided, gvk_of(&value));
        } else {
            listed.push(passed_through(&type_, &value));
        }
    }
    listed.push(built(
        props::PACKAGE,
        &props::PackageValue {
            package_name: package.clone(),
            version,
        },
    )?);
    if let Some(annotation) = csv["metadata"]["annotations"]["olm.properties"].as_str() {
        match serde_json::from_str::<Vec<Value>>(annotation) {
            Ok(list) => {
                for (type_, value) in type_value_list(&list) {
                    if type_ == props::GVK {
                        push_unique(&mut provided, gvk_of(&value));
                    } else {
                        listed.push(passed_through(&type_, &value));
                    }
                }
            }
            Err(e) => warnings.push(format!(
                "CSV {csv_name}: annotation olm.properties ignored: {e}"
            )),
        }
    }
    // The last olm.package wins (docs/catalog.md §8.3).
    if let Some(last) = listed.iter().rposition(|p| p.type_ == props::PACKAGE) {
        let keep = listed.remove(last);
        listed.retain(|p| p.type_ != props::PACKAGE);
        listed.push(keep);
    }
    for g in &provided {
        listed.push(built(props::GVK, g)?);
    }
    for g in &required {
        listed.push(built(props::GVK_REQUIRED, g)?);
    }
    let mut properties: Vec<Property> = Vec::new();
    for p in listed {
        if !properties.contains(&p) {
            properties.push(p);
        }
    }
    properties.extend(package_required);
    properties.extend(dependency_passthrough);
    properties.sort_by(|a, b| {
        a.type_
            .cmp(&b.type_)
            .then_with(|| a.value.get().cmp(b.value.get()))
    });

    // Bundle objects: Go-marshalled manifests, ordered by their base64 text.
    let mut objects: Vec<(String, Box<RawValue>)> = dir
        .manifests
        .iter()
        .map(|m| {
            let text = go_json::marshal_sorted(&m.object);
            let b64 = base64::engine::general_purpose::STANDARD.encode(text.as_bytes());
            let raw = RawValue::from_string(text).unwrap_or_else(|_| RawValue::NULL.to_owned());
            (b64, raw)
        })
        .collect();
    objects.sort_by(|a, b| a.0.cmp(&b.0));

    Ok(Rendered {
        bundle: Bundle {
            package,
            name: csv_name,
            image: image.to_string(),
            properties,
            related_images: related_images(csv, image),
            objects: objects.into_iter().map(|(_, o)| o).collect(),
            origin: Origin::new(dir.path.to_string_lossy().as_ref().into(), None),
        },
        warnings,
    })
}

/// CSV `spec.relatedImages` as written, plus the bundle image and the install-strategy
/// deployment images not yet listed, sorted by image.
fn related_images(csv: &Value, image: &str) -> Vec<RelatedImage> {
    let mut out: Vec<RelatedImage> = csv["spec"]["relatedImages"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| RelatedImage {
            name: str_of(&r["name"]),
            image: str_of(&r["image"]),
        })
        .collect();
    let add = |img: &str, out: &mut Vec<RelatedImage>| {
        if !img.is_empty() && !out.iter().any(|r| r.image == img) {
            out.push(RelatedImage {
                name: String::new(),
                image: img.to_string(),
            });
        }
    };
    add(image, &mut out);
    let install = &csv["spec"]["install"];
    if install["strategy"] == "deployment" {
        for d in install["spec"]["deployments"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let pod = &d["spec"]["template"]["spec"];
            for c in pod["initContainers"]
                .as_array()
                .into_iter()
                .flatten()
                .chain(pod["containers"].as_array().into_iter().flatten())
            {
                if let Some(img) = c["image"].as_str() {
                    add(img, &mut out);
                }
            }
        }
    }
    out.sort_by(|a, b| a.image.cmp(&b.image));
    out
}

/// A bundle as an FBC `olm.bundle` blob, keys in opm's order; inline objects become
/// `olm.bundle.object` properties at the end.
pub fn bundle_blob(bundle: &Bundle) -> Value {
    let mut properties: Vec<Value> = bundle
        .properties
        .iter()
        .map(|p| json!({"type": p.type_, "value": serde_json::from_str::<Value>(p.value.get()).unwrap_or(Value::Null)}))
        .collect();
    for o in &bundle.objects {
        let data = base64::engine::general_purpose::STANDARD.encode(o.get().as_bytes());
        properties.push(json!({"type": props::BUNDLE_OBJECT, "value": {"data": data}}));
    }
    let mut blob = Map::new();
    blob.insert("schema".into(), SCHEMA_BUNDLE.into());
    blob.insert("name".into(), bundle.name.clone().into());
    blob.insert("package".into(), bundle.package.clone().into());
    blob.insert("image".into(), bundle.image.clone().into());
    blob.insert("properties".into(), Value::Array(properties));
    if !bundle.related_images.is_empty() {
        blob.insert(
            "relatedImages".into(),
            serde_json::to_value(&bundle.related_images).unwrap_or(Value::Null),
        );
    }
    Value::Object(blob)
}

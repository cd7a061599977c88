//! From Rust types to structural OpenAPI v3 schemas, shaped like the ones controller-gen
//! produces for OLM.
//!
//! schemars gives us JSON Schema 2020-12 with `$defs`, `Option` as `type: [T, "null"]` or
//! `anyOf [T, null]`, and the k8s-openapi types as plain definitions. The API server wants a
//! *structural* schema: everything inline, every node typed, no nullable unions. We therefore
//! generate with definitions, inline them ourselves — which lets us treat a few Kubernetes
//! types the way controller-gen does, by name — and then normalise.

use serde_json::{Map, Value, json};

use super::CrdError;

const DEFS_PREFIX: &str = "#/$defs/";
const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const QUANTITY: &str = "io.k8s.apimachinery.pkg.api.resource.Quantity";
const INT_OR_STRING: &str = "io.k8s.apimachinery.pkg.util.intstr.IntOrString";

/// The pattern controller-gen puts on every resource.Quantity.
pub const QUANTITY_PATTERN: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

/// Kubernetes structs marked `+structType=atomic`; controller-gen renders them with
/// `x-kubernetes-map-type: atomic`, which makes server-side apply replace them whole.
const ATOMIC_STRUCTS: &[&str] = &[
    "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector",
    "io.k8s.api.core.v1.ObjectReference",
    "io.k8s.api.core.v1.LocalObjectReference",
    "io.k8s.api.core.v1.ObjectFieldSelector",
    "io.k8s.api.core.v1.ResourceFieldSelector",
    "io.k8s.api.core.v1.ConfigMapKeySelector",
    "io.k8s.api.core.v1.SecretKeySelector",
    "io.k8s.api.core.v1.NodeSelector",
    "io.k8s.api.core.v1.NodeSelectorTerm",
    "io.k8s.api.core.v1.TypedLocalObjectReference",
];

/// `+default` markers of the Kubernetes types OLM embeds (k8s.io/api v0.32, the version
/// OLM v0.31 is built with); the API server applies them to stored CSVs, and
/// `olm.deployment-spec-hash` depends on them (docs/api-types.md §6.3).
fn kubernetes_defaults() -> Vec<(&'static str, &'static str, Value)> {
    vec![
        ("io.k8s.api.core.v1.ContainerPort", "protocol", json!("TCP")),
        ("io.k8s.api.core.v1.GRPCAction", "service", json!("")),
        (
            "io.k8s.api.core.v1.AzureDiskVolumeSource",
            "fsType",
            json!("ext4"),
        ),
        (
            "io.k8s.api.core.v1.AzureDiskVolumeSource",
            "readOnly",
            json!(false),
        ),
        (
            "io.k8s.api.core.v1.ISCSIVolumeSource",
            "iscsiInterface",
            json!("default"),
        ),
        ("io.k8s.api.core.v1.RBDVolumeSource", "pool", json!("rbd")),
        ("io.k8s.api.core.v1.RBDVolumeSource", "user", json!("admin")),
        (
            "io.k8s.api.core.v1.RBDVolumeSource",
            "keyring",
            json!("/etc/ceph/keyring"),
        ),
        (
            "io.k8s.api.core.v1.ScaleIOVolumeSource",
            "fsType",
            json!("xfs"),
        ),
        (
            "io.k8s.api.core.v1.ScaleIOVolumeSource",
            "storageMode",
            json!("ThinProvisioned"),
        ),
        // Structs embedding LocalObjectReference inherit its `+default=""` on `name`.
        ("io.k8s.api.core.v1.LocalObjectReference", "name", json!("")),
        ("io.k8s.api.core.v1.ConfigMapKeySelector", "name", json!("")),
        ("io.k8s.api.core.v1.SecretKeySelector", "name", json!("")),
        ("io.k8s.api.core.v1.ConfigMapEnvSource", "name", json!("")),
        ("io.k8s.api.core.v1.SecretEnvSource", "name", json!("")),
        (
            "io.k8s.api.core.v1.ConfigMapVolumeSource",
            "name",
            json!(""),
        ),
        ("io.k8s.api.core.v1.ConfigMapProjection", "name", json!("")),
        ("io.k8s.api.core.v1.SecretProjection", "name", json!("")),
    ]
}

/// The structural schema of `T`, fully inlined and normalised.
pub fn structural_schema_for<T: schemars::JsonSchema>() -> Result<Value, CrdError> {
    // The serialize contract makes exactly the fields we always write (Go: no `omitempty`)
    // required, whatever `#[serde(default)]` lets us tolerate when reading.
    let generator = schemars::generate::SchemaSettings::draft2020_12()
        .with(|s| {
            s.meta_schema = None;
            s.inline_subschemas = false;
            s.contract = schemars::generate::Contract::Serialize;
        })
        .into_generator();
    let mut root = generator.into_root_schema_for::<T>().to_value();
    strip_zero_defaults(&mut root);
    let defs = match root.as_object_mut().and_then(|o| o.remove("$defs")) {
        Some(Value::Object(defs)) => defs,
        _ => Map::new(),
    };
    let mut inlined = inline(&root, &defs, &mut Vec::new())?;
    normalise(&mut inlined);
    Ok(inlined)
}

/// schemars records the value of every `#[serde(default)]` field as a schema `default`. Ours are
/// Go zero values that only make reading tolerant; they are not API defaults (OLM's CRDs have
/// none), so they go. Deliberate defaults (`containerPort: 443`, …) are never zero values.
fn strip_zero_defaults(node: &mut Value) {
    match node {
        Value::Object(map) => {
            if map.get("default").is_some_and(is_zero_value) {
                map.remove("default");
            }
            map.values_mut().for_each(strip_zero_defaults);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_zero_defaults),
        _ => {}
    }
}

fn is_zero_value(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(items) => items.is_empty(),
        Value::Object(map) => map.values().all(is_zero_value),
    }
}

/// Replaces every `$ref` by the (overridden) definition it names; keys written next to the
/// `$ref` (a field's description) win over the definition's.
fn inline(
    node: &Value,
    defs: &Map<String, Value>,
    stack: &mut Vec<String>,
) -> Result<Value, CrdError> {
    match node {
        Value::Object(map) => {
            if let Some(Value::String(reference)) = map.get("$ref") {
                let name = reference
                    .strip_prefix(DEFS_PREFIX)
                    .unwrap_or(reference)
                    .to_owned();
                if stack.contains(&name) {
                    return Err(CrdError::RecursiveType { name });
                }
                let definition = defs
                    .get(&name)
                    .ok_or_else(|| CrdError::MissingDefinition { name: name.clone() })?;
                let definition = override_definition(&name, definition);
                stack.push(name);
                let resolved = inline(&definition, defs, stack);
                stack.pop();
                let mut resolved = resolved?;
                if let Value::Object(target) = &mut resolved {
                    for (key, value) in map.iter().filter(|(k, _)| k.as_str() != "$ref") {
                        let value = if is_data_keyword(key) {
                            value.clone()
                        } else {
                            inline(value, defs, stack)?
                        };
                        target.insert(key.clone(), value);
                    }
                }
                return Ok(resolved);
            }
            let mut out = Map::with_capacity(map.len());
            for (key, value) in map {
                let value = match (key.as_str(), value) {
                    // A map of property name → schema: a property may be called `required`.
                    ("properties" | "patternProperties", Value::Object(props)) => {
                        let mut inlined = Map::with_capacity(props.len());
                        for (name, schema) in props {
                            inlined.insert(name.clone(), inline(schema, defs, stack)?);
                        }
                        Value::Object(inlined)
                    }
                    (key, value) if is_data_keyword(key) => value.clone(),
                    (_, value) => inline(value, defs, stack)?,
                };
                out.insert(key.clone(), value);
            }
            Ok(Value::Object(out))
        }
        Value::Array(items) => items
            .iter()
            .map(|i| inline(i, defs, stack))
            .collect::<Result<_, _>>()
            .map(Value::Array),
        other => Ok(other.clone()),
    }
}

/// Keywords whose values are data, not schemas.
fn is_data_keyword(key: &str) -> bool {
    matches!(
        key,
        "enum" | "default" | "const" | "examples" | "required" | "x-kubernetes-validations"
    )
}

/// Kubernetes types rendered the way controller-gen renders them in OLM's CRDs.
fn override_definition(name: &str, definition: &Value) -> Value {
    match name {
        // Embedded ObjectMeta (pod templates): OLM keeps whatever is written there.
        OBJECT_META => json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
        QUANTITY => json!({
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY_PATTERN,
            "x-kubernetes-int-or-string": true,
        }),
        INT_OR_STRING => json!({
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "x-kubernetes-int-or-string": true,
        }),
        _ => {
            let mut definition = definition.clone();
            if let Value::Object(map) = &mut definition {
                if ATOMIC_STRUCTS.contains(&name) {
                    map.insert("x-kubernetes-map-type".into(), json!("atomic"));
                }
                for (_, property, default) in kubernetes_defaults()
                    .into_iter()
                    .filter(|(d, _, _)| *d == name)
                {
                    if let Some(Value::Object(schema)) =
                        map.get_mut("properties").and_then(|p| p.get_mut(property))
                    {
                        schema.insert("default".into(), default);
                    }
                }
            }
            definition
        }
    }
}

/// Post-order clean-up towards a structural schema.
fn normalise(node: &mut Value) {
    if let Value::Bool(true) = node {
        // schemars' "anything" (serde_json::Value fields).
        *node = json!({"x-kubernetes-preserve-unknown-fields": true});
        return;
    }
    let Value::Object(map) = node else { return };
    for_each_subschema(map, normalise);

    for key in [
        "$schema",
        "$id",
        "title",
        "nullable",
        "examples",
        "readOnly",
        "writeOnly",
        "$comment",
        "uniqueItems",
    ] {
        map.remove(key);
    }
    if map.get("default") == Some(&Value::Null) {
        map.remove("default");
    }
    if let Some(Value::Array(values)) = map.get_mut("enum") {
        // `Option<Enum>` lists null as a value; absent is how OLM says "unset".
        values.retain(|v| !v.is_null());
    }
    if let Some(constant) = map.remove("const") {
        map.insert("enum".into(), json!([constant]));
    }
    drop_null_type(map);
    for keyword in ["anyOf", "oneOf"] {
        collapse_nullable_union(map, keyword);
    }
    match map.get("additionalProperties") {
        Some(Value::Bool(true)) if !map.contains_key("properties") => {
            map.remove("additionalProperties");
            map.insert("x-kubernetes-preserve-unknown-fields".into(), json!(true));
        }
        Some(Value::Bool(_)) => {
            map.remove("additionalProperties");
        }
        _ => {}
    }
    if map.get("type") == Some(&json!("object")) && map.get("properties") == Some(&json!({})) {
        map.remove("properties");
    }
}

/// `type: [T, "null"]` → `type: T`.
fn drop_null_type(map: &mut Map<String, Value>) {
    if let Some(Value::Array(types)) = map.get("type") {
        let kept: Vec<Value> = types
            .iter()
            .filter(|t| t.as_str() != Some("null"))
            .cloned()
            .collect();
        match kept.len() {
            0 => {
                map.remove("type");
            }
            1 => {
                map.insert("type".into(), kept[0].clone());
            }
            _ => {
                map.insert("type".into(), Value::Array(kept));
            }
        }
    }
}

/// `anyOf: [S, {type: null}]` → S merged into the node (the node's own keys win).
fn collapse_nullable_union(map: &mut Map<String, Value>, keyword: &str) {
    let Some(Value::Array(branches)) = map.get(keyword) else {
        return;
    };
    let kept: Vec<Value> = branches
        .iter()
        .filter(|b| !is_null_schema(b))
        .cloned()
        .collect();
    if kept.len() == branches.len() {
        return;
    }
    map.remove(keyword);
    match <[Value; 1]>::try_from(kept) {
        Ok([Value::Object(branch)]) => {
            for (key, value) in branch {
                map.entry(key).or_insert(value);
            }
        }
        Ok([other]) => {
            map.insert(keyword.into(), json!([other]));
        }
        Err(kept) if !kept.is_empty() => {
            map.insert(keyword.into(), Value::Array(kept));
        }
        Err(_) => {}
    }
}

fn is_null_schema(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("null")
        || schema.get("const") == Some(&Value::Null)
        || schema.get("enum") == Some(&json!([null]))
}

/// Calls `f` on every direct subschema of a schema object.
pub(crate) fn for_each_subschema(map: &mut Map<String, Value>, mut f: impl FnMut(&mut Value)) {
    for (key, value) in map.iter_mut() {
        match key.as_str() {
            "properties" | "patternProperties" => {
                if let Value::Object(props) = value {
                    props.values_mut().for_each(&mut f);
                }
            }
            "additionalProperties" | "items" | "not" | "contains" => match value {
                Value::Array(items) => items.iter_mut().for_each(&mut f),
                other => f(other),
            },
            "anyOf" | "oneOf" | "allOf" | "prefixItems" => {
                if let Value::Array(items) = value {
                    items.iter_mut().for_each(&mut f);
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(schemars::JsonSchema, serde::Serialize)]
    #[allow(dead_code)]
    struct Sample {
        /// The name.
        #[serde(skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        template: Option<k8s_openapi::api::core::v1::PodTemplateSpec>,
        #[serde(skip_serializing_if = "Option::is_none")]
        memory: Option<k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
        /// Always written, so required (a Go field without `omitempty`).
        #[serde(default)]
        port: k8s_openapi::apimachinery::pkg::util::intstr::IntOrString,
        #[serde(skip_serializing_if = "Option::is_none")]
        labels: Option<std::collections::BTreeMap<String, String>>,
    }

    #[test]
    fn options_become_plain_types_and_refs_are_inlined() {
        let schema = structural_schema_for::<Sample>().unwrap();
        let text = schema.to_string();
        assert!(
            !text.contains("$ref") && !text.contains("\"null\"") && !text.contains("nullable"),
            "{text}"
        );
        let props = &schema["properties"];
        assert_eq!(
            props["name"],
            json!({"type": "string", "description": "The name."})
        );
        assert_eq!(
            props["labels"]["additionalProperties"],
            json!({"type": "string"})
        );
        assert_eq!(schema["required"], json!(["port"]));
    }

    #[test]
    fn kubernetes_types_are_rendered_like_controller_gen() {
        let schema = structural_schema_for::<Sample>().unwrap();
        let props = &schema["properties"];
        let metadata = &props["template"]["properties"]["metadata"];
        assert_eq!(metadata["type"], "object");
        assert_eq!(metadata["x-kubernetes-preserve-unknown-fields"], true);
        assert!(metadata.get("properties").is_none());
        assert_eq!(props["memory"]["x-kubernetes-int-or-string"], true);
        assert_eq!(props["memory"]["pattern"], QUANTITY_PATTERN);
        assert!(props["port"].get("pattern").is_none());
        let containers = &props["template"]["properties"]["spec"]["properties"]["containers"];
        let port = &containers["items"]["properties"]["ports"]["items"]["properties"]["protocol"];
        assert_eq!(port["default"], "TCP");
        let env_from =
            &containers["items"]["properties"]["env"]["items"]["properties"]["valueFrom"];
        assert_eq!(
            env_from["properties"]["configMapKeyRef"]["x-kubernetes-map-type"],
            "atomic"
        );
    }
}

//! Checks that a CRD schema is *structural* and otherwise acceptable to the API server
//! (Kubernetes "Specifying a structural schema", apiextensions v1 validation), so a schema
//! mistake is caught by `cargo test` instead of by `kubectl apply`.

use std::fmt;

use serde_json::{Map, Value};

use super::validate;

/// One rule broken at one place of a schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Path of the schema node, e.g. `.properties.spec.properties.install`.
    pub path: String,
    pub problem: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {}",
            if self.path.is_empty() {
                "<root>"
            } else {
                &self.path
            },
            self.problem
        )
    }
}

const JUNCTORS: [&str; 4] = ["allOf", "anyOf", "oneOf", "not"];
/// Keywords a CRD schema cannot carry (JSONSchemaProps would drop them, or the API server
/// rejects them: `uniqueItems: true` is forbidden in apiextensions/v1).
const FORBIDDEN_ANYWHERE: [&str; 7] = [
    "$ref",
    "$defs",
    "definitions",
    "$schema",
    "uniqueItems",
    "const",
    "prefixItems",
];
const FORMATS: [&str; 21] = [
    "bsonobjectid",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
    "uuid3",
    "uuid4",
    "uuid5",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "ssn",
    "hexcolor",
    "rgbcolor",
    "byte",
    "password",
];
const MORE_FORMATS: [&str; 8] = [
    "date",
    "duration",
    "datetime",
    "date-time",
    "int32",
    "int64",
    "float",
    "double",
];

/// Every violation found in `schema` (the `openAPIV3Schema` of one CRD version).
pub fn check(schema: &Value) -> Vec<Violation> {
    let mut out = Vec::new();
    let Some(root) = schema.as_object() else {
        return vec![violation("", "schema root is not an object")];
    };
    if root.get("type").and_then(Value::as_str) != Some("object") {
        out.push(violation("", "root must have type: object"));
    }
    if let Some(metadata) = root.get("properties").and_then(|p| p.get("metadata"))
        && metadata != &serde_json::json!({"type": "object"})
    {
        out.push(violation(
            ".properties.metadata",
            "root metadata may only say type: object",
        ));
    }
    check_node(root, "", &mut out);
    out
}

fn violation(path: &str, problem: &str) -> Violation {
    Violation {
        path: path.to_owned(),
        problem: problem.to_owned(),
    }
}

fn check_node(node: &Map<String, Value>, path: &str, out: &mut Vec<Violation>) {
    for key in FORBIDDEN_ANYWHERE {
        if node.contains_key(key) {
            out.push(violation(
                path,
                &format!("`{key}` is not allowed in a CRD schema"),
            ));
        }
    }
    if node.contains_key("nullable") {
        // Allowed by Kubernetes, but OLM's CRDs never use it: with it, an explicit null is stored
        // instead of being pruned, and our types would read it back as absent.
        out.push(violation(path, "`nullable` is not used by OLM's CRDs"));
    }
    let int_or_string = node.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
    let preserve = node.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    if node.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(false)) {
        out.push(violation(
            path,
            "x-kubernetes-preserve-unknown-fields must be true when set",
        ));
    }
    let type_ = node.get("type");
    match type_ {
        None if !int_or_string && !preserve => out.push(violation(path, "node has no type")),
        Some(Value::String(t))
            if !["object", "array", "string", "integer", "number", "boolean"]
                .contains(&t.as_str()) =>
        {
            out.push(violation(path, &format!("unknown type {t:?}")))
        }
        Some(Value::String(_)) | None => {}
        Some(other) => out.push(violation(
            path,
            &format!("type must be a single string, got {other}"),
        )),
    }
    if int_or_string {
        check_int_or_string(node, path, out);
    }
    let is = |t: &str| type_.and_then(Value::as_str) == Some(t);
    if is("array") && !node.contains_key("items") {
        out.push(violation(path, "array without items"));
    }
    if node.contains_key("properties") && node.contains_key("additionalProperties") {
        out.push(violation(
            path,
            "properties and additionalProperties together",
        ));
    }
    if let Some(Value::Bool(_)) = node.get("additionalProperties") {
        out.push(violation(
            path,
            "additionalProperties must be a schema, not a boolean",
        ));
    }
    if (node.contains_key("properties") || node.contains_key("additionalProperties"))
        && !is("object")
    {
        out.push(violation(
            path,
            "properties on a node whose type is not object",
        ));
    }
    if let Some(format) = node.get("format").and_then(Value::as_str)
        && !FORMATS.contains(&format)
        && !MORE_FORMATS.contains(&format)
    {
        out.push(violation(
            path,
            &format!("format {format:?} is not known to the API server"),
        ));
    }
    check_required(node, path, out);
    check_enum(node, path, out);
    check_default(node, path, out);
    check_list_type(node, path, out);
    for junctor in JUNCTORS {
        if let Some(branches) = node.get(junctor) {
            check_junctor(branches, &format!("{path}.{junctor}"), int_or_string, out);
        }
    }

    if let Some(Value::Object(props)) = node.get("properties") {
        for (name, schema) in props {
            visit(schema, &format!("{path}.properties.{name}"), out);
        }
    }
    if let Some(schema) = node.get("additionalProperties")
        && schema.is_object()
    {
        visit(schema, &format!("{path}.additionalProperties"), out);
    }
    if let Some(schema) = node.get("items") {
        visit(schema, &format!("{path}.items"), out);
    }
}

fn visit(schema: &Value, path: &str, out: &mut Vec<Violation>) {
    match schema.as_object() {
        Some(map) => check_node(map, path, out),
        None => out.push(violation(path, "schema is not an object")),
    }
}

fn check_int_or_string(node: &Map<String, Value>, path: &str, out: &mut Vec<Violation>) {
    if node.contains_key("type") {
        out.push(violation(
            path,
            "x-kubernetes-int-or-string node must not set type",
        ));
    }
    if let Some(any_of) = node.get("anyOf")
        && any_of != &serde_json::json!([{"type": "integer"}, {"type": "string"}])
    {
        out.push(violation(
            path,
            "int-or-string anyOf must be exactly [{type: integer}, {type: string}]",
        ));
    }
}

/// Inside junctors only value validations are allowed: no types, descriptions, defaults,
/// properties that are not also declared outside (we simply allow none).
fn check_junctor(branches: &Value, path: &str, int_or_string: bool, out: &mut Vec<Violation>) {
    let list: Vec<&Value> = match branches {
        Value::Array(items) => items.iter().collect(),
        other => vec![other],
    };
    for (i, branch) in list.iter().enumerate() {
        let Some(map) = branch.as_object() else {
            out.push(violation(
                &format!("{path}[{i}]"),
                "junctor branch is not an object",
            ));
            continue;
        };
        for key in map.keys() {
            let allowed_type = int_or_string && key == "type";
            let structural = [
                "type",
                "description",
                "default",
                "additionalProperties",
                "nullable",
                "properties",
                "items",
            ]
            .contains(&key.as_str())
                || key.starts_with("x-kubernetes-");
            if structural && !allowed_type {
                out.push(violation(
                    &format!("{path}[{i}]"),
                    &format!("`{key}` inside a logical junctor"),
                ));
            }
        }
    }
}

fn check_required(node: &Map<String, Value>, path: &str, out: &mut Vec<Violation>) {
    let Some(required) = node.get("required") else {
        return;
    };
    let Some(required) = required.as_array() else {
        out.push(violation(path, "required is not a list"));
        return;
    };
    let props = node.get("properties").and_then(Value::as_object);
    for name in required {
        let declared = name
            .as_str()
            .is_some_and(|n| props.is_some_and(|p| p.contains_key(n)));
        if !declared {
            out.push(violation(
                path,
                &format!("required field {name} is not a declared property"),
            ));
        }
    }
}

fn check_enum(node: &Map<String, Value>, path: &str, out: &mut Vec<Violation>) {
    let Some(values) = node.get("enum") else {
        return;
    };
    let Some(values) = values.as_array() else {
        out.push(violation(path, "enum is not a list"));
        return;
    };
    let type_ = node.get("type").and_then(Value::as_str);
    for value in values {
        if !validate::has_type(value, type_) {
            out.push(violation(
                path,
                &format!("enum value {value} does not match type {type_:?}"),
            ));
        }
    }
}

/// A default must validate against its own schema and survive pruning unchanged.
fn check_default(node: &Map<String, Value>, path: &str, out: &mut Vec<Violation>) {
    let Some(default) = node.get("default") else {
        return;
    };
    let schema = Value::Object(node.clone());
    let mut value = default.clone();
    let report = validate::admit(&schema, &mut value);
    for problem in report.violations {
        out.push(violation(
            path,
            &format!("default does not validate: {problem}"),
        ));
    }
    if !report.pruned.is_empty() || &value != default {
        out.push(violation(path, "default is changed by pruning/defaulting"));
    }
}

fn check_list_type(node: &Map<String, Value>, path: &str, out: &mut Vec<Violation>) {
    let list_type = node.get("x-kubernetes-list-type").and_then(Value::as_str);
    match list_type {
        None => {}
        Some("atomic" | "set") => {}
        Some("map") => {
            let keys = node
                .get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array);
            let item = node.get("items").and_then(Value::as_object);
            match (keys, item) {
                (Some(keys), Some(item)) if !keys.is_empty() => {
                    let required = item.get("required").and_then(Value::as_array);
                    for key in keys {
                        let defaulted = key
                            .as_str()
                            .and_then(|k| item.get("properties")?.get(k)?.get("default"))
                            .is_some();
                        let is_required = required.is_some_and(|r| r.contains(key));
                        if !is_required && !defaulted {
                            out.push(violation(
                                path,
                                &format!("list map key {key} is neither required nor defaulted"),
                            ));
                        }
                    }
                }
                _ => out.push(violation(
                    path,
                    "list-type map needs x-kubernetes-list-map-keys and object items",
                )),
            }
        }
        Some(other) => out.push(violation(
            path,
            &format!("unknown x-kubernetes-list-type {other:?}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn problems(schema: Value) -> Vec<String> {
        check(&schema).into_iter().map(|v| v.to_string()).collect()
    }

    #[test]
    fn accepts_a_minimal_structural_schema() {
        let schema = json!({"type": "object", "properties": {
            "metadata": {"type": "object"},
            "port": {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": true},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            "list": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"}
        }});
        assert_eq!(problems(schema), Vec::<String>::new());
    }

    #[test]
    fn names_the_offending_path() {
        let schema = json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "untyped": {"description": "x"},
                "both": {"type": "object", "properties": {}, "additionalProperties": {"type": "string"}},
                "ref": {"$ref": "#/$defs/X"},
                "nul": {"type": "string", "nullable": true},
                "arr": {"type": "array"},
                "badDefault": {"type": "integer", "default": "x"},
                "union": {"type": "object", "anyOf": [{"type": "object", "properties": {"a": {"type": "string"}}}]}
            }}
        }});
        let found = problems(schema);
        for expected in [
            ".properties.spec.properties.untyped: node has no type",
            ".properties.spec.properties.both: properties and additionalProperties together",
            ".properties.spec.properties.ref: `$ref` is not allowed in a CRD schema",
            ".properties.spec.properties.nul: `nullable` is not used by OLM's CRDs",
            ".properties.spec.properties.arr: array without items",
            ".properties.spec.properties.union.anyOf[0]: `type` inside a logical junctor",
        ] {
            assert!(
                found.iter().any(|f| f == expected),
                "missing {expected:?} in {found:#?}"
            );
        }
        assert!(found.iter().any(|f| {
            f.starts_with(".properties.spec.properties.badDefault: default does not validate")
        }));
    }
}

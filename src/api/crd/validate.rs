//! What the API server does to a custom resource with a structural schema, in the same
//! order: drop explicit nulls, prune undeclared fields, apply defaults, validate.
//!
//! Covered: types, int-or-string, preserve-unknown-fields, required, enum, formats (date-time,
//! int32, int64, byte), numeric and length bounds, patterns, list-type set/map uniqueness.
//! Not covered: CEL rules (`x-kubernetes-validations`), which need a CEL interpreter.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

use base64::Engine;
use serde_json::{Map, Value};

/// What admitting one object did and found. Paths look like `.spec.install.spec.deployments[0]`.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Report {
    /// Fields removed because the schema does not declare them.
    pub pruned: Vec<String>,
    /// Fields removed because their value was an explicit `null`.
    pub nulls_dropped: Vec<String>,
    /// Fields added from schema defaults.
    pub defaulted: Vec<String>,
    /// Validation failures (the API server would reject the object).
    pub violations: Vec<String>,
}

impl Report {
    /// Whether the API server would accept the object.
    pub fn accepted(&self) -> bool {
        self.violations.is_empty()
    }
}

/// Prunes, defaults and validates `value` against `schema` in place.
pub fn admit(schema: &Value, value: &mut Value) -> Report {
    Admission::new(schema).run(value)
}

/// Like [`admit`] for a whole object: root `metadata` is not handled by the CRD schema (which
/// only says `type: object`) but, as by the API server, as an ObjectMeta — pruned and
/// validated against `object_meta` when given, kept as is otherwise.
pub fn admit_object(schema: &Value, object_meta: Option<&Value>, value: &mut Value) -> Report {
    Admission {
        whole_object: true,
        object_meta,
        ..Admission::new(schema)
    }
    .run(value)
}

/// How to admit an object; [`admit`] and [`admit_object`] cover the common cases.
#[derive(Debug, Clone, Copy)]
pub struct Admission<'a> {
    /// The version's `openAPIV3Schema`.
    pub schema: &'a Value,
    /// The value is a whole object: its root `metadata` is not admitted against the CRD schema
    /// (which only says `type: object`) but against `object_meta`, or kept as is without one.
    pub whole_object: bool,
    /// ObjectMeta schema for root `metadata` of a whole object.
    pub object_meta: Option<&'a Value>,
    /// Apply schema defaults (the API server does; turn off to see only what pruning does).
    pub apply_defaults: bool,
}

impl<'a> Admission<'a> {
    /// Admission of a plain value: defaults applied, no ObjectMeta handling.
    pub fn new(schema: &'a Value) -> Self {
        Self {
            schema,
            whole_object: false,
            object_meta: None,
            apply_defaults: true,
        }
    }

    /// Prunes, (optionally) defaults and validates `value` in place.
    pub fn run(&self, value: &mut Value) -> Report {
        let mut walker = Walker {
            apply_defaults: self.apply_defaults,
            report: Report::default(),
        };
        // Root metadata is set aside (an empty stand-in keeps `required: [metadata]` honest).
        let metadata = match (self.whole_object, value.as_object_mut()) {
            (true, Some(object)) if object.contains_key("metadata") => {
                object.insert("metadata".into(), Value::Object(Map::new()))
            }
            _ => None,
        };
        walk(self.schema, value, "", &mut walker);
        if let Some(mut metadata) = metadata {
            if let Some(meta_schema) = self.object_meta {
                walk(meta_schema, &mut metadata, ".metadata", &mut walker);
            }
            if let Some(object) = value.as_object_mut() {
                object.insert("metadata".into(), metadata);
            }
        }
        walker.report
    }
}

/// Whether `value` has the JSON-schema `type` (no type accepts anything).
pub fn has_type(value: &Value, type_: Option<&str>) -> bool {
    match type_ {
        None => true,
        Some("object") => value.is_object(),
        Some("array") => value.is_array(),
        Some("string") => value.is_string(),
        Some("boolean") => value.is_boolean(),
        Some("number") => value.is_number(),
        Some("integer") => is_integer(value),
        Some(_) => false,
    }
}

fn is_integer(value: &Value) -> bool {
    value.is_i64() || value.is_u64() || value.as_f64().is_some_and(|f| f.fract() == 0.0)
}

struct Walker {
    apply_defaults: bool,
    report: Report,
}

fn walk(schema: &Value, value: &mut Value, path: &str, ctx: &mut Walker) {
    let Some(schema) = schema.as_object() else {
        return;
    };
    let int_or_string = flag(schema, "x-kubernetes-int-or-string");
    let type_ = schema.get("type").and_then(Value::as_str);
    if int_or_string {
        if !(value.is_string() || is_integer(value)) {
            ctx.report.violations.push(format!(
                "{path}: expected integer or string, got {}",
                kind_of(value)
            ));
            return;
        }
    } else if !has_type(value, type_) {
        ctx.report.violations.push(format!(
            "{path}: expected {}, got {}",
            type_.unwrap_or("?"),
            kind_of(value)
        ));
        return;
    }
    match value {
        Value::Object(map) => walk_object(schema, map, path, ctx),
        Value::Array(items) => walk_array(schema, items, path, ctx),
        _ => {}
    }
    validate_scalar(schema, value, path, &mut ctx.report);
}

fn walk_object(
    schema: &Map<String, Value>,
    map: &mut Map<String, Value>,
    path: &str,
    ctx: &mut Walker,
) {
    let preserve = flag(schema, "x-kubernetes-preserve-unknown-fields");
    let props = schema.get("properties").and_then(Value::as_object);
    let additional = schema.get("additionalProperties").filter(|s| s.is_object());

    let nulls: Vec<String> = map
        .iter()
        .filter(|(_, v)| v.is_null())
        .map(|(k, _)| k.clone())
        .collect();
    for key in nulls {
        map.shift_remove(&key);
        ctx.report.nulls_dropped.push(format!("{path}.{key}"));
    }
    if !preserve && additional.is_none() {
        let unknown: Vec<String> = map
            .keys()
            .filter(|k| !props.is_some_and(|p| p.contains_key(*k)))
            .cloned()
            .collect();
        for key in unknown {
            map.shift_remove(&key);
            ctx.report.pruned.push(format!("{path}.{key}"));
        }
    }
    if let Some(props) = props {
        for (name, prop) in props {
            if ctx.apply_defaults
                && !map.contains_key(name)
                && let Some(default) = prop.get("default")
            {
                map.insert(name.clone(), default.clone());
                ctx.report.defaulted.push(format!("{path}.{name}"));
            }
        }
    }
    for (key, child) in map.iter_mut() {
        let child_schema = props.and_then(|p| p.get(key)).or(additional);
        if let Some(child_schema) = child_schema {
            walk(child_schema, child, &format!("{path}.{key}"), ctx);
        }
    }
    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        for name in required.iter().filter_map(Value::as_str) {
            if !map.contains_key(name) {
                ctx.report
                    .violations
                    .push(format!("{path}.{name}: required field is missing"));
            }
        }
    }
    check_count(
        schema,
        "minProperties",
        "maxProperties",
        map.len(),
        path,
        &mut ctx.report,
    );
}

fn walk_array(schema: &Map<String, Value>, items: &mut [Value], path: &str, ctx: &mut Walker) {
    if let Some(item_schema) = schema.get("items") {
        for (i, item) in items.iter_mut().enumerate() {
            let item_path = format!("{path}[{i}]");
            if item.is_null() {
                ctx.report
                    .violations
                    .push(format!("{item_path}: null list item"));
                continue;
            }
            walk(item_schema, item, &item_path, ctx);
        }
    }
    check_count(
        schema,
        "minItems",
        "maxItems",
        items.len(),
        path,
        &mut ctx.report,
    );
    match schema.get("x-kubernetes-list-type").and_then(Value::as_str) {
        Some("set") => {
            let mut seen = HashSet::new();
            for item in items.iter() {
                if !seen.insert(item.to_string()) {
                    ctx.report
                        .violations
                        .push(format!("{path}: duplicate entry {item} in a set"));
                }
            }
        }
        Some("map") => {
            let keys: Vec<&str> = schema
                .get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .map(|k| k.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let mut seen = HashSet::new();
            for item in items.iter() {
                let key: Vec<String> = keys
                    .iter()
                    .map(|k| item.get(*k).map(Value::to_string).unwrap_or_default())
                    .collect();
                if !seen.insert(key.clone()) {
                    ctx.report.violations.push(format!(
                        "{path}: duplicate entry for keys {keys:?} = {key:?}"
                    ));
                }
            }
        }
        _ => {}
    }
}

fn validate_scalar(schema: &Map<String, Value>, value: &Value, path: &str, report: &mut Report) {
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        report.violations.push(format!(
            "{path}: {value} is not one of {}",
            Value::Array(allowed.clone())
        ));
    }
    if let Some(number) = value.as_f64().filter(|_| value.is_number()) {
        if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
            && number < min
        {
            report
                .violations
                .push(format!("{path}: {value} is less than the minimum {min}"));
        }
        if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
            && number > max
        {
            report
                .violations
                .push(format!("{path}: {value} is more than the maximum {max}"));
        }
    }
    let Some(text) = value.as_str() else {
        if let Some(format) = schema.get("format").and_then(Value::as_str) {
            check_number_format(format, value, path, report);
        }
        return;
    };
    check_count(
        schema,
        "minLength",
        "maxLength",
        text.chars().count(),
        path,
        report,
    );
    if let Some(pattern) = schema.get("pattern").and_then(Value::as_str)
        && !matches_pattern(pattern, text)
    {
        report
            .violations
            .push(format!("{path}: {text:?} does not match {pattern:?}"));
    }
    match schema.get("format").and_then(Value::as_str) {
        Some("date-time") if text.parse::<jiff::Timestamp>().is_err() => {
            report
                .violations
                .push(format!("{path}: {text:?} is not an RFC 3339 date-time"));
        }
        Some("byte")
            if base64::engine::general_purpose::STANDARD
                .decode(text)
                .is_err() =>
        {
            report
                .violations
                .push(format!("{path}: {text:?} is not base64"));
        }
        _ => {}
    }
}

fn check_number_format(format: &str, value: &Value, path: &str, report: &mut Report) {
    let fits = match format {
        "int32" => value.as_i64().is_some_and(|n| i32::try_from(n).is_ok()),
        "int64" => value.as_i64().is_some(),
        _ => true,
    };
    if !fits {
        report
            .violations
            .push(format!("{path}: {value} does not fit {format}"));
    }
}

fn check_count(
    schema: &Map<String, Value>,
    min: &str,
    max: &str,
    count: usize,
    path: &str,
    report: &mut Report,
) {
    let count = count as u64;
    if let Some(limit) = schema.get(min).and_then(Value::as_u64)
        && count < limit
    {
        report
            .violations
            .push(format!("{path}: has {count}, {min} is {limit}"));
    }
    if let Some(limit) = schema.get(max).and_then(Value::as_u64)
        && count > limit
    {
        report
            .violations
            .push(format!("{path}: has {count}, {max} is {limit}"));
    }
}

fn flag(schema: &Map<String, Value>, key: &str) -> bool {
    schema.get(key) == Some(&Value::Bool(true))
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

thread_local! {
    static PATTERNS: RefCell<HashMap<String, Option<regex::Regex>>> = RefCell::new(HashMap::new());
}

/// Whether `text` matches the schema pattern; a pattern the regex engine cannot compile is
/// treated as matching (the API server would have refused the CRD, not the object).
fn matches_pattern(pattern: &str, text: &str) -> bool {
    PATTERNS.with(|cache| {
        let mut cache = cache.borrow_mut();
        let compiled = cache
            .entry(pattern.to_owned())
            .or_insert_with(|| regex::Regex::new(pattern).ok());
        compiled.as_ref().is_none_or(|re| re.is_match(text))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "required": ["name"], "properties": {
            "name": {"type": "string", "maxLength": 5},
            "port": {"type": "integer", "format": "int32", "default": 443, "minimum": 1},
            "mode": {"type": "string", "enum": ["a", "b"]},
            "size": {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": true,
                     "pattern": "^[0-9]+[KMG]?$"},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                     "properties": {"known": {"type": "string"}}},
            "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"}
        }})
    }

    #[test]
    fn prunes_defaults_and_keeps_preserved_fields() {
        let mut doc = json!({"name": "x", "typo": 1, "labels": {"a": "b", "c": null},
                             "free": {"anything": {"deep": true}, "known": "k"}, "mode": null});
        let report = admit(&schema(), &mut doc);
        assert!(report.accepted(), "{report:?}");
        assert_eq!(report.pruned, vec![".typo"]);
        assert_eq!(report.nulls_dropped, vec![".mode", ".labels.c"]);
        assert_eq!(report.defaulted, vec![".port"]);
        assert_eq!(
            doc,
            json!({"name": "x", "labels": {"a": "b"}, "port": 443,
                               "free": {"anything": {"deep": true}, "known": "k"}})
        );
    }

    #[test]
    fn reports_each_violation_with_its_path() {
        let mut doc = json!({"port": 0, "mode": "c", "size": "12Q", "tags": ["a", "a"], "labels": {"x": 1},
                             "free": {"known": 5}});
        let report = admit(&schema(), &mut doc);
        let text = report.violations.join("\n");
        for expected in [
            ".name: required field is missing",
            ".port: 0 is less than the minimum 1",
            ".mode: \"c\" is not one of [\"a\",\"b\"]",
            ".size: \"12Q\" does not match",
            ".tags: duplicate entry \"a\" in a set",
            ".labels.x: expected string, got number",
            ".free.known: expected string, got number",
        ] {
            assert!(text.contains(expected), "missing {expected:?} in\n{text}");
        }
    }

    #[test]
    fn int_or_string_accepts_both_and_checks_strings_against_the_pattern() {
        let mut doc = json!({"name": "x", "size": 10});
        assert!(admit(&schema(), &mut doc).accepted());
        let mut doc = json!({"name": "x", "size": "10G"});
        assert!(admit(&schema(), &mut doc).accepted());
        let mut doc = json!({"name": "x", "size": true});
        assert!(!admit(&schema(), &mut doc).accepted());
    }

    #[test]
    fn root_metadata_is_left_to_the_object_meta_schema() {
        let crd_schema = json!({"type": "object", "properties": {"metadata": {"type": "object"}}});
        let meta = json!({"type": "object", "properties": {"name": {"type": "string"}}});
        let mut doc = json!({"metadata": {"name": "a", "bogus": 1}});
        let report = admit_object(&crd_schema, Some(&meta), &mut doc);
        assert_eq!(report.pruned, vec![".metadata.bogus"]);
        assert_eq!(doc, json!({"metadata": {"name": "a"}}));
        let mut doc = json!({"metadata": {"name": "a", "bogus": 1}});
        assert!(admit_object(&crd_schema, None, &mut doc).pruned.is_empty());
    }
}

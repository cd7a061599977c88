//! What the API server does to a custom resource with its CRD's structural schema before storing
//! it: drop `null`s the schema does not allow, fill in `default`s, and prune every field the
//! schema does not declare (unless `x-kubernetes-preserve-unknown-fields`). OLM relies on this
//! pruning (e.g. unknown CSV fields vanish), so the sandbox does it too. Validation (types,
//! `required`, enums, CEL) is *not* done.

use serde_json::{Map, Value};

/// Prunes and defaults a whole custom resource against `openAPIV3Schema`.
pub fn apply(obj: &mut Value, schema: &Value) {
    walk(obj, schema, true);
}

fn flag(schema: &Value, key: &str) -> bool {
    schema.get(key).and_then(Value::as_bool) == Some(true)
}

/// `root_like`: the object is a whole resource (the root, or an `x-kubernetes-embedded-resource`)
/// whose `apiVersion`, `kind` and `metadata` are always kept.
fn walk(value: &mut Value, schema: &Value, root_like: bool) {
    if flag(schema, "x-kubernetes-int-or-string") {
        return;
    }
    match value {
        Value::Object(map) => walk_object(map, schema, root_like),
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items").filter(|s| s.is_object()) {
                for item in items {
                    let embedded = flag(item_schema, "x-kubernetes-embedded-resource");
                    walk(item, item_schema, embedded);
                }
            }
        }
        _ => {}
    }
}

fn walk_object(map: &mut Map<String, Value>, schema: &Value, root_like: bool) {
    let props = schema.get("properties").and_then(Value::as_object);
    let additional = schema.get("additionalProperties");
    let preserve = flag(schema, "x-kubernetes-preserve-unknown-fields");

    if let Some(props) = props {
        map.retain(|k, v| !(v.is_null() && props.get(k).is_some_and(|p| !flag(p, "nullable"))));
        for (k, prop) in props {
            if !map.contains_key(k)
                && let Some(default) = prop.get("default")
            {
                map.insert(k.clone(), default.clone());
            }
        }
    }

    let keys: Vec<String> = map.keys().cloned().collect();
    for k in keys {
        if root_like && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
            continue;
        }
        let child_schema = props
            .and_then(|p| p.get(&k))
            .or_else(|| additional.filter(|a| a.is_object()));
        match child_schema {
            Some(s) => {
                let embedded = flag(s, "x-kubernetes-embedded-resource");
                if let Some(child) = map.get_mut(&k) {
                    walk(child, s, embedded);
                }
            }
            None => {
                let keep = preserve || additional.and_then(Value::as_bool) == Some(true);
                if !keep {
                    map.remove(&k);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "properties": {
                        "size": {"type": "integer", "default": 3},
                        "mode": {"type": "string"},
                        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "items": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string"}}}},
                        "port": {"x-kubernetes-int-or-string": true},
                        "opaque": {"type": "object"}
                    }
                },
                "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
            }
        })
    }

    #[test]
    fn prunes_unknown_fields_and_keeps_declared_ones() {
        let mut o = json!({
            "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "x": 1},
            "unknownTop": true,
            "spec": {
                "mode": "fast", "bogus": 1,
                "free": {"anything": {"goes": 1}},
                "labels": {"a": "b"},
                "items": [{"a": "x", "b": "dropped"}],
                "port": "http",
                "opaque": {"gone": 1}
            },
            "status": {"whatever": 1}
        });
        apply(&mut o, &schema());
        assert_eq!(
            o,
            json!({
                "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "x": 1},
                "spec": {
                    "mode": "fast",
                    "free": {"anything": {"goes": 1}},
                    "labels": {"a": "b"},
                    "items": [{"a": "x"}],
                    "port": "http",
                    "opaque": {},
                    "size": 3
                },
                "status": {"whatever": 1}
            })
        );
    }

    #[test]
    fn null_without_nullable_is_dropped_then_defaulted() {
        let mut o = json!({"spec": {"size": null, "mode": null}});
        apply(&mut o, &schema());
        assert_eq!(o["spec"], json!({"size": 3}));
    }

    #[test]
    fn defaults_apply_only_inside_present_objects() {
        let mut o = json!({"metadata": {"name": "w"}});
        apply(&mut o, &schema());
        assert!(o.get("spec").is_none());
    }
}

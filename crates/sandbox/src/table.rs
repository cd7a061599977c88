//! Server-side `Table` output (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`), which
//! is what `kubectl get` prints: NAME, the resource's printer columns (a CRD's
//! `additionalPrinterColumns`), and AGE.

use serde_json::{Value, json};

use super::meta;
use super::resources::{PrinterColumn, ResourceInfo};

pub use kube_table::IncludeObject;
use kube_table::human_duration;

fn age_column() -> PrinterColumn {
    PrinterColumn {
        name: "Age".into(),
        type_: "date".into(),
        json_path: ".metadata.creationTimestamp".into(),
        description: "CreationTimestamp is a timestamp representing the server time when this object was created."
            .into(),
        priority: 0,
    }
}

/// Columns after NAME. CRDs that declare printer columns get exactly those (as the real server
/// does); everything else ends with AGE.
fn columns(res: &ResourceInfo) -> Vec<PrinterColumn> {
    let mut cols = res.columns.clone();
    if !res.custom || cols.is_empty() {
        cols.push(age_column());
    }
    cols
}

pub fn column_definitions(res: &ResourceInfo) -> Value {
    let mut defs = vec![json!({
        "name": "Name", "type": "string", "format": "name", "priority": 0,
        "description": "Name must be unique within a namespace.",
    })];
    for c in columns(res) {
        defs.push(json!({
            "name": c.name, "type": c.type_, "format": "", "description": c.description, "priority": c.priority,
        }));
    }
    Value::Array(defs)
}

/// One table row for `obj`; `now` is used for AGE-style (`date`) cells.
pub fn row(res: &ResourceInfo, obj: &Value, include: IncludeObject, now: jiff::Timestamp) -> Value {
    let mut cells = vec![json!(meta::name(obj).unwrap_or_default())];
    for c in columns(res) {
        let value = eval_json_path(obj, &c.json_path);
        cells.push(cell(value, &c.type_, now));
    }
    let mut row = json!({"cells": cells});
    match include {
        IncludeObject::None => {}
        IncludeObject::Metadata => {
            row["object"] = json!({
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj.get("metadata").cloned().unwrap_or(json!({})),
            });
        }
        IncludeObject::Object => row["object"] = obj.clone(),
    }
    row
}

pub fn table(
    res: &ResourceInfo,
    rows: Vec<Value>,
    resource_version: &str,
    with_columns: bool,
) -> Value {
    let mut t = json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "rows": rows,
    });
    if with_columns {
        t["columnDefinitions"] = column_definitions(res);
    }
    t
}

fn cell(value: Option<Value>, type_: &str, now: jiff::Timestamp) -> Value {
    let Some(v) = value else { return Value::Null };
    match type_ {
        "date" => match v.as_str().and_then(|s| s.parse::<jiff::Timestamp>().ok()) {
            Some(ts) => json!(human_duration(now.as_second() - ts.as_second())),
            None => Value::Null,
        },
        "integer" | "number" | "boolean" => v,
        _ => match v {
            Value::String(_) => v,
            other => json!(other.to_string()),
        },
    }
}

/// The JSONPath subset printer columns use: `.a.b`, `.list[0]`, `['dotted.key']`, and
/// `[?(@.type=="Ready")]` filters. Returns the first match.
pub fn eval_json_path(obj: &Value, path: &str) -> Option<Value> {
    let path = path
        .trim()
        .trim_start_matches('{')
        .trim_end_matches('}')
        .trim_start_matches('$');
    let mut cur = obj.clone();
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            let key = &r[..end];
            if !key.is_empty() {
                cur = cur.get(key)?.clone();
            }
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            let inner = &r[..end];
            rest = &r[end + 1..];
            cur = index(&cur, inner)?;
        } else {
            return None;
        }
    }
    Some(cur)
}

fn index(cur: &Value, inner: &str) -> Option<Value> {
    if let Ok(i) = inner.parse::<usize>() {
        return cur.get(i).cloned();
    }
    if let Some(key) = inner
        .strip_prefix('\'')
        .and_then(|k| k.strip_suffix('\''))
        .or_else(|| inner.strip_prefix('"').and_then(|k| k.strip_suffix('"')))
    {
        return cur.get(key).cloned();
    }
    let filter = inner.strip_prefix("?(")?.strip_suffix(')')?;
    let (lhs, rhs) = filter.split_once("==")?;
    let field = lhs.trim().strip_prefix("@.")?;
    let want = rhs.trim().trim_matches(|c| c == '"' || c == '\'');
    cur.as_array()?
        .iter()
        .find(|item| {
            eval_json_path(item, &format!(".{field}")).is_some_and(|v| match v {
                Value::String(s) => s == want,
                other => other.to_string().as_str() == want,
            })
        })
        .cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_path_subset() {
        let o = json!({"spec": {"version": "1.0", "list": ["a", "b"], "m": {"x.y": 1}},
                       "status": {"conditions": [{"type": "A", "status": "False"}, {"type": "Ready", "status": "True"}]}});
        assert_eq!(eval_json_path(&o, ".spec.version"), Some(json!("1.0")));
        assert_eq!(eval_json_path(&o, ".spec.list[1]"), Some(json!("b")));
        assert_eq!(eval_json_path(&o, ".spec.m['x.y']"), Some(json!(1)));
        assert_eq!(
            eval_json_path(&o, ".status.conditions[?(@.type==\"Ready\")].status"),
            Some(json!("True"))
        );
        assert_eq!(eval_json_path(&o, "{.spec.version}"), Some(json!("1.0")));
        assert_eq!(eval_json_path(&o, ".spec.missing"), None);
    }

    #[test]
    fn crd_columns_replace_age_builtins_keep_it() {
        let crd_res = ResourceInfo {
            custom: true,
            columns: vec![PrinterColumn {
                name: "Phase".into(),
                type_: "string".into(),
                json_path: ".status.phase".into(),
                description: String::new(),
                priority: 0,
            }],
            ..(*crate::resources::builtins()[0]).clone()
        };
        let defs = column_definitions(&crd_res);
        let names: Vec<_> = defs
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["Name", "Phase"]);
        let now: jiff::Timestamp = "2024-01-01T00:01:00Z".parse().unwrap();
        let obj = json!({"metadata": {"name": "x", "creationTimestamp": "2024-01-01T00:00:00Z"}, "status": {"phase": "Succeeded"}});
        let r = row(
            &crate::resources::builtins()[0],
            &obj,
            IncludeObject::None,
            now,
        );
        assert_eq!(r["cells"], json!(["x", "Succeeded", "60s"]));
        let r = row(&crd_res, &obj, IncludeObject::Metadata, now);
        assert_eq!(r["cells"], json!(["x", "Succeeded"]));
        assert_eq!(r["object"]["kind"], "PartialObjectMetadata");
    }
}

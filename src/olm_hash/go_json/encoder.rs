//! The typed re-encoder: walks a `serde_json::Value` along a Go type table and writes what
//! Go's `json.Marshal` writes for the decoded struct (docs/api-types.md §6.2).

use std::fmt;

use serde_json::{Map, Value};

use super::GoJsonError;
use super::escape::write_go_string;
use super::schema::{Field, Presence, Ty};
use crate::quantity::{canonical_quantity, canonical_quantity_number};

/// Where in the input a value sits, built without allocating while all is well.
#[derive(Clone, Copy)]
pub(crate) enum Path<'a> {
    Root(&'a str),
    Member(&'a Path<'a>, &'a str),
    Index(&'a Path<'a>, usize),
}

impl fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Path::Root(name) => f.write_str(name),
            Path::Member(parent, name) => write!(f, "{parent}.{name}"),
            Path::Index(parent, i) => write!(f, "{parent}[{i}]"),
        }
    }
}

fn wrong(path: &Path<'_>, expected: &'static str, found: &Value) -> GoJsonError {
    let found = match found {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    };
    GoJsonError::WrongType {
        path: path.to_string(),
        expected,
        found,
    }
}

/// Writes `value` (`None` = absent or `null`) as Go writes a member of type `ty`.
pub(crate) fn encode(
    out: &mut String,
    value: Option<&Value>,
    ty: &Ty,
    path: &Path<'_>,
) -> Result<(), GoJsonError> {
    match (ty, value) {
        (Ty::Str, None) => out.push_str("\"\""),
        (Ty::Str, Some(Value::String(s))) => write_go_string(out, s),
        (Ty::Int, None) => out.push('0'),
        (Ty::Int, Some(v @ Value::Number(n))) => write_integer(out, n, v, path)?,
        (Ty::Bool, None) => out.push_str("false"),
        (Ty::Bool, Some(Value::Bool(b))) => out.push_str(if *b { "true" } else { "false" }),
        (Ty::Quantity, None) => out.push_str("\"0\""),
        (Ty::Quantity, Some(Value::String(s))) => {
            let text = canonical_quantity(s).map_err(|source| quantity_error(path, source))?;
            write_go_string(out, &text);
        }
        (Ty::Quantity, Some(Value::Number(n))) => {
            let text =
                canonical_quantity_number(n).map_err(|source| quantity_error(path, source))?;
            write_go_string(out, &text);
        }
        (Ty::IntOrString, None) => out.push('0'),
        (Ty::IntOrString, Some(v @ Value::Number(n))) => write_integer(out, n, v, path)?,
        (Ty::IntOrString, Some(Value::String(s))) => write_go_string(out, s),
        (Ty::Time, None) => out.push_str("null"),
        (Ty::Time, Some(Value::String(s))) => write_time(out, s, path)?,
        (Ty::Raw, None) => out.push_str("null"),
        (Ty::Raw, Some(v)) => write_raw(out, v),
        (Ty::Map(_) | Ty::List(_), None) => out.push_str("null"),
        (Ty::Map(inner), Some(Value::Object(map))) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_go_string(out, key);
                out.push(':');
                let item = map.get(key.as_str()).filter(|v| !v.is_null());
                encode(out, item, inner, &Path::Member(path, key))?;
            }
            out.push('}');
        }
        (Ty::List(inner), Some(Value::Array(items))) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                let item = Some(item).filter(|v| !v.is_null());
                encode(out, item, inner, &Path::Index(path, i))?;
            }
            out.push(']');
        }
        (Ty::Struct(fields), None) => encode_struct(out, None, fields, path)?,
        (Ty::Struct(fields), Some(Value::Object(map))) => {
            encode_struct(out, Some(map), fields, path)?
        }
        (ty, Some(other)) => return Err(wrong(path, expected_name(ty), other)),
    }
    Ok(())
}

fn expected_name(ty: &Ty) -> &'static str {
    match ty {
        Ty::Str => "a string",
        Ty::Int => "an integer",
        Ty::Bool => "a boolean",
        Ty::Quantity => "a quantity (string or number)",
        Ty::IntOrString => "an integer or a string",
        Ty::Time => "an RFC 3339 time string",
        Ty::Raw => "any JSON",
        Ty::Map(_) | Ty::Struct(_) => "an object",
        Ty::List(_) => "a list",
    }
}

fn quantity_error(path: &Path<'_>, source: super::QuantityError) -> GoJsonError {
    GoJsonError::Quantity {
        path: path.to_string(),
        source,
    }
}

fn write_integer(
    out: &mut String,
    n: &serde_json::Number,
    v: &Value,
    path: &Path<'_>,
) -> Result<(), GoJsonError> {
    // Go refuses to decode `1.0` or `1e3` into an integer field; so do we.
    if let Some(i) = n.as_i64() {
        out.push_str(&i.to_string());
    } else if let Some(u) = n.as_u64() {
        out.push_str(&u.to_string());
    } else {
        return Err(wrong(path, "an integer", v));
    }
    Ok(())
}

/// metav1.Time: parsed as RFC 3339, written in UTC with whole seconds.
fn write_time(out: &mut String, text: &str, path: &Path<'_>) -> Result<(), GoJsonError> {
    let ts: jiff::Timestamp = text.parse().map_err(|e: jiff::Error| GoJsonError::Time {
        path: path.to_string(),
        value: text.to_owned(),
        reason: e.to_string(),
    })?;
    let whole = jiff::Timestamp::from_second(ts.as_second()).unwrap_or(ts);
    write_go_string(out, &whole.strftime("%Y-%m-%dT%H:%M:%SZ").to_string());
    Ok(())
}

/// Free JSON: Go compacts raw bytes as they are (member order kept) with its string escaping.
fn write_raw(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => write_go_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_raw(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_go_string(out, key);
                out.push(':');
                write_raw(out, item);
            }
            out.push('}');
        }
    }
}

/// Go matches JSON keys to members exactly or, failing that, case-insensitively, and the last
/// matching key in the input wins.
fn member<'v>(map: &'v Map<String, Value>, name: &str) -> Option<&'v Value> {
    map.iter()
        .rev()
        .find(|(key, _)| key.eq_ignore_ascii_case(name))
        .map(|(_, v)| v)
        .filter(|v| !v.is_null())
}

fn is_empty(value: &Value, ty: &Ty) -> bool {
    match (ty, value) {
        (Ty::Str, Value::String(s)) => s.is_empty(),
        (Ty::Int, Value::Number(n)) => n.as_i64() == Some(0) || n.as_u64() == Some(0),
        (Ty::Bool, Value::Bool(b)) => !b,
        (Ty::List(_), Value::Array(items)) => items.is_empty(),
        (Ty::Map(_), Value::Object(map)) => map.is_empty(),
        // Structs, quantities, int-or-strings and times behind `?` are Go pointers.
        _ => false,
    }
}

fn encode_struct(
    out: &mut String,
    map: Option<&Map<String, Value>>,
    fields: &[Field],
    path: &Path<'_>,
) -> Result<(), GoJsonError> {
    out.push('{');
    let mut first = true;
    for field in fields {
        let value = map.and_then(|m| member(m, field.name));
        let write_null = match (field.presence, value) {
            (Presence::OmitNull, None) => continue,
            (Presence::OmitEmpty, None) => continue,
            (Presence::OmitEmpty, Some(v)) if is_empty(v, &field.ty) => continue,
            (Presence::NullWhenAbsent, None) => true,
            _ => false,
        };
        if !first {
            out.push(',');
        }
        first = false;
        write_go_string(out, field.name);
        out.push(':');
        if write_null {
            out.push_str("null");
        } else {
            encode(out, value, &field.ty, &Path::Member(path, field.name))?;
        }
    }
    out.push('}');
    Ok(())
}

//! Strategic merge patch, `application/strategic-merge-patch+json`, with the semantics of
//! k8s.io/apimachinery `strategicpatch` as kube-apiserver runs it (parallel deletion lists
//! merged, unmatched nulls ignored).
//!
//! Where the Go code stores a patch value verbatim because the target has no such field,
//! this module merges the value into an empty one instead, so directives inside it are
//! interpreted (a `$patch: delete` element of a new list is a no-op) rather than stored;
//! the Go server only gets away with storing them because decoding into typed structs
//! drops unknown `$…` keys.

use serde_json::{Map, Value};

use super::merge_keys::{self, FieldSchema, ListKind, Ty};
use super::{GroupVersionKindRef, PatchError};

/// kube-apiserver's answer (HTTP 415) to a strategic merge patch on a custom resource: the
/// CRD handler only accepts these patch media types.
pub const UNSUPPORTED_FOR_CUSTOM_RESOURCES: &str = "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml";

const DIRECTIVE: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList/";
const SET_ELEMENT_ORDER: &str = "$setElementOrder/";

const BAD_RETAIN_KEYS: &str = "invalid patch format of retainKeys";
const BAD_PRIMITIVE_LIST: &str = "invalid patch format of primitive list";
const BAD_ELEMENT_ORDER: &str = "invalid patch format of setElementOrder list";

/// A strategic merge failure and the field path where it happened.
struct SmpError {
    path: String,
    message: String,
}

impl SmpError {
    fn new(message: impl Into<String>) -> Self {
        SmpError {
            path: String::new(),
            message: message.into(),
        }
    }
    fn at(mut self, segment: &str) -> Self {
        self.path.insert_str(0, segment);
        self
    }
}

type Result<T> = std::result::Result<T, SmpError>;

/// Applies a strategic merge patch to an object of a built-in kind. On error `target` is
/// left unchanged.
pub fn apply_strategic_merge_patch(
    target: &mut Value,
    patch: &Value,
    kind: &GroupVersionKindRef,
) -> std::result::Result<(), PatchError> {
    if !merge_keys::is_builtin_group(kind.group) {
        return Err(PatchError::UnsupportedMediaType(
            UNSUPPORTED_FOR_CUSTOM_RESOURCES.to_string(),
        ));
    }
    let Value::Object(patch) = patch else {
        return Err(PatchError::Invalid(format!(
            "strategic merge patch for {}: the patch must be a JSON object",
            kind.kind
        )));
    };
    let original = target.as_object().cloned().unwrap_or_default();
    let merged = merge_map(original, patch, merge_keys::root(kind).ty).map_err(|e| {
        let at = if e.path.is_empty() { "." } else { &e.path };
        PatchError::Invalid(format!(
            "strategic merge patch for {} at {at}: {}",
            kind.kind, e.message
        ))
    })?;
    *target = Value::Object(merged);
    Ok(())
}

fn merge_map(
    mut original: Map<String, Value>,
    patch: &Map<String, Value>,
    ty: Ty,
) -> Result<Map<String, Value>> {
    if let Some(directive) = patch.get(DIRECTIVE) {
        return match directive.as_str() {
            Some("replace") => {
                let mut rest = patch.clone();
                rest.shift_remove(DIRECTIVE);
                merge_map(Map::new(), &rest, ty)
            }
            Some("delete") => Ok(Map::new()),
            // `$patch: merge` is only meaningful in lists, where it is rejected too.
            _ => Err(SmpError::new(format!(
                "unknown patch type: {directive} in map"
            ))),
        };
    }
    if let Some(retain) = patch.get(RETAIN_KEYS) {
        apply_retain_keys(&mut original, patch, retain)?;
    }
    let mut ordered: Vec<&str> = Vec::new();
    for (key, order) in patch {
        if let Some(field) = key.strip_prefix(SET_ELEMENT_ORDER) {
            merge_with_element_order(&mut original, patch, field, order, ty)
                .map_err(|e| e.at(&format!(".{field}")))?;
            ordered.push(field);
        }
    }
    for (key, value) in patch {
        if key == RETAIN_KEYS
            || key.starts_with(SET_ELEMENT_ORDER)
            || ordered.contains(&key.as_str())
        {
            continue;
        }
        if let Some(field) = key.strip_prefix(DELETE_FROM_PRIMITIVE_LIST) {
            delete_from_primitive_list(&mut original, field, value)
                .map_err(|e| e.at(&format!(".{field}")))?;
            continue;
        }
        if value.is_null() {
            original.shift_remove(key);
            continue;
        }
        let schema = merge_keys::field(ty, key);
        let merged = match original.get_mut(key) {
            Some(slot) => merge_value(std::mem::take(slot), value, schema),
            None => fresh(value, schema),
        }
        .map_err(|e| e.at(&format!(".{key}")))?;
        original.insert(key.clone(), merged);
    }
    Ok(original)
}

fn merge_value(original: Value, patch: &Value, schema: FieldSchema) -> Result<Value> {
    match (original, patch) {
        (Value::Object(o), Value::Object(p)) => Ok(Value::Object(merge_map(o, p, schema.ty)?)),
        (Value::Array(o), Value::Array(p)) if merges(schema.list) => {
            Ok(Value::Array(merge_list(o, p, schema)?))
        }
        (_, p) => fresh(p, schema),
    }
}

/// The value a patch value produces where the target has nothing: merged into an empty
/// value of its own kind, which drops nulls and interprets directives.
fn fresh(patch: &Value, schema: FieldSchema) -> Result<Value> {
    match patch {
        Value::Object(p) => Ok(Value::Object(merge_map(Map::new(), p, schema.ty)?)),
        Value::Array(p) if merges(schema.list) => {
            Ok(Value::Array(merge_list(Vec::new(), p, schema)?))
        }
        Value::Array(p) => p
            .iter()
            .map(|e| fresh(e, FieldSchema::of(schema.ty)))
            .collect::<Result<Vec<_>>>()
            .map(Value::Array),
        scalar => Ok(scalar.clone()),
    }
}

/// Whether strategic merge patch merges (rather than replaces) a list of this kind.
fn merges(list: ListKind) -> bool {
    matches!(
        list,
        ListKind::Set
            | ListKind::Map {
                smp_key: Some(_),
                ..
            }
    )
}

fn merge_key(list: ListKind) -> Option<&'static str> {
    match list {
        ListKind::Map { smp_key, .. } => smp_key,
        _ => None,
    }
}

fn merge_list(original: Vec<Value>, patch: &[Value], schema: FieldSchema) -> Result<Vec<Value>> {
    if original.is_empty() && patch.is_empty() {
        return Ok(original);
    }
    if !elements_are_objects(&original, patch)? {
        return Ok(merge_scalar_list(original, patch));
    }
    let Some(key) = merge_key(schema.list) else {
        return Err(SmpError::new("cannot merge lists without merge key"));
    };
    let mut original = original;
    let mut plain = Vec::new();
    for item in patch {
        let Some(item) = item.as_object() else {
            continue;
        };
        match item.get(DIRECTIVE) {
            None => plain.push(item),
            Some(directive) => match directive.as_str() {
                Some("delete") => {
                    let value = item.get(key).ok_or_else(|| no_merge_key(item, key))?;
                    original.retain(|o| o.get(key) != Some(value));
                }
                Some("replace") => original.clear(),
                Some("merge") => {
                    return Err(SmpError::new(
                        "merging lists cannot yet be specified in the patch",
                    ));
                }
                _ => {
                    return Err(SmpError::new(format!(
                        "unknown patch type: {directive} in list element"
                    )));
                }
            },
        }
    }
    let server_order = identities(&original, Some(key));
    let mut merged = original;
    for item in &plain {
        let value = item.get(key).ok_or_else(|| no_merge_key(item, key))?;
        let position = merged.iter().position(|o| o.get(key) == Some(value));
        let at = format!("[{key}={value}]");
        match position {
            Some(i) => {
                let Value::Object(existing) = std::mem::take(&mut merged[i]) else {
                    // elements_are_objects checked every element of `original`.
                    return Err(SmpError::new("list element is not an object").at(&at));
                };
                merged[i] =
                    Value::Object(merge_map(existing, item, schema.ty).map_err(|e| e.at(&at))?);
            }
            None => merged.push(Value::Object(
                merge_map(Map::new(), item, schema.ty).map_err(|e| e.at(&at))?,
            )),
        }
    }
    let patch_order: Vec<Value> = plain.iter().filter_map(|p| p.get(key).cloned()).collect();
    Ok(normalize_order(
        merged,
        &patch_order,
        &server_order,
        Some(key),
    ))
}

/// Scalar lists with the merge strategy behave as ordered sets: union, no duplicates.
fn merge_scalar_list(original: Vec<Value>, patch: &[Value]) -> Vec<Value> {
    let server_order = original.clone();
    let mut merged: Vec<Value> = Vec::with_capacity(original.len() + patch.len());
    for v in original.into_iter().chain(patch.iter().cloned()) {
        if !merged.contains(&v) {
            merged.push(v);
        }
    }
    normalize_order(merged, patch, &server_order, None)
}

/// Orders a merged list as the Go implementation does: items named by the patch follow the
/// patch order, server-only items keep their live order, and the two are interleaved by
/// their live positions (a new item goes before the server-only items after it).
fn normalize_order(
    merged: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    key: Option<&str>,
) -> Vec<Value> {
    let index = |order: &[Value], item: &Value| -> Option<usize> {
        let id = identity(item, key)?;
        order.iter().position(|o| o == id)
    };
    let (mut from_patch, mut server_only): (Vec<Value>, Vec<Value>) = merged
        .into_iter()
        .partition(|v| index(patch_order, v).is_some());
    from_patch.sort_by_key(|v| index(patch_order, v).unwrap_or(usize::MAX));
    server_only.sort_by_key(|v| index(server_order, v).unwrap_or(usize::MAX));

    let mut out = Vec::with_capacity(from_patch.len() + server_only.len());
    let mut left = server_only.into_iter().peekable();
    let mut right = from_patch.into_iter().peekable();
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(r)) => matches!(
                (index(server_order, l), index(server_order, r)),
                (Some(li), Some(ri)) if li < ri
            ),
        };
        let next = if take_left { left.next() } else { right.next() };
        out.extend(next);
    }
    out
}

/// What identifies a list item: its merge key value, or the item itself for scalars.
fn identity<'a>(item: &'a Value, key: Option<&str>) -> Option<&'a Value> {
    match key {
        Some(k) => item.get(k),
        None => Some(item),
    }
}

fn identities(list: &[Value], key: Option<&str>) -> Vec<Value> {
    list.iter()
        .filter_map(|v| identity(v, key).cloned())
        .collect()
}

/// Whether the elements are objects (true) or scalars (false); mixed kinds and nested lists
/// are errors, as in the Go implementation.
fn elements_are_objects(a: &[Value], b: &[Value]) -> Result<bool> {
    fn kind(v: &Value) -> u8 {
        match v {
            Value::Null => 0,
            Value::Bool(_) => 1,
            Value::Number(_) => 2,
            Value::String(_) => 3,
            Value::Array(_) => 4,
            Value::Object(_) => 5,
        }
    }
    let mut seen = None;
    for v in a.iter().chain(b) {
        let k = kind(v);
        if k == 4 {
            return Err(SmpError::new("lists of lists are not supported"));
        }
        match seen {
            None => seen = Some(k),
            Some(s) if s != k => return Err(SmpError::new("list element types are not identical")),
            Some(_) => {}
        }
    }
    Ok(seen == Some(5))
}

fn no_merge_key(item: &Map<String, Value>, key: &str) -> SmpError {
    SmpError::new(format!(
        "map: {} does not contain declared merge key: {key}",
        Value::Object(item.clone())
    ))
}

fn apply_retain_keys(
    original: &mut Map<String, Value>,
    patch: &Map<String, Value>,
    retain: &Value,
) -> Result<()> {
    let keep: Vec<&str> = retain
        .as_array()
        .and_then(|list| list.iter().map(Value::as_str).collect::<Option<Vec<_>>>())
        .ok_or_else(|| SmpError::new(BAD_RETAIN_KEYS))?;
    for (k, v) in patch {
        let directive = k == RETAIN_KEYS
            || k.starts_with(DELETE_FROM_PRIMITIVE_LIST)
            || k.starts_with(SET_ELEMENT_ORDER);
        if !v.is_null() && !directive && !keep.contains(&k.as_str()) {
            return Err(SmpError::new(BAD_RETAIN_KEYS));
        }
    }
    original.retain(|k, _| keep.contains(&k.as_str()));
    Ok(())
}

fn delete_from_primitive_list(
    original: &mut Map<String, Value>,
    field: &str,
    values: &Value,
) -> Result<()> {
    let Value::Array(values) = values else {
        return Err(SmpError::new(BAD_PRIMITIVE_LIST));
    };
    if let Some(Value::Array(list)) = original.get_mut(field) {
        list.retain(|v| !values.contains(v));
    }
    Ok(())
}

/// `$setElementOrder/<field>`: merges the field's patch list (if any) and orders the result
/// by the directive, then by the live order.
fn merge_with_element_order(
    original: &mut Map<String, Value>,
    patch: &Map<String, Value>,
    field: &str,
    order: &Value,
    ty: Ty,
) -> Result<()> {
    let Value::Array(order) = order else {
        return Err(SmpError::new(BAD_ELEMENT_ORDER));
    };
    let schema = merge_keys::field(ty, field);
    let key = merge_key(schema.list);
    let live = match original.get(field) {
        None => None,
        Some(Value::Array(list)) => Some(list.clone()),
        Some(_) => return Err(SmpError::new("the live value is not a list")),
    };
    let patched = match patch.get(field) {
        None => None,
        Some(Value::Array(list)) => Some(list),
        Some(_) => return Err(SmpError::new(BAD_ELEMENT_ORDER)),
    };
    if let Some(list) = patched {
        validate_element_order(list, order, key)?;
    }
    let server_order = identities(live.as_deref().unwrap_or_default(), key);
    let merged = match (live, patched) {
        (None, None) => return Ok(()),
        (Some(live), None) => live,
        (None, Some(p)) => as_list(fresh(&Value::Array(p.clone()), schema)?),
        (Some(live), Some(p)) if merges(schema.list) => merge_list(live, p, schema)?,
        (Some(_), Some(p)) => as_list(fresh(&Value::Array(p.clone()), schema)?),
    };
    if key.is_none() && merged.iter().any(Value::is_object) {
        return Err(SmpError::new(
            "cannot order a list of objects without a merge key",
        ));
    }
    let order_ids: Vec<Value> = match key {
        Some(k) => order.iter().filter_map(|o| o.get(k).cloned()).collect(),
        None => order.clone(),
    };
    let ordered = normalize_order(merged, &order_ids, &server_order, key);
    original.insert(field.to_string(), Value::Array(ordered));
    Ok(())
}

fn as_list(v: Value) -> Vec<Value> {
    match v {
        Value::Array(list) => list,
        other => vec![other],
    }
}

/// The patch list must name its (non-deleted) items in the directive's relative order.
fn validate_element_order(patch: &[Value], order: &[Value], key: Option<&str>) -> Result<()> {
    let items: Vec<&Value> = patch
        .iter()
        .filter(|v| v.get(DIRECTIVE).is_none())
        .collect();
    let (mut p, mut o) = (0, 0);
    while p < items.len() && o < order.len() {
        let same = match key {
            Some(k) => {
                let left = items[p]
                    .get(k)
                    .ok_or_else(|| SmpError::new(format!("an item lacks the merge key {k}")))?;
                let right = order[o]
                    .get(k)
                    .ok_or_else(|| SmpError::new(BAD_ELEMENT_ORDER))?;
                left == right
            }
            None => items[p] == &order[o],
        };
        if same {
            p += 1;
        }
        o += 1;
    }
    if p < items.len() {
        return Err(SmpError::new(
            "the order in the patch list doesn't match the $setElementOrder list",
        ));
    }
    Ok(())
}

//! Schema-aware walks over objects for server-side apply: the field set an object sets, the
//! apply merge, the comparison of two versions and the pruning of fields an applier gave up.
//!
//! Granularity follows structured-merge-diff: objects are granular unless atomic; scalars,
//! atomic objects and atomic lists are leaves; items of associative lists and members of
//! sets are paths of their own (so an item can be owned and removed as a whole).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::fields_v1::{FieldSet, PathElement};
use super::merge_keys::{self, CONDITION_KEYS, FieldSchema, KeyField, ListKind};

/// How a particular list value is treated once its elements are known.
enum Resolved {
    Atomic,
    Set,
    Map(&'static [KeyField]),
}

/// Resolves the list kind for the given values of one list position. Associative lists whose
/// items lack their keys fall back to atomic, so walks never fail on what a non-apply write
/// stored; apply configurations are checked strictly by [`validate`] first.
fn resolve(list: ListKind, values: &[&[Value]]) -> Resolved {
    let all = || values.iter().flat_map(|v| v.iter());
    match list {
        ListKind::Atomic => Resolved::Atomic,
        ListKind::Set if all().all(is_scalar) => Resolved::Set,
        ListKind::Set => Resolved::Atomic,
        ListKind::Map { keys, .. } if all().all(|v| item_key(v, keys).is_ok()) => {
            Resolved::Map(keys)
        }
        ListKind::Map { .. } => Resolved::Atomic,
        ListKind::ConditionsByType
            if all().all(|v| v.get("type").is_some_and(Value::is_string)) =>
        {
            Resolved::Map(CONDITION_KEYS)
        }
        ListKind::ConditionsByType => Resolved::Atomic,
    }
}

fn is_scalar(v: &Value) -> bool {
    !v.is_object() && !v.is_array()
}

/// The path element of an associative list item: its key fields (defaulted where the API
/// server defaults them).
fn item_key(item: &Value, keys: &[KeyField]) -> Result<PathElement, ItemKeyError> {
    let Value::Object(obj) = item else {
        return Err(ItemKeyError::NotAnObject);
    };
    let mut fields = BTreeMap::new();
    for k in keys {
        let value = match (obj.get(k.name), k.default) {
            (Some(v), _) if !v.is_null() => v.clone(),
            (_, Some(default)) => Value::String(default.to_string()),
            _ => return Err(ItemKeyError::MissingKey { field: k.name }),
        };
        fields.insert(k.name, value);
    }
    Ok(PathElement::key(fields))
}

/// The path element of each item of a list resolved as a set or map.
fn item_elements(items: &[Value], resolved: &Resolved) -> Vec<PathElement> {
    items
        .iter()
        .map(|item| match resolved {
            // resolve() only yields Map when every item has its keys.
            Resolved::Map(keys) => {
                item_key(item, keys).unwrap_or_else(|_| PathElement::value(item))
            }
            _ => PathElement::value(item),
        })
        .collect()
}

/// Why an associative list item has no key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ItemKeyError {
    #[error("associative list item is not an object")]
    NotAnObject,
    #[error("associative list item omits key field {field:?}")]
    MissingKey { field: &'static str },
}

/// An apply configuration the server refuses, at `path` (`.spec.ports[1]`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ConfigurationError {
    #[error("{path}: {source}")]
    ItemKey {
        path: String,
        #[source]
        source: ItemKeyError,
    },
    #[error("{path}: duplicate entry for key {key:?}")]
    Duplicate { path: String, key: PathElement },
}

/// Checks an apply configuration: associative list items must carry their keys (or have
/// defaults for them) and must not repeat.
pub(crate) fn validate(
    value: &Value,
    schema: FieldSchema,
    path: &str,
) -> Result<(), ConfigurationError> {
    match value {
        Value::Object(map) if !schema.atomic => map.iter().try_for_each(|(k, v)| {
            validate(v, merge_keys::field(schema.ty, k), &format!("{path}.{k}"))
        }),
        Value::Array(items) => {
            let keys = match schema.list {
                ListKind::Map { keys, .. } => keys,
                _ => return Ok(()),
            };
            let mut seen = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let pe = item_key(item, keys).map_err(|source| ConfigurationError::ItemKey {
                    path: format!("{path}[{i}]"),
                    source,
                })?;
                if seen.contains(&pe) {
                    return Err(ConfigurationError::Duplicate {
                        path: format!("{path}[{i}]"),
                        key: pe,
                    });
                }
                seen.push(pe);
                validate(item, FieldSchema::of(schema.ty), &format!("{path}[{i}]"))?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// The set of fields `value` sets.
pub(crate) fn field_set(value: &Value, schema: FieldSchema) -> FieldSet {
    let mut set = FieldSet::new();
    collect(value, schema, &mut Vec::new(), &mut set);
    strip_root_member(set)
}

/// The root itself is never owned (an empty object would otherwise make it a member).
fn strip_root_member(set: FieldSet) -> FieldSet {
    let mut root_only = FieldSet::new();
    root_only.insert(&[]);
    set.difference(&root_only)
}

fn collect(value: &Value, schema: FieldSchema, path: &mut Vec<PathElement>, out: &mut FieldSet) {
    match value {
        Value::Object(map) if !schema.atomic && !map.is_empty() => {
            for (k, v) in map {
                path.push(PathElement::Field(k.clone()));
                collect(v, merge_keys::field(schema.ty, k), path, out);
                path.pop();
            }
        }
        Value::Array(items) => match resolve(schema.list, &[items]) {
            Resolved::Atomic => out.insert(path),
            resolved => {
                let element = FieldSchema::of(schema.ty);
                for (item, pe) in items.iter().zip(item_elements(items, &resolved)) {
                    path.push(pe);
                    out.insert(path);
                    if matches!(resolved, Resolved::Map(_)) {
                        collect(item, element, path, out);
                    }
                    path.pop();
                }
            }
        },
        _ => out.insert(path),
    }
}

/// Merges an apply configuration into the live object: the configuration wins for leaves,
/// objects merge by field, associative lists by key, sets by value; `null` removes a field.
pub(crate) fn merge(live: &Value, config: &Value, schema: FieldSchema) -> Value {
    match (live, config) {
        _ if schema.atomic => strip_nulls(config),
        (Value::Object(l), Value::Object(c)) => {
            let mut out = l.clone();
            for (k, cv) in c {
                if cv.is_null() {
                    out.shift_remove(k);
                    continue;
                }
                let field = merge_keys::field(schema.ty, k);
                let merged = match l.get(k) {
                    Some(lv) => merge(lv, cv, field),
                    None => merge(&empty_like(cv), cv, field),
                };
                out.insert(k.clone(), merged);
            }
            Value::Object(out)
        }
        (Value::Array(l), Value::Array(c)) => match resolve(schema.list, &[l, c]) {
            Resolved::Atomic => strip_nulls(config),
            resolved => Value::Array(merge_items(l, c, &resolved, FieldSchema::of(schema.ty))),
        },
        _ => strip_nulls(config),
    }
}

fn empty_like(v: &Value) -> Value {
    match v {
        Value::Object(_) => Value::Object(Map::new()),
        Value::Array(_) => Value::Array(Vec::new()),
        _ => Value::Null,
    }
}

fn strip_nulls(v: &Value) -> Value {
    match v {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), strip_nulls(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(strip_nulls).collect()),
        other => other.clone(),
    }
}

/// Merges list items by path element. Live-only items keep their place; configuration items
/// keep the configuration's order and are placed before the first live item they precede.
fn merge_items(
    live: &[Value],
    config: &[Value],
    resolved: &Resolved,
    element: FieldSchema,
) -> Vec<Value> {
    let live_pes = item_elements(live, resolved);
    let config_pes = item_elements(config, resolved);
    let find = |pes: &[PathElement], pe: &PathElement| pes.iter().position(|p| p == pe);
    let emit_config = |ci: usize| -> Value {
        match find(&live_pes, &config_pes[ci]) {
            Some(li) => merge(&live[li], &config[ci], element),
            None => merge(&empty_like(&config[ci]), &config[ci], element),
        }
    };
    let mut out = Vec::with_capacity(live.len() + config.len());
    let mut next = 0;
    for (li, pe) in live_pes.iter().enumerate() {
        match find(&config_pes, pe) {
            Some(ci) => {
                while next <= ci {
                    out.push(emit_config(next));
                    next += 1;
                }
            }
            None => out.push(live[li].clone()),
        }
    }
    while next < config.len() {
        out.push(emit_config(next));
        next += 1;
    }
    out
}

/// What changed between two versions of an object, as field sets.
#[derive(Debug, Default)]
pub(crate) struct Comparison {
    pub added: FieldSet,
    pub modified: FieldSet,
    pub removed: FieldSet,
}

pub(crate) fn compare(old: &Value, new: &Value, schema: FieldSchema) -> Comparison {
    let mut cmp = Comparison::default();
    compare_at(Some(old), Some(new), schema, &mut Vec::new(), &mut cmp);
    cmp.added = strip_root_member(cmp.added);
    cmp.modified = strip_root_member(cmp.modified);
    cmp.removed = strip_root_member(cmp.removed);
    cmp
}

fn subtree_set(value: &Value, schema: FieldSchema, path: &[PathElement]) -> FieldSet {
    let mut out = FieldSet::new();
    collect(value, schema, &mut path.to_vec(), &mut out);
    out
}

fn compare_at(
    old: Option<&Value>,
    new: Option<&Value>,
    schema: FieldSchema,
    path: &mut Vec<PathElement>,
    cmp: &mut Comparison,
) {
    let (old, new) = match (old, new) {
        (None, None) => return,
        (None, Some(n)) => return cmp.added.union_in_place(&subtree_set(n, schema, path)),
        (Some(o), None) => return cmp.removed.union_in_place(&subtree_set(o, schema, path)),
        (Some(o), Some(n)) => (o, n),
    };
    match (old, new) {
        // An object is never itself modified: its fields are added, changed or removed.
        (Value::Object(o), Value::Object(n)) if !schema.atomic => {
            let keys = o.keys().chain(n.keys().filter(|k| !o.contains_key(*k)));
            for k in keys {
                path.push(PathElement::Field(k.clone()));
                compare_at(
                    o.get(k),
                    n.get(k),
                    merge_keys::field(schema.ty, k),
                    path,
                    cmp,
                );
                path.pop();
            }
        }
        (Value::Array(o), Value::Array(n)) => match resolve(schema.list, &[o, n]) {
            Resolved::Atomic => {
                if o != n {
                    cmp.modified.insert(path);
                }
            }
            resolved => {
                let (old_pes, new_pes) = (item_elements(o, &resolved), item_elements(n, &resolved));
                let element = FieldSchema::of(schema.ty);
                for (i, pe) in old_pes.iter().enumerate() {
                    let matched = new_pes.iter().position(|p| p == pe).map(|j| &n[j]);
                    path.push(pe.clone());
                    match matched {
                        None => cmp
                            .removed
                            .union_in_place(&item_set(&o[i], &resolved, element, path)),
                        Some(new_item) if matches!(resolved, Resolved::Map(_)) => {
                            compare_at(Some(&o[i]), Some(new_item), element, path, cmp)
                        }
                        Some(_) => {}
                    }
                    path.pop();
                }
                for (j, pe) in new_pes.iter().enumerate() {
                    if !old_pes.contains(pe) {
                        path.push(pe.clone());
                        cmp.added
                            .union_in_place(&item_set(&n[j], &resolved, element, path));
                        path.pop();
                    }
                }
            }
        },
        (o, n) => {
            if o != n {
                let structural = |v: &Value| v.is_object() || v.is_array();
                if structural(o) || structural(n) {
                    cmp.removed
                        .union_in_place(&subtree_set(o, schema, path).difference(&leaf(path)));
                    cmp.added
                        .union_in_place(&subtree_set(n, schema, path).difference(&leaf(path)));
                }
                cmp.modified.insert(path);
            }
        }
    }
}

fn leaf(path: &[PathElement]) -> FieldSet {
    let mut s = FieldSet::new();
    s.insert(path);
    s
}

/// The paths of one list item: the item itself, plus its fields for associative lists.
fn item_set(
    item: &Value,
    resolved: &Resolved,
    element: FieldSchema,
    path: &[PathElement],
) -> FieldSet {
    let mut set = leaf(path);
    if matches!(resolved, Resolved::Map(_)) {
        set.union_in_place(&subtree_set(item, element, path));
    }
    set
}

/// Removes from `value` every member of `remove` that nobody in `owned` holds (neither the
/// path nor anything beneath it). Objects and lists emptied this way are removed too when
/// nobody owns anything beneath them, as structured-merge-diff drops fields of the last
/// applied set that no longer hold owned content.
pub(crate) fn prune(
    value: &mut Value,
    remove: &FieldSet,
    owned: Option<&FieldSet>,
    schema: FieldSchema,
) {
    match value {
        Value::Object(map) => {
            for (pe, rm) in remove.children() {
                let PathElement::Field(name) = pe else {
                    continue;
                };
                let kept = owned.and_then(|o| o.child(pe));
                let unowned = kept.is_none_or(FieldSet::is_empty);
                let Some(child) = map.get_mut(name) else {
                    continue;
                };
                if rm.is_member() && unowned {
                    map.shift_remove(name);
                    continue;
                }
                prune(child, rm, kept, merge_keys::field(schema.ty, name));
                if unowned && is_empty_container(child) {
                    map.shift_remove(name);
                }
            }
        }
        Value::Array(items) => {
            let resolved = resolve(schema.list, &[items]);
            if matches!(resolved, Resolved::Atomic) {
                return;
            }
            let element = FieldSchema::of(schema.ty);
            for (pe, rm) in remove.children() {
                let pes = item_elements(items, &resolved);
                let Some(i) = pes.iter().position(|p| p == pe) else {
                    continue;
                };
                let kept = owned.and_then(|o| o.child(pe));
                if rm.is_member() && kept.is_none_or(FieldSet::is_empty) {
                    items.remove(i);
                } else if matches!(resolved, Resolved::Map(_)) {
                    prune(&mut items[i], rm, kept, element);
                }
            }
        }
        _ => {}
    }
}

fn is_empty_container(v: &Value) -> bool {
    match v {
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

//! Server-side apply with field managers, and the ownership bookkeeping of other writes.
//!
//! Follows structured-merge-diff as kube-apiserver runs it:
//! - an apply merges the configuration into the live object, then removes the fields its
//!   manager applied last time but no longer applies, unless another manager owns them;
//! - changing a field another manager owns (any entry other than this manager's Apply
//!   entry, including this manager's own Update entry) is a conflict unless forced, in which
//!   case the field changes owner; applying the value a field already has shares ownership;
//! - any other write (create, update, merge/JSON/strategic patch) takes ownership of what it
//!   changed, recorded under operation `Update`.

use serde_json::{Map, Value, json};

use super::fields_v1::{FieldSet, PathDisplay};
use super::managed_fields::{self, APPLY, ManagedEntry, UPDATE, ownable};
use super::merge_keys::{self, FieldSchema};
use super::typed;
use super::{FieldConflict, GroupVersionKindRef, PatchError};

/// Which part of the object a write addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// The main resource: everything but `status`.
    Main,
    /// The `status` subresource: only `status`.
    Status,
}

impl Scope {
    fn subresource(self) -> &'static str {
        match self {
            Scope::Main => "",
            Scope::Status => "status",
        }
    }

    /// The part of `obj` this scope writes.
    fn part(self, obj: &Value) -> Value {
        let Value::Object(map) = obj else {
            return Value::Object(Map::new());
        };
        let part: Map<String, Value> = map
            .iter()
            .filter(|(k, _)| (k.as_str() == "status") == (self == Scope::Status))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Value::Object(part)
    }
}

/// Applies `applied` as field manager `manager` to `live` (`None` when the object does not
/// exist yet) and returns the new object with `metadata.managedFields` updated. `status` in
/// the configuration is ignored (see [`server_side_apply_status`]). `now` is the RFC 3339
/// time recorded for the manager.
pub fn server_side_apply(
    live: Option<&Value>,
    applied: &Value,
    manager: &str,
    force: bool,
    kind: &GroupVersionKindRef,
    now: &str,
) -> Result<Value, PatchError> {
    apply(live, applied, manager, force, kind, now, Scope::Main)
}

/// Server-side apply through the `status` subresource: only `status` of the configuration
/// is applied, and ownership is recorded with `subresource: status`.
pub fn server_side_apply_status(
    live: Option<&Value>,
    applied: &Value,
    manager: &str,
    force: bool,
    kind: &GroupVersionKindRef,
    now: &str,
) -> Result<Value, PatchError> {
    apply(live, applied, manager, force, kind, now, Scope::Status)
}

/// Records in `new.metadata.managedFields` that `manager` made the non-apply write `old` →
/// `new` (`old` is `None` for a create). The manager takes ownership (operation `Update`) of
/// every field it added or changed, away from other managers; fields it removed are removed
/// from every manager. A `managedFields` in `new` that differs from `old`'s replaces them
/// (`[{}]` clears them), as on the API server.
pub fn record_update(old: Option<&Value>, new: &mut Value, manager: &str, now: &str) {
    record(old, new, manager, now, Scope::Main)
}

/// [`record_update`] for writes through the `status` subresource: only changes under
/// `status` are attributed, with `subresource: status`.
pub fn record_status_update(old: Option<&Value>, new: &mut Value, manager: &str, now: &str) {
    record(old, new, manager, now, Scope::Status)
}

/// Removes `status`, e.g. from the body of a main-resource write to a kind with a status
/// subresource.
pub fn strip_status(obj: &mut Value) {
    if let Value::Object(map) = obj {
        map.shift_remove("status");
    }
}

fn api_version(kind: &GroupVersionKindRef) -> String {
    if kind.group.is_empty() {
        kind.version.to_string()
    } else {
        format!("{}/{}", kind.group, kind.version)
    }
}

fn invalid(kind: &GroupVersionKindRef, what: impl std::fmt::Display) -> PatchError {
    PatchError::Invalid(format!("apply configuration for {}: {what}", kind.kind))
}

fn check_configuration(
    applied: &Value,
    kind: &GroupVersionKindRef,
    expected: &str,
) -> Result<(), PatchError> {
    if !applied.is_object() {
        return Err(invalid(kind, "must be a JSON object"));
    }
    match applied.get("apiVersion").and_then(Value::as_str) {
        Some(v) if v == expected => {}
        // The API server's wording for this case.
        Some(v) => {
            return Err(PatchError::Invalid(format!(
                "Incorrect version specified in apply patch. Specified patch version: {v}, expected: {expected}"
            )));
        }
        None => return Err(invalid(kind, "apiVersion must be set")),
    }
    match applied.get("kind").and_then(Value::as_str) {
        Some(k) if k == kind.kind => {}
        Some(k) => return Err(invalid(kind, format_args!("kind {k:?} does not match"))),
        None => return Err(invalid(kind, "kind must be set")),
    }
    match applied.pointer("/metadata/managedFields") {
        None | Some(Value::Null) => Ok(()),
        Some(Value::Array(list)) if list.is_empty() => Ok(()),
        Some(_) => Err(PatchError::Invalid(
            "metadata.managedFields must be nil".to_string(),
        )),
    }
}

fn apply(
    live: Option<&Value>,
    applied: &Value,
    manager: &str,
    force: bool,
    kind: &GroupVersionKindRef,
    now: &str,
    scope: Scope,
) -> Result<Value, PatchError> {
    let version = api_version(kind);
    check_configuration(applied, kind, &version)?;
    let schema = merge_keys::root(kind);
    let config = scope.part(applied);
    typed::validate(&config, schema, "").map_err(|e| invalid(kind, e))?;

    let live_body = live
        .map(managed_fields::without_managed_fields)
        .unwrap_or_else(|| json!({}));
    let mut entries = live.map(managed_fields::read).unwrap_or_default();
    let me = entries
        .iter()
        .position(|e| e.is(manager, APPLY, scope.subresource(), &version));
    let applied_set = ownable(typed::field_set(&config, schema));

    let mut merged = typed::merge(&live_body, &config, schema);
    if let Some(mine) = me {
        let mut owned = applied_set.clone();
        for (i, e) in entries.iter().enumerate() {
            if i != mine {
                owned.union_in_place(&e.fields);
            }
        }
        let given_up = entries[mine].fields.difference(&applied_set);
        typed::prune(&mut merged, &given_up, Some(&owned), schema);
    }

    let cmp = typed::compare(&live_body, &merged, schema);
    let changed = ownable(cmp.added.union(&cmp.modified));
    let removed = cmp.removed;
    let conflicts = conflicts_with(&entries, me, &changed);
    if !conflicts.is_empty() && !force {
        return Err(PatchError::Conflict { conflicts });
    }
    for (i, e) in entries.iter_mut().enumerate() {
        if Some(i) != me {
            e.fields = e.fields.difference(&changed);
        }
        e.fields = e.fields.difference(&removed);
    }
    let fields = applied_set.difference(&removed);
    let object_changed = merged != live_body;
    match me {
        Some(mine) => {
            let e = &mut entries[mine];
            e.fields = fields;
            e.api_version = version;
            if object_changed || e.time.is_none() {
                e.time = Some(now.to_string());
            }
        }
        None => entries.push(ManagedEntry {
            manager: manager.to_string(),
            operation: APPLY.to_string(),
            api_version: version,
            time: Some(now.to_string()),
            subresource: scope.subresource().to_string(),
            fields,
        }),
    }
    managed_fields::write(&mut merged, entries);
    Ok(merged)
}

/// Every changed field owned by an entry other than the applier's own Apply entry.
fn conflicts_with(
    entries: &[ManagedEntry],
    me: Option<usize>,
    changed: &FieldSet,
) -> Vec<FieldConflict> {
    let mut out: Vec<FieldConflict> = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        if Some(i) == me {
            continue;
        }
        for path in e.fields.intersection(changed).members() {
            let conflict = FieldConflict {
                field: PathDisplay(&path).to_string(),
                manager: e.manager.clone(),
            };
            if !out.contains(&conflict) {
                out.push(conflict);
            }
        }
    }
    out
}

/// The group, version and kind an object names itself by.
fn object_kind(obj: &Value) -> Option<(String, String, String)> {
    let api_version = obj.get("apiVersion")?.as_str()?;
    let kind = obj.get("kind")?.as_str()?;
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    Some((group.to_string(), version.to_string(), kind.to_string()))
}

fn record(old: Option<&Value>, new: &mut Value, manager: &str, now: &str, scope: Scope) {
    let old_entries = old.map(managed_fields::read).unwrap_or_default();
    let mut entries = match new.pointer("/metadata/managedFields") {
        None | Some(Value::Null) => old_entries,
        Some(Value::Array(list)) if list.is_empty() => old_entries,
        Some(given) if old.and_then(|o| o.pointer("/metadata/managedFields")) == Some(given) => {
            old_entries
        }
        Some(given) => managed_fields::parse(given).unwrap_or_default(),
    };

    let names = object_kind(new).or_else(|| old.and_then(object_kind));
    let (group, version, kind) = names.unwrap_or_default();
    let gvk = GroupVersionKindRef {
        group: &group,
        version: &version,
        kind: &kind,
    };
    let schema: FieldSchema = merge_keys::root(&gvk);
    let before = old
        .map(|o| part_for_record(o, scope))
        .unwrap_or_else(|| json!({}));
    let after = part_for_record(new, scope);
    let cmp = typed::compare(&before, &after, schema);
    let changed = ownable(cmp.added.union(&cmp.modified));
    let removed = cmp.removed;

    let api_version = if group.is_empty() {
        version.clone()
    } else {
        format!("{group}/{version}")
    };
    let subresource = scope.subresource();
    let mine = entries
        .iter()
        .position(|e| e.is(manager, UPDATE, subresource, &api_version));
    for (i, e) in entries.iter_mut().enumerate() {
        if Some(i) != mine {
            e.fields = e.fields.difference(&changed);
        }
        e.fields = e.fields.difference(&removed);
    }
    if !changed.is_empty() {
        match mine {
            Some(i) => {
                let e = &mut entries[i];
                e.fields.union_in_place(&changed);
                e.time = Some(now.to_string());
            }
            None => entries.push(ManagedEntry {
                manager: manager.to_string(),
                operation: UPDATE.to_string(),
                api_version,
                time: Some(now.to_string()),
                subresource: subresource.to_string(),
                fields: changed,
            }),
        }
    }
    managed_fields::write(new, entries);
}

/// What a write in `scope` is compared on: the whole object (without managed fields) for
/// the main resource, only `status` for the status subresource.
fn part_for_record(obj: &Value, scope: Scope) -> Value {
    let body = managed_fields::without_managed_fields(obj);
    match scope {
        Scope::Main => body,
        Scope::Status => Scope::Status.part(&body),
    }
}

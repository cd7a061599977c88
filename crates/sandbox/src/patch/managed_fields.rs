//! `metadata.managedFields`: reading, writing and ordering the field managers' entries.

use serde_json::{Map, Value, json};

use super::fields_v1::{FieldSet, FieldsV1Error, PathElement};

pub(crate) const APPLY: &str = "Apply";
pub(crate) const UPDATE: &str = "Update";

/// One entry of `metadata.managedFields`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ManagedEntry {
    pub manager: String,
    pub operation: String,
    pub api_version: String,
    pub time: Option<String>,
    /// `""` for the main resource, `"status"` for the status subresource.
    pub subresource: String,
    pub fields: FieldSet,
}

impl ManagedEntry {
    /// Whether this entry is the one a write by (manager, operation, subresource) records into.
    /// Update entries are also per API version; an applier keeps one entry across versions.
    pub(crate) fn is(
        &self,
        manager: &str,
        operation: &str,
        subresource: &str,
        api_version: &str,
    ) -> bool {
        self.manager == manager
            && self.operation == operation
            && self.subresource == subresource
            && (operation == APPLY || self.api_version == api_version)
    }

    fn to_json(&self) -> Value {
        let mut entry = Map::new();
        entry.insert("manager".into(), json!(self.manager));
        entry.insert("operation".into(), json!(self.operation));
        entry.insert("apiVersion".into(), json!(self.api_version));
        if let Some(time) = &self.time {
            entry.insert("time".into(), json!(time));
        }
        entry.insert("fieldsType".into(), json!("FieldsV1"));
        entry.insert("fieldsV1".into(), self.fields.to_fields_v1());
        if !self.subresource.is_empty() {
            entry.insert("subresource".into(), json!(self.subresource));
        }
        Value::Object(entry)
    }

    fn from_json(v: &Value) -> Result<ManagedEntry, ManagedFieldsError> {
        let text = |key: &str| v.get(key).and_then(Value::as_str).map(str::to_string);
        let manager = text("manager")
            .filter(|m| !m.is_empty())
            .ok_or(ManagedFieldsError::NoManager)?;
        let operation = text("operation").ok_or(ManagedFieldsError::NoOperation)?;
        if operation != APPLY && operation != UPDATE {
            return Err(ManagedFieldsError::UnknownOperation(operation));
        }
        let fields_type = text("fieldsType");
        let fields = match (fields_type.as_deref(), v.get("fieldsV1")) {
            (_, None) => FieldSet::new(),
            (Some("FieldsV1"), Some(f)) => FieldSet::from_fields_v1(f)?,
            (_, Some(_)) => return Err(ManagedFieldsError::UnsupportedFieldsType(fields_type)),
        };
        Ok(ManagedEntry {
            manager,
            operation,
            api_version: text("apiVersion").unwrap_or_default(),
            time: text("time"),
            subresource: text("subresource").unwrap_or_default(),
            fields,
        })
    }
}

/// A `managedFields` list that cannot be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ManagedFieldsError {
    #[error("managedFields must be a list, found {0}")]
    NotAList(String),
    #[error("entry without manager")]
    NoManager,
    #[error("entry without operation")]
    NoOperation,
    #[error("unknown operation {0:?}")]
    UnknownOperation(String),
    #[error("unsupported fieldsType {0:?}")]
    UnsupportedFieldsType(Option<String>),
    #[error(transparent)]
    Fields(#[from] FieldsV1Error),
}

/// Parses a `managedFields` list.
pub(crate) fn parse(list: &Value) -> Result<Vec<ManagedEntry>, ManagedFieldsError> {
    match list {
        Value::Null => Ok(Vec::new()),
        Value::Array(items) => items.iter().map(ManagedEntry::from_json).collect(),
        other => Err(ManagedFieldsError::NotAList(other.to_string())),
    }
}

/// The entries of `obj`. Entries that cannot be decoded read as none at all: the API server
/// likewise resets managed fields it cannot decode instead of failing the write.
pub(crate) fn read(obj: &Value) -> Vec<ManagedEntry> {
    obj.pointer("/metadata/managedFields")
        .map(|list| parse(list).unwrap_or_default())
        .unwrap_or_default()
}

/// `obj` without `metadata.managedFields`.
pub(crate) fn without_managed_fields(obj: &Value) -> Value {
    let mut out = obj.clone();
    if let Some(Value::Object(meta)) = out.get_mut("metadata") {
        meta.shift_remove("managedFields");
    }
    out
}

/// Stores `entries` (those owning anything) in `obj`, in the API server's order: by
/// operation, time, manager, API version and subresource.
pub(crate) fn write(obj: &mut Value, mut entries: Vec<ManagedEntry>) {
    entries.retain(|e| !e.fields.is_empty());
    entries.sort_by(|a, b| {
        (
            &a.operation,
            &a.time,
            &a.manager,
            &a.api_version,
            &a.subresource,
        )
            .cmp(&(
                &b.operation,
                &b.time,
                &b.manager,
                &b.api_version,
                &b.subresource,
            ))
    });
    let Value::Object(root) = obj else { return };
    if entries.is_empty() {
        if let Some(Value::Object(meta)) = root.get_mut("metadata") {
            meta.shift_remove("managedFields");
        }
        return;
    }
    let meta = root
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(meta) = meta {
        meta.insert(
            "managedFields".into(),
            Value::Array(entries.iter().map(ManagedEntry::to_json).collect()),
        );
    }
}

/// Fields the API server sets itself and never attributes to a manager.
const SERVER_FIELDS: &[&[&str]] = &[
    &["apiVersion"],
    &["kind"],
    &["metadata", "name"],
    &["metadata", "namespace"],
    &["metadata", "uid"],
    &["metadata", "resourceVersion"],
    &["metadata", "generation"],
    &["metadata", "creationTimestamp"],
    &["metadata", "deletionTimestamp"],
    &["metadata", "deletionGracePeriodSeconds"],
    &["metadata", "selfLink"],
    &["metadata", "managedFields"],
];

/// `set` without the server-set fields.
pub(crate) fn ownable(mut set: FieldSet) -> FieldSet {
    for path in SERVER_FIELDS {
        let path: Vec<PathElement> = path
            .iter()
            .map(|f| PathElement::Field(f.to_string()))
            .collect();
        set.remove_subtree(&path);
    }
    let mut metadata_only = FieldSet::new();
    metadata_only.insert(&[PathElement::Field("metadata".into())]);
    set.difference(&metadata_only)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_apply_before_update_then_by_time() {
        let entry = |manager: &str, op: &str, time: &str| {
            let mut fields = FieldSet::new();
            fields.insert(&[PathElement::Field("data".into())]);
            ManagedEntry {
                manager: manager.into(),
                operation: op.into(),
                api_version: "v1".into(),
                time: Some(time.into()),
                subresource: String::new(),
                fields,
            }
        };
        let mut obj = json!({"metadata": {"name": "x"}});
        write(
            &mut obj,
            vec![
                entry("b", UPDATE, "2024-01-01T00:00:00Z"),
                entry("z", APPLY, "2024-01-02T00:00:00Z"),
                entry("a", APPLY, "2024-01-01T00:00:00Z"),
            ],
        );
        let managers: Vec<&str> = obj["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["manager"].as_str().unwrap())
            .collect();
        assert_eq!(managers, ["a", "z", "b"]);
        assert_eq!(read(&obj).len(), 3);
    }

    #[test]
    fn undecodable_entries_read_as_none() {
        let obj = json!({"metadata": {"managedFields": [{}]}});
        assert!(read(&obj).is_empty());
        assert!(parse(&json!([{"manager": "m", "operation": "Patch"}])).is_err());
    }

    #[test]
    fn server_fields_are_not_ownable() {
        let mut set = FieldSet::new();
        set.insert(&[
            PathElement::Field("metadata".into()),
            PathElement::Field("name".into()),
        ]);
        set.insert(&[PathElement::Field("kind".into())]);
        set.insert(&[
            PathElement::Field("data".into()),
            PathElement::Field("k".into()),
        ]);
        let kept = ownable(set);
        assert_eq!(kept.members().len(), 1);
    }
}

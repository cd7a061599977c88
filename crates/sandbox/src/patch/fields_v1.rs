//! Sets of field paths and their `FieldsV1` encoding in `metadata.managedFields`.
//!
//! A path is a sequence of elements: `f:<name>` (an object field), `k:<json>` (an item of an
//! associative list, by its key fields), `v:<json>` (a member of a set of scalars) and
//! `i:<n>` (a list index; never produced here, kept when read). In the encoding, a node's
//! children are nested objects and `".": {}` marks a node that is itself a member while
//! also having children; a member without children is `{}`.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::{Map, Value};

/// One step of a field path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum PathElement {
    Field(String),
    /// Canonical compact JSON object of the key fields, sorted by name.
    Key(String),
    /// Canonical compact JSON of the scalar.
    Value(String),
    Index(usize),
}

impl PathElement {
    /// The key element of an associative list item from its key fields.
    pub(crate) fn key(fields: BTreeMap<&str, Value>) -> PathElement {
        let object: Map<String, Value> = fields
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        PathElement::Key(Value::Object(object).to_string())
    }

    /// The element of a set member.
    pub(crate) fn value(v: &Value) -> PathElement {
        PathElement::Value(v.to_string())
    }

    fn encode(&self) -> String {
        match self {
            PathElement::Field(name) => format!("f:{name}"),
            PathElement::Key(json) => format!("k:{json}"),
            PathElement::Value(json) => format!("v:{json}"),
            PathElement::Index(i) => format!("i:{i}"),
        }
    }

    fn decode(s: &str) -> Result<PathElement, FieldsV1Error> {
        let canonical = |json: &str| -> Result<String, FieldsV1Error> {
            let v: Value = serde_json::from_str(json).map_err(|source| FieldsV1Error::BadJson {
                element: s.to_owned(),
                source,
            })?;
            Ok(sorted(v).to_string())
        };
        match s.split_at_checked(2) {
            Some(("f:", name)) => Ok(PathElement::Field(name.to_string())),
            Some(("k:", json)) => Ok(PathElement::Key(canonical(json)?)),
            Some(("v:", json)) => Ok(PathElement::Value(canonical(json)?)),
            Some(("i:", n)) => {
                n.parse()
                    .map(PathElement::Index)
                    .map_err(|_| FieldsV1Error::BadIndex {
                        element: s.to_owned(),
                    })
            }
            _ => Err(FieldsV1Error::UnknownElement {
                element: s.to_owned(),
            }),
        }
    }
}

/// A `fieldsV1` value that cannot be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FieldsV1Error {
    #[error("bad path element {element:?}: {source}")]
    BadJson {
        element: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("bad list index in path element {element:?}")]
    BadIndex { element: String },
    #[error("unknown path element {element:?}")]
    UnknownElement { element: String },
    #[error("fieldsV1 node must be an object, found {found}")]
    NotAnObject { found: String },
}

/// Sorts object keys recursively so equal keys encode equally.
fn sorted(v: Value) -> Value {
    match v {
        Value::Object(map) => {
            let ordered: BTreeMap<String, Value> =
                map.into_iter().map(|(k, v)| (k, sorted(v))).collect();
            Value::Object(ordered.into_iter().collect())
        }
        other => other,
    }
}

/// The API server's notation for a path, used in conflict messages:
/// `.spec.containers[name="app"].image`, `.metadata.finalizers[="x"]`.
pub(crate) struct PathDisplay<'a>(pub &'a [PathElement]);

impl fmt::Display for PathDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for pe in self.0 {
            match pe {
                PathElement::Field(name) => write!(f, ".{name}")?,
                PathElement::Key(json) => {
                    let fields: Vec<String> = match serde_json::from_str::<Value>(json) {
                        Ok(Value::Object(map)) => {
                            map.iter().map(|(k, v)| format!("{k}={v}")).collect()
                        }
                        _ => vec![json.clone()],
                    };
                    write!(f, "[{}]", fields.join(","))?
                }
                PathElement::Value(json) => write!(f, "[={json}]")?,
                PathElement::Index(i) => write!(f, "[{i}]")?,
            }
        }
        Ok(())
    }
}

/// A set of field paths, stored as a tree.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FieldSet {
    member: bool,
    children: BTreeMap<PathElement, FieldSet>,
}

impl FieldSet {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Adds `path` (the empty path is the root itself).
    pub(crate) fn insert(&mut self, path: &[PathElement]) {
        let mut node = self;
        for pe in path {
            node = node.children.entry(pe.clone()).or_default();
        }
        node.member = true;
    }

    pub(crate) fn is_member(&self) -> bool {
        self.member
    }

    pub(crate) fn child(&self, pe: &PathElement) -> Option<&FieldSet> {
        self.children.get(pe)
    }

    pub(crate) fn children(&self) -> impl Iterator<Item = (&PathElement, &FieldSet)> {
        self.children.iter()
    }

    /// Drops `path` and everything beneath it.
    pub(crate) fn remove_subtree(&mut self, path: &[PathElement]) {
        let Some((last, parents)) = path.split_last() else {
            *self = FieldSet::new();
            return;
        };
        let mut node = self;
        for pe in parents {
            match node.children.get_mut(pe) {
                Some(child) => node = child,
                None => return,
            }
        }
        node.children.remove(last);
    }

    /// No path at all is a member.
    pub(crate) fn is_empty(&self) -> bool {
        !self.member && self.children.values().all(FieldSet::is_empty)
    }

    pub(crate) fn union(&self, other: &FieldSet) -> FieldSet {
        let mut out = self.clone();
        out.union_in_place(other);
        out
    }

    pub(crate) fn union_in_place(&mut self, other: &FieldSet) {
        self.member |= other.member;
        for (pe, child) in &other.children {
            self.children
                .entry(pe.clone())
                .or_default()
                .union_in_place(child);
        }
    }

    /// Members of `self` that are not members of `other`.
    pub(crate) fn difference(&self, other: &FieldSet) -> FieldSet {
        self.combine(Some(other), &|a, b| a && !b)
    }

    /// Members of both.
    pub(crate) fn intersection(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet {
            member: self.member && other.member,
            children: BTreeMap::new(),
        };
        for (pe, child) in &self.children {
            if let Some(theirs) = other.children.get(pe) {
                let both = child.intersection(theirs);
                if !both.is_empty() {
                    out.children.insert(pe.clone(), both);
                }
            }
        }
        out
    }

    fn combine(&self, other: Option<&FieldSet>, keep: &dyn Fn(bool, bool) -> bool) -> FieldSet {
        let mut out = FieldSet {
            member: keep(self.member, other.is_some_and(|o| o.member)),
            children: BTreeMap::new(),
        };
        for (pe, child) in &self.children {
            let theirs = other.and_then(|o| o.children.get(pe));
            let kept = child.combine(theirs, keep);
            if !kept.is_empty() {
                out.children.insert(pe.clone(), kept);
            }
        }
        out
    }

    /// Every member path, depth first in element order.
    pub(crate) fn members(&self) -> Vec<Vec<PathElement>> {
        let mut out = Vec::new();
        let mut prefix = Vec::new();
        self.collect_members(&mut prefix, &mut out);
        out
    }

    fn collect_members(&self, prefix: &mut Vec<PathElement>, out: &mut Vec<Vec<PathElement>>) {
        if self.member {
            out.push(prefix.clone());
        }
        for (pe, child) in &self.children {
            prefix.push(pe.clone());
            child.collect_members(prefix, out);
            prefix.pop();
        }
    }

    /// The `fieldsV1` encoding.
    pub(crate) fn to_fields_v1(&self) -> Value {
        let mut map = Map::new();
        if self.member && !self.children.is_empty() {
            map.insert(".".to_string(), Value::Object(Map::new()));
        }
        for (pe, child) in &self.children {
            if !child.is_empty() {
                map.insert(pe.encode(), child.to_fields_v1());
            }
        }
        Value::Object(map)
    }

    /// Reads a `fieldsV1` value. The root node itself is never a member.
    pub(crate) fn from_fields_v1(v: &Value) -> Result<FieldSet, FieldsV1Error> {
        let mut set = Self::decode_node(v)?;
        set.member = false;
        Ok(set)
    }

    fn decode_node(v: &Value) -> Result<FieldSet, FieldsV1Error> {
        let Value::Object(map) = v else {
            return Err(FieldsV1Error::NotAnObject {
                found: v.to_string(),
            });
        };
        let mut node = FieldSet {
            member: map.is_empty(),
            children: BTreeMap::new(),
        };
        for (k, child) in map {
            if k == "." {
                node.member = true;
            } else {
                node.children
                    .insert(PathElement::decode(k)?, Self::decode_node(child)?);
            }
        }
        Ok(node)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn field(name: &str) -> PathElement {
        PathElement::Field(name.to_string())
    }

    #[test]
    fn round_trips_the_api_server_encoding() {
        let v = json!({
            "f:metadata": {"f:labels": {"f:app": {}}},
            "f:spec": {
                "f:replicas": {},
                "f:template": {"f:spec": {"f:containers": {
                    "k:{\"name\":\"nginx\"}": {".": {}, "f:image": {}, "f:name": {}}
                }}}
            },
            "f:metadata2": {"f:finalizers": {"v:\"a\"": {}}}
        });
        let set = FieldSet::from_fields_v1(&v).unwrap();
        assert_eq!(set.to_fields_v1(), sorted(v));
        assert!(
            set.members()
                .contains(&vec![field("spec"), field("replicas")])
        );
    }

    #[test]
    fn key_elements_are_canonical_whatever_the_input_order() {
        let a = PathElement::decode("k:{\"protocol\":\"TCP\",\"containerPort\":80}").unwrap();
        let mut fields = BTreeMap::new();
        fields.insert("containerPort", json!(80));
        fields.insert("protocol", json!("TCP"));
        assert_eq!(a, PathElement::key(fields));
        assert_eq!(a.encode(), "k:{\"containerPort\":80,\"protocol\":\"TCP\"}");
    }

    #[test]
    fn difference_keeps_only_members_missing_from_the_other_set() {
        let mut a = FieldSet::new();
        a.insert(&[field("spec"), field("replicas")]);
        a.insert(&[field("spec"), field("paused")]);
        let mut b = FieldSet::new();
        b.insert(&[field("spec"), field("replicas")]);
        let d = a.difference(&b);
        assert_eq!(d.members(), vec![vec![field("spec"), field("paused")]]);
        assert_eq!(a.intersection(&b), b);
        assert!(b.difference(&a).is_empty());
    }

    #[test]
    fn displays_paths_like_the_api_server() {
        let path = vec![
            field("spec"),
            field("containers"),
            PathElement::Key("{\"name\":\"app\"}".to_string()),
            field("image"),
        ];
        assert_eq!(
            PathDisplay(&path).to_string(),
            ".spec.containers[name=\"app\"].image"
        );
        let set = vec![field("finalizers"), PathElement::value(&json!("x"))];
        assert_eq!(PathDisplay(&set).to_string(), ".finalizers[=\"x\"]");
    }

    #[test]
    fn rejects_unknown_elements() {
        assert!(FieldSet::from_fields_v1(&json!({"x:y": {}})).is_err());
        assert!(FieldSet::from_fields_v1(&json!({"f:a": 1})).is_err());
    }
}

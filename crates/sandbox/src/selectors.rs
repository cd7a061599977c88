//! Label selectors (equality- and set-based) and field selectors, parsed from the query string
//! the way the API server reads `labelSelector` and `fieldSelector`.

use serde_json::Value;

use super::meta;
use super::resources::ResourceInfo;

/// A parsed `labelSelector` (the workspace's one parser, `label-selector`); the empty selector
/// matches everything.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LabelSelector(label_selector::LabelSelector);

/// A `labelSelector` or `fieldSelector` the server refuses (400), in the API server's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error(transparent)]
    Label(#[from] label_selector::SelectorError),
    #[error("invalid selector: '{selector}'; can't understand '{part}'")]
    Unreadable { selector: String, part: String },
    #[error("field label not supported: {field}")]
    UnsupportedField { field: String },
}

impl LabelSelector {
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        Ok(Self(label_selector::LabelSelector::parse(s)?))
    }

    pub fn matches(&self, obj: &Value) -> bool {
        self.0.matches(|k| meta::label(obj, k))
    }
}

/// A parsed `fieldSelector`: `field=value`, `field==value`, `field!=value`, comma-separated.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FieldSelector(Vec<(String, bool, String)>);

/// Fields a resource can be selected by besides `metadata.name` and `metadata.namespace`
/// (the subset of the real server's per-kind field labels that OLM and kubectl use).
fn extra_fields(res: &ResourceInfo) -> &'static [&'static str] {
    match (res.group.as_str(), res.kind.as_str()) {
        ("", "Pod") => &["status.phase", "spec.nodeName", "spec.serviceAccountName"],
        ("", "Event") => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "type",
            "source",
        ],
        ("events.k8s.io", "Event") => &[
            "regarding.kind",
            "regarding.namespace",
            "regarding.name",
            "regarding.uid",
            "reason",
            "type",
        ],
        ("", "Secret") => &["type"],
        ("", "Namespace") => &["status.phase"],
        _ => &[],
    }
}

fn field_value(obj: &Value, path: &str) -> String {
    let mut cur = obj;
    for part in path.split('.') {
        match cur.get(part) {
            Some(v) => cur = v,
            None => return String::new(),
        }
    }
    match cur {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

impl FieldSelector {
    pub fn parse(s: &str, res: &ResourceInfo) -> Result<Self, SelectorError> {
        if s.trim().is_empty() {
            return Ok(Self::default());
        }
        let mut reqs = Vec::new();
        for part in s.split(',') {
            let part = part.trim();
            let (field, eq, value) = if let Some((f, v)) = part.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = part.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = part.split_once('=') {
                (f, true, v)
            } else {
                return Err(SelectorError::Unreadable {
                    selector: s.to_owned(),
                    part: part.to_owned(),
                });
            };
            let field = field.trim();
            let known = matches!(field, "metadata.name" | "metadata.namespace")
                || extra_fields(res).contains(&field);
            if !known {
                return Err(SelectorError::UnsupportedField {
                    field: field.to_owned(),
                });
            }
            let stored = super::conversion::storage_field_path(res, field);
            reqs.push((stored, eq, value.trim().to_string()));
        }
        Ok(FieldSelector(reqs))
    }

    pub fn matches(&self, obj: &Value) -> bool {
        self.0
            .iter()
            .all(|(field, eq, value)| (field_value(obj, field) == *value) == *eq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(labels: Value) -> Value {
        json!({"metadata": {"name": "a", "namespace": "ns1", "labels": labels}, "status": {"phase": "Running"}})
    }

    #[test]
    fn label_selectors_read_the_objects_labels() {
        let o = obj(json!({"app": "web", "n": "5"}));
        assert!(LabelSelector::parse("app=web,n>3").unwrap().matches(&o));
        assert!(!LabelSelector::parse("app in (db)").unwrap().matches(&o));
        assert!(LabelSelector::parse("").unwrap().matches(&o));
        assert!(LabelSelector::parse("app in web").is_err());
    }

    #[test]
    fn field_selectors_on_name_namespace_and_kind_fields() {
        let pods = crate::resources::builtins()
            .into_iter()
            .find(|r| r.kind == "Pod")
            .unwrap();
        let cms = crate::resources::builtins()
            .into_iter()
            .find(|r| r.kind == "ConfigMap")
            .unwrap();
        let o = obj(json!({}));
        assert!(
            FieldSelector::parse("metadata.name=a,metadata.namespace==ns1", &cms)
                .unwrap()
                .matches(&o)
        );
        assert!(
            !FieldSelector::parse("metadata.name!=a", &cms)
                .unwrap()
                .matches(&o)
        );
        assert!(
            FieldSelector::parse("status.phase=Running", &pods)
                .unwrap()
                .matches(&o)
        );
        assert_eq!(
            FieldSelector::parse("status.phase=Running", &cms)
                .unwrap_err()
                .to_string(),
            "field label not supported: status.phase"
        );
    }
}

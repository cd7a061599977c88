//! Label selectors (equality- and set-based) and field selectors, parsed from the query string
//! the way the API server reads `labelSelector` and `fieldSelector`.

use serde_json::Value;

use super::meta;
use super::resources::ResourceInfo;

#[derive(Debug, Clone, PartialEq)]
enum Requirement {
    Exists(String),
    NotExists(String),
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    GreaterThan(String, i64),
    LessThan(String, i64),
}

/// A parsed `labelSelector`; the empty selector matches everything.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LabelSelector(Vec<Requirement>);

/// Splits on commas that are not inside `( … )`.
fn split_top_level(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

/// A `labelSelector` or `fieldSelector` the server refuses (400), in the API server's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error("unable to parse requirement: {requirement:?}")]
    Requirement { requirement: String },
    #[error("unable to parse requirement: {requirement:?}: expected ( values )")]
    ValueSet { requirement: String },
    #[error("invalid selector: '{selector}'; can't understand '{part}'")]
    Unreadable { selector: String, part: String },
    #[error("field label not supported: {field}")]
    UnsupportedField { field: String },
}

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

fn value_set(rest: &str, req: &str) -> Result<Vec<String>, SelectorError> {
    let inner = rest
        .trim()
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| SelectorError::ValueSet {
            requirement: req.to_owned(),
        })?;
    Ok(inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect())
}

fn parse_requirement(req: &str) -> Result<Requirement, SelectorError> {
    let r = req.trim();
    let bad = || SelectorError::Requirement {
        requirement: r.to_owned(),
    };
    if let Some(key) = r.strip_prefix('!') {
        let key = key.trim();
        return valid_key(key)
            .then(|| Requirement::NotExists(key.into()))
            .ok_or_else(bad);
    }
    for (op, ctor) in [("!=", 0), ("==", 1), ("=", 1), (">", 2), ("<", 3)] {
        if let Some((k, v)) = r.split_once(op) {
            let (k, v) = (k.trim(), v.trim());
            if !valid_key(k) {
                return Err(bad());
            }
            return Ok(match ctor {
                0 => Requirement::NotEquals(k.into(), v.into()),
                1 => Requirement::Equals(k.into(), v.into()),
                2 => Requirement::GreaterThan(k.into(), v.parse().map_err(|_| bad())?),
                _ => Requirement::LessThan(k.into(), v.parse().map_err(|_| bad())?),
            });
        }
    }
    let mut words = r.splitn(2, char::is_whitespace);
    let key = words.next().unwrap_or_default();
    let rest = words.next().unwrap_or_default().trim_start();
    if !valid_key(key) {
        return Err(bad());
    }
    if rest.is_empty() {
        return Ok(Requirement::Exists(key.into()));
    }
    if let Some(set) = rest.strip_prefix("notin") {
        return Ok(Requirement::NotIn(key.into(), value_set(set, r)?));
    }
    if let Some(set) = rest.strip_prefix("in") {
        return Ok(Requirement::In(key.into(), value_set(set, r)?));
    }
    Err(bad())
}

impl LabelSelector {
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        if s.trim().is_empty() {
            return Ok(Self::default());
        }
        split_top_level(s)
            .into_iter()
            .map(parse_requirement)
            .collect::<Result<_, _>>()
            .map(LabelSelector)
    }

    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|req| {
            let get = |k: &str| meta::label(obj, k);
            match req {
                Requirement::Exists(k) => get(k).is_some(),
                Requirement::NotExists(k) => get(k).is_none(),
                Requirement::Equals(k, v) => get(k) == Some(v.as_str()),
                Requirement::NotEquals(k, v) => get(k) != Some(v.as_str()),
                Requirement::In(k, vs) => get(k).is_some_and(|l| vs.iter().any(|v| v == l)),
                Requirement::NotIn(k, vs) => get(k).is_none_or(|l| vs.iter().all(|v| v != l)),
                Requirement::GreaterThan(k, n) => get(k)
                    .and_then(|l| l.parse::<i64>().ok())
                    .is_some_and(|l| l > *n),
                Requirement::LessThan(k, n) => get(k)
                    .and_then(|l| l.parse::<i64>().ok())
                    .is_some_and(|l| l < *n),
            }
        })
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
    fn equality_and_set_based_label_requirements() {
        let o = obj(json!({"app": "web", "tier": "front", "n": "5"}));
        let cases = [
            ("", true),
            ("app=web", true),
            ("app==web,tier=front", true),
            ("app!=web", false),
            ("app in (web, db)", true),
            ("app notin (web)", false),
            ("missing notin (x)", true),
            ("app", true),
            ("!app", false),
            ("!missing", true),
            ("app in (db),tier", false),
            ("n>3,n<6", true),
            ("n>5", false),
        ];
        for (sel, want) in cases {
            assert_eq!(
                LabelSelector::parse(sel).unwrap().matches(&o),
                want,
                "{sel}"
            );
        }
    }

    #[test]
    fn bad_label_selectors_are_errors() {
        for sel in ["app in web", "=x", "a b c", "n>x"] {
            assert!(LabelSelector::parse(sel).is_err(), "{sel}");
        }
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

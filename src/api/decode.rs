//! Reading OLM objects from JSON/YAML with errors that name the object and the field.

use serde::de::DeserializeOwned;
use serde_json::Value;

/// An object that does not fit its Rust type.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[error("{kind} {name}: {path}: {message}")]
pub struct DecodeError {
    /// `kind` of the document, or `object` when it has none.
    pub kind: String,
    /// `metadata.name` (with `namespace/` when set), or `<unnamed>`.
    pub name: String,
    /// Field path such as `.spec.install.spec.deployments[0].spec`, `.` for the root.
    pub path: String,
    pub message: String,
}

/// Deserialises `value` into `T`; on failure the error names the object and the field.
pub fn decode<T: DeserializeOwned>(value: &Value) -> Result<T, DecodeError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        DecodeError {
            kind: value
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or("object")
                .to_owned(),
            name: object_name(value),
            path: if path == "." {
                path
            } else {
                format!(".{path}")
            },
            message: e.into_inner().to_string(),
        }
    })
}

fn object_name(value: &Value) -> String {
    let metadata = value.get("metadata");
    let field = |key: &str| metadata.and_then(|m| m.get(key)).and_then(Value::as_str);
    match (field("namespace"), field("name")) {
        (Some(ns), Some(name)) => format!("{ns}/{name}"),
        (None, Some(name)) => name.to_owned(),
        _ => "<unnamed>".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{ClusterServiceVersion, Subscription};

    #[test]
    fn errors_name_object_and_field() {
        let doc = serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": "demo.v1", "namespace": "demo"},
            "spec": {"displayName": "Demo", "install": {"strategy": "deployment", "spec": {
                "deployments": [{"name": "d", "spec": {"replicas": "three"}}]}}}
        });
        let err = decode::<ClusterServiceVersion>(&doc).unwrap_err();
        assert_eq!(err.kind, "ClusterServiceVersion");
        assert_eq!(err.name, "demo/demo.v1");
        assert_eq!(err.path, ".spec.install.spec.deployments[0].spec.replicas");
        assert!(
            err.to_string()
                .starts_with("ClusterServiceVersion demo/demo.v1: .spec.install"),
            "{err}"
        );
    }

    #[test]
    fn absent_required_strings_read_as_empty_like_go() {
        let doc = serde_json::json!({"kind": "Subscription", "metadata": {"name": "s"}, "spec": {"name": "pkg"}});
        let sub = decode::<Subscription>(&doc).unwrap();
        assert_eq!(sub.spec.source, "");
        assert_eq!(
            serde_json::to_value(&sub).unwrap()["spec"]["sourceNamespace"],
            ""
        );
    }
}

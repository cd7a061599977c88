//! One object of a plan: its identity (group, version, step kind, name) and its manifest.

use serde_json::Value;

use super::error::PlanError;
use super::kinds::StepKind;

/// An object a step creates. `kind` is the *step* kind: a bundle `Secret` is `BundleSecret`
/// (docs/install-plans.md §7.1); the manifest keeps its real kind.
#[derive(Debug, Clone, PartialEq)]
pub struct StepObject {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub name: String,
    pub manifest: Value,
}

impl StepObject {
    /// Reads the identity of manifest `index` of bundle `bundle`.
    pub fn from_manifest(bundle: &str, index: usize, manifest: Value) -> Result<Self, PlanError> {
        let field = |field: &'static str| PlanError::MissingField {
            bundle: bundle.to_owned(),
            index,
            field,
        };
        let api_version = str_at(&manifest, &["apiVersion"]).ok_or_else(|| field("apiVersion"))?;
        let kind = str_at(&manifest, &["kind"]).ok_or_else(|| field("kind"))?;
        let name =
            str_at(&manifest, &["metadata", "name"]).ok_or_else(|| field("metadata.name"))?;
        let (group, version) = split_api_version(api_version);
        Ok(StepObject {
            group: group.to_owned(),
            version: version.to_owned(),
            kind: StepKind::step_kind(kind).to_owned(),
            name: name.to_owned(),
            manifest,
        })
    }

    /// `group/version` or `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    pub fn is_csv(&self) -> bool {
        self.kind == "ClusterServiceVersion"
    }

    pub fn is_crd(&self) -> bool {
        self.kind == "CustomResourceDefinition"
    }
}

/// The manifest with `apiVersion` and `kind` taken from the step when it has none of its own.
/// OLM writes the RBAC it derives from a CSV's permissions (ServiceAccounts, Roles and their
/// bindings) into a plan's steps without them: its executor reads the type from the step
/// (docs/migrating-from-olm.md, "InstallPlans OLM made"). The API server refuses an object
/// without a type, so a plan OLM resolved is completed from the step's group, version and kind.
pub fn with_step_type(mut manifest: Value, group: &str, version: &str, step_kind: &str) -> Value {
    let Some(map) = manifest.as_object_mut() else {
        return manifest;
    };
    let missing = |map: &serde_json::Map<String, Value>, key: &str| {
        map.get(key)
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
    };
    if missing(map, "apiVersion") && !version.is_empty() {
        let api_version = if group.is_empty() {
            version.to_owned()
        } else {
            format!("{group}/{version}")
        };
        map.insert("apiVersion".into(), api_version.into());
    }
    if missing(map, "kind") && !step_kind.is_empty() {
        map.insert(
            "kind".into(),
            StepKind::manifest_kind(step_kind).to_owned().into(),
        );
    }
    manifest
}

/// `("apps", "v1")` for `apps/v1`, `("", "v1")` for `v1`.
pub fn split_api_version(api_version: &str) -> (&str, &str) {
    api_version.split_once('/').unwrap_or(("", api_version))
}

/// A non-empty string at `path`.
pub fn str_at<'a>(value: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter()
        .try_fold(value, |v, key| v.get(key))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_identity_and_renames_bundle_secrets() {
        let secret = StepObject::from_manifest(
            "op.v1",
            2,
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"}}),
        )
        .unwrap();
        assert_eq!((secret.group.as_str(), secret.version.as_str()), ("", "v1"));
        assert_eq!(secret.kind, "BundleSecret");
        assert_eq!(secret.api_version(), "v1");
        let err =
            StepObject::from_manifest("op.v1", 3, json!({"apiVersion": "v1", "kind": "ConfigMap"}))
                .unwrap_err();
        assert_eq!(
            err.to_string(),
            "bundle op.v1: manifest #3 has no metadata.name"
        );
    }

    #[test]
    fn a_manifest_without_a_type_takes_the_steps() {
        // The shape of a ServiceAccount step in a plan OLM resolved: no apiVersion, no kind.
        let sa = json!({"metadata": {"name": "op-sa", "creationTimestamp": null}});
        let typed = with_step_type(sa, "", "v1", "ServiceAccount");
        assert_eq!(typed["apiVersion"], "v1");
        assert_eq!(typed["kind"], "ServiceAccount");
        let binding = with_step_type(
            json!({"kind": "", "metadata": {"name": "b"}}),
            "rbac.authorization.k8s.io",
            "v1",
            "RoleBinding",
        );
        assert_eq!(binding["apiVersion"], "rbac.authorization.k8s.io/v1");
        assert_eq!(binding["kind"], "RoleBinding");
        let secret = with_step_type(json!({}), "", "v1", "BundleSecret");
        assert_eq!(secret["kind"], "Secret");
    }

    #[test]
    fn a_manifest_with_a_type_keeps_it() {
        let crd =
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition"});
        assert_eq!(
            with_step_type(crd.clone(), "apiextensions.k8s.io", "v1beta1", "Other"),
            crd
        );
    }
}

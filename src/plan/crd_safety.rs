//! May an existing CRD be replaced by a bundle's? (docs/install-plans.md §7.4)
//!
//! Two checks, both before anything is written: every existing custom resource of a version
//! served by both CRDs must validate against the new schema of that version, and every
//! version in the existing CRD's `status.storedVersions` must still be in the new CRD.

use serde_json::Value;

/// Why a CRD update is refused; the texts are OLM's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CrdUpdateError {
    #[error(
        "error validating existing CRs against new CRD's schema for {crd:?}: error validating {gvk} {object:?}: updated validation is too restrictive: {details}"
    )]
    TooRestrictive {
        crd: String,
        /// `<group>/<version>, Kind=<kind>`, as Go prints a GroupVersionKind.
        gvk: String,
        /// `<namespace>/<name>` (`/<name>` for cluster-scoped resources), as Go prints it.
        object: String,
        details: String,
    },
    #[error(
        "risk of data loss updating {crd:?}: new CRD removes version {version} that is listed as a stored version on the existing CRD"
    )]
    DropsStoredVersion { crd: String, version: String },
}

/// A served version whose existing resources must be checked, with the new schema for it.
#[derive(Debug, Clone, PartialEq)]
pub struct VersionToValidate {
    pub version: String,
    /// `openAPIV3Schema` of the new CRD for this version (`None`: no schema, anything goes).
    pub schema: Option<Value>,
}

/// What passed, possibly with a warning to publish (Warning Event `CRDValidation` on the plan).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CrdUpdateCheck {
    Safe,
    /// Existing resources fail the new schema, but the new CRD converts through a webhook, so
    /// OLM lets the update through and only warns.
    SafeWithWarning(String),
}

/// Versions served by both CRDs whose schema changed: only their resources need listing. When
/// the schemas of all shared versions are unchanged, nothing needs validating.
pub fn versions_to_validate(existing: &Value, new: &Value) -> Vec<VersionToValidate> {
    let old_served = served_versions(existing);
    served_versions(new)
        .into_iter()
        .filter(|v| old_served.contains(v))
        .filter_map(|version| {
            let schema = schema_for(new, &version);
            let unchanged = schema == schema_for(existing, &version);
            (!unchanged).then_some(VersionToValidate { version, schema })
        })
        .collect()
}

/// Checks the update of `existing` (as read from the cluster) to `new` (from the bundle).
/// `resources` are the existing custom resources of the versions [`versions_to_validate`]
/// returned, each listed through its version; `validate` says what is wrong with one object
/// under a schema (empty: valid).
pub fn check_crd_update(
    existing: &Value,
    new: &Value,
    resources: &[(VersionToValidate, Vec<Value>)],
    validate: impl Fn(&Value, &Value) -> Vec<String>,
) -> Result<CrdUpdateCheck, CrdUpdateError> {
    let crd = name(new).to_owned();
    let mut warning = None;
    'versions: for (version, objects) in resources {
        let Some(schema) = &version.schema else {
            continue;
        };
        for object in objects {
            let problems = validate(schema, object);
            if problems.is_empty() {
                continue;
            }
            let error = too_restrictive(&crd, object, &problems);
            if conversion_is_webhook(new) {
                warning = Some(error.to_string());
                break 'versions;
            }
            return Err(error);
        }
    }
    let new_versions = all_versions(new);
    for stored in stored_versions(existing) {
        if !new_versions.contains(&stored) {
            return Err(CrdUpdateError::DropsStoredVersion {
                crd,
                version: stored,
            });
        }
    }
    Ok(warning.map_or(CrdUpdateCheck::Safe, CrdUpdateCheck::SafeWithWarning))
}

fn too_restrictive(crd: &str, object: &Value, problems: &[String]) -> CrdUpdateError {
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let meta = |k: &str| {
        object
            .pointer(&format!("/metadata/{k}"))
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let kind = object
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    CrdUpdateError::TooRestrictive {
        crd: crd.to_owned(),
        gvk: format!("{group}/{version}, Kind={kind}"),
        object: format!("{}/{}", meta("namespace"), meta("name")),
        details: problems.join(", "),
    }
}

fn name(crd: &Value) -> &str {
    crd.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn conversion_is_webhook(crd: &Value) -> bool {
    crd.pointer("/spec/conversion/strategy")
        .and_then(Value::as_str)
        == Some("Webhook")
}

fn versions(crd: &Value) -> &[Value] {
    crd.pointer("/spec/versions")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// v1beta1 CRDs may name a single `spec.version` instead of a `versions` list.
fn legacy_version(crd: &Value) -> Option<String> {
    crd.pointer("/spec/version")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

fn all_versions(crd: &Value) -> Vec<String> {
    let listed: Vec<String> = versions(crd)
        .iter()
        .filter_map(|v| v.get("name").and_then(Value::as_str).map(str::to_owned))
        .collect();
    if listed.is_empty() {
        legacy_version(crd).into_iter().collect()
    } else {
        listed
    }
}

fn served_versions(crd: &Value) -> Vec<String> {
    if versions(crd).is_empty() {
        return legacy_version(crd).into_iter().collect();
    }
    versions(crd)
        .iter()
        .filter(|v| v.get("served").and_then(Value::as_bool).unwrap_or(false))
        .filter_map(|v| v.get("name").and_then(Value::as_str).map(str::to_owned))
        .collect()
}

fn stored_versions(crd: &Value) -> Vec<String> {
    crd.pointer("/status/storedVersions")
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// The schema of `version`: a v1beta1 top-level `spec.validation` wins over per-version ones.
fn schema_for(crd: &Value, version: &str) -> Option<Value> {
    if let Some(global) = crd.pointer("/spec/validation/openAPIV3Schema") {
        return Some(global.clone());
    }
    versions(crd)
        .iter()
        .find(|v| v.get("name").and_then(Value::as_str) == Some(version))
        .and_then(|v| v.pointer("/schema/openAPIV3Schema"))
        .cloned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd(versions: Value, stored: &[&str]) -> Value {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "names": {"plural": "widgets", "kind": "Widget"}, "versions": versions},
            "status": {"storedVersions": stored},
        })
    }

    fn version(name: &str, size_type: &str) -> Value {
        json!({"name": name, "served": true, "storage": true, "schema": {"openAPIV3Schema": {
            "type": "object", "properties": {"spec": {"type": "object", "properties": {"size": {"type": size_type}}}}}}})
    }

    /// Type check only: enough to exercise the logic (the real validator is the API server's).
    fn types_only(schema: &Value, object: &Value) -> Vec<String> {
        let want = schema
            .pointer("/properties/spec/properties/size/type")
            .and_then(Value::as_str);
        match (want, object.pointer("/spec/size")) {
            (Some("integer"), Some(v)) if !v.is_i64() => vec![format!(
                "spec.size: Invalid value: {v}: must be of type integer"
            )],
            _ => vec![],
        }
    }

    #[test]
    fn unchanged_schemas_need_no_listing() {
        let old = crd(json!([version("v1", "string")]), &["v1"]);
        assert!(versions_to_validate(&old, &old.clone()).is_empty());
        let new = crd(json!([version("v1", "integer")]), &[]);
        let todo = versions_to_validate(&old, &new);
        assert_eq!(todo.len(), 1);
        assert_eq!(todo[0].version, "v1");
    }

    #[test]
    fn existing_resource_failing_the_new_schema_refuses_the_update() {
        let old = crd(json!([version("v1", "string")]), &["v1"]);
        let new = crd(json!([version("v1", "integer")]), &[]);
        let todo = versions_to_validate(&old, &new);
        let cr = json!({"apiVersion": "example.com/v1", "kind": "Widget",
                        "metadata": {"name": "w", "namespace": "ns"}, "spec": {"size": "big"}});
        let err = check_crd_update(
            &old,
            &new,
            &[(todo[0].clone(), vec![cr.clone()])],
            types_only,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "error validating existing CRs against new CRD's schema for \"widgets.example.com\": error validating example.com/v1, Kind=Widget \"ns/w\": updated validation is too restrictive: spec.size: Invalid value: \"big\": must be of type integer"
        );
        let mut webhook = new.clone();
        webhook["spec"]["conversion"] = json!({"strategy": "Webhook"});
        let ok =
            check_crd_update(&old, &webhook, &[(todo[0].clone(), vec![cr])], types_only).unwrap();
        assert!(matches!(ok, CrdUpdateCheck::SafeWithWarning(m) if m.contains("too restrictive")));
    }

    #[test]
    fn dropping_a_stored_version_is_refused() {
        let old = crd(
            json!([version("v1alpha1", "string"), version("v1", "string")]),
            &["v1alpha1", "v1"],
        );
        let new = crd(json!([version("v1", "string")]), &[]);
        let err = check_crd_update(&old, &new, &[], types_only).unwrap_err();
        assert_eq!(
            err.to_string(),
            "risk of data loss updating \"widgets.example.com\": new CRD removes version v1alpha1 that is listed as a stored version on the existing CRD"
        );
        let kept = crd(
            json!([version("v1alpha1", "string"), version("v1", "string")]),
            &[],
        );
        assert_eq!(
            check_crd_update(&old, &kept, &[], types_only),
            Ok(CrdUpdateCheck::Safe)
        );
    }

    #[test]
    fn v1beta1_global_validation_applies_to_every_version() {
        let old = crd(json!([version("v1", "string")]), &["v1"]);
        let new = json!({"apiVersion": "apiextensions.k8s.io/v1beta1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"version": "v1", "validation": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}}});
        let todo = versions_to_validate(&old, &new);
        assert_eq!(todo.len(), 1);
        assert!(todo[0].schema.is_some());
    }
}

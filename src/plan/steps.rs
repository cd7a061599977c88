//! A bundle turned into InstallPlan steps (docs/install-plans.md §7.1); the order of a whole
//! plan is `plan::order`.

use crate::api::CatalogRef;
use serde_json::{Map, Value, json};

use super::error::PlanError;
use super::object::{StepObject, str_at};
use super::rbac::rbac_manifests;
use crate::api::keys::PROPERTIES_ANNOTATION;

/// A bundle whose content is known (from `olm.bundle.object` properties / `csvJson`).
#[derive(Debug, Clone)]
pub struct BundleContent {
    /// The bundle (= CSV) name as the catalog lists it.
    pub name: String,
    /// Every manifest of the bundle, the CSV included, in bundle order.
    pub manifests: Vec<Value>,
    /// The bundle's properties (`{type, value}`), projected onto the CSV.
    pub properties: Vec<Value>,
    pub catalog: CatalogRef,
}

/// One step of a plan before it is written to `status.plan`.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedStep {
    /// The CSV the step belongs to.
    pub resolving: String,
    pub catalog: CatalogRef,
    pub object: StepObject,
}

/// The steps installing `bundle` into `namespace` over `replaces` (the CSV being replaced):
/// the CSV, then every other manifest in bundle order, then RBAC from the CSV's permissions.
pub fn bundle_steps(
    bundle: &BundleContent,
    namespace: &str,
    replaces: Option<&str>,
) -> Result<Vec<PlannedStep>, PlanError> {
    if bundle.manifests.is_empty() {
        return Err(PlanError::NoManifests {
            bundle: bundle.name.clone(),
        });
    }
    let csv_index = bundle
        .manifests
        .iter()
        .position(|m| m.get("kind").and_then(Value::as_str) == Some("ClusterServiceVersion"))
        .ok_or_else(|| PlanError::NoCsv {
            bundle: bundle.name.clone(),
            count: bundle.manifests.len(),
        })?;
    let csv = csv_manifest(bundle, &bundle.manifests[csv_index], namespace, replaces)?;
    let csv_name = str_at(&csv, &["metadata", "name"])
        .unwrap_or(&bundle.name)
        .to_owned();
    let step = |object: StepObject| PlannedStep {
        resolving: csv_name.clone(),
        catalog: bundle.catalog.clone(),
        object,
    };
    let mut steps = Vec::with_capacity(bundle.manifests.len() + 4);
    let rbac = rbac_manifests(&csv, &csv_name, namespace)?;
    steps.push(step(StepObject::from_manifest(
        &bundle.name,
        csv_index,
        csv,
    )?));
    for (index, manifest) in bundle.manifests.iter().enumerate() {
        if index != csv_index {
            steps.push(step(StepObject::from_manifest(
                &bundle.name,
                index,
                manifest.clone(),
            )?));
        }
    }
    for manifest in rbac {
        let index = bundle.manifests.len();
        steps.push(step(StepObject::from_manifest(
            &bundle.name,
            index,
            manifest,
        )?));
    }
    Ok(steps)
}

/// The CSV as the plan installs it: in the plan namespace, `spec.replaces` overwritten with
/// the CSV actually replaced (removed for a fresh install), and the bundle's properties in the
/// `operatorframework.io/properties` annotation.
fn csv_manifest(
    bundle: &BundleContent,
    csv: &Value,
    namespace: &str,
    replaces: Option<&str>,
) -> Result<Value, PlanError> {
    // docs/install-plans.md §9: OLM's own wording for a CSV without apiVersion/kind.
    for (field, label) in [("apiVersion", "APIVersion"), ("kind", "Kind")] {
        if str_at(csv, &[field]).is_none() {
            return Err(PlanError::CsvMissing {
                bundle: bundle.name.clone(),
                field: label,
            });
        }
    }
    let mut csv = csv.clone();
    let object = csv.as_object_mut().ok_or_else(|| PlanError::BadField {
        bundle: bundle.name.clone(),
        field: "ClusterServiceVersion".into(),
        reason: "must be an object".into(),
    })?;
    let metadata = object
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(metadata) = metadata.as_object_mut() else {
        return Err(bad(bundle, "metadata", "must be an object"));
    };
    metadata.insert("namespace".into(), namespace.into());
    let annotations = metadata
        .entry("annotations")
        .or_insert_with(|| Value::Object(Map::new()));
    if annotations.is_null() {
        *annotations = Value::Object(Map::new());
    }
    let Some(annotations) = annotations.as_object_mut() else {
        return Err(bad(bundle, "metadata.annotations", "must be a map"));
    };
    let properties = json!({ "properties": bundle.properties }).to_string();
    annotations.insert(PROPERTIES_ANNOTATION.into(), properties.into());
    let spec = object
        .entry("spec")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(spec) = spec.as_object_mut() else {
        return Err(bad(bundle, "spec", "must be an object"));
    };
    match replaces {
        Some(r) if !r.is_empty() => {
            spec.insert("replaces".into(), r.into());
        }
        _ => {
            spec.remove("replaces");
        }
    }
    Ok(csv)
}

fn bad(bundle: &BundleContent, field: &str, reason: &str) -> PlanError {
    PlanError::BadField {
        bundle: bundle.name.clone(),
        field: format!("ClusterServiceVersion {field}"),
        reason: reason.into(),
    }
}

/// The CSV names of a plan in step order (`spec.clusterServiceVersionNames`).
pub fn csv_names(steps: &[PlannedStep]) -> Vec<String> {
    steps
        .iter()
        .filter(|s| s.object.is_csv())
        .map(|s| s.object.name.clone())
        .collect()
}

/// Distinct CatalogSource names of a plan's steps (`status.catalogSources`, no namespaces).
pub fn catalog_source_names(steps: &[PlannedStep]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for s in steps {
        if !names.contains(&s.catalog.name) {
            names.push(s.catalog.name.clone());
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundle() -> BundleContent {
        BundleContent {
            name: "op.v2".into(),
            manifests: vec![
                json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                       "metadata": {"name": "widgets.example.com"}}),
                json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
                       "metadata": {"name": "op.v2", "namespace": "placeholder"},
                       "spec": {"replaces": "op.v0", "install": {"strategy": "deployment", "spec": {
                           "permissions": [{"serviceAccountName": "op", "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}],
                           "deployments": []}}}}),
                json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}),
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}),
            ],
            properties: vec![
                json!({"type": "olm.package", "value": {"packageName": "op", "version": "2.0.0"}}),
            ],
            catalog: CatalogRef {
                name: "cat".into(),
                namespace: "olm".into(),
            },
        }
    }

    #[test]
    fn csv_first_then_manifests_then_rbac() {
        let steps = bundle_steps(&bundle(), "ns", Some("op.v1")).unwrap();
        let kinds: Vec<&str> = steps.iter().map(|s| s.object.kind.as_str()).collect();
        assert_eq!(
            kinds,
            [
                "ClusterServiceVersion",
                "CustomResourceDefinition",
                "BundleSecret",
                "ConfigMap",
                "ServiceAccount",
                "Role",
                "RoleBinding"
            ]
        );
        let csv = &steps[0].object.manifest;
        assert_eq!(
            csv["spec"]["replaces"], "op.v1",
            "replaces is the CSV actually replaced"
        );
        assert_eq!(csv["metadata"]["namespace"], "ns");
        assert_eq!(
            csv["metadata"]["annotations"][PROPERTIES_ANNOTATION],
            r#"{"properties":[{"type":"olm.package","value":{"packageName":"op","version":"2.0.0"}}]}"#
        );
        assert!(
            steps
                .iter()
                .all(|s| s.resolving == "op.v2" && s.catalog.name == "cat")
        );
    }

    #[test]
    fn fresh_install_drops_replaces() {
        let steps = bundle_steps(&bundle(), "ns", None).unwrap();
        assert!(steps[0].object.manifest["spec"].get("replaces").is_none());
    }

    #[test]
    fn csv_without_kind_uses_olms_words() {
        let mut b = bundle();
        b.manifests[1]["apiVersion"] = Value::Null;
        let err = bundle_steps(&b, "ns", None).unwrap_err();
        assert_eq!(err.to_string(), "bundle CSV op.v2 missing APIVersion");
    }
}

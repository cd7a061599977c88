//! Serving CustomResourceDefinitions: which resources a stored CRD makes available, and the
//! checks the real server makes before it accepts a CRD.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::resources::{GroupResource, PrinterColumn, ResourceInfo};

/// The finalizer the API server puts on a CRD being deleted; it is removed once every custom
/// resource of the CRD is gone.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

/// Served versions of every stored CRD, updated whenever a CRD is written.
#[derive(Debug, Default, Clone)]
pub struct CrdRegistry {
    served: BTreeMap<GroupResource, ServedCrd>,
    /// CRD name → the resource it serves.
    by_name: BTreeMap<String, GroupResource>,
    /// CRD name → when it was first stored (kept across updates, dropped on deletion).
    stored_at: BTreeMap<String, Instant>,
    /// How long a new CRD's versions answer 404 while its group is already listed
    /// ([`super::ApiServerOptions::crd_establish_delay`]).
    establish_delay: Duration,
}

#[derive(Debug, Clone)]
pub struct ServedCrd {
    pub versions: Vec<Arc<ResourceInfo>>,
    pub storage_version: String,
    /// The CRD has a deletionTimestamp: reads still work, creates are refused.
    pub terminating: bool,
}

impl CrdRegistry {
    #[cfg(test)]
    pub fn rebuild<'a>(crds: impl Iterator<Item = &'a Value>) -> Self {
        let mut reg = CrdRegistry::default();
        for crd in crds {
            reg.update(super::meta::name(crd).unwrap_or_default(), Some(crd));
        }
        reg
    }

    /// A registry whose new CRDs answer only `delay` after they are stored.
    pub fn with_establish_delay(delay: Duration) -> Self {
        CrdRegistry {
            establish_delay: delay,
            ..CrdRegistry::default()
        }
    }

    /// Serves what CRD `name` now says; `None` when it is gone.
    pub fn update(&mut self, name: &str, crd: Option<&Value>) {
        if let Some(gr) = self.by_name.remove(name) {
            self.served.remove(&gr);
        }
        let Some(crd) = crd else {
            self.stored_at.remove(name);
            return;
        };
        self.stored_at
            .entry(name.to_string())
            .or_insert_with(Instant::now);
        let versions = served_versions(crd);
        let Some(first) = versions.first() else {
            return;
        };
        let gr = first.group_resource();
        let served = ServedCrd {
            storage_version: storage_version(crd).unwrap_or_else(|| first.version.clone()),
            versions,
            terminating: super::meta::is_deleting(crd),
        };
        self.by_name.insert(name.to_string(), gr.clone());
        self.served.insert(gr, served);
    }

    /// Every version of every stored CRD, established or not (the group list shows them).
    pub fn resources(&self) -> impl Iterator<Item = &Arc<ResourceInfo>> {
        self.served.values().flat_map(|s| s.versions.iter())
    }

    /// The versions that answer requests: those of CRDs stored at least the establish delay ago.
    pub fn established_resources(&self) -> impl Iterator<Item = &Arc<ResourceInfo>> {
        self.by_name
            .iter()
            .filter(|(name, _)| self.is_established(name))
            .filter_map(|(_, gr)| self.served.get(gr))
            .flat_map(|s| s.versions.iter())
    }

    fn is_established(&self, name: &str) -> bool {
        self.establish_delay.is_zero()
            || self
                .stored_at
                .get(name)
                .is_none_or(|at| at.elapsed() >= self.establish_delay)
    }

    fn gr_established(&self, gr: &GroupResource) -> bool {
        self.by_name
            .iter()
            .find(|(_, g)| *g == gr)
            .is_none_or(|(name, _)| self.is_established(name))
    }

    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceInfo>> {
        let key = GroupResource {
            group: group.into(),
            resource: plural.into(),
        };
        if !self.gr_established(&key) {
            return None;
        }
        self.served
            .get(&key)?
            .versions
            .iter()
            .find(|r| r.version == version)
            .cloned()
    }

    pub fn get(&self, gr: &GroupResource) -> Option<&ServedCrd> {
        self.served.get(gr)
    }
}

fn storage_version(crd: &Value) -> Option<String> {
    crd.pointer("/spec/versions")?
        .as_array()?
        .iter()
        .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))?
        .get("name")?
        .as_str()
        .map(str::to_string)
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// One `ResourceInfo` per `spec.versions[]` entry with `served: true`.
pub fn served_versions(crd: &Value) -> Vec<Arc<ResourceInfo>> {
    let spec = &crd["spec"];
    let names = &spec["names"];
    let (Some(group), Some(kind), Some(plural)) = (
        spec["group"].as_str(),
        names["kind"].as_str(),
        names["plural"].as_str(),
    ) else {
        return Vec::new();
    };
    let singular = names["singular"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| kind.to_ascii_lowercase());
    let namespaced = spec["scope"].as_str() != Some("Cluster");
    let Some(versions) = spec["versions"].as_array() else {
        return Vec::new();
    };
    versions
        .iter()
        .filter(|v| v["served"].as_bool() == Some(true))
        .filter_map(|v| {
            Some(Arc::new(ResourceInfo {
                group: group.into(),
                version: v["name"].as_str()?.into(),
                kind: kind.into(),
                plural: plural.into(),
                singular: singular.clone(),
                namespaced,
                status_subresource: v.pointer("/subresources/status").is_some(),
                tracks_generation: true,
                short_names: strings(names.get("shortNames")),
                categories: strings(names.get("categories")),
                columns: printer_columns(v),
                schema: v.pointer("/schema/openAPIV3Schema").cloned().map(Arc::new),
                custom: true,
                deprecation_warning: deprecation_warning(group, kind, v),
            }))
        })
        .collect()
}

/// The warning Kubernetes returns for a deprecated CRD version: its `deprecationWarning`, or
/// `<group>/<version> <Kind> is deprecated`.
fn deprecation_warning(group: &str, kind: &str, version: &Value) -> Option<String> {
    if version["deprecated"].as_bool() != Some(true) {
        return None;
    }
    Some(match version["deprecationWarning"].as_str() {
        Some(text) => text.to_owned(),
        None => format!(
            "{group}/{} {kind} is deprecated",
            version["name"].as_str().unwrap_or_default()
        ),
    })
}

fn printer_columns(version: &Value) -> Vec<PrinterColumn> {
    let Some(cols) = version["additionalPrinterColumns"].as_array() else {
        return Vec::new();
    };
    cols.iter()
        .filter_map(|c| {
            Some(PrinterColumn {
                name: c["name"].as_str()?.into(),
                type_: c["type"].as_str().unwrap_or("string").into(),
                json_path: c["jsonPath"].as_str()?.into(),
                description: c["description"].as_str().unwrap_or_default().into(),
                priority: c["priority"].as_i64().unwrap_or(0),
            })
        })
        .collect()
}

/// The validation a CRD gets before it is stored; `Err((field, message))`.
pub fn validate(crd: &Value) -> Result<(), (String, String)> {
    let spec = &crd["spec"];
    let required = |field: &str| (field.to_string(), "Required value".to_string());
    let group = spec["group"]
        .as_str()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| required("spec.group"))?;
    let plural = spec["names"]["plural"]
        .as_str()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| required("spec.names.plural"))?;
    spec["names"]["kind"]
        .as_str()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| required("spec.names.kind"))?;
    let name = super::meta::name(crd).unwrap_or_default();
    if name != format!("{plural}.{group}") {
        return Err((
            "metadata.name".into(),
            format!("Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    match spec["scope"].as_str() {
        Some("Namespaced" | "Cluster") => {}
        other => {
            return Err((
                "spec.scope".into(),
                format!(
                    "Unsupported value: {other:?}: supported values: \"Cluster\", \"Namespaced\""
                ),
            ));
        }
    }
    let versions = spec["versions"]
        .as_array()
        .filter(|v| !v.is_empty())
        .ok_or_else(|| required("spec.versions"))?;
    let storage = versions
        .iter()
        .filter(|v| v["storage"].as_bool() == Some(true))
        .count();
    if storage != 1 {
        return Err((
            "spec.versions".into(),
            format!(
                "Invalid value: must have exactly one version marked as storage version, found {storage}"
            ),
        ));
    }
    for (i, v) in versions.iter().enumerate() {
        if v["name"].as_str().is_none_or(str::is_empty) {
            return Err(required(&format!("spec.versions[{i}].name")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd() -> Value {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {
                "group": "example.com", "scope": "Namespaced",
                "names": {"kind": "Widget", "plural": "widgets", "shortNames": ["wd"]},
                "versions": [
                    {"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                     "additionalPrinterColumns": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}]},
                    {"name": "v1beta1", "served": true, "storage": false},
                    {"name": "v1alpha1", "served": false, "storage": false}
                ]
            }
        })
    }

    #[test]
    fn serves_only_served_versions_with_their_subresources() {
        let v = served_versions(&crd());
        assert_eq!(
            v.iter().map(|r| r.version.as_str()).collect::<Vec<_>>(),
            ["v1", "v1beta1"]
        );
        assert!(v[0].status_subresource && !v[1].status_subresource);
        assert_eq!(v[0].columns[0].json_path, ".spec.size");
        assert_eq!(v[0].short_names, ["wd"]);
        assert_eq!(v[0].singular, "widget");
    }

    #[test]
    fn registry_finds_by_group_version_plural() {
        let c = crd();
        let reg = CrdRegistry::rebuild([&c].into_iter());
        assert!(reg.find("example.com", "v1beta1", "widgets").is_some());
        assert!(reg.find("example.com", "v1alpha1", "widgets").is_none());
        let gr = GroupResource {
            group: "example.com".into(),
            resource: "widgets".into(),
        };
        assert_eq!(reg.get(&gr).unwrap().storage_version, "v1");
    }

    #[test]
    fn validation_names_the_bad_field() {
        assert!(validate(&crd()).is_ok());
        let mut bad = crd();
        bad["metadata"]["name"] = json!("gadgets.example.com");
        assert_eq!(validate(&bad).unwrap_err().0, "metadata.name");
        let mut bad = crd();
        bad["spec"]["versions"][1]["storage"] = json!(true);
        assert_eq!(validate(&bad).unwrap_err().0, "spec.versions");
    }
}

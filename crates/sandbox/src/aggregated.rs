//! APIs the embedded server hands to another handler, as the real API server's aggregation
//! layer hands an APIService's group to its Service: today the PackageManifest API
//! (docs/packagemanifests.md §10). The group shows in discovery like any other.

use serde_json::{Value, json};

/// One group/version served by `router`.
#[derive(Clone)]
pub struct AggregatedApi {
    pub group: String,
    pub version: String,
    /// Its `APIResourceList` (the discovery document the handler also serves).
    pub resource_list: Value,
    pub router: axum::Router,
}

impl std::fmt::Debug for AggregatedApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AggregatedApi")
            .field("group", &self.group)
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

impl AggregatedApi {
    /// Whether `path` is under this API's group.
    pub fn serves(&self, path: &str) -> bool {
        let prefix = format!("/apis/{}", self.group);
        path == prefix || path.starts_with(&format!("{prefix}/"))
    }

    /// Its entry in `/apis`.
    pub fn group_json(&self) -> Value {
        let gv = json!({"groupVersion": format!("{}/{}", self.group, self.version), "version": self.version});
        json!({"name": self.group, "versions": [gv], "preferredVersion": gv})
    }

    /// Its entry in aggregated discovery (`apidiscovery.k8s.io/v2`).
    pub fn aggregated_json(&self) -> Value {
        let listed = self.resource_list["resources"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let resources: Vec<Value> = listed
            .iter()
            .filter(|r| r["name"].as_str().is_some_and(|n| !n.contains('/')))
            .map(|r| {
                let name = r["name"].as_str().unwrap_or_default();
                let gvk = json!({"group": self.group, "version": self.version, "kind": r["kind"]});
                let subresources: Vec<Value> = listed
                    .iter()
                    .filter_map(|s| {
                        let sub = s["name"].as_str()?.strip_prefix(&format!("{name}/"))?;
                        Some(json!({"subresource": sub, "responseKind": gvk, "verbs": s["verbs"]}))
                    })
                    .collect();
                let mut out = json!({
                    "resource": name,
                    "responseKind": gvk,
                    "scope": if r["namespaced"] == json!(true) { "Namespaced" } else { "Cluster" },
                    "singularResource": r["singularName"],
                    "verbs": r["verbs"],
                });
                if r.get("categories").is_some() {
                    out["categories"] = r["categories"].clone();
                }
                if !subresources.is_empty() {
                    out["subresources"] = json!(subresources);
                }
                out
            })
            .collect();
        json!({
            "metadata": {"name": self.group, "creationTimestamp": null},
            "versions": [{"version": self.version, "resources": resources, "freshness": "Current"}],
        })
    }
}

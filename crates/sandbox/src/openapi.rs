//! Minimal OpenAPI v3 documents. They carry no schemas: only, per resource, the PATCH operation
//! with its `x-kubernetes-group-version-kind` and the `fieldValidation` parameter, which is what
//! `kubectl apply` looks for to decide that validation happens on the server (without it,
//! kubectl insists on downloading schemas). Strategic merge patch is not advertised, so kubectl
//! computes its patches from its compiled-in types (built-ins) or as merge patches (CRs).
//! `/openapi/v2` is not served.

use std::sync::Arc;

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::resources::ResourceInfo;

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `/openapi/v3`: one entry per served group-version, with a hash that changes with its content.
pub fn root(resources: &[Arc<ResourceInfo>]) -> Value {
    let mut paths = Map::new();
    for r in resources {
        let path = gv_path(&r.group, &r.version);
        if paths.contains_key(&path) {
            continue;
        }
        let doc = group_version(resources, &r.group, &r.version).unwrap_or(Value::Null);
        let hash: String = Sha256::digest(doc.to_string().as_bytes())
            .iter()
            .take(16)
            .map(|b| format!("{b:02X}"))
            .collect();
        paths.insert(
            path.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{path}?hash={hash}")}),
        );
    }
    json!({"paths": paths})
}

/// `/openapi/v3/api/v1`, `/openapi/v3/apis/{group}/{version}`.
pub fn group_version(resources: &[Arc<ResourceInfo>], group: &str, version: &str) -> Option<Value> {
    let mut paths = Map::new();
    for r in resources
        .iter()
        .filter(|r| r.group == group && r.version == version)
    {
        let prefix = format!("/{}", gv_path(group, version));
        let item = if r.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", r.plural)
        } else {
            format!("{prefix}/{}/{{name}}", r.plural)
        };
        let query = |name: &str| json!({"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": true}});
        paths.insert(item, json!({
            "patch": {
                "operationId": format!("patch{}", r.kind),
                "x-kubernetes-action": "patch",
                "x-kubernetes-group-version-kind": {"group": r.group, "version": r.version, "kind": r.kind},
                "parameters": [query("dryRun"), query("fieldManager"), query("fieldValidation"), query("force")],
                "requestBody": {"content": {
                    "application/json-patch+json": {"schema": {"type": "object"}},
                    "application/merge-patch+json": {"schema": {"type": "object"}},
                    "application/apply-patch+yaml": {"schema": {"type": "object"}}
                }},
                "responses": {"200": {"description": "OK"}}
            }
        }));
    }
    if paths.is_empty() {
        return None;
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (olm-rs sandbox)", "version": "unversioned"},
        "paths": paths,
        "components": {"schemas": {}},
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::builtins;

    #[test]
    fn root_points_at_each_group_version() {
        let root = root(&builtins());
        let url = root["paths"]["apis/apps/v1"]["serverRelativeURL"]
            .as_str()
            .unwrap();
        assert!(url.starts_with("/openapi/v3/apis/apps/v1?hash="), "{url}");
        assert!(root["paths"]["api/v1"].is_object());
    }

    #[test]
    fn patch_operations_advertise_field_validation() {
        let doc = group_version(&builtins(), "apps", "v1").unwrap();
        let op = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
        assert_eq!(op["x-kubernetes-group-version-kind"]["kind"], "Deployment");
        assert!(
            op["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["name"] == "fieldValidation")
        );
        assert!(group_version(&builtins(), "apps", "v9").is_none());
    }
}

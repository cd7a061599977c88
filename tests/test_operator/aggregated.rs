//! A minimal aggregated API server: the discovery documents the kube-apiserver's aggregator
//! reads (`/apis`, `/apis/<group>`, `/apis/<group>/v1`) and one read-only, cluster-scoped
//! resource, `reports`, whose single object names the pod serving it and the operator's version
//! — so a test reading `kubectl get --raw /apis/<group>/<version>/reports` through the aggregator
//! sees which version answered. Group and version are the operator's flags: two packages of the
//! test operator installed side by side need both their own group and their own version, since
//! OLM names the per-API ClusterRoles of an APIService `<plural>-<version>-…` without the group
//! (docs/operator-groups.md §9.1).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};

pub const DEFAULT_GROUP: &str = "api.testop.olm-rs.dev";
pub const DEFAULT_VERSION: &str = "v1";
const RESOURCE: &str = "reports";
const KIND: &str = "Report";

#[derive(Debug, Clone)]
pub struct Api {
    pub group: String,
    pub version: String,
    pub report_name: String,
    pub operator_version: String,
}

impl Api {
    pub fn routes(self) -> Router {
        Router::new()
            .route("/healthz", get(|| async { "ok" }))
            .route("/readyz", get(|| async { "ok" }))
            .route("/apis", get(group_list))
            .route("/apis/{group}", get(group))
            .route("/apis/{group}/{version}", get(resource_list))
            .route("/apis/{group}/{version}/{resource}", get(list))
            .route("/apis/{group}/{version}/{resource}/{name}", get(get_one))
            .with_state(self)
    }

    fn group_version(&self) -> String {
        format!("{}/{}", self.group, self.version)
    }

    fn api_group(&self) -> Value {
        let version = json!({"groupVersion": self.group_version(), "version": self.version});
        json!({
            "name": self.group,
            "versions": [version.clone()],
            "preferredVersion": version,
        })
    }

    fn report(&self) -> Value {
        json!({
            "apiVersion": self.group_version(),
            "kind": KIND,
            "metadata": {"name": self.report_name, "resourceVersion": "1"},
            "spec": {"operatorVersion": self.operator_version},
        })
    }

    /// Whether the path names this group, version and (when given) resource.
    fn serves(&self, group: &str, version: &str, resource: Option<&str>) -> bool {
        group == self.group && version == self.version && resource.is_none_or(|r| r == RESOURCE)
    }
}

type Reply = (StatusCode, Json<Value>);

async fn group_list(State(api): State<Api>) -> Json<Value> {
    Json(json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [api.api_group()]}))
}

async fn group(State(api): State<Api>, Path(group): Path<String>) -> Reply {
    if group != api.group {
        return not_found(&format!("/apis/{group}"));
    }
    let mut body = api.api_group();
    body["kind"] = json!("APIGroup");
    body["apiVersion"] = json!("v1");
    (StatusCode::OK, Json(body))
}

async fn resource_list(
    State(api): State<Api>,
    Path((group, version)): Path<(String, String)>,
) -> Reply {
    if !api.serves(&group, &version, None) {
        return not_found(&format!("/apis/{group}/{version}"));
    }
    (
        StatusCode::OK,
        Json(json!({
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": api.group_version(),
            "resources": [{
                "name": RESOURCE,
                "singularName": "report",
                "namespaced": false,
                "kind": KIND,
                "verbs": ["get", "list"],
            }],
        })),
    )
}

async fn list(
    State(api): State<Api>,
    Path((group, version, resource)): Path<(String, String, String)>,
) -> Reply {
    if !api.serves(&group, &version, Some(&resource)) {
        return not_found(&format!("/apis/{group}/{version}/{resource}"));
    }
    (
        StatusCode::OK,
        Json(json!({
            "apiVersion": api.group_version(),
            "kind": format!("{KIND}List"),
            "metadata": {"resourceVersion": "1"},
            "items": [api.report()],
        })),
    )
}

async fn get_one(
    State(api): State<Api>,
    Path((group, version, resource, name)): Path<(String, String, String, String)>,
) -> Reply {
    if !api.serves(&group, &version, Some(&resource)) || name != api.report_name {
        return not_found(&format!("/apis/{group}/{version}/{resource}/{name}"));
    }
    (StatusCode::OK, Json(api.report()))
}

/// A Kubernetes `Status` for a path this server does not serve.
fn not_found(path: &str) -> Reply {
    (
        StatusCode::NOT_FOUND,
        Json(json!({
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "reason": "NotFound",
            "code": 404,
            "message": format!("{path} is not served here"),
        })),
    )
}

//! The JSON answers the PackageManifest API gives: a body with its status code, and a
//! Kubernetes `Status` for refusals (docs/packagemanifests.md §4, §8). Shared by the request
//! handlers (`api.rs`) and the authorizer (`auth.rs`).

use axum::body::Body;
use axum::response::Response;
use http::{HeaderValue, StatusCode, header};
use serde_json::{Value, json};

/// A `meta/v1` Status answer.
pub fn status(code: u16, reason: &str, message: &str, details: Option<Value>) -> Response {
    let mut body = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": message, "code": code,
    });
    if !reason.is_empty() {
        body["reason"] = json!(reason);
    }
    if let Some(details) = details {
        body["details"] = details;
    }
    json_response(code, &body)
}

/// `body` as JSON with status `code`.
pub fn json_response(code: u16, body: &impl serde::Serialize) -> Response {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    let mut resp = Response::new(Body::from(bytes));
    *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

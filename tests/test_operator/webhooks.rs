//! The two webhooks OLM wires to an operator's Service (docs/certificates.md §4): a validating
//! admission webhook and a CRD conversion webhook, both for the `Gadget` custom resource of the
//! test bundle (e2e/testop/): `v1alpha1` has `spec.size`, `v1` has `spec.replicas`.

use axum::Router;
use axum::routing::post;
use axum::{Json, http::StatusCode};
use serde_json::{Value, json};

pub fn routes() -> Router {
    Router::new()
        .route("/validate", post(validate))
        .route("/convert", post(convert))
}

/// `AdmissionReview` v1: denies an object whose `spec.deny` is `true`, allows every other
/// (a DELETE, which carries no object, included).
async fn validate(Json(review): Json<Value>) -> (StatusCode, Json<Value>) {
    let Some(request) = review.get("request") else {
        return bad_request("an AdmissionReview without a request");
    };
    let uid = request.get("uid").cloned().unwrap_or(Value::Null);
    let object = request.get("object").unwrap_or(&Value::Null);
    let denied = object.pointer("/spec/deny") == Some(&Value::Bool(true));
    let mut response = json!({"uid": uid, "allowed": !denied});
    if denied {
        let name = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        response["status"] = json!({
            "code": 403,
            "reason": "Forbidden",
            "message": format!(
                "olm-rs-test-operator denies {name}: spec.deny is true"
            ),
        });
    }
    (
        StatusCode::OK,
        Json(json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": response,
        })),
    )
}

/// `ConversionReview` v1: each object converted to `desiredAPIVersion`, its metadata kept.
async fn convert(Json(review): Json<Value>) -> (StatusCode, Json<Value>) {
    let Some(request) = review.get("request") else {
        return bad_request("a ConversionReview without a request");
    };
    let uid = request.get("uid").cloned().unwrap_or(Value::Null);
    let desired = request
        .get("desiredAPIVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let objects = request
        .get("objects")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let converted: Result<Vec<Value>, String> = objects
        .into_iter()
        .map(|o| convert_object(o, desired))
        .collect();
    let response = match converted {
        Ok(objects) => json!({
            "uid": uid,
            "convertedObjects": objects,
            "result": {"status": "Success"},
        }),
        Err(message) => json!({
            "uid": uid,
            "convertedObjects": [],
            "result": {"status": "Failure", "message": message},
        }),
    };
    (
        StatusCode::OK,
        Json(json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "ConversionReview",
            "response": response,
        })),
    )
}

/// `group/v1alpha1` `spec.size` ⇄ `group/v1` `spec.replicas`; the same version is returned as
/// it is. Everything but `apiVersion` and that one field is kept.
fn convert_object(mut object: Value, desired: &str) -> Result<Value, String> {
    let from = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let version = |api_version: &str| api_version.rsplit('/').next().unwrap_or("").to_string();
    let (from_version, to_version) = (version(&from), version(desired));
    let (old_field, new_field) = match (from_version.as_str(), to_version.as_str()) {
        (a, b) if a == b => ("", ""),
        ("v1alpha1", "v1") => ("size", "replicas"),
        ("v1", "v1alpha1") => ("replicas", "size"),
        _ => return Err(format!("cannot convert {from} to {desired}")),
    };
    if !old_field.is_empty()
        && let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut)
        && let Some(value) = spec.remove(old_field)
    {
        spec.insert(new_field.to_string(), value);
    }
    match object.as_object_mut() {
        Some(map) => {
            map.insert("apiVersion".into(), Value::String(desired.to_string()));
        }
        None => return Err(format!("an object of {from} is not a JSON object")),
    }
    Ok(object)
}

fn bad_request(message: &str) -> (StatusCode, Json<Value>) {
    (StatusCode::BAD_REQUEST, Json(json!({"message": message})))
}

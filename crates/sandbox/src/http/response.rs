//! Building HTTP responses: JSON bodies and `metav1.Status` errors.

use axum::body::Body;
use axum::response::Response;
use http::{HeaderValue, StatusCode, header};
use serde::Serialize;

use crate::error::ApiError;

pub fn json(code: u16, body: &impl Serialize) -> Response {
    json_with_type(code, body, "application/json")
}

pub fn json_with_type(code: u16, body: &impl Serialize, content_type: &'static str) -> Response {
    let bytes =
        serde_json::to_vec(body).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}").into_bytes());
    let mut resp = Response::new(Body::from(bytes));
    *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}

pub fn error(err: &ApiError) -> Response {
    json(err.code, &err.to_status())
}

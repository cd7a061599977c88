//! Request bodies: reading, decoding (JSON or YAML), and the write/delete options they carry.

use axum::body::Body;
use serde_json::Value;

use super::route::Query;
use crate::error::ApiError;
use crate::objects::{DeleteOptions, Propagation, WriteOptions};

/// Largest request body accepted (the real server's limit is 3 MiB per object; bundles with
/// big CRDs stay well below this).
const MAX_BODY: usize = 32 * 1024 * 1024;

pub async fn read(body: Body) -> Result<bytes::Bytes, ApiError> {
    axum::body::to_bytes(body, MAX_BODY)
        .await
        .map_err(|e| ApiError::bad_request(format!("reading the request body: {e}")))
}

/// Decodes a JSON body, or YAML when the content type says so.
pub fn decode(bytes: &[u8], content_type: Option<&str>) -> Result<Value, ApiError> {
    if let Some(binary) = content_type.filter(|c| c.contains("protobuf") || c.contains("cbor")) {
        // kubectl's `create <generator>` commands send protobuf; only `-f`/`apply` (JSON) work.
        return Err(ApiError::unsupported_media_type(format!(
            "the olm-rs sandbox accepts JSON and YAML request bodies only, not {binary}"
        )));
    }
    let yaml = content_type.is_some_and(|c| c.contains("yaml"));
    if yaml {
        serde_yaml_ng::from_slice(bytes)
            .map_err(|e| ApiError::bad_request(format!("the request body is not valid YAML: {e}")))
    } else {
        serde_json::from_slice(bytes)
            .map_err(|e| ApiError::bad_request(format!("the request body is not valid JSON: {e}")))
    }
}

fn dry_run(q: &Query, body: Option<&Value>) -> bool {
    q.get("dryRun") == Some("All")
        || body
            .and_then(|b| b.get("dryRun"))
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|v| v == "All"))
}

pub fn write_options(q: &Query) -> WriteOptions {
    WriteOptions {
        dry_run: dry_run(q, None),
    }
}

/// DeleteOptions from the query string and/or the JSON body kube and kubectl send.
pub fn delete_options(q: &Query, body: &[u8]) -> Result<DeleteOptions, ApiError> {
    let body: Option<Value> = if body.iter().all(u8::is_ascii_whitespace) {
        None
    } else {
        Some(decode(body, None)?)
    };
    let policy = q.get("propagationPolicy").map(str::to_string).or_else(|| {
        body.as_ref()?
            .get("propagationPolicy")?
            .as_str()
            .map(str::to_string)
    });
    let mut propagation = match policy {
        Some(p) => Some(Propagation::parse(&p).ok_or_else(|| {
            ApiError::bad_request(format!(
                "propagationPolicy: Unsupported value: \"{p}\": supported values: \"Foreground\", \"Background\", \"Orphan\""
            ))
        })?),
        None => None,
    };
    let orphan = q
        .get("orphanDependents")
        .map(|v| v == "true")
        .or_else(|| body.as_ref()?.get("orphanDependents")?.as_bool());
    if propagation.is_none() && orphan == Some(true) {
        propagation = Some(Propagation::Orphan);
    }
    let pre = body.as_ref().and_then(|b| b.get("preconditions"));
    let pre_str = |k: &str| {
        pre.and_then(|p| p.get(k))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    Ok(DeleteOptions {
        propagation,
        precondition_uid: pre_str("uid"),
        precondition_resource_version: pre_str("resourceVersion"),
        write: WriteOptions {
            dry_run: dry_run(q, body.as_ref()),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delete_options_from_body_and_query() {
        let q = Query::parse(Some("propagationPolicy=Foreground"));
        let o = delete_options(&q, b"").unwrap();
        assert_eq!(o.propagation, Some(Propagation::Foreground));
        let q = Query::parse(None);
        let o = delete_options(&q, br#"{"kind":"DeleteOptions","orphanDependents":true,"preconditions":{"uid":"u"},"dryRun":["All"]}"#).unwrap();
        assert_eq!(o.propagation, Some(Propagation::Orphan));
        assert_eq!(o.precondition_uid.as_deref(), Some("u"));
        assert!(o.write.dry_run);
        assert_eq!(
            delete_options(&Query::parse(Some("propagationPolicy=Later")), b"")
                .unwrap_err()
                .code,
            400
        );
    }

    #[test]
    fn yaml_bodies_decode() {
        let v = decode(b"a: 1\nb: [x]\n", Some("application/apply-patch+yaml")).unwrap();
        assert_eq!(v, serde_json::json!({"a": 1, "b": ["x"]}));
        assert_eq!(decode(b"{", None).unwrap_err().code, 400);
    }
}

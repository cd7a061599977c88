//! Helpers shared by the `apiserver_*` integration tests of the embedded API server.

use std::future::Future;
use std::time::Duration;

use serde_json::{Value, json};

/// Polls `f` every 10 ms until it returns `Some`, for at most 5 s; panics naming `what`.
pub async fn eventually<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("timed out waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The HTTP code of a failed kube call (panics if the call succeeded or failed otherwise).
pub fn code<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> u16 {
    match result {
        Err(kube::Error::Api(status)) => status.code,
        other => panic!("expected an API error, got {other:?}"),
    }
}

pub fn status<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> kube::core::Status {
    match result {
        Err(kube::Error::Api(status)) => *status,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// A namespaced `Widget` CRD in group `example.com` with versions v1 (storage, status
/// subresource, printer columns) and v1beta1 (served).
pub fn widget_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "shortNames": ["wd"], "listKind": "WidgetList"},
            "versions": [
                {
                    "name": "v1", "served": true, "storage": true,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [
                        {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"}
                    ],
                    "schema": {"openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {"type": "object", "properties": {
                                "size": {"type": "integer", "default": 1},
                                "color": {"type": "string"},
                                "tags": {"type": "array", "items": {"type": "string"}},
                                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                            }},
                            "status": {"type": "object", "properties": {"phase": {"type": "string"}}}
                        }
                    }}
                },
                {
                    "name": "v1beta1", "served": true, "storage": false,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
                }
            ]
        }
    })
}

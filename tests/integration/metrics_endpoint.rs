//! `/metrics` is served next to the probes, in the format Prometheus scrapes, with what the
//! reconcilers recorded.

use std::sync::Arc;

use axum::body::Body;
use http::{Request, StatusCode};
use http_body_util::BodyExt as _;
use olm_rs::api::cluster_service_version::ClusterServiceVersion;
use olm_rs::health::{self, Readiness};
use olm_rs::metrics::{self, Metrics};
use tower::ServiceExt as _;

async fn get(router: axum::Router, path: &str) -> (StatusCode, Option<String>, String) {
    let response = router
        .oneshot(Request::get(path).body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let content_type = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .map(|v| v.to_str().unwrap().to_owned());
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        content_type,
        String::from_utf8(body.to_vec()).unwrap(),
    )
}

#[tokio::test]
async fn metrics_are_served_on_the_probe_router() {
    let metrics = Arc::new(Metrics::new());
    let readiness = Readiness::default();
    readiness.register("api-server", "not contacted yet");
    let router = health::router(readiness).merge(metrics::router(Arc::clone(&metrics)));

    let csv: ClusterServiceVersion = serde_json::from_value(serde_json::json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {"name": "etcd.v0.9.4", "namespace": "operators"},
        "spec": {"version": "0.9.4", "install": {"strategy": "deployment"}},
        "status": {"phase": "Failed", "reason": "ComponentUnhealthy"},
    }))
    .unwrap();
    metrics.csv_phase(&csv);
    let (status, content_type, body) = get(router.clone(), "/metrics").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(content_type.as_deref(), Some(metrics::CONTENT_TYPE));
    assert!(
        body.contains(
            r#"csv_abnormal{namespace="operators",name="etcd.v0.9.4",version="0.9.4",phase="Failed",reason="ComponentUnhealthy"} 1"#
        ),
        "{body}"
    );

    // Later writes show on the next scrape: the handler reads the shared registry.
    metrics.csv_upgraded();
    let (_, _, body) = get(router.clone(), "/metrics").await;
    assert!(body.lines().any(|l| l == "csv_upgrade_count 1"), "{body}");

    // The probes still answer on the merged router.
    let (status, _, body) = get(router.clone(), "/readyz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(body.contains("api-server"), "{body}");
    let (status, _, _) = get(router, "/healthz").await;
    assert_eq!(status, StatusCode::OK);
}

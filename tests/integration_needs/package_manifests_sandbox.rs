//! `kubectl get packagemanifests` against `olm-rs sandbox`'s embedded API server, which routes
//! `packages.operators.coreos.com` to the same handler `olm-rs run` serves behind the
//! aggregation layer. The expected object is written by hand from OLM's rules
//! (docs/packagemanifests.md §3) for the demo catalog (examples/catalog). The kubectl checks
//! need `kubectl` on PATH; without it they say so on stderr and the raw-HTTP checks still run.

use std::path::PathBuf;
use std::time::Duration;

use olm_rs::sandbox_run::{Sandbox, SandboxOptions, SubscriptionRequest};
use serde_json::{Value, json};

use crate::package_manifests_expected::{CatalogSeen, expected_greeter};

fn demo_catalog() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/catalog")
}

async fn start() -> Sandbox {
    Sandbox::start(SandboxOptions {
        api_addr: "127.0.0.1:0".parse().unwrap(),
        catalog: demo_catalog(),
        subscription: SubscriptionRequest::default(),
        bundle_images: Default::default(),
    })
    .await
    .expect("sandbox starts")
}

/// GET `path` on the sandbox; (status, body).
async fn get(sandbox: &Sandbox, path: &str, accept: &str) -> (u16, Vec<u8>, http::HeaderMap) {
    let req = http::Request::get(path)
        .header("Accept", accept)
        .body(Vec::new())
        .unwrap();
    let resp = sandbox
        .client()
        .send(req.map(kube::client::Body::from))
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = http_body_util::BodyExt::collect(resp.into_body())
        .await
        .unwrap()
        .to_bytes()
        .to_vec();
    (status, body, headers)
}

const BASE: &str = "/apis/packages.operators.coreos.com/v1";

/// Waits until the catalog's packages are served.
async fn wait_for_packages(sandbox: &Sandbox) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let (status, body, _) = get(
            sandbox,
            &format!("{BASE}/packagemanifests"),
            "application/json",
        )
        .await;
        if status == 200 {
            let list: Value = serde_json::from_slice(&body).unwrap();
            if list["items"].as_array().is_some_and(|i| !i.is_empty()) {
                return;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no PackageManifests after 60 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The sandbox's CatalogSource, as a PackageManifest shows it.
fn sandbox_catalog(created: &Value) -> CatalogSeen {
    CatalogSeen {
        name: "sandbox-catalog".into(),
        namespace: "olm".into(),
        display_name: "olm-rs sandbox catalog".into(),
        publisher: "olm-rs".into(),
        labels: json!({}),
        created: created.clone(),
    }
}

async fn the_sandbox_serves_packagemanifests_as_olm_does() {
    let sandbox = start().await;
    wait_for_packages(&sandbox).await;
    let catalog: Value = {
        let (_, body, _) = get(
            &sandbox,
            "/apis/operators.coreos.com/v1alpha1/namespaces/olm/catalogsources/sandbox-catalog",
            "application/json",
        )
        .await;
        serde_json::from_slice(&body).unwrap()
    };
    assert_eq!(
        catalog["metadata"]["name"], "sandbox-catalog",
        "the sandbox's catalog name"
    );
    let created = &catalog["metadata"]["creationTimestamp"];

    // A get in any namespace shows the global catalog's package in that namespace.
    let (status, body, _) = get(
        &sandbox,
        &format!("{BASE}/namespaces/operators/packagemanifests/greeter-operator"),
        "application/json",
    )
    .await;
    assert_eq!(status, 200);
    let got: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        got,
        expected_greeter("operators", &sandbox_catalog(created))
    );

    // All namespaces: in the catalog's namespace.
    let (_, body, _) = get(
        &sandbox,
        &format!("{BASE}/packagemanifests"),
        "application/json",
    )
    .await;
    let list: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(list["kind"], "PackageManifestList");
    assert_eq!(
        list["items"],
        json!([expected_greeter("olm", &sandbox_catalog(created))])
    );

    // Label and field selectors.
    let (_, body, _) = get(
        &sandbox,
        &format!("{BASE}/namespaces/default/packagemanifests?labelSelector=catalog%3Dother"),
        "application/json",
    )
    .await;
    assert_eq!(
        serde_json::from_slice::<Value>(&body).unwrap()["items"],
        json!([])
    );
    let (status, body, _) = get(
        &sandbox,
        &format!(
            "{BASE}/namespaces/default/packagemanifests?fieldSelector=status.catalogSource%3Dx"
        ),
        "application/json",
    )
    .await;
    assert_eq!(status, 500);
    let error: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        error["message"],
        "field label not supported: status.catalogSource"
    );

    // Watch is refused as OLM's package server refuses it.
    let (status, body, _) = get(
        &sandbox,
        &format!("{BASE}/namespaces/default/packagemanifests?watch=true"),
        "application/json",
    )
    .await;
    assert_eq!(status, 405);
    let error: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(error["reason"], "MethodNotAllowed");

    // The icon: the demo package has none, so the built-in SVG, without an ETag value.
    let (status, body, headers) = get(
        &sandbox,
        &format!("{BASE}/namespaces/default/packagemanifests/greeter-operator/icon"),
        "*/*",
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(headers["content-type"], "image/svg+xml");
    assert!(body.starts_with(b"<svg"));
    let (status, _, _) = get(
        &sandbox,
        &format!("{BASE}/namespaces/default/packagemanifests/nothing"),
        "application/json",
    )
    .await;
    assert_eq!(status, 404);

    kubectl_checks(&sandbox).await;
    sandbox.shutdown().await.unwrap();
}

async fn kubectl_checks(sandbox: &Sandbox) {
    // The checks above ran; without kubectl the test is reported skipped from here.
    crate::common::skip::require_program("kubectl", crate::apiserver_kubectl::KUBECTL_INSTALL);
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, sandbox.kubeconfig_yaml()).unwrap();
    // Async: the sandbox answers on this test's runtime while kubectl waits.
    let kubectl = async |args: &[&str]| {
        let out = tokio::process::Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .arg("--cache-dir")
            .arg(dir.path().join("cache"))
            .args(args)
            .env("HOME", dir.path())
            .env_remove("KUBECONFIG")
            .output()
            .await
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, out, err) = kubectl(&["get", "packagemanifests", "-n", "default"]).await;
    assert!(ok, "{err}");
    let lines: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(lines[0], ["NAME", "CATALOG", "AGE"]);
    assert_eq!(
        &lines[1][..4],
        ["greeter-operator", "olm-rs", "sandbox", "catalog"]
    );
    let (ok, out, err) = kubectl(&[
        "get",
        "packagemanifests",
        "-A",
        "-l",
        "catalog=sandbox-catalog",
    ])
    .await;
    assert!(ok, "{err}");
    assert!(out.lines().nth(1).unwrap().starts_with("olm "), "{out}");
    let (ok, out, err) = kubectl(&[
        "get",
        "packagemanifests",
        "-n",
        "default",
        "--field-selector",
        "metadata.name=greeter-operator",
        "-o",
        "name",
    ])
    .await;
    assert!(ok, "{err}");
    assert_eq!(
        out.trim(),
        "packagemanifest.packages.operators.coreos.com/greeter-operator"
    );
    let (ok, out, err) = kubectl(&[
        "describe",
        "packagemanifest",
        "greeter-operator",
        "-n",
        "default",
    ])
    .await;
    assert!(ok, "{err}");
    assert!(
        out.contains("Current CSV:  greeter-operator.v2.0.0")
            || out.contains("greeter-operator.v2.0.0"),
        "{out}"
    );
    assert!(out.contains("Default Channel:  stable"), "{out}");
    let (ok, _, err) = kubectl(&[
        "get",
        "packagemanifests",
        "-n",
        "default",
        "--field-selector",
        "spec.x=y",
    ])
    .await;
    assert!(!ok);
    assert!(err.contains("field label not supported: spec.x"), "{err}");
}

crate::trials! {
    current the_sandbox_serves_packagemanifests_as_olm_does,
}

//! The PackageManifest API through the real API server's aggregation layer: the chart's
//! APIService, Service and bindings; `olm-rs run` on this host listening on the Service's port
//! (the Service range is loopback, so the aggregator's dial of ClusterIP:port lands on it);
//! the front proxy's client certificate; SubjectAccessReviews for the user it names.
//! Users: the admin, a ServiceAccount with `view` in one namespace (the aggregated ClusterRole)
//! and one with nothing (refused by the API server).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};

use crate::cluster;
use crate::package_manifests_expected::{CatalogSeen, expected_greeter};
use crate::real_control_plane::chart::{self, Controller, Rendered};
use crate::real_control_plane::{ControlPlane, User, free_ports};

const BASE: &str = "/apis/packages.operators.coreos.com/v1";
const TEAM: &str = "pm-team";
const WAIT: Duration = Duration::from_secs(90);

async fn raw_get(
    client: &kube::Client,
    path: &str,
    accept: &str,
) -> anyhow::Result<(u16, Vec<u8>, http::HeaderMap)> {
    let req = http::Request::get(path)
        .header("Accept", accept)
        .body(Vec::new())?;
    let resp = tokio::time::timeout(
        Duration::from_secs(20),
        client.send(req.map(kube::client::Body::from)),
    )
    .await
    .with_context(|| format!("GET {path}: no answer in 20 s"))??;
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = http_body_util::BodyExt::collect(resp.into_body())
        .await?
        .to_bytes()
        .to_vec();
    Ok((status, body, headers))
}

async fn get_json(client: &kube::Client, path: &str) -> anyhow::Result<(u16, Value)> {
    let (status, body, _) = raw_get(client, path, "application/json").await?;
    let value =
        serde_json::from_slice(&body).unwrap_or_else(|_| json!(String::from_utf8_lossy(&body)));
    Ok((status, value))
}

async fn client_for(plane: &ControlPlane, token: &str) -> anyhow::Result<kube::Client> {
    let yaml = plane.kubeconfig(&User::Token(token));
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::from_yaml(&yaml)?,
        &Default::default(),
    )
    .await?;
    Ok(kube::Client::try_from(config)?)
}

/// A ServiceAccount in `TEAM` and a token for it.
async fn account(plane: &ControlPlane, name: &str) -> anyhow::Result<String> {
    let accounts: Api<DynamicObject> = Api::namespaced_with(
        plane.client.clone(),
        TEAM,
        &cluster::core("", "v1", "ServiceAccount", "serviceaccounts"),
    );
    let _ = accounts
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}}))?,
        )
        .await;
    let request = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                         "spec": {"expirationSeconds": 3600}});
    let response: Value = accounts
        .create_subresource("token", name, &PostParams::default(), &request)
        .await?;
    response["status"]["token"]
        .as_str()
        .map(str::to_owned)
        .context("no token")
}

fn demo_catalog() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/catalog")
}

pub async fn run(plane: &ControlPlane, helm: &std::path::Path, token: &str) -> anyhow::Result<()> {
    let [service_port, registry_port] = free_ports::<2>()?;
    let rendered = Rendered::render(
        helm,
        &[&format!("packageServer.servicePort={service_port}")],
    )?;
    chart::apply(&plane.client, &rendered.identity, WAIT).await?;
    chart::apply(&plane.client, &rendered.crds, WAIT).await?;
    chart::apply(&plane.client, &rendered.rest, WAIT).await?;

    // The demo catalog, served by a registry on this host.
    let loaded = olm_rs::catalog::validated::load_for_serving(&demo_catalog())?;
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", registry_port)).await?;
    let (stop_registry, stopped) = tokio::sync::oneshot::channel::<()>();
    let registry = tokio::spawn(olm_rs::registry::server::serve(
        Arc::new(loaded.index),
        listener,
        async {
            let _ = stopped.await;
        },
    ));
    let namespaces: Api<DynamicObject> = Api::all_with(
        plane.client.clone(),
        &cluster::core("", "v1", "Namespace", "namespaces"),
    );
    let _ = namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": TEAM}}),
            )?,
        )
        .await;
    let catalog = |ns: &str, name: &str| {
        json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
               "metadata": {"name": name, "namespace": ns, "labels": {"tier": "demo"}},
               "spec": {"sourceType": "grpc", "address": format!("127.0.0.1:{registry_port}"),
                        "displayName": format!("{name} catalog"), "publisher": "e2e"}})
    };
    chart::apply(
        &plane.client,
        &[
            catalog(chart::NAMESPACE, "pm-global"),
            catalog(TEAM, "pm-own"),
        ],
        WAIT,
    )
    .await?;

    // No kubelet runs the controller's pod, so nothing fills the Service's endpoints; the
    // aggregator's availability check wants a ready address on the port named `https`. The
    // address is never dialed (the aggregator dials the ClusterIP): a documentation address.
    let slices: Api<DynamicObject> = Api::namespaced_with(
        plane.client.clone(),
        chart::NAMESPACE,
        &cluster::core("discovery.k8s.io", "v1", "EndpointSlice", "endpointslices"),
    );
    let _ = slices
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "olm-rs-packageserver-e2e", "namespace": chart::NAMESPACE,
                         "labels": {"kubernetes.io/service-name": "olm-rs-packageserver"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["192.0.2.10"], "conditions": {"ready": true}}],
            "ports": [{"name": "https", "port": service_port, "protocol": "TCP"}]}))?,
        )
        .await;
    let mut controller = Controller::spawn(
        plane,
        &rendered.without_leader_election(),
        token,
        "olm-rs-controller-packages",
        &[format!("--package-api-addr=0.0.0.0:{service_port}")],
    )?;
    let result = checks(plane, &mut controller).await;
    controller.process.terminate();
    controller.process.wait_exit(Duration::from_secs(10));
    let _ = stop_registry.send(());
    let _ = registry.await;
    result.map_err(|err| {
        err.context(format!(
            "controller log:\n{}",
            controller.process.log_tail(30)
        ))
    })
}

async fn checks(plane: &ControlPlane, controller: &mut Controller) -> anyhow::Result<()> {
    controller.wait_ready(WAIT).await?;
    let admin = &plane.client;
    // Through the aggregator: first the APIService turns Available (caBundle written by
    // olm-rs, the Service reached), then both catalogs' packages appear.
    let started = Instant::now();
    let list_path = format!("{BASE}/packagemanifests");
    let all = loop {
        // While the APIService becomes Available a request may hang or fail in the aggregator:
        // that is "not yet", until the wait is over.
        let (status, body) = match get_json(admin, &list_path).await {
            Ok(answer) => answer,
            Err(err) => (0, json!(format!("{err:#}"))),
        };
        if status == 200 && body["items"].as_array().is_some_and(|i| i.len() == 2) {
            break body;
        }
        if started.elapsed() > WAIT {
            let apiservices: Api<DynamicObject> = Api::all_with(
                admin.clone(),
                &cluster::core("apiregistration.k8s.io", "v1", "APIService", "apiservices"),
            );
            let apiservice = apiservices
                .get("v1.packages.operators.coreos.com")
                .await
                .ok();
            bail!(
                "no two PackageManifests through the aggregator after {}s; last answer {status}: {body}; APIService status: {}",
                WAIT.as_secs(),
                apiservice
                    .map(|a| a.data["status"].to_string())
                    .unwrap_or_default()
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    println!(
        "e2e-real:   PackageManifests served through the aggregator after {:.1}s",
        started.elapsed().as_secs_f64()
    );
    let placed: Vec<(String, String)> = all["items"]
        .as_array()
        .unwrap_or(&Vec::new())
        .iter()
        .map(|m| {
            (
                m["metadata"]["namespace"].as_str().unwrap_or("").to_owned(),
                m["status"]["catalogSource"]
                    .as_str()
                    .unwrap_or("")
                    .to_owned(),
            )
        })
        .collect();
    ensure!(
        placed
            == [
                ("olm".to_owned(), "pm-global".to_owned()),
                (TEAM.to_owned(), "pm-own".to_owned())
            ],
        "-A: each in its catalog's namespace, got {placed:?}"
    );

    // -n TEAM: its own catalog's and the global one's, both shown in TEAM; get prefers its own.
    let (status, team) =
        get_json(admin, &format!("{BASE}/namespaces/{TEAM}/packagemanifests")).await?;
    ensure!(status == 200, "list in {TEAM}: {status} {team}");
    let sources: Vec<(&str, &str)> = team["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .map(|m| {
                    (
                        m["metadata"]["namespace"].as_str().unwrap_or(""),
                        m["status"]["catalogSource"].as_str().unwrap_or(""),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    ensure!(
        sources == [(TEAM, "pm-own"), (TEAM, "pm-global")],
        "-n {TEAM}: {sources:?}"
    );
    let (_, own) = get_json(
        admin,
        &format!("{BASE}/namespaces/{TEAM}/packagemanifests/greeter-operator"),
    )
    .await?;
    ensure!(
        own["status"]["catalogSource"] == "pm-own",
        "get prefers the namespace's catalog: {own}"
    );

    // The whole object, as OLM v0.31 would show it (written by hand).
    let catalogs: Api<DynamicObject> = Api::namespaced_with(
        admin.clone(),
        chart::NAMESPACE,
        &cluster::core(
            "operators.coreos.com",
            "v1alpha1",
            "CatalogSource",
            "catalogsources",
        ),
    );
    let created = catalogs.get("pm-global").await?.metadata.creation_timestamp;
    let seen = CatalogSeen {
        name: "pm-global".into(),
        namespace: chart::NAMESPACE.into(),
        display_name: "pm-global catalog".into(),
        publisher: "e2e".into(),
        labels: json!({"tier": "demo"}),
        created: serde_json::to_value(created)?,
    };
    let (_, global) = get_json(
        admin,
        &format!("{BASE}/namespaces/default/packagemanifests/greeter-operator"),
    )
    .await?;
    let want = expected_greeter("default", &seen);
    ensure!(
        global == want,
        "get through the aggregator:\n got {global}\nwant {want}"
    );

    // Selectors.
    let (_, by_label) = get_json(
        admin,
        &format!("{list_path}?labelSelector=catalog%3Dpm-own"),
    )
    .await?;
    ensure!(
        by_label["items"].as_array().map(Vec::len) == Some(1),
        "-l catalog=pm-own: {by_label}"
    );
    let (_, by_name) = get_json(
        admin,
        &format!("{list_path}?fieldSelector=metadata.name%3Dnothing"),
    )
    .await?;
    ensure!(
        by_name["items"].as_array().map(Vec::len) == Some(0),
        "--field-selector metadata.name=nothing: {by_name}"
    );
    let (status, refused) = get_json(
        admin,
        &format!("{list_path}?fieldSelector=status.catalogSource%3Dx"),
    )
    .await?;
    ensure!(
        status == 500 && refused["message"] == "field label not supported: status.catalogSource",
        "{status} {refused}"
    );

    // Table (kubectl get), icon, watch.
    let (_, table, _) = raw_get(
        admin,
        &format!("{BASE}/namespaces/{TEAM}/packagemanifests"),
        "application/json;as=Table;v=v1;g=meta.k8s.io",
    )
    .await?;
    let table: Value = serde_json::from_slice(&table)?;
    ensure!(
        table["columnDefinitions"]
            .as_array()
            .map(|c| c.iter().map(|c| c["name"].clone()).collect::<Vec<_>>())
            == Some(vec![json!("Name"), json!("Catalog"), json!("Age")]),
        "{table}"
    );
    let (status, icon, headers) = raw_get(
        admin,
        &format!("{BASE}/namespaces/{TEAM}/packagemanifests/greeter-operator/icon"),
        "*/*",
    )
    .await?;
    ensure!(
        status == 200
            && headers
                .get("content-type")
                .is_some_and(|v| v == "image/svg+xml")
            && icon.starts_with(b"<svg"),
        "icon: {status} {headers:?}"
    );
    let (status, watch) = get_json(admin, &format!("{list_path}?watch=true")).await?;
    ensure!(
        status == 405 && watch["reason"] == "MethodNotAllowed",
        "watch: {status} {watch}"
    );

    // A user with `view` in TEAM may read there (the aggregated ClusterRole), not elsewhere;
    // a user with nothing is refused.
    let viewer_token = account(plane, "pm-viewer").await?;
    let bindings: Api<DynamicObject> = Api::namespaced_with(
        admin.clone(),
        TEAM,
        &cluster::core(
            "rbac.authorization.k8s.io",
            "v1",
            "RoleBinding",
            "rolebindings",
        ),
    );
    let _ = bindings
        .create(&PostParams::default(), &serde_json::from_value(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "pm-viewer", "namespace": TEAM},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "ServiceAccount", "name": "pm-viewer", "namespace": TEAM}]}))?)
        .await;
    let viewer = client_for(plane, &viewer_token).await?;
    let started = Instant::now();
    loop {
        let (status, body) = get_json(
            &viewer,
            &format!("{BASE}/namespaces/{TEAM}/packagemanifests"),
        )
        .await?;
        if status == 200 {
            ensure!(
                body["items"].as_array().map(Vec::len) == Some(2),
                "viewer's list: {body}"
            );
            break;
        }
        // The aggregated ClusterRole reaches `view` through the controller-manager.
        ensure!(
            started.elapsed() < WAIT,
            "a viewer of {TEAM} cannot list there: {status} {body}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let (status, _) = get_json(
        &viewer,
        &format!("{BASE}/namespaces/default/packagemanifests"),
    )
    .await?;
    ensure!(
        status == 403,
        "a viewer of {TEAM} listed in default: {status}"
    );
    let nobody = client_for(plane, &account(plane, "pm-nobody").await?).await?;
    let (status, body) = get_json(
        &nobody,
        &format!("{BASE}/namespaces/{TEAM}/packagemanifests"),
    )
    .await?;
    ensure!(status == 403, "a user without permissions: {status} {body}");
    kubectl_checks(plane).await
}

/// What a user types, through the real API server; skipped (said on stdout) without kubectl.
async fn kubectl_checks(plane: &ControlPlane) -> anyhow::Result<()> {
    let kubectl = async |args: &[&str]| -> anyhow::Result<(bool, String, String)> {
        let out = tokio::process::Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&plane.admin_kubeconfig)
            .arg("--cache-dir")
            .arg(plane.dir.join("kubectl-cache"))
            .args(args)
            .env_remove("KUBECONFIG")
            .output()
            .await?;
        Ok((
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ))
    };
    if kubectl(&["version", "--client"]).await.is_err() {
        println!(
            "e2e-real:   kubectl is not on PATH: the kubectl checks of packagemanifests did not run"
        );
        return Ok(());
    }
    let (ok, out, err) = kubectl(&["get", "packagemanifests", "-n", TEAM]).await?;
    ensure!(ok, "kubectl get packagemanifests -n {TEAM}: {err}");
    let rows: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    ensure!(
        rows.len() == 3
            && rows[0] == ["NAME", "CATALOG", "AGE"]
            && rows[1][..3] == ["greeter-operator", "pm-own", "catalog"],
        "kubectl get packagemanifests -n {TEAM}:\n{out}"
    );
    let (ok, out, err) = kubectl(&[
        "get",
        "packagemanifests",
        "-A",
        "-l",
        "catalog=pm-global",
        "-o",
        "name",
    ])
    .await?;
    ensure!(
        ok && out.trim() == "packagemanifest.packages.operators.coreos.com/greeter-operator",
        "-A -l: {out}{err}"
    );
    let (ok, out, err) = kubectl(&[
        "get",
        "packagemanifests",
        "-n",
        TEAM,
        "--field-selector",
        "metadata.name=greeter-operator",
        "-o",
        "yaml",
    ])
    .await?;
    ensure!(
        ok && out.contains("currentCSV: greeter-operator.v2.0.0"),
        "--field-selector -o yaml: {out}{err}"
    );
    let (ok, out, err) = kubectl(&[
        "describe",
        "packagemanifest",
        "greeter-operator",
        "-n",
        TEAM,
    ])
    .await?;
    ensure!(
        ok && out.contains("Default Channel:") && out.contains("greeter-operator.v1.2.0"),
        "describe: {out}{err}"
    );
    let (ok, _, err) = kubectl(&[
        "get",
        "packagemanifests",
        "-n",
        TEAM,
        "--field-selector",
        "spec.x=y",
    ])
    .await?;
    ensure!(
        !ok && err.contains("field label not supported: spec.x"),
        "an unsupported field selector: {err}"
    );
    let (ok, _, err) = kubectl(&[
        "get",
        "packagemanifests",
        "-n",
        TEAM,
        "--watch",
        "--request-timeout=10s",
    ])
    .await?;
    ensure!(
        !ok && err.contains("not supported"),
        "kubectl get --watch: {err}"
    );
    Ok(())
}

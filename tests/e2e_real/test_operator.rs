//! The test operator (tests/test_operator/) called by the real kube-apiserver: its validating
//! webhook admits and denies `Gadget`s, its conversion webhook converts them between the CRD's
//! two served versions on writes and reads, and its aggregated API answers through the API
//! server's aggregator (`kubectl get --raw /apis/api.testop.olm-rs.dev/v1`) — all over TLS with
//! a CA the API server is given, and again after the certificate files are replaced by ones from
//! a new CA (a rotation) without a restart.
//!
//! Without a node the API server reaches the operator process on loopback: the webhooks by URL,
//! the APIService through an `ExternalName` Service naming `localhost` (the aggregator checks no
//! endpoints for those, and dials the name on the APIService's port). What this proves is the
//! wire — AdmissionReview, ConversionReview and discovery as the API server sends and expects
//! them, HTTP/2 over TLS, a certificate re-read. The journeys with real pods reach it through
//! OLM's Service instead.

use std::path::Path;
use std::process::Command;

use anyhow::{Context as _, bail, ensure};
use base64::Engine as _;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde::Deserialize as _;
use serde_json::{Value, json};

use crate::checks::wait;
use crate::cluster;
use crate::real_control_plane::ControlPlane;
use crate::real_control_plane::process::Process;

const BIN: &str = env!("CARGO_BIN_EXE_olm-rs-test-operator");
const CRD: &str =
    "e2e/testop/bundles/olm-rs-testop/0.1.0/manifests/gadgets.testop.olm-rs.dev.crd.yaml";
const GROUP: &str = "testop.olm-rs.dev";
const NS: &str = "e2e-real-testop";
const WEBHOOK: &str = "vgadget.testop.olm-rs.dev";
const API_GROUP: &str = "api.testop.olm-rs.dev";
const API_SERVICE: &str = "v1.api.testop.olm-rs.dev";
/// The Service the APIService names; the serving certificate is for its DNS name, which the
/// aggregator verifies.
const SERVICE: &str = "testop-api";

pub async fn run(plane: &ControlPlane) -> anyhow::Result<()> {
    let certs = plane.dir.join("testop-certs");
    let (ca, cert, key) = ca_and_cert("testop webhooks CA 1")?;
    mount(&certs, 1, &cert, &key)?;
    let [health, webhook, apiserver] = free_ports()?;
    let mut command = Command::new(BIN);
    command
        .args(["--bind-address", "127.0.0.1", "--operator-version", "0.1.0"])
        .args(["--health-port", &health.to_string()])
        .args(["--webhook-port", &webhook.to_string()])
        .args(["--apiserver-port", &apiserver.to_string()])
        .arg("--webhook-cert-dir")
        .arg(&certs)
        .arg("--apiserver-cert-dir")
        .arg(&certs);
    let mut operator = Process::spawn("olm-rs-test-operator", command, &plane.dir)?;
    let base = format!("https://127.0.0.1:{webhook}");

    let result = exercise(plane, &mut operator, (&base, apiserver), &certs, &ca).await;
    cleanup(plane).await;
    result.with_context(|| {
        format!(
            "the test operator's log ends with:\n{}",
            operator.log_tail(20)
        )
    })
}

async fn exercise(
    plane: &ControlPlane,
    operator: &mut Process,
    (base, api_port): (&str, u16),
    certs: &Path,
    ca: &str,
) -> anyhow::Result<()> {
    let client = &plane.client;
    let crds: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &cluster::core(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
        ),
    );
    let configs: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &cluster::core(
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingWebhookConfiguration",
            "validatingwebhookconfigurations",
        ),
    );
    let namespaces: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &cluster::core("", "v1", "Namespace", "namespaces"),
    );

    // The bundle's CRD, converted by the operator, and a webhook configuration for it — what
    // olm-rs writes for the CSV, with a URL where OLM puts its Service.
    let mut crd = bundle_crd()?;
    crd["spec"]["conversion"] = conversion(base, ca);
    let crd: DynamicObject = serde_json::from_value(crd)?;
    crds.create(&PostParams::default(), &crd)
        .await
        .context("creating the Gadget CRD")?;
    configs
        .create(
            &PostParams::default(),
            &serde_json::from_value(webhook_configuration(base, ca))?,
        )
        .await
        .context("creating the webhook configuration")?;
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": NS}}))?,
        )
        .await?;
    let services: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        NS,
        &cluster::core("", "v1", "Service", "services"),
    );
    services
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "Service",
                "metadata": {"name": SERVICE, "namespace": NS},
                "spec": {"type": "ExternalName", "externalName": "localhost",
                         "ports": [{"port": api_port}]},
            }))?,
        )
        .await
        .context("creating the APIService's Service")?;
    api_services(plane)
        .create(
            &PostParams::default(),
            &serde_json::from_value(api_service(api_port, ca))?,
        )
        .await
        .context("creating the APIService")?;
    let v1 = gadgets(plane, "v1");
    let v1alpha1 = gadgets(plane, "v1alpha1");

    // Admission: allowed, and denied with the operator's message. The first calls may come
    // before the API server has the CRD and the configuration.
    wait("a Gadget admitted by the webhook".to_owned(), || async {
        Ok(create(&v1, "v1", "g1", json!({"replicas": 3}))
            .await
            .map_err(|e| format!("{e:#}")))
    })
    .await?;
    let denied = create(&v1, "v1", "g2", json!({"deny": true})).await;
    let message = match denied {
        Ok(()) => bail!("a Gadget with spec.deny true was admitted"),
        Err(err) => match err.downcast_ref::<kube::Error>() {
            Some(kube::Error::Api(status)) if status.code == 403 => status.message.clone(),
            _ => bail!("the denial is not a 403 from the API server: {err:#}"),
        },
    };
    ensure!(
        message.contains(WEBHOOK) && message.contains("spec.deny is true"),
        "the denial does not carry the webhook's message: {message}"
    );
    println!("e2e-real:   denied: {message}");

    // Conversion: stored as v1, read as v1alpha1 (replicas → size), and the other way round.
    let seen = v1alpha1.get("g1").await?;
    ensure!(
        seen.data["spec"] == json!({"size": 3}),
        "g1 read as v1alpha1: {}",
        seen.data["spec"]
    );
    create(&v1alpha1, "v1alpha1", "g3", json!({"size": 2})).await?;
    let seen = v1.get("g3").await?;
    ensure!(
        seen.data["spec"] == json!({"replicas": 2}),
        "g3 read as v1: {}",
        seen.data["spec"]
    );

    aggregated_api_answers(plane).await?;
    println!("e2e-real:   GET /apis/{API_GROUP}/v1/reports answered through the aggregator");

    // Rotation: new CA and certificate files, the new CA given to the API server; the operator
    // serves the new certificate without a restart and both webhooks keep answering.
    let (ca2, cert2, key2) = ca_and_cert("testop webhooks CA 2")?;
    mount(certs, 2, &cert2, &key2)?;
    let bundle = base64::engine::general_purpose::STANDARD.encode(&ca2);
    crds.patch(
        &format!("gadgets.{GROUP}"),
        &PatchParams::default(),
        &Patch::Merge(
            json!({"spec": {"conversion": {"webhook": {"clientConfig": {"caBundle": bundle}}}}}),
        ),
    )
    .await?;
    api_services(plane)
        .patch(
            API_SERVICE,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"caBundle": bundle}})),
        )
        .await?;
    let mut config = configs.get(WEBHOOK).await?;
    config.data["webhooks"][0]["clientConfig"]["caBundle"] = json!(bundle);
    configs
        .replace(WEBHOOK, &PostParams::default(), &config)
        .await?;
    let mut n = 0;
    wait(
        "both webhooks on the rotated certificate".to_owned(),
        || {
            n += 1;
            let name = format!("g-rotated-{n}");
            let (v1, v1alpha1) = (v1.clone(), v1alpha1.clone());
            async move {
                if let Err(e) = create(&v1alpha1, "v1alpha1", &name, json!({"size": 7})).await {
                    return Ok(Err(format!("{e:#}")));
                }
                let seen = v1.get(&name).await?;
                Ok((seen.data["spec"] == json!({"replicas": 7}))
                    .then_some(())
                    .ok_or(format!("{name} read as v1: {}", seen.data["spec"])))
            }
        },
    )
    .await?;
    aggregated_api_answers(plane).await?;
    ensure!(operator.exited().is_none(), "the operator restarted");
    // The API server made new connections, and the operator loaded the new files for them
    // (it logs each certificate it loads): both servers served both certificates.
    let log = std::fs::read_to_string(&operator.log)?;
    for file in ["tls.crt", "apiserver.crt"] {
        let loaded = format!(
            "loaded the serving certificate {}",
            certs.join(file).display()
        );
        let times = log.matches(&loaded).count();
        ensure!(
            times == 2,
            "{file} loaded {times} times, not 2 (before and after the rotation)"
        );
    }
    println!(
        "e2e-real:   after a certificate rotation: Gadgets converted, the aggregated API answers"
    );
    Ok(())
}

/// Removes what the check made, so later checks see an API server without it.
async fn cleanup(plane: &ControlPlane) {
    let client = &plane.client;
    let delete = |resource: kube::discovery::ApiResource, name: &'static str| {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        async move {
            let _ = api.delete(name, &DeleteParams::default()).await;
        }
    };
    // First the APIService: an unavailable aggregated API stalls discovery, and with it the
    // namespace deletions of later checks.
    delete(
        cluster::core("apiregistration.k8s.io", "v1", "APIService", "apiservices"),
        API_SERVICE,
    )
    .await;
    delete(
        cluster::core(
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingWebhookConfiguration",
            "validatingwebhookconfigurations",
        ),
        WEBHOOK,
    )
    .await;
    delete(cluster::core("", "v1", "Namespace", "namespaces"), NS).await;
    delete(
        cluster::core(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
        ),
        "gadgets.testop.olm-rs.dev",
    )
    .await;
}

fn api_services(plane: &ControlPlane) -> Api<DynamicObject> {
    Api::all_with(
        plane.client.clone(),
        &cluster::core("apiregistration.k8s.io", "v1", "APIService", "apiservices"),
    )
}

fn api_service(port: u16, ca: &str) -> Value {
    json!({
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": API_SERVICE},
        "spec": {
            "group": API_GROUP,
            "version": "v1",
            "service": {"namespace": NS, "name": SERVICE, "port": port},
            "caBundle": base64::engine::general_purpose::STANDARD.encode(ca),
            "groupPriorityMinimum": 2000,
            "versionPriority": 15,
        },
    })
}

/// `kubectl get --raw` of the group-version's discovery and of its `reports`, through the
/// aggregator, until they answer (the aggregator picks an APIService up within seconds).
async fn aggregated_api_answers(plane: &ControlPlane) -> anyhow::Result<()> {
    let get = |path: String| async move {
        let request = http::Request::get(&path).body(Vec::new())?;
        let text = plane
            .client
            .request_text(request)
            .await
            .with_context(|| format!("GET {path}"))?;
        anyhow::Ok(serde_json::from_str::<Value>(&text)?)
    };
    wait(
        format!("the aggregator to serve {API_GROUP}/v1"),
        || async {
            let list = match get(format!("/apis/{API_GROUP}/v1")).await {
                Ok(list) => list,
                Err(e) => return Ok(Err(format!("{e:#}"))),
            };
            Ok(
                (list["kind"] == "APIResourceList" && list["resources"][0]["name"] == "reports")
                    .then_some(())
                    .ok_or(format!("discovery: {list}")),
            )
        },
    )
    .await?;
    let reports = get(format!("/apis/{API_GROUP}/v1/reports")).await?;
    ensure!(
        reports["kind"] == "ReportList"
            && reports["items"][0]["spec"]["operatorVersion"] == "0.1.0",
        "reports: {reports}"
    );
    Ok(())
}

fn gadgets(plane: &ControlPlane, version: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        plane.client.clone(),
        NS,
        &cluster::core(GROUP, version, "Gadget", "gadgets"),
    )
}

async fn create(
    api: &Api<DynamicObject>,
    version: &str,
    name: &str,
    spec: Value,
) -> anyhow::Result<()> {
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{GROUP}/{version}"),
        "kind": "Gadget",
        "metadata": {"name": name},
        "spec": spec,
    }))?;
    api.create(&PostParams::default(), &object)
        .await
        .with_context(|| format!("creating Gadget {name}"))?;
    Ok(())
}

fn bundle_crd() -> anyhow::Result<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(CRD);
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    Ok(Value::deserialize(serde_yaml_ng::Deserializer::from_str(
        &text,
    ))?)
}

fn conversion(base: &str, ca: &str) -> Value {
    json!({
        "strategy": "Webhook",
        "webhook": {
            "conversionReviewVersions": ["v1"],
            "clientConfig": {
                "url": format!("{base}/convert"),
                "caBundle": base64::engine::general_purpose::STANDARD.encode(ca),
            },
        },
    })
}

fn webhook_configuration(base: &str, ca: &str) -> Value {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": WEBHOOK},
        "webhooks": [{
            "name": WEBHOOK,
            "clientConfig": {
                "url": format!("{base}/validate"),
                "caBundle": base64::engine::general_purpose::STANDARD.encode(ca),
            },
            "rules": [{
                "apiGroups": [GROUP],
                "apiVersions": ["*"],
                "operations": ["CREATE", "UPDATE"],
                "resources": ["gadgets"],
            }],
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": "Fail",
            "timeoutSeconds": 10,
        }],
    })
}

/// A CA (PEM) and a serving certificate and key signed by it, for 127.0.0.1 (the webhook URLs)
/// and the APIService's Service (as OLM's certificate names its Service).
fn ca_and_cert(name: &str) -> anyhow::Result<(String, String, String)> {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate()?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    let ca = ca_params.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate()?;
    let names = vec!["127.0.0.1".to_string(), format!("{SERVICE}.{NS}.svc")];
    let cert = CertificateParams::new(names)?.signed_by(&key, &issuer)?;
    Ok((ca.pem(), cert.pem(), key.serialize_pem()))
}

/// The certificate as both mounts of OLM's Secret name it, written as the kubelet updates a
/// Secret volume: a new directory, then the `..data` symlink switched to it by a rename.
fn mount(dir: &Path, generation: u32, cert: &str, key: &str) -> anyhow::Result<()> {
    let payload = format!("..generation_{generation}");
    std::fs::create_dir_all(dir.join(&payload))?;
    let files = [
        ("tls.crt", cert),
        ("tls.key", key),
        ("apiserver.crt", cert),
        ("apiserver.key", key),
    ];
    for (name, content) in files {
        std::fs::write(dir.join(&payload).join(name), content)?;
    }
    let tmp = dir.join("..data_tmp");
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(&payload, &tmp)?;
    std::fs::rename(&tmp, dir.join("..data"))?;
    for (name, _) in files {
        let link = dir.join(name);
        if std::fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(Path::new("..data").join(name), &link)?;
        }
    }
    Ok(())
}

fn free_ports() -> anyhow::Result<[u16; 3]> {
    let listeners = [
        std::net::TcpListener::bind("127.0.0.1:0")?,
        std::net::TcpListener::bind("127.0.0.1:0")?,
        std::net::TcpListener::bind("127.0.0.1:0")?,
    ];
    Ok([
        listeners[0].local_addr()?.port(),
        listeners[1].local_addr()?.port(),
        listeners[2].local_addr()?.port(),
    ])
}

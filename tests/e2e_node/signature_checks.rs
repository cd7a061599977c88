//! The node's image policy, as users give it to the chart (docs/image-signatures.md §7,
//! `imagePolicy.source: values`): a key made by skopeo, a policy that asks for its sigstore
//! signature in one namespace of the node's registry (`<registry>/signed-only`) and accepts
//! anything elsewhere — so the chart install every check shares keeps its behaviour for every
//! other image — and a registries.d that turns attachments on there.
//!
//! The check: a catalog image that skopeo signed into that namespace serves in-process and a
//! Subscription from it installs; the same image copied there unsigned is refused, with a
//! condition and an event naming the image, the policy scope and why, while a catalog outside
//! the scope in the same namespace stays READY.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context as _, ensure};
use serde_json::{Value, json};

use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;

use crate::chart_install::NAMESPACE;
use crate::cluster::{self, Cluster, Progress, field, local_get, text};
use crate::fixtures;
use crate::journeys::{events_about, wait_catalog_ready, wait_installed};
use crate::real_control_plane::ControlPlane;
use crate::real_control_plane::images;
use crate::real_control_plane::real_node::RealNode;
use crate::signature_support::Skopeo;

/// The namespace of the node's registry whose images must carry our signature.
const SIGNED_ONLY: &str = "signed-only";
/// Where the chart mounts `imagePolicy.keys` (charts/olm-rs/templates/deployment.yaml).
const KEY_IN_POD: &str = "/etc/olm-rs/image-policy/keys/e2e.pub";
/// `CatalogSource` condition and reason of a refused image (src/catalog_source/image.rs).
const CONTENT_CONDITION: &str = "CatalogContentServed";
const REFUSED: &str = "ImagePolicyRefused";

/// The key, the policy and registries.d, written under the control plane's directory.
pub struct SignedSetup {
    skopeo: Skopeo,
    dir: PathBuf,
    registry: String,
}

impl SignedSetup {
    /// Makes the key pair and writes the files; `Err` says why this cannot run here (no
    /// skopeo with sigstore).
    pub fn prepare(plane: &ControlPlane, node: &RealNode) -> Result<SignedSetup, String> {
        let skopeo = Skopeo::try_find()?;
        let dir = plane.dir.join("image-policy");
        let registries_d = dir.join("registries.d");
        std::fs::create_dir_all(&registries_d).map_err(|e| e.to_string())?;
        let registry = node.registry.host();
        skopeo.generate_key(&dir.join("e2e"));
        let policy = json!({
            "default": [{"type": "insecureAcceptAnything"}],
            "transports": {"docker": {
                format!("{registry}/{SIGNED_ONLY}"):
                    [{"type": "sigstoreSigned", "keyPath": KEY_IN_POD}],
            }},
        });
        let write =
            |path: PathBuf, text: String| std::fs::write(path, text).map_err(|e| e.to_string());
        write(dir.join("policy.json"), policy.to_string())?;
        write(
            registries_d.join("e2e.yaml"),
            format!("docker:\n  {registry}/{SIGNED_ONLY}:\n    use-sigstore-attachments: true\n"),
        )?;
        Ok(SignedSetup {
            skopeo,
            dir,
            registry,
        })
    }

    /// `helm install --set` values of the policy.
    pub fn helm_sets(&self) -> Vec<String> {
        vec!["imagePolicy.source=values".to_owned()]
    }

    /// `helm install --set-file` values: the policy, the registries.d file and the public key
    /// (dots in file names escaped, as helm reads keys).
    pub fn helm_files(&self) -> Vec<(&'static str, PathBuf)> {
        vec![
            ("imagePolicy.policy", self.dir.join("policy.json")),
            (
                r"imagePolicy.registriesD.e2e\.yaml",
                self.dir.join("registries.d/e2e.yaml"),
            ),
            (r"imagePolicy.keys.e2e\.pub", self.dir.join("e2e.pub")),
        ]
    }

    fn registries_d(&self) -> PathBuf {
        self.dir.join("registries.d")
    }

    fn key_prefix(&self) -> PathBuf {
        self.dir.join("e2e")
    }
}

/// An in-process image catalog (no registry pod: olm-rs pulls the image and applies the policy).
fn in_process_catalog(ns: &str, name: &str, image: &str) -> Value {
    let mut catalog = fixtures::image_catalog(ns, name, image);
    if let Some(meta) = catalog["metadata"].as_object_mut() {
        meta.remove("annotations");
    }
    catalog
}

/// The check (see the module's doc).
pub async fn signed_catalog_serves_unsigned_refused(
    c: &Cluster,
    node: &RealNode,
    setup: &SignedSetup,
) -> anyhow::Result<()> {
    let binary = Path::new(env!("CARGO_BIN_EXE_olm-rs"));
    let catalog = images::catalog_image(
        &images::olm_rs_image(binary)?,
        &fixtures::e2e_dir().join("catalog"),
    )?;
    let registry = &setup.registry;
    let source = format!("{registry}/olm-rs-e2e-sign-source:dev");
    let signed = format!("{registry}/{SIGNED_ONLY}/catalog:dev");
    let unsigned = format!("{registry}/{SIGNED_ONLY}/unsigned:dev");
    catalog
        .push(&node.registry, "olm-rs-e2e-sign-source", "dev")
        .await?;
    // The same image twice: signed by skopeo into one repository, pushed plainly into another.
    let started = Instant::now();
    setup.skopeo.copy(
        &setup.registries_d(),
        &source,
        &signed,
        Some(&setup.key_prefix()),
    );
    println!(
        "e2e-node:   skopeo signed {signed} in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    catalog
        .push(&node.registry, &format!("{SIGNED_ONLY}/unsigned"), "dev")
        .await?;
    controllers_say_the_policy_is_enforced(c).await?;
    let ns = c.create_namespace("olm-rs-e2e-signatures-").await?;
    let result = check(c, &ns, &signed, &unsigned, registry).await;
    if result.is_err() {
        println!("e2e-node:   in {ns}:{}", c.describe_namespace(&ns).await);
    }
    c.delete_namespace(&ns).await;
    result
}

/// Each controller pod said at start which policy it obeys, and its metric says it is
/// enforced (docs/image-signatures.md §1).
async fn controllers_say_the_policy_is_enforced(c: &Cluster) -> anyhow::Result<()> {
    let pods: kube::Api<Pod> = kube::Api::namespaced(c.client.clone(), NAMESPACE);
    let list = pods
        .list(&ListParams::default().labels("app.kubernetes.io/name=olm-rs"))
        .await?;
    ensure!(!list.items.is_empty(), "no controller pod");
    for pod in list.items {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let log = pods.logs(&name, &Default::default()).await?;
        ensure!(
            log.contains("in-process image pulls obey the image policy")
                && log.contains("/etc/olm-rs/image-policy/policy.json"),
            "pod {name} did not say at start which image policy it obeys"
        );
        let ip = pod
            .status
            .and_then(|s| s.pod_ip)
            .context("a controller pod without an IP")?;
        let (status, metrics) = local_get(&format!("http://{ip}:8080/metrics")).await?;
        ensure!(
            status == 200
                && metrics
                    .lines()
                    .any(|l| l == "olm_rs_image_policy_enforced 1"),
            "pod {name}: olm_rs_image_policy_enforced is not 1 ({status})"
        );
    }
    Ok(())
}

async fn check(
    c: &Cluster,
    ns: &str,
    signed: &str,
    unsigned: &str,
    registry: &str,
) -> anyhow::Result<()> {
    c.create(
        &cluster::operator_groups(),
        ns,
        fixtures::operator_group(ns),
    )
    .await?;
    let other = c.settings.catalog_image.clone();
    for (name, image) in [
        ("signed", signed),
        ("unsigned", unsigned),
        ("other", other.as_str()),
    ] {
        c.create(
            &cluster::catalog_sources(),
            ns,
            in_process_catalog(ns, name, image),
        )
        .await?;
    }
    let started = Instant::now();
    wait_catalog_ready(c, ns, "signed").await?;
    wait_catalog_ready(c, ns, "other").await?;
    let scope = format!("transports.docker.\"{registry}/{SIGNED_ONLY}\"");
    let message = c
        .wait_for("the unsigned catalog to be refused", || async {
            let cs = c
                .get(&cluster::catalog_sources(), ns, "unsigned")
                .await?
                .context("the CatalogSource is gone")?;
            let refused = field(&cs, "/status/conditions")
                .and_then(Value::as_array)
                .and_then(|all| all.iter().find(|c| c["type"] == CONTENT_CONDITION))
                .filter(|c| c["status"] == "False" && c["reason"] == REFUSED)
                .and_then(|c| c["message"].as_str().map(str::to_owned));
            Ok(match refused {
                Some(message) => Progress::Done(message),
                None => Progress::Pending(format!(
                    "status {}",
                    cs.data.get("status").unwrap_or(&Value::Null)
                )),
            })
        })
        .await?;
    println!("e2e-node:   CatalogSource {ns}/unsigned: {message}");
    ensure!(
        message.contains(unsigned) && message.contains(&scope) && message.contains("no signature"),
        "the condition does not name the image {unsigned}, the scope {scope} and why: {message}"
    );
    let event = c
        .wait_for(
            "an ImagePolicyRefused event about the unsigned catalog",
            || async {
                let events = events_about(c, ns, "CatalogSource", "unsigned").await?;
                Ok(
                    match events
                        .iter()
                        .find(|e| e.starts_with(&format!("{REFUSED}: ")))
                    {
                        Some(e) => Progress::Done(e.clone()),
                        None => Progress::Pending(format!("events {events:?}")),
                    },
                )
            },
        )
        .await?;
    ensure!(
        event.contains(unsigned) && event.contains(&scope) && event.contains("no signature"),
        "the event does not name the image, the scope and why: {event}"
    );
    println!(
        "e2e-node:   signed and other catalogs READY, unsigned refused, {:.1}s after creation",
        started.elapsed().as_secs_f64()
    );
    // The signed catalog is used: a Subscription from it installs the channel head.
    c.create(
        &cluster::subscriptions(),
        ns,
        fixtures::subscription(ns, "signed", "stable", "Automatic", None),
    )
    .await?;
    wait_installed(c, ns, "demo", fixtures::V020).await?;
    // The refusal holds, nothing was served from the unsigned image, the other catalog serves.
    let cs = c
        .get(&cluster::catalog_sources(), ns, "unsigned")
        .await?
        .context("the unsigned CatalogSource is gone")?;
    ensure!(
        text(&cs, "/status/connectionState/lastObservedState") != "READY",
        "the unsigned catalog reports READY: {:?}",
        cs.data.get("status")
    );
    wait_catalog_ready(c, ns, "other").await?;
    let path = format!(
        "/apis/packages.operators.coreos.com/v1/namespaces/{ns}/packagemanifests?labelSelector=catalog%3Dunsigned"
    );
    let listed: Value = serde_json::from_str(
        &c.client
            .request_text(http::Request::get(&path).body(Vec::new())?)
            .await?,
    )?;
    ensure!(
        listed["items"].as_array().is_some_and(Vec::is_empty),
        "packages served from the refused image: {listed}"
    );
    println!(
        "e2e-node:   the demo operator installed from the signed catalog in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

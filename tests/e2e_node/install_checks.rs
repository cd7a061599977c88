//! Two checks of what the chart's least privilege means on a real API server:
//!
//! - an OperatorGroup's `serviceAccountName` bounds **every** step of a plan: with an account
//!   that may do nothing, nothing is written — not even the CRD, which olm-rs applies with its
//!   own rights — and the plan says why in its message and an `Installed` condition; once the
//!   account is granted its rights, the same plan goes on and the operator installs;
//! - the first upgrade whose CRD changes its schema while objects of it are stored: olm-rs lists
//!   them (under the reader role it grants itself, docs/install-plans.md §7.5) and the upgrade
//!   completes.

use std::path::Path;

use anyhow::{Context as _, bail, ensure};
use base64::Engine as _;
use serde_json::{Value, json};

use crate::cluster::{self, Cluster, Progress, field, text};
use crate::fixtures::{self, DEPENDENT};
use crate::journeys::{configmap_catalog_only, wait_catalog_ready, wait_installed};
use crate::real_control_plane::images;
use crate::real_control_plane::real_node::RealNode;

const CRD: &str = "widgets.e2e.olm-rs.dev";
/// The group of the CRD whose schema the CRD-update check changes, apart from the demo's.
const CRD_UPDATE_GROUP: &str = "crd-update.olm-rs.dev";

/// The scoped install. Runs before any journey, while the demo CRD does not exist yet.
pub async fn scoped_account_bounds_every_step(c: &Cluster) -> anyhow::Result<()> {
    ensure!(
        c.get_cluster_scoped(&crds(), CRD).await?.is_none(),
        "{CRD} exists already: this check must run before the journeys"
    );
    let ns = c.create_namespace("olm-rs-e2e-scoped-").await?;
    let result = scoped(c, &ns).await;
    c.delete_namespace(&ns).await;
    result
}

async fn scoped(c: &Cluster, ns: &str) -> anyhow::Result<()> {
    c.create(
        &cluster::core("", "v1", "ServiceAccount", "serviceaccounts"),
        ns,
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "installer"}}),
    )
    .await?;
    let mut group = fixtures::operator_group(ns);
    group["spec"]["serviceAccountName"] = json!("installer");
    c.create(&cluster::operator_groups(), ns, group).await?;
    configmap_catalog_only(c, ns, "e2e-scoped").await?;
    c.create(
        &cluster::subscriptions(),
        ns,
        fixtures::subscription(ns, "e2e-scoped", "stable", "Automatic", None),
    )
    .await?;
    // The plan is refused before any write, and says so.
    let (plan, message) = c
        .wait_for(
            "the scoped InstallPlan to report the missing rights",
            || async {
                let plans = c
                    .api(&cluster::install_plans(), ns)
                    .list(&Default::default())
                    .await?;
                let seen: Vec<Value> = plans
                    .items
                    .iter()
                    .map(|p| p.data.get("status").cloned().unwrap_or(Value::Null))
                    .collect();
                for plan in plans.items {
                    let message = text(&plan, "/status/message").to_owned();
                    let condition = field(&plan, "/status/conditions")
                        .and_then(Value::as_array)
                        .and_then(|all| all.iter().find(|c| c["type"] == "Installed"))
                        .cloned()
                        .unwrap_or(Value::Null);
                    if message.contains("service account")
                        && condition["reason"] == "InstallCheckFailed"
                    {
                        return Ok(Progress::Done((
                            plan.metadata.name.clone().unwrap_or_default(),
                            message,
                        )));
                    }
                }
                Ok(Progress::Pending(format!(
                    "no plan reports the account yet: {}",
                    Value::from(seen)
                )))
            },
        )
        .await?;
    println!("e2e-node:   InstallPlan {plan}: {message}");
    ensure!(
        message.contains(&format!("{ns}/installer")) && message.contains("may not create"),
        "the message does not name the account and what it may not do: {message}"
    );
    // OLM's words for the first refused step come first (docs/install-plans.md §10).
    let olm = format!("is forbidden: User \"system:serviceaccount:{ns}:installer\" cannot ");
    ensure!(
        message
            .find(&olm)
            .is_some_and(|at| at < message.find("may not create").unwrap_or(0)),
        "the message does not lead with OLM's sentence ({olm}…): {message}"
    );
    // Held for a while: still nothing written (the CRD first of all).
    tokio::time::sleep(std::time::Duration::from_secs(8)).await;
    ensure!(
        c.get_cluster_scoped(&crds(), CRD).await?.is_none(),
        "the CRD {CRD} was created although the plan's account may not install anything"
    );
    ensure!(
        c.api(&cluster::csvs(), ns)
            .list(&Default::default())
            .await?
            .items
            .is_empty(),
        "a CSV was created although the plan's account may not create it"
    );
    let phase = c
        .get(&cluster::install_plans(), ns, &plan)
        .await?
        .map(|p| text(&p, "/status/phase").to_owned());
    ensure!(
        phase.as_deref() == Some("Installing"),
        "the plan is {phase:?}: permission errors must not fail it"
    );
    // Granted: everything in the namespace. The same plan goes on.
    c.create(
        &cluster::core(
            "rbac.authorization.k8s.io",
            "v1",
            "RoleBinding",
            "rolebindings",
        ),
        ns,
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "installer-admin"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": "cluster-admin"},
            "subjects": [{"kind": "ServiceAccount", "name": "installer", "namespace": ns}],
        }),
    )
    .await?;
    wait_installed(c, ns, "demo", fixtures::V020).await?;
    println!(
        "e2e-node:   granted: the same plan installed {}",
        fixtures::V020
    );
    Ok(())
}

/// The upgrade with a changed CRD schema and a stored object, from a catalog image whose
/// v0.3.0 CRD gains a property.
pub async fn crd_update_with_objects(c: &Cluster, node: &RealNode) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    changed_schema_catalog(&fixtures::e2e_dir().join("catalog"), dir.path())?;
    let image = images::catalog_image(
        &images::olm_rs_image(Path::new(env!("CARGO_BIN_EXE_olm-rs")))?,
        dir.path(),
    )?
    .push(&node.registry, "olm-rs-e2e-catalog-crd-change", "v1")
    .await?;
    let ns = c.create_namespace("olm-rs-e2e-crd-update-").await?;
    let result = crd_update(c, &ns, &image).await;
    c.delete_namespace(&ns).await;
    result
}

async fn crd_update(c: &Cluster, ns: &str, image: &str) -> anyhow::Result<()> {
    image_catalog_ready(c, ns, "crd-change", image).await?;
    c.create(
        &cluster::subscriptions(),
        ns,
        fixtures::subscription(ns, "crd-change", "stable", "Automatic", None),
    )
    .await?;
    wait_installed(c, ns, "demo", fixtures::V020).await?;
    let widgets = cluster::core(CRD_UPDATE_GROUP, "v1", "Widget", "widgets");
    c.create(
        &widgets,
        ns,
        json!({"apiVersion": format!("{CRD_UPDATE_GROUP}/v1"), "kind": "Widget",
               "metadata": {"name": "kept"}, "spec": {}}),
    )
    .await
    .context("creating a Widget before the upgrade")?;
    c.merge_patch(
        &cluster::subscriptions(),
        ns,
        "demo",
        json!({"spec": {"channel": "fast"}}),
    )
    .await?;
    wait_installed(c, ns, "demo", fixtures::V030).await?;
    let crd = c
        .get_cluster_scoped(&crds(), &format!("widgets.{CRD_UPDATE_GROUP}"))
        .await?
        .context("the CRD is gone")?;
    ensure!(
        crd.data.to_string().contains("olmRsE2eAdded"),
        "the CRD was not updated to v0.3.0's schema"
    );
    ensure!(
        c.get(&widgets, ns, "kept").await?.is_some(),
        "the stored Widget is gone"
    );
    println!(
        "e2e-node:   upgraded to {} with a stored Widget and a changed CRD schema",
        fixtures::V030
    );
    Ok(())
}

/// The demo catalog in the group [`CRD_UPDATE_GROUP`], with v0.3.0's CRD given one more
/// (optional) property, so that its update must be checked against the stored objects. The
/// group of its own keeps the checks that install the demo beside this one on their CRD.
fn changed_schema_catalog(from: &Path, to: &Path) -> anyhow::Result<()> {
    let package = from.join("olm-rs-e2e-demo");
    let out = to.join("olm-rs-e2e-demo");
    std::fs::create_dir_all(&out)?;
    std::fs::copy(package.join("package.yaml"), out.join("package.yaml"))?;
    let text = std::fs::read_to_string(package.join("bundles.yaml"))?;
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut documents = Vec::new();
    let mut changed = false;
    for document in serde_yaml_ng::Deserializer::from_str(&text) {
        let doc: Value = serde::Deserialize::deserialize(document)?;
        let mut doc = regroup(&doc)?;
        let v030 = doc["name"] == fixtures::V030;
        for property in doc["properties"].as_array_mut().into_iter().flatten() {
            if property["type"] != "olm.bundle.object" {
                continue;
            }
            let data = property["value"]["data"].as_str().unwrap_or_default();
            let object: Value = serde_json::from_slice(&b64.decode(data)?)?;
            let mut object = regroup(&object)?;
            if v030 && object["kind"] == "CustomResourceDefinition" {
                for version in object["spec"]["versions"]
                    .as_array_mut()
                    .into_iter()
                    .flatten()
                {
                    let schema = &mut version["schema"]["openAPIV3Schema"];
                    if schema.is_object() {
                        schema["properties"]["olmRsE2eAdded"] = json!({"type": "string"});
                        changed = true;
                    }
                }
            }
            property["value"]["data"] = json!(b64.encode(serde_json::to_vec(&object)?));
        }
        documents.push(serde_yaml_ng::to_string(&doc)?);
    }
    if !changed {
        bail!("no CRD schema found in {} to change", fixtures::V030);
    }
    std::fs::write(out.join("bundles.yaml"), documents.join("---\n"))?;
    Ok(())
}

/// `value` with the demo API's group renamed to [`CRD_UPDATE_GROUP`].
fn regroup(value: &Value) -> anyhow::Result<Value> {
    let text = serde_json::to_string(value)?.replace("e2e.olm-rs.dev", CRD_UPDATE_GROUP);
    Ok(serde_json::from_str(&text)?)
}

fn crds() -> kube::core::ApiResource {
    cluster::core(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
    )
}

/// A catalog from an image by tag, polled (`registryPoll`): its registry pod really serves the
/// first content; a new digest pushed under the same tag is picked up and the Subscription
/// upgrades.
pub async fn registry_poll_upgrades(c: &Cluster, node: &RealNode) -> anyhow::Result<()> {
    let binary = Path::new(env!("CARGO_BIN_EXE_olm-rs"));
    let first = tempfile::tempdir()?;
    stable_up_to(&fixtures::e2e_dir().join("catalog"), first.path(), 1)?;
    let repo = "olm-rs-e2e-catalog-polled";
    images::catalog_image(&images::olm_rs_image(binary)?, first.path())?
        .push(&node.registry, repo, "latest")
        .await?;
    let ns = c.create_namespace("olm-rs-e2e-poll-").await?;
    let image = format!("{}/{repo}:latest", node.registry.host());
    let result = registry_poll(c, &ns, &image, node, binary).await;
    c.delete_namespace(&ns).await;
    result
}

async fn registry_poll(
    c: &Cluster,
    ns: &str,
    image: &str,
    node: &RealNode,
    binary: &Path,
) -> anyhow::Result<()> {
    polled_image_catalog_ready(c, ns, "polled", image, "10s").await?;
    c.create(
        &cluster::subscriptions(),
        ns,
        fixtures::subscription(ns, "polled", "stable", "Automatic", None),
    )
    .await?;
    wait_installed(c, ns, "demo", fixtures::V010).await?;
    // The same tag, new content: stable now reaches v0.2.0.
    let second = tempfile::tempdir()?;
    stable_up_to(&fixtures::e2e_dir().join("catalog"), second.path(), 2)?;
    let pushed = images::catalog_image(&images::olm_rs_image(binary)?, second.path())?
        .push(&node.registry, "olm-rs-e2e-catalog-polled", "latest")
        .await?;
    let started = std::time::Instant::now();
    if let Err(err) = wait_installed(c, ns, "demo", fixtures::V020).await {
        let status = c
            .get(&cluster::catalog_sources(), ns, "polled")
            .await?
            .and_then(|cs| cs.data.get("status").cloned())
            .unwrap_or(Value::Null);
        let seen = c.describe_namespace(ns).await;
        bail!("{err:#}; the CatalogSource's status: {status}; in the namespace:{seen}");
    }
    println!(
        "e2e-node:   new digest {} picked up and v0.2.0 installed {:.1}s after the push",
        pushed.rsplit('@').next().unwrap_or_default(),
        started.elapsed().as_secs_f64()
    );
    let catalog = c
        .get(&cluster::catalog_sources(), ns, "polled")
        .await?
        .context("the CatalogSource is gone")?;
    ensure!(
        field(&catalog, "/status/latestImageRegistryPoll").is_some(),
        "status.latestImageRegistryPoll is not set: {}",
        catalog.data.get("status").unwrap_or(&Value::Null)
    );
    Ok(())
}

/// The demo catalog with its `stable` channel cut to its first `entries` bundles.
fn stable_up_to(from: &Path, to: &Path, entries: usize) -> anyhow::Result<()> {
    let package = from.join("olm-rs-e2e-demo");
    let out = to.join("olm-rs-e2e-demo");
    std::fs::create_dir_all(&out)?;
    std::fs::copy(package.join("bundles.yaml"), out.join("bundles.yaml"))?;
    let text = std::fs::read_to_string(package.join("package.yaml"))?;
    let mut documents = Vec::new();
    for document in serde_yaml_ng::Deserializer::from_str(&text) {
        let mut doc: Value = serde::Deserialize::deserialize(document)?;
        if doc["schema"] == "olm.channel"
            && doc["name"] == "stable"
            && let Some(list) = doc["entries"].as_array_mut()
        {
            list.truncate(entries);
        }
        documents.push(serde_yaml_ng::to_string(&doc)?);
    }
    std::fs::write(out.join("package.yaml"), documents.join("---\n"))?;
    Ok(())
}

/// Bundles only as images (as in production catalogs): the demo bundles pushed as bundle images,
/// a catalog image whose bundles carry nothing but their image, and the controller pod pulls
/// them itself (through the chart's `registries.conf`) and installs.
pub async fn bundle_images_install(c: &Cluster, node: &RealNode) -> anyhow::Result<()> {
    let repo = "olm-rs-e2e-demo-bundle";
    for version in ["0.1.0", "0.2.0", "0.3.0"] {
        let dir = fixtures::e2e_dir()
            .join("bundles/olm-rs-e2e-demo")
            .join(version);
        images::bundle_image(&dir)?
            .push(&node.registry, repo, &format!("v{version}"))
            .await?;
    }
    let dir = tempfile::tempdir()?;
    let package = dir.path().join("olm-rs-e2e-demo");
    std::fs::create_dir_all(&package)?;
    std::fs::write(
        package.join("catalog.yaml"),
        fixtures::image_only_catalog(&node.registry.host(), repo)?,
    )?;
    let image = images::catalog_image(
        &images::olm_rs_image(Path::new(env!("CARGO_BIN_EXE_olm-rs")))?,
        dir.path(),
    )?
    .push(&node.registry, "olm-rs-e2e-catalog-image-bundles", "v1")
    .await?;
    let ns = c.create_namespace("olm-rs-e2e-bundle-images-").await?;
    let result = async {
        image_catalog_ready(c, &ns, "bundle-images", &image).await?;
        c.create(
            &cluster::subscriptions(),
            &ns,
            fixtures::subscription(&ns, "bundle-images", "fast", "Automatic", None),
        )
        .await?;
        wait_installed(c, &ns, "demo", fixtures::V030).await?;
        println!(
            "e2e-node:   {} installed from its bundle image",
            fixtures::V030
        );
        anyhow::Ok(())
    }
    .await;
    c.delete_namespace(&ns).await;
    result
}

/// A dependency resolved on the real cluster: a second package whose only bundle requires the
/// demo package (`olm.package.required`) and its Widget API; subscribing to it installs both,
/// each operator's pod running.
pub async fn dependency_installs(c: &Cluster, node: &RealNode) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    fixtures::dependent_catalog(&fixtures::e2e_dir().join("catalog"), dir.path())?;
    let image = images::catalog_image(
        &images::olm_rs_image(Path::new(env!("CARGO_BIN_EXE_olm-rs")))?,
        dir.path(),
    )?
    .push(&node.registry, "olm-rs-e2e-catalog-dependency", "v1")
    .await?;
    let ns = c.create_namespace("olm-rs-e2e-dependency-").await?;
    let result = async {
        image_catalog_ready(c, &ns, "dependency", &image).await?;
        let mut sub = fixtures::subscription(&ns, "dependency", "stable", "Automatic", None);
        sub["metadata"]["name"] = json!("dependent");
        sub["spec"]["name"] = json!(DEPENDENT);
        c.create(&cluster::subscriptions(), &ns, sub).await?;
        wait_installed(c, &ns, "dependent", &format!("{DEPENDENT}.v1.0.0")).await?;
        // The dependency came with it: its CSV Succeeded and both operators' pods run.
        let demo = c
            .wait_for("the demo package installed as a dependency", || async {
                let csvs = c
                    .api(&cluster::csvs(), &ns)
                    .list(&Default::default())
                    .await?;
                let demo = csvs.items.iter().find(|csv| {
                    csv.metadata.name.as_deref() == Some(fixtures::V020)
                        && text(csv, "/status/phase") == "Succeeded"
                });
                Ok(match demo {
                    Some(csv) => Progress::Done(csv.metadata.name.clone().unwrap_or_default()),
                    None => Progress::Pending("no Succeeded demo CSV yet".to_owned()),
                })
            })
            .await?;
        for deployment in [fixtures::DEPLOYMENT, DEPENDENT] {
            let d = c
                .get(&cluster::deployments(), &ns, deployment)
                .await?
                .with_context(|| format!("no Deployment {deployment}"))?;
            ensure!(
                field(&d, "/status/availableReplicas") == Some(&json!(1)),
                "Deployment {deployment} has no available pod: {}",
                d.data["status"]
            );
        }
        println!("e2e-node:   {DEPENDENT} installed with its dependency {demo}, both pods running");
        anyhow::Ok(())
    }
    .await;
    c.delete_namespace(&ns).await;
    result
}

/// `kubectl get packagemanifests` against the chart-deployed controller: the APIService the
/// chart creates becomes Available (the aggregator dials the serving pod) and lists the
/// packages of a catalog from an image, with the catalog's display name as OLM labels it.
pub async fn package_manifests_served_by_the_pod(
    c: &Cluster,
    catalog_image: &str,
) -> anyhow::Result<()> {
    let apiservices = cluster::core("apiregistration.k8s.io", "v1", "APIService", "apiservices");
    c.wait_for(
        "APIService v1.packages.operators.coreos.com to be Available",
        || async {
            let Some(service) = c
                .get_cluster_scoped(&apiservices, "v1.packages.operators.coreos.com")
                .await?
            else {
                return Ok(Progress::Pending("absent".to_owned()));
            };
            let available = field(&service, "/status/conditions")
                .and_then(Value::as_array)
                .and_then(|all| all.iter().find(|c| c["type"] == "Available"))
                .cloned()
                .unwrap_or(Value::Null);
            Ok(if available["status"] == "True" {
                Progress::Done(())
            } else {
                Progress::Pending(format!("Available: {available}"))
            })
        },
    )
    .await?;
    let ns = c.create_namespace("olm-rs-e2e-packages-").await?;
    let result = async {
        c.create(
            &cluster::catalog_sources(),
            &ns,
            fixtures::image_catalog(&ns, "packages", catalog_image),
        )
        .await?;
        wait_catalog_ready(c, &ns, "packages").await?;
        let path = format!(
            "/apis/packages.operators.coreos.com/v1/namespaces/{ns}/packagemanifests/{}",
            fixtures::PACKAGE
        );
        let manifest: Value = c
            .wait_for("the demo PackageManifest", || async {
                let request = http::Request::get(&path).body(Vec::new())?;
                Ok(match c.client.request_text(request).await {
                    Ok(text) => Progress::Done(serde_json::from_str(&text)?),
                    Err(err) => Progress::Pending(format!("{err}")),
                })
            })
            .await?;
        ensure!(
            manifest["status"]["catalogSource"] == "packages"
                && manifest["metadata"]["labels"]["catalog"] == "packages"
                && manifest["status"]["defaultChannel"] == "stable",
            "the PackageManifest served from the pod: {manifest}"
        );
        println!(
            "e2e-node:   kubectl get packagemanifests -n {ns}: {} (channels {})",
            fixtures::PACKAGE,
            manifest["status"]["channels"]
                .as_array()
                .map(|c| c.len())
                .unwrap_or_default()
        );
        anyhow::Ok(())
    }
    .await;
    c.delete_namespace(&ns).await;
    result
}

/// An OperatorGroup for `ns` itself and a CatalogSource `name` from `image` there, ready.
pub(crate) async fn image_catalog_ready(
    c: &Cluster,
    ns: &str,
    name: &str,
    image: &str,
) -> anyhow::Result<()> {
    catalog_ready(c, ns, name, fixtures::image_catalog(ns, name, image)).await
}

/// As [`image_catalog_ready`], the image's digest polled `every` (`registryPoll.interval`).
pub(crate) async fn polled_image_catalog_ready(
    c: &Cluster,
    ns: &str,
    name: &str,
    image: &str,
    every: &str,
) -> anyhow::Result<()> {
    let mut catalog = fixtures::image_catalog(ns, name, image);
    catalog["spec"]["updateStrategy"] = json!({"registryPoll": {"interval": every}});
    catalog_ready(c, ns, name, catalog).await
}

async fn catalog_ready(c: &Cluster, ns: &str, name: &str, catalog: Value) -> anyhow::Result<()> {
    c.create(
        &cluster::operator_groups(),
        ns,
        fixtures::operator_group(ns),
    )
    .await?;
    c.create(&cluster::catalog_sources(), ns, catalog).await?;
    wait_catalog_ready(c, ns, name).await
}

//! Rollback of a failed upgrade and a pin that outlives catalog polls, with real operator pods
//! (docs/upgrades.md §1, §3). Each check builds its own catalog image from the demo package
//! (e2e/catalog/): v0.2.0's operator image is one the registry does not have, with a 10 s
//! progress deadline, so its Deployment never becomes ready and its CSV fails quickly.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context as _, ensure};
use base64::Engine as _;
use serde_json::{Value, json};

use crate::cluster::{self, Cluster, Progress, field, text};
use crate::fixtures::{self, V010, V020, V030};
use crate::install_checks::{image_catalog_ready, polled_image_catalog_ready};
use crate::journeys::{running_version, wait_gone, wait_installed};
use crate::real_control_plane::images;
use crate::real_control_plane::real_node::RealNode;

const POLICY: &str = "olm-rs.io/on-failed-upgrade";
const MARK: &str = "olm-rs.io/failed-upgrade";
/// The group the refused-rollback check's CRD lives in, apart from the demo's.
const OWN_GROUP: &str = "rollback.olm-rs.dev";

/// (a) v0.1.0 runs with a custom resource; the approved upgrade to v0.2.0 never becomes ready;
/// the rollback plan (no approval, under Manual) restores v0.1.0: its pods serve again, the
/// custom resource is unchanged, nothing of v0.2.0 is left, and v0.2.0 is not tried again.
pub async fn failed_upgrade_rolled_back(c: &Cluster, node: &RealNode) -> anyhow::Result<()> {
    let image = push_catalog(node, "olm-rs-e2e-rollback", &broken_upgrade(node, None)?).await?;
    let ns = c.create_namespace("olm-rs-e2e-rollback-").await?;
    let result = rolled_back(c, &ns, &image).await;
    c.delete_namespace(&ns).await;
    result
}

async fn rolled_back(c: &Cluster, ns: &str, image: &str) -> anyhow::Result<()> {
    let mut sub = setup(c, ns, image, "Manual").await?;
    sub["metadata"]["annotations"] = json!({POLICY: "rollback"});
    c.create(&cluster::subscriptions(), ns, sub).await?;
    let first = pending_plan(c, ns, None).await?;
    approve(c, ns, &first).await?;
    wait_installed(c, ns, "demo", V010).await?;
    let widgets = cluster::core("e2e.olm-rs.dev", "v1", "Widget", "widgets");
    let widget = c
        .create(
            &widgets,
            ns,
            json!({"apiVersion": "e2e.olm-rs.dev/v1", "kind": "Widget",
                   "metadata": {"name": "kept", "namespace": ns}, "spec": {"size": 3}}),
        )
        .await?;

    let upgrade = pending_plan(c, ns, Some(&first)).await?;
    approve(c, ns, &upgrade).await?;
    let approved = Instant::now();
    let failed = wait_failed_or_gone(c, ns, V020).await?;
    let failed_after = approved.elapsed();
    wait_gone(c, &cluster::csvs(), ns, V020).await?;
    wait_installed(c, ns, "demo", V010).await?;
    wait_serving(c, ns, "0.1.0").await?;
    let restored = failed.elapsed();
    println!(
        "e2e-node:   v0.2.0 Failed {:.1}s after its approval; v0.1.0 Succeeded and serving again, v0.2.0 gone, {:.1}s after the failure",
        failed_after.as_secs_f64(),
        restored.as_secs_f64()
    );

    let sub = c
        .get(&cluster::subscriptions(), ns, "demo")
        .await?
        .context("the Subscription is gone")?;
    let mark = mark_of(&sub);
    ensure!(mark.as_deref() == Some("0.2.0"), "the mark: {mark:?}");
    let rolled = condition(&sub, "RolledBack").context("no RolledBack condition")?;
    ensure!(
        rolled["status"] == "True" && rolled["reason"] == "InstallCheckFailed",
        "RolledBack: {rolled}"
    );
    let message = rolled["message"].as_str().unwrap_or_default();
    ensure!(
        message.contains(V020) && message.contains("rolled back to olm-rs-e2e-demo.v0.1.0"),
        "RolledBack: {message}"
    );
    let after = c
        .get(&widgets, ns, "kept")
        .await?
        .context("the Widget is gone")?;
    // Untouched by the rollback: its content, generation, annotations and labels. The one
    // write it may have had is the Operator API's component label (docs/operator-api.md §2),
    // which can land at any time after the Widget was made, so that label is left out.
    let kept = |w: &kube::core::DynamicObject| {
        let labels: std::collections::BTreeMap<String, String> = w
            .metadata
            .labels
            .clone()
            .unwrap_or_default()
            .into_iter()
            .filter(|(k, _)| !k.starts_with("operators.coreos.com/"))
            .collect();
        (
            w.data.clone(),
            w.metadata.generation,
            w.metadata.annotations.clone().unwrap_or_default(),
            labels,
        )
    };
    ensure!(
        kept(&after) == kept(&widget),
        "the Widget changed: {:?} -> {:?}",
        kept(&widget),
        kept(&after)
    );
    nothing_left_of(c, ns, V020).await?;

    // No retry loop: the Subscription holds at v0.1.0 and says why.
    let plans = c
        .api(&cluster::install_plans(), ns)
        .list(&Default::default())
        .await?
        .items
        .len();
    let held = version_held(c, ns).await?;
    ensure!(held.contains("0.2.0"), "VersionHeld: {held}");
    tokio::time::sleep(Duration::from_secs(5)).await;
    let again = c
        .api(&cluster::install_plans(), ns)
        .list(&Default::default())
        .await?
        .items
        .len();
    ensure!(
        again == plans,
        "{plans} plans, then {again}: v0.2.0 tried again"
    );
    ensure!(
        running_version(c, ns).await?.as_deref() == Some("0.1.0"),
        "v0.1.0 no longer runs"
    );
    println!("e2e-node:   held at v0.1.0 after the rollback: {held}");
    Ok(())
}

/// (b) v0.2.0 of a package in a group of its own stores its custom resources at `v2` and no
/// longer serves `v1`, which v0.1.0 owns: its failure is not rolled back, and the reason is
/// given; v0.2.0 stays as it failed, v0.1.0 as it was.
pub async fn rollback_refused_after_crd_change(c: &Cluster, node: &RealNode) -> anyhow::Result<()> {
    let image = push_catalog(
        node,
        "olm-rs-e2e-rollback-refused",
        &broken_upgrade(node, Some(OWN_GROUP))?,
    )
    .await?;
    let ns = c.create_namespace("olm-rs-e2e-rollback-refused-").await?;
    let result = refused(c, &ns, &image).await;
    c.delete_namespace(&ns).await;
    result
}

async fn refused(c: &Cluster, ns: &str, image: &str) -> anyhow::Result<()> {
    let mut sub = setup(c, ns, image, "Automatic").await?;
    sub["metadata"]["annotations"] = json!({POLICY: "rollback"});
    c.create(&cluster::subscriptions(), ns, sub).await?;
    // v0.1.0 runs, then the upgrade follows at once (Automatic).
    let started = Instant::now();
    let message = c
        .wait_for(format!("RolledBack=False on {ns}/demo"), || async {
            let sub = c
                .get(&cluster::subscriptions(), ns, "demo")
                .await?
                .context("the Subscription is gone")?;
            Ok(match condition(&sub, "RolledBack") {
                Some(c) if c["status"] == "False" => {
                    Progress::Done(c["message"].as_str().unwrap_or_default().to_owned())
                }
                other => Progress::Pending(format!(
                    "RolledBack {other:?}, installedCSV {:?}",
                    text(&sub, "/status/installedCSV")
                )),
            })
        })
        .await?;
    let crd = format!("widgets.{OWN_GROUP}");
    ensure!(
        message.contains(&format!(
            "it owns CRD {crd} at version v1, which the cluster's CRD no longer serves (served: v2)"
        )),
        "RolledBack: {message}"
    );
    let phase = |name: &'static str| async move {
        let csv = c.get(&cluster::csvs(), ns, name).await?;
        anyhow::Ok(csv.map(|c| text(&c, "/status/phase").to_owned()))
    };
    ensure!(
        phase(V020).await?.as_deref() == Some("Failed"),
        "v0.2.0 is no longer as it failed"
    );
    ensure!(
        phase(V010).await?.as_deref() == Some("Replacing"),
        "v0.1.0 is no longer as it was"
    );
    let sub = c
        .get(&cluster::subscriptions(), ns, "demo")
        .await?
        .context("the Subscription is gone")?;
    ensure!(
        mark_of(&sub).is_none(),
        "a mark was left although nothing was rolled back"
    );
    println!(
        "e2e-node:   rollback refused {:.1}s after the Subscription was made: {message}",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// (c) Pinned at v0.1.0 while the catalog image, polled every 10 s, gains v0.2.0 and then
/// v0.3.0: each new bundle is seen (the condition names it) and v0.1.0 stays.
pub async fn pin_outlives_catalog_polls(c: &Cluster, node: &RealNode) -> anyhow::Result<()> {
    let repo = "olm-rs-e2e-catalog-pinned";
    let image = push_catalog(node, repo, &fast_up_to(1)?).await?;
    let ns = c.create_namespace("olm-rs-e2e-pin-").await?;
    let result = pinned(c, &ns, &image, node, repo).await;
    c.delete_namespace(&ns).await;
    result
}

async fn pinned(
    c: &Cluster,
    ns: &str,
    image: &str,
    node: &RealNode,
    repo: &str,
) -> anyhow::Result<()> {
    polled_image_catalog_ready(c, ns, "pinned", image, "10s").await?;
    let mut sub = fixtures::subscription(ns, "pinned", "fast", "Automatic", None);
    sub["metadata"]["annotations"] = json!({"olm-rs.io/version": "0.1.0"});
    c.create(&cluster::subscriptions(), ns, sub).await?;
    wait_installed(c, ns, "demo", V010).await?;
    for (entries, newest) in [(2, V020), (3, V030)] {
        push_catalog(node, repo, &fast_up_to(entries)?).await?;
        let pushed = Instant::now();
        let held = c
            .wait_for(format!("VersionHeld naming {newest}"), || async {
                let sub = c
                    .get(&cluster::subscriptions(), ns, "demo")
                    .await?
                    .context("the Subscription is gone")?;
                let message = condition(&sub, "VersionHeld")
                    .and_then(|c| c["message"].as_str().map(str::to_owned))
                    .unwrap_or_default();
                Ok(if message.contains(newest) {
                    Progress::Done(message)
                } else {
                    Progress::Pending(format!("VersionHeld {message:?}"))
                })
            })
            .await?;
        ensure!(
            text(
                &c.get(&cluster::subscriptions(), ns, "demo")
                    .await?
                    .context("the Subscription is gone")?,
                "/status/installedCSV"
            ) == V010,
            "the pin did not hold"
        );
        ensure!(
            c.get(&cluster::csvs(), ns, V020).await?.is_none()
                && c.get(&cluster::csvs(), ns, V030).await?.is_none(),
            "a newer CSV was installed"
        );
        println!(
            "e2e-node:   {newest} seen {:.1}s after its push; pinned at v0.1.0: {held}",
            pushed.elapsed().as_secs_f64()
        );
    }
    ensure!(
        running_version(c, ns).await?.as_deref() == Some("0.1.0"),
        "v0.1.0 no longer runs"
    );
    Ok(())
}

// ---- helpers -----------------------------------------------------------------------------

/// The OperatorGroup and CatalogSource of `ns`; returns the Subscription to create (starting
/// at v0.1.0, channel `stable`).
async fn setup(c: &Cluster, ns: &str, image: &str, approval: &str) -> anyhow::Result<Value> {
    image_catalog_ready(c, ns, "rollback", image).await?;
    Ok(fixtures::subscription(
        ns,
        "rollback",
        "stable",
        approval,
        Some(V010),
    ))
}

async fn push_catalog(node: &RealNode, repo: &str, catalog: &str) -> anyhow::Result<String> {
    let dir = tempfile::tempdir()?;
    let package = dir.path().join(fixtures::PACKAGE);
    std::fs::create_dir_all(&package)?;
    std::fs::write(package.join("catalog.yaml"), catalog)?;
    let olm_rs = images::olm_rs_image(Path::new(env!("CARGO_BIN_EXE_olm-rs")))?;
    images::catalog_image(&olm_rs, dir.path())?
        .push(&node.registry, repo, "latest")
        .await?;
    Ok(format!("{}/{repo}:latest", node.registry.host()))
}

/// The demo package's documents (package, channels, bundles), bundles with decoded objects.
fn demo_documents() -> anyhow::Result<Vec<Value>> {
    let dir = fixtures::e2e_dir().join("catalog").join(fixtures::PACKAGE);
    let mut out = Vec::new();
    for file in ["package.yaml", "bundles.yaml"] {
        let text = std::fs::read_to_string(dir.join(file))?;
        for document in serde_yaml_ng::Deserializer::from_str(&text) {
            let doc: Value = serde::Deserialize::deserialize(document)?;
            if doc.is_object() {
                out.push(doc);
            }
        }
    }
    Ok(out)
}

fn bundle_objects(bundle: &Value) -> anyhow::Result<Vec<Value>> {
    let engine = base64::engine::general_purpose::STANDARD;
    bundle["properties"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["type"] == "olm.bundle.object")
        .map(|p| {
            let data = engine.decode(p["value"]["data"].as_str().unwrap_or_default())?;
            Ok(serde_json::from_slice(&data)?)
        })
        .collect()
}

fn with_objects(mut bundle: Value, objects: &[Value]) -> anyhow::Result<Value> {
    let engine = base64::engine::general_purpose::STANDARD;
    let props = bundle["properties"]
        .as_array_mut()
        .context("a bundle without properties")?;
    props.retain(|p| p["type"] != "olm.bundle.object");
    for o in objects {
        props.push(json!({"type": "olm.bundle.object",
                          "value": {"data": engine.encode(serde_json::to_vec(o)?)}}));
    }
    Ok(bundle)
}

/// Renames the demo API's group (objects and properties alike).
fn regroup(value: Value, group: &str) -> anyhow::Result<Value> {
    let text = serde_json::to_string(&value)?.replace("e2e.olm-rs.dev", group);
    Ok(serde_json::from_str(&text)?)
}

/// `stable`: v0.1.0 ← v0.2.0, where v0.2.0's operator image does not exist (10 s progress
/// deadline). With `group`, the API lives in that group and v0.2.0's CRD stores `v2` and no
/// longer serves `v1`.
fn broken_upgrade(node: &RealNode, group: Option<&str>) -> anyhow::Result<String> {
    let missing = format!("{}/olm-rs-e2e-missing:never", node.registry.host());
    let mut out = String::new();
    for doc in demo_documents()? {
        let mut doc = match group {
            Some(g) => regroup(doc, g)?,
            None => doc,
        };
        if doc["schema"] == "olm.channel" {
            if doc["name"] != "stable" {
                continue;
            }
        } else if doc["schema"] == "olm.bundle" {
            if doc["name"] == V030 {
                continue;
            }
            let mut objects = bundle_objects(&doc)?;
            if let Some(g) = group {
                objects = objects
                    .into_iter()
                    .map(|o| regroup(o, g))
                    .collect::<anyhow::Result<_>>()?;
            }
            if doc["name"] == V020 {
                for o in &mut objects {
                    break_object(o, &missing, group.is_some());
                }
                if group.is_some()
                    && let Some(props) = doc["properties"].as_array_mut()
                {
                    for p in props.iter_mut().filter(|p| p["type"] == "olm.gvk") {
                        p["value"]["version"] = json!("v2");
                    }
                }
            }
            doc = with_objects(doc, &objects)?;
        }
        out.push_str("---\n");
        out.push_str(&serde_yaml_ng::to_string(&doc)?);
    }
    Ok(out)
}

/// v0.2.0's objects broken: its Deployment's image `missing`, its progress deadline 10 s; with
/// `retire_v1`, its CRD stores `v2` and no longer serves `v1`, and its CSV owns `v2`.
fn break_object(o: &mut Value, missing: &str, retire_v1: bool) {
    if o["kind"] == "ClusterServiceVersion" {
        if let Some(deployments) = o
            .pointer_mut("/spec/install/spec/deployments")
            .and_then(Value::as_array_mut)
        {
            for d in deployments {
                d["spec"]["progressDeadlineSeconds"] = json!(10);
                if let Some(containers) = d
                    .pointer_mut("/spec/template/spec/containers")
                    .and_then(Value::as_array_mut)
                {
                    for container in containers {
                        container["image"] = json!(missing);
                    }
                }
            }
        }
        if retire_v1
            && let Some(owned) = o
                .pointer_mut("/spec/customresourcedefinitions/owned")
                .and_then(Value::as_array_mut)
        {
            for d in owned {
                d["version"] = json!("v2");
            }
        }
    }
    if o["kind"] == "CustomResourceDefinition"
        && retire_v1
        && let Some(versions) = o
            .pointer_mut("/spec/versions")
            .and_then(Value::as_array_mut)
        && let Some(v1) = versions.first().cloned()
    {
        let mut old = v1.clone();
        old["served"] = json!(false);
        old["storage"] = json!(false);
        let mut new = v1;
        new["name"] = json!("v2");
        *versions = vec![old, new];
    }
}

/// The demo package with only its `fast` channel, cut to its first `entries` bundles, and only
/// those bundles.
fn fast_up_to(entries: usize) -> anyhow::Result<String> {
    let kept = [V010, V020, V030];
    let kept = &kept[..entries.min(kept.len())];
    let mut out = String::new();
    for mut doc in demo_documents()? {
        if doc["schema"] == "olm.channel" {
            if doc["name"] != "fast" {
                continue;
            }
            if let Some(list) = doc["entries"].as_array_mut() {
                list.truncate(entries);
            }
        }
        if doc["schema"] == "olm.bundle" && !kept.iter().any(|k| doc["name"] == *k) {
            continue;
        }
        if doc["schema"] == "olm.package" {
            doc["defaultChannel"] = json!("fast");
        }
        out.push_str("---\n");
        out.push_str(&serde_yaml_ng::to_string(&doc)?);
    }
    Ok(out)
}

/// The Subscription's `olm-rs.io/failed-upgrade`.
fn mark_of(sub: &kube::api::DynamicObject) -> Option<String> {
    sub.metadata.annotations.as_ref()?.get(MARK).cloned()
}

fn condition<'a>(sub: &'a kube::api::DynamicObject, kind: &str) -> Option<&'a Value> {
    field(sub, "/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

async fn version_held(c: &Cluster, ns: &str) -> anyhow::Result<String> {
    c.wait_for(
        format!("VersionHeld FailedVersionSkipped on {ns}/demo"),
        || async {
            let sub = c
                .get(&cluster::subscriptions(), ns, "demo")
                .await?
                .context("the Subscription is gone")?;
            Ok(match condition(&sub, "VersionHeld") {
                Some(h) if h["reason"] == "FailedVersionSkipped" => {
                    Progress::Done(h["message"].as_str().unwrap_or_default().to_owned())
                }
                other => Progress::Pending(format!("VersionHeld {other:?}")),
            })
        },
    )
    .await
}

/// The Subscription's next plan (not `not`), once it waits for approval.
async fn pending_plan(c: &Cluster, ns: &str, not: Option<&str>) -> anyhow::Result<String> {
    c.wait_for(format!("a plan to approve in {ns}"), || async {
        let sub = c
            .get(&cluster::subscriptions(), ns, "demo")
            .await?
            .context("the Subscription is gone")?;
        let plan = text(&sub, "/status/installPlanRef/name");
        let state = text(&sub, "/status/state");
        Ok(
            if plan.is_empty() || state != "UpgradePending" || Some(plan) == not {
                Progress::Pending(format!("state {state:?}, installPlanRef {plan:?}"))
            } else {
                Progress::Done(plan.to_owned())
            },
        )
    })
    .await
}

async fn approve(c: &Cluster, ns: &str, plan: &str) -> anyhow::Result<()> {
    c.merge_patch(
        &cluster::install_plans(),
        ns,
        plan,
        json!({"spec": {"approved": true}}),
    )
    .await?;
    Ok(())
}

/// When `csv`, once it exists, was first seen `Failed` (or already gone again: then now).
async fn wait_failed_or_gone(c: &Cluster, ns: &str, csv: &str) -> anyhow::Result<Instant> {
    c.wait_for(format!("{csv} to be created"), || async {
        Ok(match c.get(&cluster::csvs(), ns, csv).await? {
            Some(_) => Progress::Done(()),
            None => Progress::Pending("not yet".to_owned()),
        })
    })
    .await?;
    c.wait_for(format!("{csv} to fail"), || async {
        Ok(match c.get(&cluster::csvs(), ns, csv).await? {
            None => Progress::Done(Instant::now()),
            Some(o) if text(&o, "/status/phase") == "Failed" => Progress::Done(Instant::now()),
            Some(o) => Progress::Pending(format!(
                "phase {:?}: {:?}",
                text(&o, "/status/phase"),
                text(&o, "/status/message")
            )),
        })
    })
    .await
}

/// The operator Deployment runs `version` with a ready pod.
async fn wait_serving(c: &Cluster, ns: &str, version: &str) -> anyhow::Result<()> {
    c.wait_for(format!("v{version}'s pods to serve"), || async {
        let running = running_version(c, ns).await?;
        let deployment = c
            .get(&cluster::deployments(), ns, fixtures::DEPLOYMENT)
            .await?;
        let ready = deployment
            .as_ref()
            .and_then(|d| field(d, "/status/readyReplicas"))
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let updated = deployment
            .as_ref()
            .and_then(|d| field(d, "/status/updatedReplicas"))
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let total = deployment
            .as_ref()
            .and_then(|d| field(d, "/status/replicas"))
            .and_then(Value::as_i64)
            .unwrap_or(0);
        Ok(
            if running.as_deref() == Some(version) && ready >= 1 && updated == total {
                Progress::Done(())
            } else {
                Progress::Pending(format!(
                    "version {running:?}, ready {ready}, updated {updated} of {total}"
                ))
            },
        )
    })
    .await
}

/// No pod of the namespace runs the missing image and no Role is owned by `csv` any more.
async fn nothing_left_of(c: &Cluster, ns: &str, csv: &str) -> anyhow::Result<()> {
    let pods = cluster::core("", "v1", "Pod", "pods");
    let roles = cluster::core("rbac.authorization.k8s.io", "v1", "Role", "roles");
    c.wait_for(format!("nothing of {csv} left in {ns}"), || async {
        let stale_pods: Vec<String> = c
            .api(&pods, ns)
            .list(&Default::default())
            .await?
            .items
            .into_iter()
            .filter(|p| {
                serde_json::to_string(&p.data).is_ok_and(|t| t.contains("olm-rs-e2e-missing"))
            })
            .filter_map(|p| p.metadata.name)
            .collect();
        let owned_roles: Vec<String> = c
            .api(&roles, ns)
            .list(&kube::api::ListParams::default().labels(&format!("olm.owner={csv}")))
            .await?
            .items
            .into_iter()
            .filter_map(|r| r.metadata.name)
            .collect();
        Ok(if stale_pods.is_empty() && owned_roles.is_empty() {
            Progress::Done(())
        } else {
            Progress::Pending(format!("pods {stale_pods:?}, roles {owned_roles:?}"))
        })
    })
    .await
}

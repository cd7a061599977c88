//! kind's local-registry recipe, as operator-sdk users test their catalogs: images pushed to a
//! registry and named `localhost:5001/…`, a name only the node's containerd resolves (its
//! `hosts.toml` mirrors `localhost:5001` to the registry, tests/real_control_plane/real_node.rs);
//! inside the controller's pod `localhost:5001` is nothing. Under the chart's default settings
//! the catalog is served by its registry pod and the bundle unpacked by a pod that runs the
//! bundle image (docs/catalog-images.md §7, docs/bundle-images.md), and the package installs —
//! each status saying which mode served it and why. The plan is approved only after every
//! controller pod was replaced, so the new leader, whose bundle cache is empty, has a pod
//! unpack the plan's pinned digest again.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context as _, ensure};
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, DeleteParams, ListParams};
use serde_json::{Value, json};

use crate::chart_install;
use crate::cluster::{self, Cluster, Progress, field};
use crate::fixtures;
use crate::journeys::{wait_catalog_ready, wait_installed};
use crate::real_control_plane::images;
use crate::real_control_plane::real_node::{KIND_REGISTRY, RealNode};

pub async fn installs_through_the_node_mirror(c: &Cluster, node: &RealNode) -> anyhow::Result<()> {
    let started = Instant::now();
    let repo = "olm-rs-e2e-kind-bundle";
    // The catalog lists three bundles; the channel head is the one installed.
    let head = fixtures::e2e_dir().join("bundles/olm-rs-e2e-demo/0.3.0");
    images::bundle_image(&head)?
        .push(&node.registry, repo, "v0.3.0")
        .await?;
    let dir = tempfile::tempdir()?;
    let package = dir.path().join("olm-rs-e2e-demo");
    std::fs::create_dir_all(&package)?;
    std::fs::write(
        package.join("catalog.yaml"),
        fixtures::image_only_catalog(KIND_REGISTRY, repo)?,
    )?;
    images::catalog_image(
        &images::olm_rs_image(Path::new(env!("CARGO_BIN_EXE_olm-rs")))?,
        dir.path(),
    )?
    .push(&node.registry, "olm-rs-e2e-kind-catalog", "v1")
    .await?;
    let catalog = format!("{KIND_REGISTRY}/olm-rs-e2e-kind-catalog:v1");

    let ns = c.create_namespace("olm-rs-e2e-kind-").await?;
    let result = async {
        c.create(
            &cluster::operator_groups(),
            &ns,
            fixtures::operator_group(&ns),
        )
        .await?;
        // The chart's default serving (in-process), not the fixture's pod annotation.
        let mut source = fixtures::image_catalog(&ns, "kind", &catalog);
        source["metadata"]
            .as_object_mut()
            .context("a CatalogSource without metadata")?
            .remove("annotations");
        c.create(&cluster::catalog_sources(), &ns, source).await?;
        wait_catalog_ready(c, &ns, "kind").await?;
        let source = c
            .get(&cluster::catalog_sources(), &ns, "kind")
            .await?
            .context("the CatalogSource is gone")?;
        let served = condition(&source, "CatalogContentServed");
        ensure!(
            served["reason"] == "RegistryPod"
                && text_of(&served["message"]).contains("localhost:5001"),
            "the catalog does not say a registry pod serves it because olm-rs could not pull it: {}",
            field(&source, "/status").unwrap_or(&Value::Null)
        );
        println!(
            "e2e-node:   catalog {catalog} served by its registry pod ({:.1}s)",
            started.elapsed().as_secs_f64()
        );

        c.create(
            &cluster::subscriptions(),
            &ns,
            fixtures::subscription(&ns, "kind", "fast", "Manual", None),
        )
        .await?;
        let plan = plan_awaiting_approval(c, &ns).await?;
        // Every controller pod replaced before approval: the new leader's bundle cache is
        // empty, and the plan's bundle can come only from a second unpack pod (the pinned
        // digest, which the controller cannot pull either).
        restart_controllers(c).await?;
        c.merge_patch(
            &cluster::install_plans(),
            &ns,
            &plan,
            json!({"spec": {"approved": true}}),
        )
        .await?;
        wait_installed(c, &ns, "demo", fixtures::V030).await?;

        // The plan's events say the bundle went to a pod, why, and that the pod handed it back.
        let events: Api<Event> = Api::namespaced(c.client.clone(), &ns);
        let events = events.list(&ListParams::default()).await?.items;
        let said = |reason: &str| {
            events
                .iter()
                .filter(|e| e.reason.as_deref() == Some(reason))
                .filter_map(|e| e.message.clone())
                .collect::<Vec<_>>()
        };
        let to_pod = said("BundleUnpackingInPod");
        ensure!(
            to_pod.iter().any(|m| m.contains(&format!("{KIND_REGISTRY}/{repo}:v0.3.0"))
                && m.contains("could not pull")),
            "no BundleUnpackingInPod event naming the bundle image and why: {to_pod:?}"
        );
        let unpacked = said("BundleUnpacked");
        ensure!(
            unpacked.iter().any(|m| m.contains("in pod")),
            "no BundleUnpacked event saying a pod unpacked it: {unpacked:?}"
        );
        // The unpack pod is gone once its bundle was read.
        let pods: Api<Pod> = Api::namespaced(c.client.clone(), &ns);
        let left = pods
            .list(&ListParams::default().labels("operatorframework.io/bundle-unpack-ref"))
            .await?
            .items;
        ensure!(
            left.iter().all(|p| p.metadata.deletion_timestamp.is_some()),
            "unpack pods left behind: {:?}",
            left.iter().map(|p| &p.metadata.name).collect::<Vec<_>>()
        );
        println!(
            "e2e-node:   {} installed from {KIND_REGISTRY} through the node's mirror, bundle unpacked by a pod, again after the controllers restarted ({:.1}s)",
            fixtures::V030,
            started.elapsed().as_secs_f64()
        );
        anyhow::Ok(())
    }
    .await;
    c.delete_namespace(&ns).await;
    result
}

/// The Subscription's plan, once its bundle is unpacked and it waits for approval.
async fn plan_awaiting_approval(c: &Cluster, ns: &str) -> anyhow::Result<String> {
    c.wait_for(
        format!("the plan of Subscription {ns}/demo to wait for approval"),
        || async {
            let sub = c
                .get(&cluster::subscriptions(), ns, "demo")
                .await?
                .context("the Subscription is gone")?;
            let name = field(&sub, "/status/installPlanRef/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            if name.is_empty() {
                return Ok(Progress::Pending("no plan yet".to_owned()));
            }
            let plan = c
                .get(&cluster::install_plans(), ns, &name)
                .await?
                .with_context(|| format!("plan {name} is gone"))?;
            let phase = field(&plan, "/status/phase")
                .and_then(Value::as_str)
                .unwrap_or_default();
            Ok(
                if phase == "RequiresApproval" && field(&plan, "/status/bundleLookups").is_none() {
                    Progress::Done(name)
                } else {
                    Progress::Pending(format!(
                        "plan {name}: {}",
                        plan.data.get("status").unwrap_or(&Value::Null)
                    ))
                },
            )
        },
    )
    .await
}

/// Deletes every controller pod and waits for their replacements to be Ready and one to lead.
async fn restart_controllers(c: &Cluster) -> anyhow::Result<()> {
    let before: Vec<String> = chart_install::controller_pods(&c.client)
        .await?
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), chart_install::NAMESPACE);
    for name in &before {
        pods.delete(name, &DeleteParams::default()).await?;
    }
    let ready = c
        .wait_for("new controller pods to be Ready", || async {
            let now = chart_install::controller_pods(&c.client).await?;
            let fresh: Vec<String> = now
                .iter()
                .filter(|(name, ready)| *ready && !before.contains(name))
                .map(|(name, _)| name.clone())
                .collect();
            Ok(if fresh.len() == before.len() {
                Progress::Done(fresh)
            } else {
                Progress::Pending(format!("{now:?}"))
            })
        })
        .await?;
    chart_install::wait_leader(&c.client, &ready, c.settings.timeout).await?;
    Ok(())
}

fn condition(object: &kube::api::DynamicObject, kind: &str) -> Value {
    field(object, "/status/conditions")
        .and_then(Value::as_array)
        .and_then(|all| all.iter().find(|c| c["type"] == kind))
        .cloned()
        .unwrap_or(Value::Null)
}

fn text_of(value: &Value) -> &str {
    value.as_str().unwrap_or_default()
}

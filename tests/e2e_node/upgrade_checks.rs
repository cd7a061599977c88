//! Version ranges and a downgrade with real operator pods (docs/upgrades.md): a range holds
//! below the head, widening it upgrades, narrowing it with `olm-rs.io/allow-downgrade` installs
//! the older version again and the newer CSV goes.

use anyhow::Context as _;
use serde_json::{Value, json};

use crate::cluster::{self, Cluster, Progress, field, text};
use crate::fixtures;
use crate::install_checks::image_catalog_ready;
use crate::journeys::{wait_gone, wait_installed};

pub async fn range_then_downgrade(c: &Cluster) -> anyhow::Result<()> {
    let ns = c.create_namespace("olm-rs-e2e-versions-").await?;
    let result = journey(c, &ns).await;
    c.delete_namespace(&ns).await;
    result
}

async fn journey(c: &Cluster, ns: &str) -> anyhow::Result<()> {
    let image = c.settings.catalog_image.clone();
    image_catalog_ready(c, ns, "versions", &image).await?;
    let mut sub = fixtures::subscription(ns, "versions", "fast", "Automatic", None);
    sub["metadata"]["annotations"] = json!({"olm-rs.io/version": "<0.2.0"});
    c.create(&cluster::subscriptions(), ns, sub).await?;

    // Held below the head: v0.1.0 runs, the condition names v0.3.0.
    wait_installed(c, ns, "demo", fixtures::V010).await?;
    let held = version_held(c, ns, "NewerVersionOutsideRange").await?;
    anyhow::ensure!(held.contains(fixtures::V030), "VersionHeld: {held}");
    println!("e2e-node:   held at {} by <0.2.0: {held}", fixtures::V010);

    // Widened: the upgrade follows.
    annotate(c, ns, json!({"olm-rs.io/version": "<0.3.0"})).await?;
    wait_installed(c, ns, "demo", fixtures::V020).await?;
    wait_gone(c, &cluster::csvs(), ns, fixtures::V010).await?;

    // Narrowed, downgrade allowed: v0.1.0 again, v0.2.0 gone, the operator's pods ready.
    annotate(
        c,
        ns,
        json!({"olm-rs.io/version": "<0.2.0", "olm-rs.io/allow-downgrade": "true"}),
    )
    .await?;
    wait_installed(c, ns, "demo", fixtures::V010).await?;
    wait_gone(c, &cluster::csvs(), ns, fixtures::V020).await?;
    let deployment = c
        .get(&cluster::deployments(), ns, fixtures::DEPLOYMENT)
        .await?
        .context("the operator's Deployment is gone")?;
    let ready = field(&deployment, "/status/readyReplicas").and_then(Value::as_i64);
    anyhow::ensure!(
        ready >= Some(1),
        "the operator is not ready: {}",
        deployment.data
    );
    println!(
        "e2e-node:   widened to {}, then downgraded to {} on request, its pods ready",
        fixtures::V020,
        fixtures::V010
    );
    Ok(())
}

async fn annotate(c: &Cluster, ns: &str, annotations: Value) -> anyhow::Result<()> {
    c.merge_patch(
        &cluster::subscriptions(),
        ns,
        "demo",
        json!({"metadata": {"annotations": annotations}}),
    )
    .await?;
    Ok(())
}

/// The message of the Subscription's `VersionHeld` condition once its reason is `reason`.
async fn version_held(c: &Cluster, ns: &str, reason: &str) -> anyhow::Result<String> {
    c.wait_for(format!("VersionHeld {reason} on {ns}/demo"), || async {
        let sub = c
            .get(&cluster::subscriptions(), ns, "demo")
            .await?
            .context("the Subscription is gone")?;
        let conditions = field(&sub, "/status/conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let held = conditions
            .iter()
            .find(|c| c["type"] == "VersionHeld" && c["reason"] == reason);
        Ok(match held {
            Some(c) => Progress::Done(c["message"].as_str().unwrap_or_default().to_owned()),
            None => Progress::Pending(format!(
                "state {:?}, conditions {}",
                text(&sub, "/status/state"),
                Value::Array(conditions)
            )),
        })
    })
    .await
}

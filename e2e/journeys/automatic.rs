//! Catalog from a ConfigMap → Subscription with Automatic approval → CSV phases in order →
//! channel switch upgrade → metrics → uninstall.

use anyhow::ensure;
use serde_json::json;

use super::{
    PhaseRecorder, configmap_catalog_ready, events_about, running_version, uninstall, wait_gone,
    wait_installed,
};
use crate::cluster::{self, Cluster, Progress};
use crate::{fixtures, journeys};

pub async fn run(c: &Cluster, ns: &str) -> anyhow::Result<()> {
    let catalog = "e2e-configmap";
    configmap_catalog_ready(c, ns, catalog).await?;

    let phases = PhaseRecorder::start(c, ns).await?;
    c.create(
        &cluster::subscriptions(),
        ns,
        fixtures::subscription(ns, catalog, "stable", "Automatic", None),
    )
    .await?;
    // No startingCSV: the head of `stable` is installed directly.
    wait_installed(c, ns, "demo", fixtures::V020).await?;
    let seen = phases.phases_of(fixtures::V020);
    ensure!(
        seen == ["Pending", "InstallReady", "Installing", "Succeeded"],
        "CSV {} went through phases {seen:?}, expected Pending → InstallReady → Installing → Succeeded",
        fixtures::V020
    );
    println!("e2e:   {} phases: {}", fixtures::V020, seen.join(" → "));
    ensure!(
        running_version(c, ns).await?.as_deref() == Some("0.2.0"),
        "the operator Deployment does not run version 0.2.0"
    );
    let events = events_about(c, ns, "ClusterServiceVersion", fixtures::V020).await?;
    ensure!(
        !events.is_empty(),
        "no Events about CSV {} (kubectl describe would show none)",
        fixtures::V020
    );

    // Switching channel upgrades along the new channel: v0.3.0 replaces v0.2.0.
    c.merge_patch(
        &cluster::subscriptions(),
        ns,
        "demo",
        json!({"spec": {"channel": "fast"}}),
    )
    .await?;
    wait_installed(c, ns, "demo", fixtures::V030).await?;
    wait_gone(c, &cluster::csvs(), ns, fixtures::V020).await?;
    ensure!(
        running_version(c, ns).await?.as_deref() == Some("0.3.0"),
        "after the upgrade the operator Deployment does not run version 0.3.0"
    );
    println!(
        "e2e:   channel switch stable → fast upgraded to {}",
        fixtures::V030
    );

    // What `kubectl get csv` shows the user.
    let (columns, rows) = c.table(&cluster::csvs(), ns).await?;
    println!("e2e:   kubectl get csv: {columns:?} {rows:?}");
    let cell = |row: &[String], column: &str| {
        columns
            .iter()
            .position(|c| c == column)
            .and_then(|i| row.get(i).cloned())
            .unwrap_or_default()
    };
    // Other rows may be copies of all-namespaces operators installed on the cluster.
    let row = rows
        .iter()
        .find(|row| cell(row, "NAME") == fixtures::V030)
        .cloned()
        .unwrap_or_default();
    ensure!(
        cell(&row, "DISPLAY") == "olm-rs e2e demo"
            && cell(&row, "VERSION") == "0.3.0"
            && cell(&row, "REPLACES") == fixtures::V020
            && cell(&row, "PHASE") == "Succeeded"
            && !rows.iter().any(|row| cell(row, "NAME") == fixtures::V020),
        "kubectl get csv shows {columns:?} {rows:?}, expected a row {} olm-rs e2e demo 0.3.0 \
         {} Succeeded and none for {}",
        fixtures::V030,
        fixtures::V020,
        fixtures::V020
    );

    // Metrics follow the CSV's sync, so they may trail its status by a moment.
    let expected = format!(
        r#"csv_succeeded{{namespace="{ns}",name="{}",version="0.3.0"}} 1"#,
        fixtures::V030
    );
    c.wait_for(
        format!("the leader's /metrics to show {expected}"),
        || async {
            let metrics = journeys::leader::leader_metrics(c).await?;
            if metrics.lines().any(|line| line == expected) {
                return Ok(Progress::Done(()));
            }
            let about_csvs: Vec<&str> = metrics
                .lines()
                .filter(|line| line.starts_with("csv_"))
                .collect();
            Ok(Progress::Pending(format!("csv_ lines: {about_csvs:?}")))
        },
    )
    .await?;

    uninstall(c, ns, fixtures::V030).await
}

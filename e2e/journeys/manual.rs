//! Catalog from a ConfigMap → Subscription with Manual approval in `stable` → nothing installed
//! until the InstallPlan is approved → approving installs exactly that plan's CSV, and the
//! upgrade the channel offers next waits for its own approval → switching to `fast` while it
//! waits replaces that plan at once with one for `fast`'s head (the old one is deleted) →
//! approving it upgrades in one hop → uninstall.

use anyhow::{Context as _, ensure};
use serde_json::{Value, json};

use super::{configmap_catalog_ready, running_version, uninstall, wait_gone, wait_installed};
use crate::cluster::{self, Cluster, Progress, field, text};
use crate::fixtures;

pub async fn run(c: &Cluster, ns: &str) -> anyhow::Result<()> {
    let catalog = "e2e-configmap";
    configmap_catalog_ready(c, ns, catalog).await?;
    c.create(
        &cluster::subscriptions(),
        ns,
        fixtures::subscription(ns, catalog, "stable", "Manual", Some(fixtures::V010)),
    )
    .await?;

    let first = pending_plan(c, ns, None).await?;
    expect_unapproved(c, ns, &first, fixtures::V010).await?;
    ensure!(
        c.get(&cluster::csvs(), ns, fixtures::V010).await?.is_none(),
        "CSV {} exists before its InstallPlan was approved",
        fixtures::V010
    );
    println!("e2e:   InstallPlan {first} awaits approval; nothing installed");

    approve(c, ns, &first).await?;
    wait_installed(c, ns, "demo", fixtures::V010).await?;
    println!("e2e:   approved; Subscription moved to {}", fixtures::V010);

    // `stable` offers 0.2.0 next: planned at once, but a Manual Subscription only proposes it.
    let stale = pending_plan(c, ns, Some(&first)).await?;
    expect_unapproved(c, ns, &stale, fixtures::V020).await?;
    println!("e2e:   upgrade InstallPlan {stale} to 0.2.0 awaits approval");

    // The user switches to `fast` while that plan waits: its head v0.3.0 skips every version
    // from 0.1.0, so the Subscription re-resolves at once and proposes it instead.
    c.merge_patch(
        &cluster::subscriptions(),
        ns,
        "demo",
        json!({"spec": {"channel": "fast"}}),
    )
    .await?;
    let second = pending_plan(c, ns, Some(&stale)).await?;
    expect_unapproved(c, ns, &second, fixtures::V030).await?;
    wait_gone(c, &cluster::install_plans(), ns, &stale).await?;
    ensure!(
        running_version(c, ns).await?.as_deref() == Some("0.1.0")
            && c.get(&cluster::csvs(), ns, fixtures::V030).await?.is_none()
            && c.get(&cluster::csvs(), ns, fixtures::V020).await?.is_none(),
        "an upgrade started before its InstallPlan {second} was approved"
    );
    println!(
        "e2e:   channel switched to fast: InstallPlan {second} to 0.3.0 replaces {stale}; 0.1.0 still runs"
    );

    approve(c, ns, &second).await?;
    wait_installed(c, ns, "demo", fixtures::V030).await?;
    wait_gone(c, &cluster::csvs(), ns, fixtures::V010).await?;
    ensure!(
        running_version(c, ns).await?.as_deref() == Some("0.3.0"),
        "after the approved upgrade the operator Deployment does not run version 0.3.0"
    );
    println!("e2e:   approved; upgraded to {}", fixtures::V030);

    uninstall(c, ns, fixtures::V030).await
}

/// Waits until the Subscription waits for approval of a plan other than `not`; returns its name.
pub(super) async fn pending_plan(
    c: &Cluster,
    ns: &str,
    not: Option<&str>,
) -> anyhow::Result<String> {
    c.wait_for(
        format!("Subscription {ns}/demo to wait for approval of a new plan"),
        || async {
            let sub = c
                .get(&cluster::subscriptions(), ns, "demo")
                .await?
                .context("the Subscription is gone")?;
            let plan = text(&sub, "/status/installPlanRef/name");
            let state = text(&sub, "/status/state");
            if plan.is_empty() || state != "UpgradePending" || Some(plan) == not {
                return Ok(Progress::Pending(format!(
                    "state {state:?}, installPlanRef {plan:?}"
                )));
            }
            Ok(Progress::Done(plan.to_owned()))
        },
    )
    .await
}

/// Checks `plan` is Manual, not approved, and installs exactly `csv`.
async fn expect_unapproved(c: &Cluster, ns: &str, plan: &str, csv: &str) -> anyhow::Result<()> {
    let pending = c
        .get(&cluster::install_plans(), ns, plan)
        .await?
        .with_context(|| format!("InstallPlan {ns}/{plan} named by the Subscription is absent"))?;
    ensure!(
        text(&pending, "/spec/approval") == "Manual"
            && field(&pending, "/spec/approved") == Some(&json!(false)),
        "InstallPlan {plan} should be Manual and not approved: spec {}",
        pending.data.get("spec").unwrap_or(&Value::Null)
    );
    let names = field(&pending, "/spec/clusterServiceVersionNames")
        .cloned()
        .unwrap_or(Value::Null);
    ensure!(
        names == json!([csv]),
        "InstallPlan {plan} installs {names}, expected {csv}"
    );
    Ok(())
}

/// What `kubectl patch installplan … --type merge -p '{"spec":{"approved":true}}'` does.
pub(super) async fn approve(c: &Cluster, ns: &str, plan: &str) -> anyhow::Result<()> {
    c.merge_patch(
        &cluster::install_plans(),
        ns,
        plan,
        json!({"spec": {"approved": true}}),
    )
    .await?;
    Ok(())
}

//! The ways a user meets an operator that already runs (docs/install-plans.md §1.1,
//! docs/resolution.md §4.2):
//! - deleting the CSV of a live Subscription reinstalls it — a new InstallPlan, the CSV back
//!   `Succeeded` with a new uid (OLM's users are told to do this when an install is wedged);
//! - a Subscription deleted and made again adopts the running CSV: `installedCSV` and
//!   `currentCSV` name it, `AtLatestKnown`, no ResolutionFailed, nothing reinstalled; and, in a
//!   channel with a newer entry, `UpgradePending` with a plan for it;
//! - a CSV the Subscription's channel does not list is named in a condition and left alone.

use anyhow::{Context as _, ensure};
use kube::api::ListParams;
use serde_json::Value;

use super::manual::{approve, pending_plan};
use super::{configmap_catalog_ready, wait_gone, wait_installed};
use crate::cluster::{self, Cluster, Progress, field, text};
use crate::fixtures;

const CATALOG: &str = "e2e-configmap";

pub async fn run(c: &Cluster, ns: &str) -> anyhow::Result<()> {
    configmap_catalog_ready(c, ns, CATALOG).await?;
    c.create(
        &cluster::subscriptions(),
        ns,
        fixtures::subscription(ns, CATALOG, "stable", "Automatic", None),
    )
    .await?;
    wait_installed(c, ns, "demo", fixtures::V020).await?;
    let first_plan = plan_of(c, ns).await?;
    let first_uid = csv_uid(c, ns, fixtures::V020).await?;

    // The way back: delete the CSV of the live Subscription.
    c.delete(&cluster::csvs(), ns, fixtures::V020).await?;
    let second_uid = c
        .wait_for(
            format!("CSV {ns}/{} to be made again by a new plan", fixtures::V020),
            || async {
                let sub = subscription(c, ns).await?;
                let plan = text(&sub, "/status/installPlanRef/name").to_owned();
                let csv = c.get(&cluster::csvs(), ns, fixtures::V020).await?;
                let (uid, phase) = csv
                    .as_ref()
                    .map(|csv| {
                        (
                            csv.metadata.uid.clone().unwrap_or_default(),
                            text(csv, "/status/phase").to_owned(),
                        )
                    })
                    .unwrap_or_default();
                let settled = plan != first_plan
                    && !plan.is_empty()
                    && uid != first_uid
                    && !uid.is_empty()
                    && phase == "Succeeded"
                    && text(&sub, "/status/state") == "AtLatestKnown"
                    && text(&sub, "/status/installedCSV") == fixtures::V020;
                Ok(if settled {
                    Progress::Done(uid)
                } else {
                    Progress::Pending(format!(
                        "plan {plan:?} (first {first_plan}), CSV uid {uid:?} phase {phase:?}, \
                         status {}",
                        sub.data.get("status").unwrap_or(&Value::Null)
                    ))
                })
            },
        )
        .await?;
    println!(
        "e2e:   deleted CSV {} reinstalled by a new InstallPlan: uid {first_uid} → {second_uid}",
        fixtures::V020
    );

    // Re-created, the Subscription adopts what runs.
    let adopted = resubscribe(c, ns, "stable", "Automatic").await?;
    wait_adopted(c, ns, fixtures::V020, fixtures::V020, "AtLatestKnown").await?;
    settle_then_check_untouched(c, ns, &adopted, fixtures::V020, &second_uid).await?;
    println!(
        "e2e:   re-created Subscription adopted {} (AtLatestKnown, no plan, same CSV uid)",
        fixtures::V020
    );

    // In `fast`, which has newer, it adopts, then proposes the upgrade.
    let upgrading = resubscribe(c, ns, "fast", "Manual").await?;
    let plan = pending_plan(c, ns, None).await?;
    wait_adopted(c, ns, fixtures::V020, fixtures::V030, "UpgradePending").await?;
    ensure!(
        csv_uid(c, ns, fixtures::V020).await? == second_uid,
        "adopting {} in channel fast reinstalled it",
        fixtures::V020
    );
    ensure!(
        plans_owned_by(c, ns, &upgrading).await? == [plan.clone()],
        "the adopting Subscription made plans other than its upgrade {plan}"
    );
    println!(
        "e2e:   re-created in fast: adopted {}, UpgradePending with plan {plan} for {}",
        fixtures::V020,
        fixtures::V030
    );
    approve(c, ns, &plan).await?;
    wait_installed(c, ns, "demo", fixtures::V030).await?;
    wait_gone(c, &cluster::csvs(), ns, fixtures::V020).await?;
    let v030_uid = csv_uid(c, ns, fixtures::V030).await?;

    // v0.3.0 is only in `fast`: a Subscription to `stable` names it and leaves it alone.
    let refused = resubscribe(c, ns, "stable", "Automatic").await?;
    let message = c
        .wait_for(
            format!(
                "Subscription {ns}/demo to name {} it does not adopt",
                fixtures::V030
            ),
            || async {
                let sub = subscription(c, ns).await?;
                Ok(match condition(&sub, "ResolutionFailed") {
                    Some(failed)
                        if failed["message"]
                            .as_str()
                            .is_some_and(|m| m.contains(fixtures::V030)) =>
                    {
                        Progress::Done(failed["message"].as_str().unwrap_or_default().to_owned())
                    }
                    _ => Progress::Pending(format!(
                        "status {}",
                        sub.data.get("status").unwrap_or(&Value::Null)
                    )),
                })
            },
        )
        .await?;
    ensure!(
        message.contains(&format!(
            "clusterserviceversion {} exists and is not referenced by a subscription",
            fixtures::V030
        )),
        "the refusal does not start with OLM's words: {message}"
    );
    settle_then_check_untouched(c, ns, &refused, fixtures::V030, &v030_uid).await?;
    let sub = subscription(c, ns).await?;
    ensure!(
        text(&sub, "/status/installedCSV").is_empty(),
        "the Subscription to stable claims {}: {}",
        fixtures::V030,
        sub.data.get("status").unwrap_or(&Value::Null)
    );
    println!(
        "e2e:   a Subscription to stable names {} and leaves it running: {message}",
        fixtures::V030
    );

    c.delete(&cluster::subscriptions(), ns, "demo").await?;
    c.delete(&cluster::csvs(), ns, fixtures::V030).await?;
    wait_gone(c, &cluster::deployments(), ns, fixtures::DEPLOYMENT).await
}

async fn subscription(c: &Cluster, ns: &str) -> anyhow::Result<kube::api::DynamicObject> {
    c.get(&cluster::subscriptions(), ns, "demo")
        .await?
        .context("the Subscription is gone")
}

fn condition<'a>(object: &'a kube::api::DynamicObject, kind: &str) -> Option<&'a Value> {
    field(object, "/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| c["type"] == kind && c["status"] == "True")
}

async fn csv_uid(c: &Cluster, ns: &str, name: &str) -> anyhow::Result<String> {
    c.get(&cluster::csvs(), ns, name)
        .await?
        .and_then(|csv| csv.metadata.uid)
        .with_context(|| format!("CSV {ns}/{name} is absent"))
}

async fn plan_of(c: &Cluster, ns: &str) -> anyhow::Result<String> {
    let sub = subscription(c, ns).await?;
    let plan = text(&sub, "/status/installPlanRef/name").to_owned();
    ensure!(
        !plan.is_empty(),
        "Subscription {ns}/demo references no plan"
    );
    Ok(plan)
}

/// Deletes the Subscription `demo` and makes it again in `channel`; returns the new uid.
async fn resubscribe(
    c: &Cluster,
    ns: &str,
    channel: &str,
    approval: &str,
) -> anyhow::Result<String> {
    c.delete(&cluster::subscriptions(), ns, "demo").await?;
    wait_gone(c, &cluster::subscriptions(), ns, "demo").await?;
    let made = c
        .create(
            &cluster::subscriptions(),
            ns,
            fixtures::subscription(ns, CATALOG, channel, approval, None),
        )
        .await?;
    Ok(made.metadata.uid.unwrap_or_default())
}

/// Waits until the Subscription names `installed` and `current` in `state`, with no
/// ResolutionFailed.
async fn wait_adopted(
    c: &Cluster,
    ns: &str,
    installed: &str,
    current: &str,
    state: &str,
) -> anyhow::Result<()> {
    c.wait_for(
        format!("Subscription {ns}/demo to adopt {installed} ({state}, currentCSV {current})"),
        || async {
            let sub = subscription(c, ns).await?;
            let done = text(&sub, "/status/installedCSV") == installed
                && text(&sub, "/status/currentCSV") == current
                && text(&sub, "/status/state") == state;
            if let Some(failed) = condition(&sub, "ResolutionFailed") {
                anyhow::bail!(
                    "adopting {installed}, the Subscription reports ResolutionFailed: {failed}"
                );
            }
            Ok(if done {
                Progress::Done(())
            } else {
                Progress::Pending(format!(
                    "status {}",
                    sub.data.get("status").unwrap_or(&Value::Null)
                ))
            })
        },
    )
    .await
}

/// After a few seconds (time for any wrong write to happen): `csv` still has `uid` and is
/// `Succeeded`, and the Subscription `sub_uid` owns no plan.
async fn settle_then_check_untouched(
    c: &Cluster,
    ns: &str,
    sub_uid: &str,
    csv: &str,
    uid: &str,
) -> anyhow::Result<()> {
    tokio::time::sleep(std::time::Duration::from_secs(4)).await;
    let now = c
        .get(&cluster::csvs(), ns, csv)
        .await?
        .with_context(|| format!("CSV {ns}/{csv} is gone"))?;
    ensure!(
        now.metadata.uid.as_deref() == Some(uid) && text(&now, "/status/phase") == "Succeeded",
        "CSV {csv} was touched: uid {:?} (was {uid}), phase {:?}",
        now.metadata.uid,
        text(&now, "/status/phase")
    );
    let plans = plans_owned_by(c, ns, sub_uid).await?;
    ensure!(
        plans.is_empty(),
        "the re-created Subscription made InstallPlans {plans:?}"
    );
    Ok(())
}

/// The InstallPlans of `ns` owned by the Subscription with uid `sub_uid`.
async fn plans_owned_by(c: &Cluster, ns: &str, sub_uid: &str) -> anyhow::Result<Vec<String>> {
    let plans = c
        .api(&cluster::install_plans(), ns)
        .list(&ListParams::default())
        .await
        .with_context(|| format!("listing InstallPlans in {ns}"))?;
    Ok(plans
        .items
        .into_iter()
        .filter(|p| {
            p.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.uid == sub_uid)
        })
        .filter_map(|p| p.metadata.name)
        .collect())
}

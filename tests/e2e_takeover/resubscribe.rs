//! After the move, a Subscription OLM made is deleted and made again (a GitOps re-sync, an
//! accidental delete): olm-rs adopts the CSV OLM installed — `installedCSV` names it,
//! `AtLatestKnown`, no `ResolutionFailed`, no InstallPlan, the CSV untouched (same uid, still
//! `Succeeded`) — where OLM itself refuses until the CSV is deleted (docs/resolution.md §4.2).

use std::time::Duration;

use anyhow::{Context as _, ensure};
use kube::api::ListParams;
use serde_json::{Value, json};

use crate::cluster::{self, Cluster, Progress, field, text};
use crate::journeys::wait_gone;

pub async fn resubscribe_adopts_olms_csv(
    c: &Cluster,
    ns: &str,
    name: &str,
    csv: &str,
) -> anyhow::Result<()> {
    let old = c
        .get(&cluster::subscriptions(), ns, name)
        .await?
        .with_context(|| format!("no Subscription {ns}/{name}"))?;
    let csv_uid = c
        .get(&cluster::csvs(), ns, csv)
        .await?
        .and_then(|o| o.metadata.uid)
        .with_context(|| format!("no CSV {ns}/{csv}"))?;
    let spec = old.data["spec"].clone();
    c.delete(&cluster::subscriptions(), ns, name).await?;
    wait_gone(c, &cluster::subscriptions(), ns, name).await?;
    let made = c
        .create(
            &cluster::subscriptions(),
            ns,
            json!({
                "apiVersion": "operators.coreos.com/v1alpha1",
                "kind": "Subscription",
                "metadata": {"name": name, "namespace": ns},
                "spec": spec,
            }),
        )
        .await?;
    let uid = made.metadata.uid.unwrap_or_default();
    c.wait_for(
        format!("the re-created Subscription {ns}/{name} to adopt OLM's {csv}"),
        || async {
            let sub = c
                .get(&cluster::subscriptions(), ns, name)
                .await?
                .context("the Subscription is gone")?;
            let failed = field(&sub, "/status/conditions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .find(|c| c["type"] == "ResolutionFailed" && c["status"] == "True");
            ensure!(
                failed.is_none(),
                "adopting {csv}, the Subscription reports ResolutionFailed: {failed:?}"
            );
            let done = text(&sub, "/status/installedCSV") == csv
                && text(&sub, "/status/state") == "AtLatestKnown";
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
    .await?;
    // Time for any wrong write to happen.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let now = c
        .get(&cluster::csvs(), ns, csv)
        .await?
        .with_context(|| format!("CSV {ns}/{csv} is gone"))?;
    ensure!(
        now.metadata.uid.as_deref() == Some(csv_uid.as_str())
            && text(&now, "/status/phase") == "Succeeded",
        "adopting reinstalled or disturbed {csv}: uid {:?} (was {csv_uid}), phase {:?}",
        now.metadata.uid,
        text(&now, "/status/phase")
    );
    let plans = c
        .api(&cluster::install_plans(), ns)
        .list(&ListParams::default())
        .await?;
    let made_plans: Vec<String> = plans
        .items
        .iter()
        .filter(|p| {
            p.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.uid == uid)
        })
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    ensure!(
        made_plans.is_empty(),
        "the adopting Subscription made InstallPlans {made_plans:?}"
    );
    println!(
        "e2e-takeover:   Subscription {ns}/{name} re-created under olm-rs adopted OLM's {csv} (AtLatestKnown, same uid, no plan)"
    );
    Ok(())
}

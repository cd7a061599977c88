//! Catalog from a ConfigMap → Subscription with Manual approval → nothing installed until the
//! InstallPlan is approved → approve → the Subscription moves to the approved CSV → uninstall.

use anyhow::{Context as _, ensure};
use serde_json::{Value, json};

use super::{wait_catalog_ready, wait_gone, wait_installed};
use crate::cluster::{self, Cluster, Progress, field, text};
use crate::{configmap_catalog, fixtures};

pub async fn run(c: &Cluster, ns: &str) -> anyhow::Result<()> {
    c.create(
        &cluster::operator_groups(),
        ns,
        fixtures::operator_group(ns),
    )
    .await?;
    let data = configmap_catalog::data(
        &fixtures::e2e_dir().join("bundles"),
        &fixtures::e2e_dir().join("catalog"),
        fixtures::PACKAGE,
    )?;
    let config_map = "e2e-catalog";
    c.create(
        &cluster::core("", "v1", "ConfigMap", "configmaps"),
        ns,
        configmap_catalog::config_map(ns, config_map, &data),
    )
    .await?;
    let catalog = "e2e-configmap";
    c.create(
        &cluster::catalog_sources(),
        ns,
        fixtures::configmap_catalog(ns, catalog, config_map),
    )
    .await?;
    wait_catalog_ready(c, ns, catalog).await?;
    println!("e2e:   catalog {catalog} from ConfigMap {config_map} is ready");

    c.create(
        &cluster::subscriptions(),
        ns,
        fixtures::subscription(ns, catalog, "fast", "Manual", Some(fixtures::V010)),
    )
    .await?;
    let plan = c
        .wait_for(
            format!("Subscription {ns}/demo to wait for approval of a plan"),
            || async {
                let sub = c
                    .get(&cluster::subscriptions(), ns, "demo")
                    .await?
                    .context("the Subscription is gone")?;
                let plan = text(&sub, "/status/installPlanRef/name");
                let state = text(&sub, "/status/state");
                if plan.is_empty() || state != "UpgradePending" {
                    return Ok(Progress::Pending(format!(
                        "state {state:?}, installPlanRef {plan:?}"
                    )));
                }
                Ok(Progress::Done(plan.to_owned()))
            },
        )
        .await?;
    let pending = c
        .get(&cluster::install_plans(), ns, &plan)
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
        names == json!([fixtures::V010]),
        "InstallPlan {plan} installs {names}, expected the startingCSV {}",
        fixtures::V010
    );
    ensure!(
        c.get(&cluster::csvs(), ns, fixtures::V010).await?.is_none(),
        "CSV {} exists before its InstallPlan was approved",
        fixtures::V010
    );
    println!("e2e:   InstallPlan {plan} awaits approval; nothing installed");

    c.merge_patch(
        &cluster::install_plans(),
        ns,
        &plan,
        json!({"spec": {"approved": true}}),
    )
    .await?;
    // Only that the Subscription moved: the next upgrade waits for its own approval.
    wait_installed(c, ns, "demo", fixtures::V010).await?;
    println!("e2e:   approved; Subscription moved to {}", fixtures::V010);

    c.delete(&cluster::subscriptions(), ns, "demo").await?;
    c.delete(&cluster::csvs(), ns, fixtures::V010).await?;
    wait_gone(c, &cluster::deployments(), ns, fixtures::DEPLOYMENT).await?;
    println!("e2e:   uninstalled");
    Ok(())
}

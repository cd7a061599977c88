//! What the takeover checks wait for and watch: InstallPlans waiting for approval and their
//! phases, CSV phases, Deployments available. Every phase a CSV passes through is recorded by
//! the journeys' `PhaseRecorder::everywhere`.

use anyhow::Context as _;
use kube::api::ListParams;
use serde_json::{Value, json};

use crate::cluster::{self, Cluster, Progress, field, text};

/// The InstallPlan in `ns` that would install `csv` and waits for approval.
pub async fn wait_plan_waiting(c: &Cluster, ns: &str, csv: &str) -> anyhow::Result<String> {
    c.wait_for(
        format!("a plan in {ns} for {csv} waiting for approval"),
        || async {
            let plans = c
                .api(&cluster::install_plans(), ns)
                .list(&ListParams::default())
                .await?;
            let mut seen = Vec::new();
            for plan in &plans.items {
                let names = field(plan, "/spec/clusterServiceVersionNames")
                    .cloned()
                    .unwrap_or_default();
                let phase = text(plan, "/status/phase");
                let name = plan.metadata.name.clone().unwrap_or_default();
                if names.as_array().is_some_and(|n| n.iter().any(|n| n == csv))
                    && phase == "RequiresApproval"
                {
                    return Ok(Progress::Done(name));
                }
                seen.push(format!("{name} {names} {phase}"));
            }
            Ok(Progress::Pending(format!("plans: {seen:?}")))
        },
    )
    .await
}

pub async fn approve(c: &Cluster, ns: &str, plan: &str) -> anyhow::Result<()> {
    c.merge_patch(
        &cluster::install_plans(),
        ns,
        plan,
        json!({"spec": {"approved": true}}),
    )
    .await?;
    Ok(())
}

pub async fn wait_plan_phase(c: &Cluster, ns: &str, plan: &str, want: &str) -> anyhow::Result<()> {
    c.wait_for(format!("InstallPlan {ns}/{plan} to be {want}"), || async {
        let plan = c
            .get(&cluster::install_plans(), ns, plan)
            .await?
            .context("gone")?;
        let phase = text(&plan, "/status/phase");
        Ok(if phase == want {
            Progress::Done(())
        } else {
            Progress::Pending(format!(
                "{phase}: {}",
                field(&plan, "/status/conditions").unwrap_or(&Value::Null)
            ))
        })
    })
    .await
}

pub async fn wait_csv(c: &Cluster, ns: &str, csv: &str, phase: &str) -> anyhow::Result<()> {
    c.wait_for(format!("CSV {ns}/{csv} to be {phase}"), || async {
        Ok(match c.get(&cluster::csvs(), ns, csv).await? {
            Some(o) if text(&o, "/status/phase") == phase => Progress::Done(()),
            Some(o) => Progress::Pending(format!(
                "{} / {}",
                text(&o, "/status/phase"),
                text(&o, "/status/message")
            )),
            None => Progress::Pending("absent".to_owned()),
        })
    })
    .await
}

/// Every Deployment in `namespaces` available, with every replica updated.
pub async fn wait_deployments_available(c: &Cluster, namespaces: &[&str]) -> anyhow::Result<()> {
    c.wait_for("every operator Deployment to be available", || async {
        let mut pending = Vec::new();
        for ns in namespaces {
            let list = c
                .api(&cluster::deployments(), ns)
                .list(&ListParams::default())
                .await?;
            for d in list.items {
                let want = field(&d, "/spec/replicas")
                    .and_then(Value::as_i64)
                    .unwrap_or(1);
                let have = field(&d, "/status/updatedReplicas")
                    .and_then(Value::as_i64)
                    .unwrap_or(0);
                let available = field(&d, "/status/availableReplicas")
                    .and_then(Value::as_i64)
                    .unwrap_or(0);
                if have != want || available != want {
                    pending.push(format!("{ns}/{}", d.metadata.name.unwrap_or_default()));
                }
            }
        }
        Ok(if pending.is_empty() {
            Progress::Done(())
        } else {
            Progress::Pending(format!("not available: {pending:?}"))
        })
    })
    .await
}

//! The chart's ClusterRole without its rule for Deployments: the controller must say what it
//! cannot do — naming the resource and the verb — instead of hanging.

use std::time::Duration;

use anyhow::{Context as _, bail};

use crate::real_control_plane::ControlPlane;
use crate::real_control_plane::chart::{self, Controller, Rendered};

pub async fn run(plane: &ControlPlane, rendered: &Rendered, token: &str) -> anyhow::Result<()> {
    let mut without = rendered.clone();
    let role = without
        .cluster_role_mut()
        .context("the chart renders no ClusterRole olm-rs-controller")?;
    let rules = role["rules"]
        .as_array_mut()
        .context("the ClusterRole has no rules")?;
    let before = rules.len();
    rules.retain(|rule| {
        !rule["resources"]
            .as_array()
            .is_some_and(|r| r.iter().any(|r| r == "deployments"))
    });
    anyhow::ensure!(
        rules.len() + 1 == before,
        "expected one rule for deployments"
    );
    let role = role.clone();
    chart::apply(
        &plane.client,
        std::slice::from_ref(&role),
        Duration::from_secs(5),
    )
    .await?;

    // One replica, no election: the Lease of the replicas before may still be held.
    let args: Vec<String> = Vec::new();
    let mut controller = Controller::spawn(
        plane,
        &without.without_leader_election(),
        token,
        "olm-rs-controller-norbac",
        &args,
    )?;
    // It must stop, saying which permissions are missing; a hang (a green /readyz while every
    // watch of Deployments is refused) fails after 30s.
    let exited = controller.process.wait_exit(Duration::from_secs(30));
    let log = std::fs::read_to_string(&controller.process.log).unwrap_or_default();
    let named = log
        .lines()
        .find(|l| l.contains("list deployments.apps") && l.contains("watch deployments.apps"))
        .map(str::to_owned);
    let outcome = match (exited, named) {
        (true, Some(line)) => Ok(line),
        (exited, _) => Err(format!(
            "exited: {exited}; /readyz: {:?}; log:\n{}",
            controller.get("/readyz").await.ok(),
            controller.process.log_tail(30)
        )),
    };
    drop(controller);
    // Put the rule back for whatever runs next on this plane.
    if let Some(role) = rendered.clone().cluster_role_mut() {
        chart::apply(
            &plane.client,
            std::slice::from_ref(role),
            Duration::from_secs(5),
        )
        .await?;
    }
    match outcome {
        Ok(seen) => {
            println!("e2e-real:   reported: {seen}");
            Ok(())
        }
        Err(seen) => {
            bail!("the missing rule (deployments: list/watch) was not reported clearly: {seen}")
        }
    }
}

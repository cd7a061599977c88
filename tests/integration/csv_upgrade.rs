//! Upgrades: replacement hand-over, deletion of the old CSV, renamed Deployments, chains.

use crate::csv_support;

use csv_support::*;
use olm_rs::api::{CsvPhase as P, CsvReason as R};

async fn installed(h: &Harness, name: &str, deployment: &str) {
    h.create_csv(csv(name, deployment)).await;
    h.wait_for(name, P::Succeeded, R::InstallSucceeded).await;
}

#[tokio::test]
async fn an_upgrade_takes_over_the_deployment_and_deletes_the_old_csv() {
    let h = Harness::start().await;
    h.operator_group(NS, "og", &[NS]).await;
    h.service_account_with_rbac().await;
    installed(&h, "demo.v0.1.0", "op").await;

    h.create_csv(replacing(csv("demo.v0.2.0", "op"), "demo.v0.1.0"))
        .await;
    h.wait_for("demo.v0.2.0", P::Succeeded, R::InstallSucceeded)
        .await;
    h.wait_gone("demo.v0.1.0").await;

    let dep = h.deployments().get("op").await.unwrap();
    let labels = dep.metadata.labels.unwrap();
    assert_eq!(labels["olm.owner"], "demo.v0.2.0");
    let owners: Vec<String> = dep
        .metadata
        .owner_references
        .unwrap()
        .into_iter()
        .map(|o| o.name)
        .collect();
    assert_eq!(owners, vec!["demo.v0.2.0".to_string()]);
    // One upgrade counted, when the old CSV entered Replacing.
    let text = h.ctx().metrics.encode();
    assert!(text.lines().any(|l| l == "csv_upgrade_count 1"), "{text}");
}

#[tokio::test]
async fn a_renamed_deployment_is_removed_with_the_old_csv() {
    let h = Harness::start().await;
    h.operator_group(NS, "og", &[NS]).await;
    h.service_account_with_rbac().await;
    installed(&h, "demo.v0.1.0", "op").await;

    h.create_csv(replacing(csv("demo.v0.2.0", "op-next"), "demo.v0.1.0"))
        .await;
    h.wait_for("demo.v0.2.0", P::Succeeded, R::InstallSucceeded)
        .await;
    h.wait_gone("demo.v0.1.0").await;
    let deployments = h.deployments();
    eventually("the old Deployment removed", || {
        let deployments = deployments.clone();
        async move {
            deployments
                .get_opt("op")
                .await
                .ok()?
                .is_none()
                .then_some(())
        }
    })
    .await;
    assert!(h.deployments().get_opt("op-next").await.unwrap().is_some());
}

#[tokio::test]
async fn a_replacement_chain_collapses_to_its_head() {
    let h = Harness::start().await;
    h.operator_group(NS, "og", &[NS]).await;
    h.service_account_with_rbac().await;
    installed(&h, "demo.v0.1.0", "op").await;

    h.create_csv(replacing(csv("demo.v0.2.0", "op"), "demo.v0.1.0"))
        .await;
    h.create_csv(replacing(csv("demo.v0.3.0", "op"), "demo.v0.2.0"))
        .await;
    h.wait_for("demo.v0.3.0", P::Succeeded, R::InstallSucceeded)
        .await;
    h.wait_gone("demo.v0.1.0").await;
    h.wait_gone("demo.v0.2.0").await;
    let dep = h.deployments().get("op").await.unwrap();
    assert_eq!(dep.metadata.labels.unwrap()["olm.owner"], "demo.v0.3.0");
}

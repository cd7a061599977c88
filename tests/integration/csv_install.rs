//! A CSV installs on the embedded API server: phases, Deployment shape, failure by progress
//! deadline and by timeout, deletion.

use crate::csv_support;

use std::time::Duration;

use csv_support::*;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use olm_rs::api::{CsvPhase as P, CsvReason as R};

#[tokio::test]
async fn a_csv_installs_and_succeeds_with_olms_deployment() {
    let h = Harness::start().await;
    h.operator_group(NS, "og", &[NS]).await;
    h.service_account_with_rbac().await;
    h.create_csv(csv("demo.v0.1.0", "op")).await;
    let done = h
        .wait_for("demo.v0.1.0", P::Succeeded, R::InstallSucceeded)
        .await;

    assert!(
        done.metadata
            .finalizers
            .unwrap()
            .contains(&"operators.coreos.com/csv-cleanup".to_string())
    );
    let annotations = done.metadata.annotations.unwrap();
    assert_eq!(annotations["olm.operatorGroup"], "og");
    assert_eq!(annotations["olm.operatorNamespace"], NS);
    assert_eq!(annotations["olm.targetNamespaces"], NS);
    let status = done.status.unwrap();
    let mut phases: Vec<&str> = status
        .conditions
        .iter()
        .flatten()
        .map(|c| c.phase.as_ref().map(|p| p.as_str()).unwrap_or_default())
        .collect();
    // Installing may appear twice (InstallSucceeded, then InstallWaiting while it rolls out).
    phases.dedup();
    assert_eq!(
        phases,
        vec!["Pending", "InstallReady", "Installing", "Succeeded"]
    );
    let reqs = status.requirement_status.unwrap();
    assert!(
        reqs.iter().all(|r| r.status.as_str() == "Present"),
        "{reqs:?}"
    );

    let dep = h.deployments().get("op").await.unwrap();
    let labels = dep.metadata.labels.unwrap();
    assert_eq!(labels["olm.owner"], "demo.v0.1.0");
    assert_eq!(labels["olm.owner.kind"], "ClusterServiceVersion");
    assert!(labels.contains_key("olm.deployment-spec-hash"));
    let owner = &dep.metadata.owner_references.unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("ClusterServiceVersion", "demo.v0.1.0")
    );
    let spec = dep.spec.unwrap();
    let template = spec.template.metadata.unwrap().annotations.unwrap();
    assert_eq!(template["olm.targetNamespaces"], NS);
    let env = spec.template.spec.unwrap().containers[0]
        .env
        .clone()
        .unwrap();
    assert!(
        env.iter()
            .any(|e| e.name == "OPERATOR_CONDITION_NAME"
                && e.value.as_deref() == Some("demo.v0.1.0"))
    );

    let group = h.groups(NS).get("og").await.unwrap();
    assert_eq!(
        group.metadata.annotations.unwrap()["olm.providedAPIs"],
        "Demo.v1.example.com"
    );
}

#[tokio::test]
async fn a_deployment_that_never_becomes_available_fails_with_olms_reason() {
    let h = Harness::start().await;
    h.server.simulator().fail_deployment(NS, "op");
    h.operator_group(NS, "og", &[NS]).await;
    h.service_account_with_rbac().await;
    h.create_csv(csv("demo.v0.1.0", "op")).await;
    let failed = h
        .wait_for("demo.v0.1.0", P::Failed, R::InstallCheckFailed)
        .await;
    assert_eq!(
        failed.status.unwrap().message.unwrap(),
        "install failed: deployment op not ready before timeout: deployment \"op\" exceeded its progress deadline"
    );
    // Healing the rollout brings it back: Failed → Succeeded once healthy.
    h.server.simulator().heal_deployment(NS, "op");
    h.wait_for("demo.v0.1.0", P::Succeeded, R::InstallSucceeded)
        .await;
}

#[tokio::test]
async fn an_install_not_healthy_after_five_minutes_times_out() {
    let h = Harness::start().await;
    h.server.simulator().set_enabled(false);
    h.operator_group(NS, "og", &[NS]).await;
    h.service_account_with_rbac().await;
    h.create_csv(csv("demo.v0.1.0", "op")).await;
    h.wait_for("demo.v0.1.0", P::Installing, R::InstallWaiting)
        .await;

    h.clock.advance(jiff::SignedDuration::from_mins(5));
    // Any event brings the CSV back; a label does not change what is installed.
    h.csvs()
        .patch(
            "demo.v0.1.0",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"labels": {"touched": "yes"}}})),
        )
        .await
        .unwrap();
    // Failed is brief: the Failed handler sees the unhealthy Deployment and reinstalls.
    let message = h
        .wait_for_history("demo.v0.1.0", P::Failed, R::InstallCheckFailed)
        .await;
    assert_eq!(message, "install timeout");
    h.wait_for_history("demo.v0.1.0", P::Pending, R::NeedsReinstall)
        .await;
    // Once the rollout completes it succeeds.
    h.server.simulator().set_enabled(true);
    h.wait_for("demo.v0.1.0", P::Succeeded, R::InstallSucceeded)
        .await;
}

#[tokio::test]
async fn deleting_a_csv_removes_its_deployments_but_not_its_crds() {
    let h = Harness::start().await;
    h.operator_group(NS, "og", &[NS]).await;
    h.service_account_with_rbac().await;
    h.create_csv(csv("demo.v0.1.0", "op")).await;
    h.wait_for("demo.v0.1.0", P::Succeeded, R::InstallSucceeded)
        .await;
    h.csvs()
        .delete("demo.v0.1.0", &DeleteParams::default())
        .await
        .unwrap();
    h.wait_gone("demo.v0.1.0").await;
    let deployments = h.deployments();
    eventually("Deployment op garbage-collected", || {
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
    let crds: Api<CustomResourceDefinition> = Api::all(h.client.clone());
    assert!(crds.get_opt("demos.example.com").await.unwrap().is_some());
    tokio::time::sleep(Duration::from_millis(50)).await;
}

#[tokio::test]
async fn kubectl_get_csv_shows_olms_columns() {
    let h = Harness::start().await;
    h.operator_group(NS, "og", &[NS]).await;
    h.service_account_with_rbac().await;
    h.create_csv(replacing(csv("demo.v0.1.0", "op"), "demo.v0.0.9"))
        .await;
    h.wait_for("demo.v0.1.0", P::Succeeded, R::InstallSucceeded)
        .await;
    let request = http::Request::get(format!(
        "/apis/operators.coreos.com/v1alpha1/namespaces/{NS}/clusterserviceversions"
    ))
    .header("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
    .body(Vec::new())
    .unwrap();
    let table: serde_json::Value = h.client.request(request).await.unwrap();
    let columns: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        columns,
        vec!["Name", "Display", "Version", "Release", "Replaces", "Phase"]
    );
    let cells: Vec<&str> = table["rows"][0]["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        cells,
        vec![
            "demo.v0.1.0",
            "Demo Operator",
            "0.1.0",
            "",
            "demo.v0.0.9",
            "Succeeded"
        ]
    );
}

#[tokio::test]
async fn subscription_config_reaches_the_deployment_and_a_change_rolls_it() {
    let h = Harness::start().await;
    h.operator_group(NS, "og", &[NS]).await;
    h.service_account_with_rbac().await;
    let subs: Api<olm_rs::api::Subscription> = Api::namespaced(h.client.clone(), NS);
    let sub: olm_rs::api::Subscription = serde_json::from_value(serde_json::json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": "demo", "namespace": NS},
        "spec": {"source": "cat", "sourceNamespace": "olm", "name": "demo",
                 "config": {"env": [{"name": "LOG_LEVEL", "value": "debug"}],
                            "nodeSelector": {"zone": "a"}}}
    }))
    .unwrap();
    subs.create(&kube::api::PostParams::default(), &sub)
        .await
        .unwrap();
    subs.patch_status(
        "demo",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"status": {"installedCSV": "demo.v0.1.0", "lastUpdated": "2026-01-01T00:00:00Z"}})),
    )
    .await
    .unwrap();
    h.create_csv(csv("demo.v0.1.0", "op")).await;
    h.wait_for("demo.v0.1.0", P::Succeeded, R::InstallSucceeded)
        .await;
    let pod = h
        .deployments()
        .get("op")
        .await
        .unwrap()
        .spec
        .unwrap()
        .template
        .spec
        .unwrap();
    assert_eq!(pod.node_selector.unwrap()["zone"], "a");
    let env = pod.containers[0].env.clone().unwrap();
    let names: Vec<&str> = env.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, vec!["LOG_LEVEL", "OPERATOR_CONDITION_NAME"]);

    // Editing the config changes the desired spec hash: the CSV reinstalls and the new
    // selector reaches the Deployment.
    subs.patch(
        "demo",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"spec": {"config": {"nodeSelector": {"zone": "b"}}}})),
    )
    .await
    .unwrap();
    let deployments = h.deployments();
    eventually("the Deployment rolled to zone b", || {
        let deployments = deployments.clone();
        async move {
            let pod = deployments.get("op").await.ok()?.spec?.template.spec?;
            (pod.node_selector?.get("zone")? == "b").then_some(())
        }
    })
    .await;
    h.wait_for("demo.v0.1.0", P::Succeeded, R::InstallSucceeded)
        .await;
}

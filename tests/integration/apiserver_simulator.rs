//! The workload simulator: Deployments become Available (or fail on request), APIServices
//! become Available when their Service exists; off, it leaves status alone.

use crate::apiserver_common;

use std::time::Duration;

use apiserver_common::eventually;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::{Api, Patch, PatchParams, PostParams};
use olm_rs::sandbox::{ApiServer, ApiServerOptions};
use serde_json::json;

fn deployment(name: &str, replicas: i32) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": "img"}]}}
        }
    }))
    .unwrap()
}

fn condition(d: &Deployment, type_: &str) -> Option<(String, String)> {
    let c = d
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)?;
    Some((c.status.clone(), c.reason.clone().unwrap_or_default()))
}

#[tokio::test]
async fn deployments_become_available_with_ready_replicas() {
    let server = ApiServer::new();
    let deps: Api<Deployment> = Api::default_namespaced(server.client());
    deps.create(&PostParams::default(), &deployment("op", 2))
        .await
        .unwrap();
    let d = eventually("Available", || async {
        let d = deps.get("op").await.ok()?;
        (condition(&d, "Available")? == ("True".into(), "MinimumReplicasAvailable".into()))
            .then_some(d)
    })
    .await;
    let s = d.status.as_ref().unwrap();
    assert_eq!(
        (s.ready_replicas, s.available_replicas, s.updated_replicas),
        (Some(2), Some(2), Some(2))
    );
    assert_eq!(s.observed_generation, Some(1));
    assert_eq!(
        condition(&d, "Progressing").unwrap(),
        ("True".into(), "NewReplicaSetAvailable".into())
    );

    // A spec change is observed again.
    deps.patch(
        "op",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 3}})),
    )
    .await
    .unwrap();
    eventually("observed generation 2", || async {
        let d = deps.get("op").await.ok()?;
        let s = d.status?;
        (s.observed_generation == Some(2) && s.ready_replicas == Some(3)).then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_deployment_told_to_fail_reports_progress_deadline_exceeded() {
    let server = ApiServer::new();
    server.simulator().fail_deployment("default", "broken");
    let deps: Api<Deployment> = Api::default_namespaced(server.client());
    deps.create(&PostParams::default(), &deployment("broken", 1))
        .await
        .unwrap();
    let d = eventually("failed rollout", || async {
        let d = deps.get("broken").await.ok()?;
        (condition(&d, "Progressing")?.1 == "ProgressDeadlineExceeded").then_some(d)
    })
    .await;
    assert_eq!(condition(&d, "Available").unwrap().0, "False");
    assert_eq!(d.status.unwrap().available_replicas, None);

    server.simulator().heal_deployment("default", "broken");
    eventually("healed", || async {
        let d = deps.get("broken").await.ok()?;
        (condition(&d, "Available")?.0 == "True").then_some(())
    })
    .await;
}

#[tokio::test]
async fn with_the_simulator_off_status_stays_empty() {
    let server = ApiServer::with_options(ApiServerOptions {
        simulate_workloads: false,
        ..Default::default()
    });
    let deps: Api<Deployment> = Api::default_namespaced(server.client());
    deps.create(&PostParams::default(), &deployment("op", 1))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(deps.get("op").await.unwrap().status.is_none());
    server.simulator().set_enabled(true);
    eventually("Available once switched on", || async {
        let d = deps.get("op").await.ok()?;
        (condition(&d, "Available")?.0 == "True").then_some(())
    })
    .await;
}

#[tokio::test]
async fn apiservices_are_available_once_their_service_exists() {
    let server = ApiServer::new();
    let client = server.client();
    let apis: Api<APIService> = Api::all(client.clone());
    let svc = json!({
        "metadata": {"name": "v1alpha1.packages.example.com"},
        "spec": {"group": "packages.example.com", "version": "v1alpha1", "groupPriorityMinimum": 100, "versionPriority": 15,
                 "service": {"namespace": "default", "name": "pkg-server", "port": 5443}}
    });
    apis.create(
        &PostParams::default(),
        &serde_json::from_value(svc).unwrap(),
    )
    .await
    .unwrap();
    let available = |want: &'static str| {
        let apis = apis.clone();
        async move {
            let a = apis.get("v1alpha1.packages.example.com").await.ok()?;
            let c = a
                .status?
                .conditions?
                .into_iter()
                .find(|c| c.type_ == "Available")?;
            (c.status == want).then_some(c.reason.unwrap_or_default())
        }
    };
    assert_eq!(
        eventually("ServiceNotFound", || available("False")).await,
        "ServiceNotFound"
    );
    let services: Api<Service> = Api::default_namespaced(client);
    let s = json!({"metadata": {"name": "pkg-server"}, "spec": {"ports": [{"port": 5443}]}});
    services
        .create(&PostParams::default(), &serde_json::from_value(s).unwrap())
        .await
        .unwrap();
    assert_eq!(
        eventually("Available", || available("True")).await,
        "Passed"
    );
}

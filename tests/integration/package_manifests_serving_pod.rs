//! Only the replica that runs the reconcilers (and so holds the catalogs) is selected by the
//! package API's Service: it labels its Pod; a standby removes the label its restarted
//! container's Pod may still carry (docs/packagemanifests.md §8).

use std::sync::Arc;
use std::time::Duration;

use jiff::SignedDuration;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::Client;
use kube::api::{Api, PostParams};
use olm_rs::controller::{self, LeaderElectionOptions, RunOptions};
use olm_rs::leader_election::{LeaseConfig, LeaseLock};
use olm_rs::package_manifest::ManifestStore;
use olm_rs::package_server::PackageServing;
use olm_rs::package_server::serving_pod::{PodRef, SERVING_LABEL};
use olm_rs::reconcile::ControllerOptions;
use olm_rs::sandbox::ApiServer;
use serde_json::json;

const NS: &str = "olm";

async fn cluster() -> (ApiServer, Client) {
    let server = ApiServer::new();
    let client = server.client();
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    for crd in olm_rs::api::crd::all().unwrap() {
        crds.create(&PostParams::default(), &crd).await.unwrap();
    }
    (server, client)
}

/// The replica's Pod, labelled `serving` as a restarted container's Pod may still be.
async fn pod(client: &Client, name: &str) -> PodRef {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NS, "labels": {SERVING_LABEL: "serving"}},
        "spec": {"containers": [{"name": "controller", "image": "olm-rs"}]}
    }))
    .unwrap();
    Api::<Pod>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &pod)
        .await
        .unwrap();
    PodRef {
        namespace: NS.into(),
        name: name.into(),
    }
}

async fn label(client: &Client, name: &str) -> Option<String> {
    let pod = Api::<Pod>::namespaced(client.clone(), NS)
        .get(name)
        .await
        .unwrap();
    pod.metadata
        .labels
        .unwrap_or_default()
        .get(SERVING_LABEL)
        .cloned()
}

fn options(pod: PodRef, leader_election: Option<LeaderElectionOptions>) -> RunOptions {
    RunOptions {
        probe_addr: "127.0.0.1:0".parse().unwrap(),
        controller: ControllerOptions::default(),
        leader_election,
        packages: Some(PackageServing {
            store: Arc::new(ManifestStore::new(NS)),
            feed: Default::default(),
            https: None,
            serving_pod: Some(pod),
        }),
    }
}

async fn eventually(client: &Client, name: &str, want: Option<&str>) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let got = label(client, name).await;
        if got.as_deref() == want {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "Pod {name}: label {SERVING_LABEL} is {got:?}, want {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn the_replica_that_reconciles_is_selected_a_standby_is_not() {
    let (_server, client) = cluster().await;
    // Another replica holds the Lease for a long while: this one stays a standby.
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": "olm-rs-controller", "namespace": NS},
        "spec": {"holderIdentity": "other", "leaseDurationSeconds": 3600,
                 "renewTime": jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()}
    }))
    .unwrap();
    Api::<Lease>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &lease)
        .await
        .unwrap();
    let standby = pod(&client, "standby").await;
    let election = LeaderElectionOptions {
        lock: LeaseLock {
            namespace: NS.into(),
            name: "olm-rs-controller".into(),
            identity: "standby".into(),
        },
        config: LeaseConfig {
            lease_duration: SignedDuration::from_secs(15),
            renew_deadline: SignedDuration::from_secs(10),
            retry_period: SignedDuration::from_millis(200),
        },
        connections: None,
    };
    let (stop_standby, stopped) = tokio::sync::oneshot::channel::<()>();
    let standby_run = tokio::spawn(controller::run(
        client.clone(),
        options(standby, Some(election)),
        async {
            let _ = stopped.await;
        },
    ));
    eventually(&client, "standby", None).await;

    // Without election the replica reconciles at once, and is selected.
    let single = pod(&client, "single").await;
    Api::<Pod>::namespaced(client.clone(), NS)
        .patch(
            "single",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"metadata": {"labels": {SERVING_LABEL: null}}})),
        )
        .await
        .unwrap();
    let (stop_single, stopped) = tokio::sync::oneshot::channel::<()>();
    let single_run = tokio::spawn(controller::run(
        client.clone(),
        options(single, None),
        async {
            let _ = stopped.await;
        },
    ));
    eventually(&client, "single", Some("serving")).await;
    // The standby is still not selected.
    assert_eq!(label(&client, "standby").await, None);

    let _ = stop_single.send(());
    let _ = stop_standby.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), single_run).await;
    let _ = tokio::time::timeout(Duration::from_secs(10), standby_run).await;
}

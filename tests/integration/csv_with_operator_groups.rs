//! The CSV and OperatorGroup controllers together, as `olm-rs run` starts them
//! (`controller::run_reconcilers`): no test fakes a group's status or a CSV's annotations; the
//! OperatorGroup side computes targets and annotates, the CSV side reads what it wrote.

use crate::csv_support;

use std::time::Duration;

use csv_support::*;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use olm_rs::api::{ClusterServiceVersion, CsvPhase as P, CsvReason as R, OperatorGroup};
use serde_json::{Value, json};

async fn namespace(client: &Client, name: &str, labels: Value) {
    let api: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace =
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap();
    api.create(&PostParams::default(), &ns).await.unwrap();
}

/// An OperatorGroup with `spec` and no status: the OperatorGroup controller fills it in.
async fn group(h: &Harness, ns: &str, name: &str, spec: Value, annotations: Value) {
    let og: OperatorGroup = serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
        "metadata": {"name": name, "namespace": ns, "annotations": annotations},
        "spec": spec,
    }))
    .unwrap();
    h.groups(ns)
        .create(&PostParams::default(), &og)
        .await
        .unwrap();
}

fn with_modes(mut csv: Value, supported: &[&str]) -> Value {
    let modes: Vec<Value> = [
        "OwnNamespace",
        "SingleNamespace",
        "MultiNamespace",
        "AllNamespaces",
    ]
    .iter()
    .map(|t| json!({"type": t, "supported": supported.contains(t)}))
    .collect();
    csv["spec"]["installModes"] = json!(modes);
    csv
}

fn message(csv: &ClusterServiceVersion) -> String {
    csv.status
        .as_ref()
        .and_then(|s| s.message.clone())
        .unwrap_or_default()
}

async fn pod_template_targets(h: &Harness, deployment: &str) -> Option<String> {
    let dep = h.deployments().get_opt(deployment).await.ok()??;
    dep.spec?
        .template
        .metadata?
        .annotations?
        .get("olm.targetNamespaces")
        .cloned()
}

/// Copies of `name` by namespace, with their status reason.
async fn copies(client: &Client, name: &str) -> Vec<(String, String)> {
    let api: Api<ClusterServiceVersion> = Api::all(client.clone());
    let mut found: Vec<(String, String)> = api
        .list(&ListParams::default().labels("olm.copiedFrom"))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|c| c.name_any() == name)
        .map(|c| {
            let reason = c
                .status
                .and_then(|s| s.reason)
                .map(|r| r.as_str().to_owned())
                .unwrap_or_default();
            (c.metadata.namespace.unwrap_or_default(), reason)
        })
        .collect();
    found.sort();
    found
}

#[tokio::test]
async fn an_all_namespaces_group_installs_its_csv_and_copies_it_everywhere_else() {
    let h = Harness::start_all_controllers().await;
    namespace(&h.client, "team-a", json!({})).await;
    namespace(&h.client, "team-b", json!({})).await;
    group(&h, NS, "og", json!({}), json!({})).await;
    h.service_account_with_rbac().await;
    h.create_csv(with_modes(csv("demo.v0.1.0", "op"), &["AllNamespaces"]))
        .await;

    let done = h
        .wait_for("demo.v0.1.0", P::Succeeded, R::InstallSucceeded)
        .await;
    let annotations = done.annotations();
    assert_eq!(annotations["olm.targetNamespaces"], "");
    assert_eq!(annotations["olm.operatorGroup"], "og");
    assert_eq!(annotations["olm.operatorNamespace"], NS);
    let og = h.groups(NS).get("og").await.unwrap();
    assert_eq!(
        og.status.clone().unwrap().namespaces,
        Some(vec![String::new()])
    );
    assert_eq!(og.annotations()["olm.providedAPIs"], "Demo.v1.example.com");
    assert_eq!(
        pod_template_targets(&h, "op").await.as_deref(),
        Some(""),
        "the Deployment watches all namespaces"
    );

    // Metrics after the status write: Succeeded, no abnormal series, reconciles timed.
    let text = h.ctx().metrics.encode();
    assert!(
        text.lines().any(|l| l.starts_with("csv_succeeded{")
            && l.contains("name=\"demo.v0.1.0\"")
            && l.ends_with(" 1")),
        "{text}"
    );
    assert!(
        !text
            .lines()
            .any(|l| l.starts_with("csv_abnormal{") && l.contains("demo.v0.1.0")),
        "{text}"
    );
    assert!(
        text.contains("olm_rs_reconcile_duration_seconds_count{kind=\"ClusterServiceVersion\""),
        "{text}"
    );

    // Every namespace but the operator's own (the API server also has default, kube-system…).
    let namespaces: Api<Namespace> = Api::all(h.client.clone());
    let mut want: Vec<(String, String)> = namespaces
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|n| n.name_any())
        .filter(|n| n != NS)
        .map(|n| (n, "Copied".to_owned()))
        .collect();
    want.sort();
    assert!(want.iter().any(|(n, _)| n == "team-a") && want.iter().any(|(n, _)| n == "team-b"));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let found = copies(&h.client, "demo.v0.1.0").await;
        if found == want {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "copies: {found:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    h.csvs()
        .delete("demo.v0.1.0", &DeleteParams::default())
        .await
        .unwrap();
    h.wait_gone("demo.v0.1.0").await;
    eventually("copies removed with the original", || async {
        copies(&h.client, "demo.v0.1.0")
            .await
            .is_empty()
            .then_some(())
    })
    .await;
    // The finalizer's removal and the metrics update are one reconcile apart.
    eventually("a deleted CSV's metric series go", || async {
        let text = h.ctx().metrics.encode();
        (!text
            .lines()
            .any(|l| l.starts_with("csv_") && l.contains("demo.v0.1.0")))
        .then_some(())
    })
    .await;
}

#[tokio::test]
async fn install_modes_follow_the_targets_the_group_controller_computes() {
    let h = Harness::start_all_controllers().await;
    namespace(&h.client, "other", json!({})).await;
    group(
        &h,
        NS,
        "og",
        json!({"targetNamespaces": ["other", NS]}),
        json!({}),
    )
    .await;
    h.service_account_with_rbac().await;
    // Own and Single only.
    h.create_csv(csv("demo.v0.1.0", "op")).await;
    let failed = h
        .wait_for("demo.v0.1.0", P::Failed, R::UnsupportedOperatorGroup)
        .await;
    assert_eq!(
        message(&failed),
        "MultiNamespace InstallModeType not supported, cannot configure to watch 2 namespaces"
    );
    assert_eq!(failed.annotations()["olm.targetNamespaces"], "demo,other");
    assert!(h.deployments().get_opt("op").await.unwrap().is_none());

    // Narrowing the group to its own namespace fixes it.
    h.groups(NS)
        .patch(
            "og",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"targetNamespaces": [NS]}})),
        )
        .await
        .unwrap();
    let done = h
        .wait_for("demo.v0.1.0", P::Succeeded, R::InstallSucceeded)
        .await;
    assert_eq!(done.annotations()["olm.targetNamespaces"], NS);
    assert_eq!(pod_template_targets(&h, "op").await.as_deref(), Some(NS));

    // Moving it to one other namespace (SingleNamespace) rewrites the pod template.
    h.groups(NS)
        .patch(
            "og",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"targetNamespaces": ["other"]}})),
        )
        .await
        .unwrap();
    eventually("the Deployment follows the new targets", || async {
        (pod_template_targets(&h, "op").await.as_deref() == Some("other")).then_some(())
    })
    .await;
    h.wait_for("demo.v0.1.0", P::Succeeded, R::InstallSucceeded)
        .await;
}

#[tokio::test]
async fn an_intersecting_group_providing_the_api_fails_the_csv_naming_both() {
    let h = Harness::start_all_controllers().await;
    namespace(&h.client, "operators", json!({})).await;
    // A static all-namespaces group reserving the API (a dynamic one would be pruned: nobody
    // in `operators` provides it).
    group(
        &h,
        "operators",
        "global-operators",
        json!({"staticProvidedAPIs": true}),
        json!({"olm.providedAPIs": "Demo.v1.example.com"}),
    )
    .await;
    group(&h, NS, "og", json!({"targetNamespaces": [NS]}), json!({})).await;
    h.service_account_with_rbac().await;
    h.create_csv(csv("demo.v0.1.0", "op")).await;

    let failed = h
        .wait_for("demo.v0.1.0", P::Failed, R::InterOperatorGroupOwnerConflict)
        .await;
    // The metric follows the status write within the same sync; the watch may show the status
    // a moment before the sync records the metric.
    eventually("csv_abnormal reports the conflict", || async {
        let text = h.ctx().metrics.encode();
        text.lines()
            .any(|l| {
                l.starts_with("csv_abnormal{")
                    && l.contains("phase=\"Failed\"")
                    && l.contains("reason=\"InterOperatorGroupOwnerConflict\"")
            })
            .then_some(())
    })
    .await;
    assert_eq!(
        message(&failed),
        "intersecting operatorgroups provide the same apis: Demo.v1.example.com also provided by operatorgroup(s) operators/global-operators"
    );
    assert!(h.deployments().get_opt("op").await.unwrap().is_none());
    // Its own group never took the API.
    let og = h.groups(NS).get("og").await.unwrap();
    assert!(
        og.annotations()
            .get("olm.providedAPIs")
            .is_none_or(|v| v.is_empty()),
        "{:?}",
        og.annotations()
    );

    // Removing the reservation lets it install.
    h.groups("operators")
        .delete("global-operators", &DeleteParams::default())
        .await
        .unwrap();
    h.wait_for("demo.v0.1.0", P::Succeeded, R::InstallSucceeded)
        .await;
}

#[tokio::test]
async fn a_group_selecting_nothing_fails_its_csv_until_a_namespace_matches() {
    let h = Harness::start_all_controllers().await;
    group(
        &h,
        NS,
        "og",
        json!({"selector": {"matchLabels": {"team": "demo"}}}),
        json!({}),
    )
    .await;
    h.service_account_with_rbac().await;
    h.create_csv(csv("demo.v0.1.0", "op")).await;
    let failed = h
        .wait_for("demo.v0.1.0", P::Failed, R::NoTargetNamespaces)
        .await;
    assert_eq!(
        message(&failed),
        "no targetNamespaces are matched operatorgroups namespace selection"
    );
    assert!(!failed.annotations().contains_key("olm.targetNamespaces"));

    let namespaces: Api<Namespace> = Api::all(h.client.clone());
    namespaces
        .patch(
            NS,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"team": "demo"}}})),
        )
        .await
        .unwrap();
    let done = h
        .wait_for("demo.v0.1.0", P::Succeeded, R::InstallSucceeded)
        .await;
    assert_eq!(done.annotations()["olm.targetNamespaces"], NS);

    // Both controllers agree on the annotations: nothing keeps rewriting the CSV.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = h.csvs().get("demo.v0.1.0").await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = h.csvs().get("demo.v0.1.0").await.unwrap();
    assert_eq!(before.resource_version(), after.resource_version());
}

/// `kubectl get og` prints `NAME AGE`: the OperatorGroup CRD declares no printer columns
/// (docs/api-types.md), so the server's default Table applies.
#[tokio::test]
async fn kubectl_get_og_shows_name_and_age() {
    let h = Harness::start_all_controllers().await;
    group(&h, NS, "og", json!({}), json!({})).await;
    let request = http::Request::get(format!(
        "/apis/operators.coreos.com/v1/namespaces/{NS}/operatorgroups"
    ))
    .header("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
    .body(Vec::new())
    .unwrap();
    let table: Value = h.client.request(request).await.unwrap();
    let columns: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .expect("a Table")
        .iter()
        .map(|c| c["name"].as_str().unwrap_or_default())
        .collect();
    // For a CRD without printer columns the API server adds `Age` (creationTimestamp).
    assert_eq!(columns, vec!["Name", "Age"]);
    assert_eq!(table["rows"][0]["cells"][0], "og");
}

/// A CSV parked in `InstallComponentFailedNoRetry` because its group's service account lacks
/// rights is released by pointing the group at an account that has them: the OperatorGroup
/// controller records the new `serviceAccountRef`, and the CSV controller — the only writer of
/// CSV status — sees the group change and retries. No RBAC object changes after the failure, so
/// only the group's change can be what released it.
#[tokio::test]
async fn pointing_the_group_at_an_account_with_rights_releases_a_no_retry_csv() {
    let h = Harness::start_all_controllers().await;
    h.service_account("scoped").await;
    h.service_account_with_rbac().await;
    h.service_account("installer").await;
    h.grant(
        "installer",
        "installer",
        json!([{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]),
    )
    .await;
    group(
        &h,
        NS,
        "og",
        json!({"targetNamespaces": [NS], "serviceAccountName": "scoped"}),
        json!({}),
    )
    .await;
    let groups = h.groups(NS);
    eventually("the group's status names the scoped account", || async {
        let og = groups.get("og").await.ok()?;
        (og.status?.service_account_ref?.name.as_deref() == Some("scoped")).then_some(())
    })
    .await;
    // The failure must come after every RBAC object's last change (seconds resolution); the
    // controller's clock is the harness's manual one, set to the wall time the server stamps.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    h.clock.set(jiff::Timestamp::now());
    h.create_csv(csv("demo.v0.1.0", "op")).await;
    h.wait_for("demo.v0.1.0", P::Failed, R::InstallComponentFailedNoRetry)
        .await;

    // Still parked a while later: nothing changed.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let parked = h.csvs().get("demo.v0.1.0").await.unwrap();
    assert_eq!(
        parked.status.as_ref().and_then(|s| s.reason.clone()),
        Some(R::InstallComponentFailedNoRetry)
    );

    groups
        .patch(
            "og",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"serviceAccountName": "installer"}})),
        )
        .await
        .unwrap();
    h.wait_for_history("demo.v0.1.0", P::Pending, R::DetectedClusterChange)
        .await;
    h.wait_for("demo.v0.1.0", P::Succeeded, R::InstallSucceeded)
        .await;
}

//! Watches that expire (docs/reliability.md §2): the API server restarts after etcd compacted
//! its history, every watch of every controller ends, and each gets `410 Gone` for the version
//! it knew and lists again. A change made in that gap must be acted on, and nothing that was
//! already right may be made again (no copy deleted and created anew).

use crate::csv_support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use csv_support::*;
use k8s_openapi::api::core::v1::Namespace;
use kube::ResourceExt;
use kube::api::{Api, ListParams, PostParams};
use olm_rs::api::{ClusterServiceVersion, CsvPhase as P, CsvReason as R, OperatorGroup};
use serde_json::json;

/// The copies of `name` by namespace, with their uid.
async fn copies(h: &Harness, name: &str) -> BTreeMap<String, String> {
    let api: Api<ClusterServiceVersion> = Api::all(h.client.clone());
    api.list(&ListParams::default().labels("olm.copiedFrom"))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|c| c.name_any() == name)
        .map(|c| {
            (
                c.namespace().unwrap_or_default(),
                c.uid().unwrap_or_default(),
            )
        })
        .collect()
}

async fn namespace(h: &Harness, name: &str) {
    let api: Api<Namespace> = Api::all(h.client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    api.create(&PostParams::default(), &ns).await.unwrap();
}

#[tokio::test]
async fn a_namespace_created_while_every_watch_expires_gets_its_copy_and_no_copy_is_made_twice() {
    let h = Harness::start_all_controllers().await;
    namespace(&h, "team-a").await;
    let og: OperatorGroup = serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
        "metadata": {"name": "og", "namespace": NS}, "spec": {},
    }))
    .unwrap();
    h.groups(NS)
        .create(&PostParams::default(), &og)
        .await
        .unwrap();
    h.service_account_with_rbac().await;
    let mut all = csv("demo.v0.1.0", "op");
    all["spec"]["installModes"] = json!([{"type": "AllNamespaces", "supported": true}]);
    h.create_csv(all).await;
    h.wait_for("demo.v0.1.0", P::Succeeded, R::InstallSucceeded)
        .await;
    let before = eventually("a copy in team-a", || async {
        let found = copies(&h, "demo.v0.1.0").await;
        found.contains_key("team-a").then_some(found)
    })
    .await;

    // etcd compacted, the API server restarted: every watch ends and gets 410 on its way back.
    // The namespace is created in that gap, before any controller has listed again.
    let expired = Instant::now();
    h.server.restart_watches();
    namespace(&h, "team-late").await;
    let after = eventually("a copy in the namespace created during the gap", || async {
        let found = copies(&h, "demo.v0.1.0").await;
        found.contains_key("team-late").then_some(found)
    })
    .await;
    let converged = expired.elapsed();
    println!(
        "watch expiry: the change made in the gap acted on after {:.2}s",
        converged.as_secs_f64()
    );
    assert!(converged < Duration::from_secs(20));
    for (ns, uid) in &before {
        assert_eq!(
            after.get(ns),
            Some(uid),
            "the copy in {ns} is the same object after the relist (not deleted and made again)"
        );
    }
    let csv = h.csvs().get("demo.v0.1.0").await.unwrap();
    assert_eq!(
        csv.status.and_then(|s| s.phase),
        Some(P::Succeeded),
        "the relist did not move the CSV backwards"
    );
}

//! Writes lost as an API server restart loses them (docs/reliability.md §2): of the
//! controllers' writes, one in four fails — alternately before it reaches the server (a
//! refused connection) and after the server performed it (the answer lost). Every reconciler
//! of `olm-rs run` runs; the workload is an AllNamespaces operator with its copies. The
//! operation history, watched from the outside: every object made once (never deleted and made
//! again), the CSV's phase never going back once `Succeeded`, nothing missing at the end.

use crate::csv_support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use csv_support::*;
use futures::{FutureExt, StreamExt};
use http::{Method, Request};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams, PostParams};
use kube::client::Body;
use kube::{Client, Resource, ResourceExt};
use kube_runtime::watcher;
use olm_rs::api::{ClusterServiceVersion, CsvPhase as P, CsvReason as R, OperatorGroup};
use serde_json::json;

#[derive(Default)]
struct Losses {
    writes: AtomicUsize,
    failed_before: AtomicUsize,
    lost_after: AtomicUsize,
}

/// `client`, losing one write in `every`: alternately never sent, and sent with its answer lost.
fn lossy(client: Client, every: usize, losses: Arc<Losses>) -> Client {
    let service = tower::service_fn(move |request: Request<Body>| {
        let (inner, losses) = (client.clone(), losses.clone());
        async move {
            let write = !matches!(*request.method(), Method::GET | Method::HEAD);
            let n = if write {
                losses.writes.fetch_add(1, Ordering::SeqCst) + 1
            } else {
                0
            };
            if write && n.is_multiple_of(every) {
                if (n / every).is_multiple_of(2) {
                    losses.failed_before.fetch_add(1, Ordering::SeqCst);
                    return Err(kube::Error::Service("connection refused (test)".into()));
                }
                let _performed = inner.send(request).await?;
                losses.lost_after.fetch_add(1, Ordering::SeqCst);
                return Err(kube::Error::Service("connection reset (test)".into()));
            }
            inner.send(request).await
        }
        .boxed()
    });
    Client::new(service, "default")
}

/// What a watch from outside saw of one kind: the uids each name had, the deletions.
#[derive(Default, Debug)]
struct History {
    uids: BTreeMap<String, BTreeSet<String>>,
    deleted: BTreeSet<String>,
    /// The original CSV's phases, in the order seen.
    phases: Vec<String>,
}

fn record<K>(client: &Client, history: Arc<Mutex<History>>) -> tokio::task::JoinHandle<()>
where
    K: Resource
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug
        + Send
        + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    let api: Api<K> = Api::all(client.clone());
    tokio::spawn(async move {
        let mut events = watcher(api, watcher::Config::default()).boxed();
        while let Some(Ok(event)) = events.next().await {
            let mut h = history.lock().unwrap();
            let key = |o: &K| format!("{}/{}", o.namespace().unwrap_or_default(), o.name_any());
            match event {
                watcher::Event::Apply(o) | watcher::Event::InitApply(o) => {
                    let uid = o.uid().unwrap_or_default();
                    h.uids.entry(key(&o)).or_default().insert(uid);
                    if let Ok(v) = serde_json::to_value(&o)
                        && key(&o) == format!("{NS}/demo.v0.1.0")
                        && let Some(phase) = v.pointer("/status/phase").and_then(|p| p.as_str())
                        && h.phases.last().map(String::as_str) != Some(phase)
                    {
                        h.phases.push(phase.to_owned());
                    }
                }
                watcher::Event::Delete(o) => {
                    h.deleted.insert(key(&o));
                }
                _ => {}
            }
        }
    })
}

#[tokio::test]
async fn with_one_write_in_four_lost_an_all_namespaces_operator_converges_making_nothing_twice() {
    let losses = Arc::new(Losses::default());
    let h = {
        let losses = losses.clone();
        Harness::start_all_controllers_through(move |c| lossy(c, 4, losses)).await
    };
    let csvs = Arc::new(Mutex::new(History::default()));
    let deployments = Arc::new(Mutex::new(History::default()));
    let watches = [
        record::<ClusterServiceVersion>(&h.client, csvs.clone()),
        record::<Deployment>(&h.client, deployments.clone()),
    ];
    let namespaces: Api<Namespace> = Api::all(h.client.clone());
    for name in ["team-a", "team-b", "team-c"] {
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
        namespaces
            .create(&PostParams::default(), &ns)
            .await
            .unwrap();
    }
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
    let started = Instant::now();
    h.create_csv(all).await;
    h.wait_for("demo.v0.1.0", P::Succeeded, R::InstallSucceeded)
        .await;
    let every_namespace: BTreeSet<String> = namespaces
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|n| n.name_any())
        .filter(|n| n != NS)
        .collect();
    let copies = || async {
        Api::<ClusterServiceVersion>::all(h.client.clone())
            .list(&ListParams::default().labels("olm.copiedFrom"))
            .await
            .unwrap()
            .items
            .iter()
            .map(|c| c.namespace().unwrap_or_default())
            .collect::<BTreeSet<String>>()
    };
    eventually("a copy in every other namespace", || async {
        (copies().await == every_namespace).then_some(())
    })
    .await;
    let converged = started.elapsed();
    // Let the watches see the last writes.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    for w in watches {
        w.abort();
    }

    let (failed, lost) = (
        losses.failed_before.load(Ordering::SeqCst),
        losses.lost_after.load(Ordering::SeqCst),
    );
    println!(
        "lost writes: {} writes, {failed} refused before the server, {lost} answers lost; converged in {:.2}s",
        losses.writes.load(Ordering::SeqCst),
        converged.as_secs_f64()
    );
    assert!(failed > 0 && lost > 0, "the faults happened");
    for (what, history) in [("CSV", &csvs), ("Deployment", &deployments)] {
        let history = history.lock().unwrap();
        let twice: Vec<&String> = history
            .uids
            .iter()
            .filter(|(_, uids)| uids.len() > 1)
            .map(|(name, _)| name)
            .collect();
        assert!(twice.is_empty(), "{what}s made twice: {twice:?}");
        assert!(
            history.deleted.is_empty(),
            "{what}s deleted: {:?}",
            history.deleted
        );
    }
    let phases = csvs.lock().unwrap().phases.clone();
    let first_success = phases.iter().position(|p| p == "Succeeded").unwrap();
    assert_eq!(
        &phases[first_success..],
        ["Succeeded"],
        "the phase never went back once Succeeded: {phases:?}"
    );
    assert!(
        deployments
            .lock()
            .unwrap()
            .uids
            .contains_key(&format!("{NS}/op")),
        "the operator's Deployment"
    );
}

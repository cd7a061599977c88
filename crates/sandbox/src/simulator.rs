//! The workload simulator stands in for the kubelet and the Deployment controller, which the
//! sandbox does not have: shortly after a Deployment is created or changed it writes the status a
//! healthy rollout ends with (all replicas ready, `Available=True`, `Progressing=True` with
//! reason `NewReplicaSetAvailable`), or — for a Deployment named in
//! [`WorkloadSimulator::fail_deployment`](crate::WorkloadSimulator::fail_deployment) — the status of a rollout that timed out
//! (`Available=False`, `Progressing=False` with reason `ProgressDeadlineExceeded`).
//! It also marks APIServices `Available` when they are local or their Service exists (no
//! request is ever proxied to them). No Pods or ReplicaSets are created.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::conditions;
use super::meta;
use super::objects::{self, Part, WriteOptions};
use super::resources::GroupResource;
use super::server::ApiServer;
use super::state::State;

pub(crate) fn spawn(server: &ApiServer) {
    let weak = Arc::downgrade(&server.inner);
    let shared = server.simulator().shared.clone();
    let mut changes = server.subscribe();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                changed = changes.changed() => if changed.is_err() { return },
                _ = shared.wake.notified() => {}
            }
            let Some(inner) = weak.upgrade() else { return };
            let server = ApiServer { inner };
            let sim = server.simulator();
            if !sim.is_enabled() {
                continue;
            }
            let delay = sim.delay();
            drop(server);
            tokio::time::sleep(delay).await;
            let Some(inner) = weak.upgrade() else { return };
            let server = ApiServer { inner };
            let failing = server.simulator().failing_set().clone();
            if server.simulator().is_enabled() {
                server.write(|s| sweep(s, &failing));
            }
        }
    });
}

fn deployments_gr() -> GroupResource {
    GroupResource {
        group: "apps".into(),
        resource: "deployments".into(),
    }
}

fn apiservices_gr() -> GroupResource {
    GroupResource {
        group: "apiregistration.k8s.io".into(),
        resource: "apiservices".into(),
    }
}

/// Brings every Deployment's and APIService's status to what the simulated cluster reports.
pub(crate) fn sweep(state: &mut State, failing: &BTreeSet<(String, String)>) {
    for gr in [deployments_gr(), apiservices_gr()] {
        let Some(res) = state.storage_info(&gr) else {
            continue;
        };
        let objs: Vec<Value> = state.store.list(&gr, None).map(|o| (**o).clone()).collect();
        for obj in objs {
            if meta::is_deleting(&obj) {
                continue;
            }
            let next = if gr == deployments_gr() {
                let key = (
                    meta::namespace(&obj).unwrap_or_default().to_string(),
                    meta::name(&obj).unwrap_or_default().to_string(),
                );
                deployment_status(&obj, failing.contains(&key))
            } else {
                apiservice_status(state, &obj)
            };
            if next == obj {
                continue;
            }
            let ns = meta::namespace(&obj).map(str::to_string);
            let name = meta::name(&obj).unwrap_or_default().to_string();
            if let Err(err) = objects::update(
                state,
                &res,
                ns.as_deref(),
                &name,
                next,
                Part::Status,
                &WriteOptions::default(),
            ) {
                tracing::debug!(%err, object = %name, "sandbox simulator: status write failed");
            }
        }
    }
}

/// The ReplicaSet name a Deployment controller would derive from the pod template.
fn replica_set_name(dep: &Value) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let template = dep
        .pointer("/spec/template")
        .map(Value::to_string)
        .unwrap_or_default();
    let digest = Sha256::digest(template.as_bytes());
    let hash: String = digest
        .iter()
        .take(10)
        .map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char)
        .collect();
    format!("{}-{hash}", meta::name(dep).unwrap_or_default())
}

fn set_count(status: &mut Value, key: &str, n: i64) {
    // The real controller omits zero counts.
    if n == 0 {
        if let Some(m) = status.as_object_mut() {
            m.shift_remove(key);
        }
    } else {
        status[key] = json!(n);
    }
}

pub(crate) fn deployment_status(dep: &Value, failing: bool) -> Value {
    let mut next = dep.clone();
    let replicas = dep
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    if !next.get("status").is_some_and(Value::is_object) {
        next["status"] = json!({});
    }
    let status = &mut next["status"];
    status["observedGeneration"] = json!(meta::generation(dep).unwrap_or(1));
    set_count(status, "replicas", replicas);
    set_count(status, "updatedReplicas", replicas);
    let rs = replica_set_name(dep);
    if failing {
        set_count(status, "readyReplicas", 0);
        set_count(status, "availableReplicas", 0);
        set_count(status, "unavailableReplicas", replicas);
        conditions::set(
            &mut next,
            "Available",
            "False",
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.",
        );
        conditions::set(
            &mut next,
            "Progressing",
            "False",
            "ProgressDeadlineExceeded",
            &format!("ReplicaSet \"{rs}\" has timed out progressing."),
        );
    } else {
        set_count(status, "readyReplicas", replicas);
        set_count(status, "availableReplicas", replicas);
        set_count(status, "unavailableReplicas", 0);
        conditions::set(
            &mut next,
            "Available",
            "True",
            "MinimumReplicasAvailable",
            "Deployment has minimum availability.",
        );
        conditions::set(
            &mut next,
            "Progressing",
            "True",
            "NewReplicaSetAvailable",
            &format!("ReplicaSet \"{rs}\" has successfully progressed."),
        );
    }
    next
}

fn apiservice_status(state: &State, svc: &Value) -> Value {
    let mut next = svc.clone();
    let (status, reason, message) = match svc.pointer("/spec/service") {
        None | Some(Value::Null) => (
            "True",
            "Local",
            "Local APIServices are always available".to_string(),
        ),
        Some(target) => {
            let ns = target["namespace"].as_str().unwrap_or_default();
            let name = target["name"].as_str().unwrap_or_default();
            let services = GroupResource {
                group: String::new(),
                resource: "services".into(),
            };
            if state.store.get(&services, ns, name).is_some() {
                ("True", "Passed", "all checks passed".to_string())
            } else {
                (
                    "False",
                    "ServiceNotFound",
                    format!("service/{name} in \"{ns}\" is not present"),
                )
            }
        }
    };
    conditions::set(&mut next, "Available", status, reason, &message);
    next
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn healthy_and_failed_deployment_status() {
        let dep = json!({"metadata": {"name": "op", "generation": 3}, "spec": {"replicas": 2, "template": {}}});
        let ok = deployment_status(&dep, false);
        assert_eq!(ok["status"]["observedGeneration"], 3);
        assert_eq!(ok["status"]["availableReplicas"], 2);
        assert_eq!(conditions::status_of(&ok, "Available"), Some("True"));
        assert_eq!(
            conditions::find(&ok, "Progressing").unwrap()["reason"],
            "NewReplicaSetAvailable"
        );
        assert_eq!(
            deployment_status(&ok, false),
            ok,
            "settled status is stable"
        );
        let bad = deployment_status(&ok, true);
        assert_eq!(conditions::status_of(&bad, "Available"), Some("False"));
        assert_eq!(
            conditions::find(&bad, "Progressing").unwrap()["reason"],
            "ProgressDeadlineExceeded"
        );
        assert!(bad["status"].get("availableReplicas").is_none());
    }
}

//! The node simulator: plays the kubelet (and the scheduler) for a control plane that has no
//! container runtime. It registers one Ready Node, binds every unscheduled pod to it
//! (`pods/binding`), marks bound pods Running and Ready (Job pods Succeeded) with podIP, hostIP
//! and conditions, deletes terminating pods at once (grace 0) so namespace deletion and rollouts
//! finish, and renews the node's Lease. It watches pods; it never polls them.

use std::time::Duration;

use anyhow::Context as _;
use futures::StreamExt as _;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube_runtime::{WatchStreamExt as _, watcher};
use serde_json::{Value, json};

pub const NODE_NAME: &str = "olm-rs-e2e-node";
/// The field manager of the simulator's writes.
const MANAGER: &str = "olm-rs-e2e-node";
const LEASE_RENEW: Duration = Duration::from_secs(10);

/// The running simulator; it stops when dropped.
pub struct NodeSimulator {
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for NodeSimulator {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl NodeSimulator {
    /// Registers the node and starts playing it.
    pub async fn start(client: kube::Client) -> anyhow::Result<Self> {
        register(&client).await?;
        let lease = tokio::spawn(renew_lease(client.clone()));
        let pods = tokio::spawn(run_pods(client));
        Ok(Self {
            tasks: vec![lease, pods],
        })
    }
}

fn params() -> PatchParams {
    PatchParams {
        field_manager: Some(MANAGER.to_owned()),
        ..PatchParams::default()
    }
}

fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

async fn register(client: &kube::Client) -> anyhow::Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": NODE_NAME, "labels": {
            "kubernetes.io/hostname": NODE_NAME,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
        }},
    }))?;
    let post = PostParams {
        field_manager: Some(MANAGER.to_owned()),
        ..PostParams::default()
    };
    match nodes.create(&post, &node).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(err) => return Err(err).context("registering the node"),
    }
    let t = now();
    let condition = |kind: &str, status: &str, reason: &str| {
        json!({"type": kind, "status": status, "reason": reason, "message": reason,
               "lastHeartbeatTime": t, "lastTransitionTime": t})
    };
    let capacity = json!({"cpu": "32", "memory": "128Gi", "pods": "1000",
                          "ephemeral-storage": "100Gi"});
    nodes
        .patch_status(
            NODE_NAME,
            &params(),
            &Patch::Merge(json!({"status": {
                "capacity": capacity,
                "allocatable": capacity,
                "conditions": [
                    condition("MemoryPressure", "False", "KubeletHasSufficientMemory"),
                    condition("DiskPressure", "False", "KubeletHasNoDiskPressure"),
                    condition("PIDPressure", "False", "KubeletHasSufficientPID"),
                    condition("Ready", "True", "KubeletReady"),
                ],
                "addresses": [
                    {"type": "InternalIP", "address": "127.0.0.1"},
                    {"type": "Hostname", "address": NODE_NAME},
                ],
                "nodeInfo": {
                    "machineID": "olm-rs-e2e", "systemUUID": "olm-rs-e2e", "bootID": "olm-rs-e2e",
                    "kernelVersion": "", "osImage": "olm-rs node simulator",
                    "containerRuntimeVersion": "simulated://0", "kubeletVersion": "v1.36.2",
                    "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64",
                },
            }})),
        )
        .await
        .context("marking the node Ready")?;
    // The API server taints a new node not-ready until the node lifecycle controller sees it
    // Ready; drop those taints now so pods can be bound at once.
    let node = nodes.get(NODE_NAME).await?;
    let taints = node.spec.and_then(|s| s.taints).unwrap_or_default();
    let keep: Vec<_> = taints
        .iter()
        .filter(|t| !t.key.starts_with("node.kubernetes.io/"))
        .collect();
    if keep.len() != taints.len() {
        nodes
            .patch(
                NODE_NAME,
                &params(),
                &Patch::Merge(json!({"spec": {"taints": keep}})),
            )
            .await
            .context("removing the not-ready taints")?;
    }
    Ok(())
}

async fn renew_lease(client: kube::Client) {
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    loop {
        let spec = json!({"holderIdentity": NODE_NAME, "leaseDurationSeconds": 40,
                          "renewTime": jiff::Timestamp::now()
                              .strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()});
        let result = match leases
            .patch(NODE_NAME, &params(), &Patch::Merge(json!({"spec": spec})))
            .await
        {
            Err(kube::Error::Api(status)) if status.code == 404 => {
                let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                   "metadata": {"name": NODE_NAME, "namespace": "kube-node-lease"},
                                   "spec": spec});
                match serde_json::from_value::<Lease>(lease) {
                    Ok(lease) => leases
                        .create(&PostParams::default(), &lease)
                        .await
                        .map(drop),
                    Err(err) => Err(kube::Error::SerdeError(err)),
                }
            }
            other => other.map(drop),
        };
        if let Err(err) = result {
            eprintln!("e2e-real node: renewing the Lease: {err}");
        }
        tokio::time::sleep(LEASE_RENEW).await;
    }
}

async fn run_pods(client: kube::Client) {
    let pods: Api<Pod> = Api::all(client.clone());
    let mut events = watcher(pods, watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .boxed();
    while let Some(event) = events.next().await {
        match event {
            Ok(pod) => {
                if let Err(err) = handle(&client, &pod).await {
                    eprintln!("e2e-real node: {err:#}");
                }
            }
            Err(err) => eprintln!("e2e-real node: watching pods: {err}"),
        }
    }
}

/// Does for one pod what a scheduler and a kubelet would do next.
async fn handle(client: &kube::Client, pod: &Pod) -> anyhow::Result<()> {
    let (Some(ns), Some(name), Some(uid)) = (
        pod.metadata.namespace.as_deref(),
        pod.metadata.name.as_deref(),
        pod.metadata.uid.as_deref(),
    ) else {
        return Ok(());
    };
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let spec = pod.spec.clone().unwrap_or_default();
    let ignore_gone = |result: Result<(), kube::Error>, what: &str| match result {
        Err(kube::Error::Api(status)) if matches!(status.code, 404 | 409) => Ok(()),
        other => other.with_context(|| format!("{what} pod {ns}/{name}")),
    };
    let deleting = pod.metadata.deletion_timestamp.is_some();
    match spec.node_name.as_deref() {
        None if !deleting => {
            let binding = json!({"apiVersion": "v1", "kind": "Binding",
                                 "metadata": {"name": name, "namespace": ns, "uid": uid},
                                 "target": {"apiVersion": "v1", "kind": "Node", "name": NODE_NAME}});
            let result = pods
                .create_subresource::<_, Value>("binding", name, &PostParams::default(), &binding)
                .await
                .map(drop);
            ignore_gone(result, "binding")
        }
        Some(NODE_NAME) if deleting => {
            let delete = DeleteParams {
                grace_period_seconds: Some(0),
                preconditions: Some(Preconditions {
                    uid: Some(uid.to_owned()),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            ignore_gone(pods.delete(name, &delete).await.map(drop), "deleting")
        }
        Some(NODE_NAME) => {
            let phase = desired_phase(pod);
            let current = pod.status.as_ref().and_then(|s| s.phase.as_deref());
            if matches!(current, Some("Succeeded" | "Failed")) || current == Some(phase) {
                return Ok(());
            }
            let status = running_status(pod, phase);
            let result = pods
                .patch_status(
                    name,
                    &params(),
                    &Patch::Merge(json!({"metadata": {"uid": uid}, "status": status})),
                )
                .await
                .map(drop);
            ignore_gone(result, "setting the status of")
        }
        _ => Ok(()),
    }
}

fn desired_phase(pod: &Pod) -> &'static str {
    let owned_by_job = pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|owner| owner.kind == "Job");
    if owned_by_job { "Succeeded" } else { "Running" }
}

/// The status a kubelet reports for a pod whose containers all started (`Running`, ready) or
/// all exited 0 (`Succeeded`).
fn running_status(pod: &Pod, phase: &str) -> Value {
    let t = now();
    let spec = pod.spec.clone().unwrap_or_default();
    let done = phase == "Succeeded";
    let ip = if spec.host_network == Some(true) {
        "127.0.0.1".to_owned()
    } else {
        pod_ip(pod.metadata.uid.as_deref().unwrap_or_default())
    };
    let containers: Vec<Value> = spec
        .containers
        .iter()
        .map(|c| {
            let state = if done {
                json!({"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": t,
                                      "finishedAt": t}})
            } else {
                json!({"running": {"startedAt": t}})
            };
            json!({"name": c.name, "image": c.image.clone().unwrap_or_default(),
                   "imageID": "", "containerID": format!("simulated://{}", c.name),
                   "restartCount": 0, "ready": !done, "started": !done, "state": state})
        })
        .collect();
    let condition = |kind: &str, status: bool| {
        let mut c = json!({"type": kind, "status": if status { "True" } else { "False" },
                           "lastProbeTime": null, "lastTransitionTime": t});
        if done && kind != "PodScheduled" {
            c["reason"] = json!("PodCompleted");
        }
        c
    };
    json!({
        "phase": phase,
        "hostIP": "127.0.0.1",
        "hostIPs": [{"ip": "127.0.0.1"}],
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "startTime": t,
        "conditions": [
            condition("Initialized", true),
            condition("Ready", !done),
            condition("ContainersReady", !done),
            condition("PodScheduled", true),
        ],
        "containerStatuses": containers,
    })
}

/// A stable address in 10.244.0.0/16 for a pod (written into status only, never dialled).
fn pod_ip(uid: &str) -> String {
    let hash = uid
        .bytes()
        .fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
    format!("10.244.{}.{}", (hash >> 8) % 250, hash % 250 + 2)
}

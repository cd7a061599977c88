//! The real-node checks, in order, each building on the one before.

use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;

use crate::real_control_plane::ControlPlane;
use crate::real_control_plane::real_node::{PAUSE_IMAGE, RealNode};

/// The checks, in the order they run (`--list` prints them).
pub const CHECKS: &[&str] = &["node::pods_run"];

/// The longest any one wait takes (a busy 2-core machine pulls and starts slowly).
const WAIT: Duration = Duration::from_secs(120);

/// Prints each check's outcome and counts the failures.
#[derive(Default)]
struct Report {
    failures: usize,
}

impl Report {
    fn check(&mut self, name: &str, started: Instant, result: anyhow::Result<()>) {
        let secs = started.elapsed().as_secs_f64();
        match result {
            Ok(()) => println!("e2e-node: {name} ... ok ({secs:.1}s)"),
            Err(err) => {
                self.failures += 1;
                println!("e2e-node: {name} ... FAILED ({secs:.1}s)\n  {err:#}");
            }
        }
    }
}

pub async fn run(plane: &ControlPlane, node: &RealNode) -> usize {
    let mut report = Report::default();
    let started = Instant::now();
    report.check("node::pods_run", started, pods_run(plane).await);
    let _ = node;
    report.failures
}

/// A pod really runs: it resolves the `kubernetes` Service through CoreDNS and reaches the API
/// server through kube-proxy's rules, then exits 0.
async fn pods_run(plane: &ControlPlane) -> anyhow::Result<()> {
    let pods: Api<Pod> = Api::namespaced(plane.client.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "node-check"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{
                "name": "check",
                "image": PAUSE_IMAGE,
                "command": ["/bin/busybox", "sh", "-c",
                    "/bin/busybox nslookup kubernetes.default.svc.cluster.local && \
                     echo | /bin/busybox nc -w 5 kubernetes.default.svc.cluster.local 443"],
            }],
        },
    }))?;
    pods.create(&PostParams::default(), &pod).await?;
    let started = Instant::now();
    loop {
        let pod = pods.get("node-check").await?;
        let phase = pod.status.and_then(|s| s.phase).unwrap_or_default();
        match phase.as_str() {
            "Succeeded" => break,
            "Failed" => {
                let logs = pods
                    .logs("node-check", &Default::default())
                    .await
                    .unwrap_or_default();
                bail!("the check pod failed:\n{logs}");
            }
            _ if started.elapsed() > WAIT => bail!("the check pod is still {phase}"),
            _ => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
    pods.delete("node-check", &DeleteParams::default())
        .await
        .context("deleting the check pod")?;
    Ok(())
}

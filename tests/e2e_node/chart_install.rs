//! The chart as users install it: `helm install olm-rs charts/olm-rs -n olm --create-namespace`
//! with the olm-rs image from the node's registry and two replicas. The controller runs as pods,
//! under exactly the chart's RBAC, with its real probes.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};

use crate::real_control_plane::ControlPlane;
use crate::real_control_plane::chart;
use crate::real_control_plane::images;
use crate::real_control_plane::real_node::RealNode;

pub const NAMESPACE: &str = "olm";
pub const RELEASE: &str = "olm-rs";
const SELECTOR: &str = "app.kubernetes.io/name=olm-rs";

/// The images the journeys need, pushed to the node's registry: olm-rs (the controller), the
/// demo catalog (for the `image` journey). Returns the catalog image's reference.
pub async fn push_images(node: &RealNode) -> anyhow::Result<String> {
    let binary = Path::new(env!("CARGO_BIN_EXE_olm-rs"));
    let started = Instant::now();
    images::olm_rs_image(binary)?
        .push(&node.registry, "olm-rs", "dev")
        .await?;
    let catalog_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("e2e/catalog");
    images::catalog_image(&images::olm_rs_image(binary)?, &catalog_dir)?
        .push(&node.registry, "olm-rs-e2e-catalog", "dev")
        .await?;
    println!(
        "e2e-node:   images pushed in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    Ok(format!("{}/olm-rs-e2e-catalog:dev", node.registry.host()))
}

/// `helm install` of the chart with `sets`, and values read from `files` (`--set-file
/// key=path`: PEM and other text `--set` would split at commas), as the admin.
pub fn helm_install(
    plane: &ControlPlane,
    node: &RealNode,
    sets: &[String],
    files: &[(&str, &Path)],
) -> anyhow::Result<()> {
    let helm = chart::helm().map_err(|why| anyhow::anyhow!("helm cannot be had: {why}"))?;
    let chart_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("charts/olm-rs");
    let registry = node.registry.host();
    // olm-rs pulls bundle images and reads catalog digests itself, from inside its pod: the
    // node's registry speaks plain HTTP.
    let registries_conf = format!("[[registry]]\nlocation = \"{registry}\"\ninsecure = true\n");
    let mut command = Command::new(helm);
    command
        .args(["install", RELEASE])
        .arg(&chart_dir)
        .args(["--namespace", NAMESPACE, "--create-namespace"])
        .arg("--kubeconfig")
        .arg(&plane.admin_kubeconfig)
        .args(["--set", &format!("image.repository={registry}/olm-rs")])
        .args(["--set", "image.tag=dev"])
        .args([
            "--set-string",
            &format!("bundleImages.registriesConf={registries_conf}"),
        ]);
    for set in sets {
        command.args(["--set", set]);
    }
    for (key, path) in files {
        command
            .arg("--set-file")
            .arg(format!("{key}={}", path.display()));
    }
    let output = command.output().context("running helm install")?;
    ensure!(
        output.status.success(),
        "helm install failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(())
}

/// The controller's pods, by name, with whether each is Ready.
pub async fn controller_pods(client: &kube::Client) -> anyhow::Result<Vec<(String, bool)>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let list = pods.list(&ListParams::default().labels(SELECTOR)).await?;
    Ok(list
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| {
            let ready = p
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True");
            (p.metadata.name.unwrap_or_default(), ready)
        })
        .collect())
}

/// Waits until `count` controller pods are Ready (their real readiness probes); returns their
/// names.
pub async fn wait_pods_ready(
    client: &kube::Client,
    count: usize,
    timeout: Duration,
) -> anyhow::Result<Vec<String>> {
    let started = Instant::now();
    loop {
        let pods = controller_pods(client).await?;
        let ready: Vec<String> = pods
            .iter()
            .filter(|(_, ready)| *ready)
            .map(|(name, _)| name.clone())
            .collect();
        if ready.len() >= count {
            return Ok(ready);
        }
        if started.elapsed() > timeout {
            bail!(
                "{} of {count} controller pods Ready after {}s: {pods:?}\n{}",
                ready.len(),
                timeout.as_secs(),
                describe_pods(client, 15).await
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The pod the Lease `olm/olm-rs-controller` names, once it names one of `among`.
pub async fn wait_leader(
    client: &kube::Client,
    among: &[String],
    timeout: Duration,
) -> anyhow::Result<String> {
    wait_leader_other_than(client, among, None, timeout).await
}

/// The pod the Lease names once it names one of `among` — or, when `among` is empty, any
/// running controller pod — other than `not`.
pub async fn wait_leader_other_than(
    client: &kube::Client,
    among: &[String],
    not: Option<&str>,
    timeout: Duration,
) -> anyhow::Result<String> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    let started = Instant::now();
    loop {
        let holder = leases
            .get_opt(chart::NAME)
            .await?
            .and_then(|l| l.spec)
            .and_then(|s| s.holder_identity);
        let candidates: Vec<String> = if among.is_empty() {
            controller_pods(client)
                .await?
                .into_iter()
                .map(|(name, _)| name)
                .collect()
        } else {
            among.to_vec()
        };
        if let Some(holder) = &holder
            && Some(holder.as_str()) != not
            && candidates.iter().any(|pod| pod == holder)
        {
            return Ok(holder.clone());
        }
        if started.elapsed() > timeout {
            bail!(
                "the Lease names {holder:?}, none of {among:?}, after {}s",
                timeout.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// What went wrong with the controller's pods: each container's state and last log lines, and
/// the namespace's warning events.
pub async fn describe_pods(client: &kube::Client, log_lines: i64) -> String {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let mut out = String::new();
    let Ok(list) = pods.list(&ListParams::default().labels(SELECTOR)).await else {
        return out;
    };
    for pod in list.items {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let statuses = pod
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.clone())
            .unwrap_or_default();
        for status in statuses {
            out.push_str(&format!(
                "pod {name} container {}: ready {} restarts {} state {:?} last {:?}\n",
                status.name, status.ready, status.restart_count, status.state, status.last_state
            ));
        }
        let params = kube::api::LogParams {
            tail_lines: Some(log_lines),
            ..Default::default()
        };
        if let Ok(log) = pods.logs(&name, &params).await {
            out.push_str(&format!("---- log of {name}\n{log}\n"));
        }
    }
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), NAMESPACE);
    if let Ok(list) = events.list(&ListParams::default()).await {
        for event in list
            .items
            .iter()
            .filter(|e| e.type_.as_deref() == Some("Warning"))
        {
            out.push_str(&format!(
                "event {:?} {:?}: {:?}\n",
                event.involved_object.name, event.reason, event.message
            ));
        }
    }
    out
}

/// Resident memory of each `olm-rs run` process on this machine (the controller pods'
/// containers are processes of the node), in MiB.
pub fn controller_rss() -> Vec<u64> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        let is_controller = args
            .first()
            .is_some_and(|a| a.ends_with(b"/usr/local/bin/olm-rs"))
            && args.get(1).is_some_and(|a| *a == b"run");
        if !is_controller {
            continue;
        }
        let status = std::fs::read_to_string(entry.path().join("status")).unwrap_or_default();
        if let Some(kib) = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<u64>().ok())
        {
            out.push(kib / 1024);
        }
    }
    out
}

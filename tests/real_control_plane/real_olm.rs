//! Real OLM v0.31 (`../shared/olm/`) beside the real control plane and node: its CRDs and the
//! namespaces and OperatorGroups of OLM's quickstart, and its two operators, `olm` and
//! `catalog`, as processes with the admin kubeconfig — as `../shared/olm/reference/run-olm.sh`
//! runs them.
//!
//! Both hard-code a health listener on `:8080` on every interface, so each runs in a network
//! namespace of its own (`ip netns`), joined to the node's bridge by a veth pair with an address
//! of the pod network that the CNI's allocator does not reach in a test (`.250` and up): they
//! reach the API server and the catalogs at the node's address, as pods do, and nothing of theirs
//! listens anywhere else. Stopped, and the namespaces and links removed, when dropped — also
//! while a panic unwinds (and the kernel kills the processes if the test process dies).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery;
use serde_json::{Value, json};

use super::ControlPlane;
use super::process::Process;
use super::real_node::{BRIDGE, NODE_IP, run, run_quiet};

/// The field manager of what the test applies in OLM's place (its quickstart manifests).
const MANAGER: &str = "olm-rs-e2e-olm-quickstart";

/// OLM's CRDs, applied server-side and established.
pub async fn apply_crds(plane: &ControlPlane, crds: &Path) -> anyhow::Result<()> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(crds)
        .with_context(|| format!("reading {}", crds.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let api: Api<DynamicObject> = Api::all_with(
        plane.client.clone(),
        &kube::core::ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
            "customresourcedefinitions",
        ),
    );
    let mut names = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file)?;
        let crd: DynamicObject = serde_yaml_ng::from_str(&text)
            .with_context(|| format!("parsing {}", file.display()))?;
        let name = crd.metadata.name.clone().context("a CRD without a name")?;
        api.patch(
            &name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&crd),
        )
        .await
        .with_context(|| format!("applying CRD {name}"))?;
        names.push(name);
    }
    let started = Instant::now();
    for name in names {
        loop {
            let crd = api.get(&name).await?;
            let established = crd.data["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Established" && c["status"] == "True");
            if established {
                break;
            }
            ensure!(
                started.elapsed() < Duration::from_secs(60),
                "CRD {name} not established after 60s"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    Ok(())
}

/// The namespaces `olm` and `operators` and the OperatorGroups OLM's quickstart creates
/// (`../shared/olm/reference/base.yaml`).
pub async fn apply_quickstart(plane: &ControlPlane) -> anyhow::Result<()> {
    let objects = [
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "olm"}}),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "operators"}}),
        json!({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
               "metadata": {"name": "global-operators", "namespace": "operators"}}),
        json!({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
               "metadata": {"name": "olm-operators", "namespace": "olm"},
               "spec": {"targetNamespaces": ["olm"]}}),
    ];
    let discovery = discovery::Discovery::new(plane.client.clone())
        .run()
        .await?;
    for object in objects {
        apply(plane, &discovery, &object).await?;
    }
    Ok(())
}

async fn apply(
    plane: &ControlPlane,
    discovery: &discovery::Discovery,
    object: &Value,
) -> anyhow::Result<()> {
    let (group, version) = match object["apiVersion"].as_str().unwrap_or_default() {
        v if v.contains('/') => v.split_once('/').unwrap(),
        v => ("", v),
    };
    let kind = object["kind"].as_str().unwrap_or_default();
    let (resource, caps) = discovery
        .resolve_gvk(&GroupVersionKind::gvk(group, version, kind))
        .with_context(|| format!("the API server does not serve {kind}"))?;
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let api: Api<DynamicObject> = match object["metadata"]["namespace"].as_str() {
        Some(ns) if caps.scope == discovery::Scope::Namespaced => {
            Api::namespaced_with(plane.client.clone(), ns, &resource)
        }
        _ => Api::all_with(plane.client.clone(), &resource),
    };
    api.patch(name, &PatchParams::apply(MANAGER), &Patch::Apply(object))
        .await
        .with_context(|| format!("applying {kind} {name}"))?;
    Ok(())
}

/// OLM's two operators, each in its own network namespace; stopped when dropped.
pub struct RealOlm {
    /// `olm`, then `catalog`.
    processes: Vec<Process>,
    /// The network namespaces (`ip netns` names), removed when dropped.
    netns: Vec<String>,
}

/// The first address given to OLM's network namespaces; the CNI allocates pods from `.2` up.
const FIRST_HOST: u8 = 250;

impl RealOlm {
    /// Starts `olm` and `catalog` from `bin` with the admin kubeconfig, as OLM's quickstart
    /// Deployments run them, and waits until both answer `/healthz`.
    pub async fn start(plane: &ControlPlane, bin: &Path, log_dir: &Path) -> anyhow::Result<Self> {
        let started = Instant::now();
        let mut olm = Self {
            processes: Vec::new(),
            netns: Vec::new(),
        };
        let kubeconfig = plane.admin_kubeconfig.display().to_string();
        for (i, name) in ["olm", "catalog"].into_iter().enumerate() {
            let netns = format!("olmrs-{name}");
            let address = format!("10.244.0.{}", FIRST_HOST + i as u8);
            olm.netns.push(netns.clone());
            join_bridge(&netns, &address, i)?;
            let mut command = Command::new("ip");
            command
                .args(["netns", "exec", &netns])
                .arg(bin.join(name))
                .env("KUBECONFIG", &kubeconfig);
            match name {
                // deploy/upstream/quickstart/olm.yaml: --namespace $(OPERATOR_NAMESPACE)
                // --writeStatusName ""
                "olm" => {
                    command
                        .args(["--namespace", "olm", "--writeStatusName", ""])
                        .env("OPERATOR_NAMESPACE", "olm")
                        .env("OPERATOR_NAME", "olm-operator");
                }
                // The image flags matter only for ConfigMap and image catalogs and bundle
                // unpack Jobs; the test's catalogs are served at an address.
                _ => {
                    command
                        .args(["--kubeconfig", &kubeconfig, "--namespace", "olm"])
                        .arg(
                            "--configmapServerImage=quay.io/operator-framework/\
                             configmap-operator-registry:latest",
                        )
                        .args(["--opmImage", "quay.io/operator-framework/opm:v1.50.0"])
                        .args(["--util-image", "quay.io/operator-framework/olm:v0.31.0"])
                        .arg("--set-workload-user-id=false");
                }
            }
            olm.processes.push(Process::spawn(
                &format!("real-olm-{name}"),
                command,
                log_dir,
            )?);
        }
        for (i, process) in olm.processes.iter_mut().enumerate() {
            let url = format!("10.244.0.{}:8080", FIRST_HOST + i as u8);
            loop {
                if let Some(why) = process.exited() {
                    bail!("{why}\n{}", process.log_tail(20));
                }
                if healthz(&url).await {
                    break;
                }
                if started.elapsed() > Duration::from_secs(60) {
                    bail!(
                        "{} not healthy after 60s\n{}",
                        process.name,
                        process.log_tail(20)
                    );
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        println!(
            "e2e-takeover:   real OLM v0.31 (olm, catalog) healthy in {:.1}s",
            started.elapsed().as_secs_f64()
        );
        Ok(olm)
    }

    /// SIGTERM to both, as a scale to zero does; waits for them to exit (SIGKILL after 20 s).
    pub fn stop(mut self) {
        for process in &self.processes {
            process.terminate();
        }
        for process in &mut self.processes {
            process.wait_exit(Duration::from_secs(20));
        }
        // Drop removes the network namespaces.
        self.processes.clear();
    }

    /// The logs of both, for a failure's report.
    pub fn logs(&self) -> Vec<PathBuf> {
        self.processes.iter().map(|p| p.log.clone()).collect()
    }

    /// An error naming a process that exited.
    pub fn check_alive(&mut self) -> anyhow::Result<()> {
        for process in &mut self.processes {
            if let Some(why) = process.exited() {
                bail!("{why}\n{}", process.log_tail(30));
            }
        }
        Ok(())
    }
}

impl Drop for RealOlm {
    fn drop(&mut self) {
        self.processes.clear();
        for netns in &self.netns {
            // Deleting the namespace destroys its end of the veth pair, and with it the other.
            let _ = run_quiet("ip", &["netns", "del", netns]);
        }
    }
}

/// A network namespace `netns` with `lo` and an `eth0` at `address` on the node's bridge, its
/// default route through the node.
fn join_bridge(netns: &str, address: &str, i: usize) -> anyhow::Result<()> {
    let _ = run_quiet("ip", &["netns", "del", netns]);
    let host_end = format!("olmrs-olm{i}");
    let _ = run_quiet("ip", &["link", "del", &host_end]);
    run("ip", &["netns", "add", netns])?;
    run(
        "ip",
        &[
            "link", "add", &host_end, "type", "veth", "peer", "name", "eth0", "netns", netns,
        ],
    )?;
    run("ip", &["link", "set", &host_end, "master", BRIDGE, "up"])?;
    let in_ns = |args: &[&str]| {
        let mut all = vec!["netns", "exec", netns, "ip"];
        all.extend_from_slice(args);
        run("ip", &all)
    };
    in_ns(&["link", "set", "lo", "up"])?;
    in_ns(&["addr", "add", &format!("{address}/24"), "dev", "eth0"])?;
    in_ns(&["link", "set", "eth0", "up"])?;
    in_ns(&["route", "add", "default", "via", NODE_IP])?;
    Ok(())
}

/// `GET http://<host:port>/healthz` answers 200.
async fn healthz(address: &str) -> bool {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let Ok(Ok(mut stream)) = tokio::time::timeout(
        Duration::from_secs(1),
        tokio::net::TcpStream::connect(address),
    )
    .await
    else {
        return false;
    };
    let request = format!("GET /healthz HTTP/1.0\r\nHost: {address}\r\n\r\n");
    if stream.write_all(request.as_bytes()).await.is_err() {
        return false;
    }
    let mut response = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(1), stream.read_to_end(&mut response)).await;
    response.starts_with(b"HTTP/1.0 200") || response.starts_with(b"HTTP/1.1 200")
}

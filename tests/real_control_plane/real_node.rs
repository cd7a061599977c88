//! A real node for the harness: pods that really run. containerd (Debian's) with runc, the CNI
//! `bridge` + `host-local` + `portmap` plugins on a bridge of its own, kubelet, kube-proxy
//! (iptables), kube-scheduler and CoreDNS as cluster DNS, all v1.36 from `../shared/k8s/`, and a
//! real image registry (Debian's `docker-registry`) that containerd pulls every image from.
//!
//! The pod and Service networks are local to the bridge: no NAT, and a FORWARD rule drops
//! anything from the pod network that would leave through another interface. Names such as
//! `registry.k8s.io/pause:3.10` or `example.com/x:v1` are served by the local registry
//! (containerd's `hosts.toml` mirrors). Settings that work on this kind of machine (cgroup v1,
//! no `CAP_SYS_RESOURCE`): `../shared/k8s/README.md`.
//!
//! Everything is undone when the [`RealNode`] is dropped, in the order that leaves nothing
//! behind: the kubelet first (it would restart what is stopped), every container, containerd,
//! the other programs, kube-proxy's rules, mounts under the node's directory, the pods' network
//! namespaces, the FORWARD rule and the bridge.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use k8s_openapi::api::core::v1::{Endpoints, Node};
use kube::Api;

use super::binaries::Binaries;
use super::process::Process;
use super::{ControlPlane, Network, User};
use crate::registry_support::{Kind, TestRegistry};

/// The bridge the pods are attached to; the node's address is its gateway address.
pub const BRIDGE: &str = "olmrs0";
pub const NODE_IP: &str = "10.244.0.1";
pub const POD_CIDR: &str = "10.244.0.0/24";
pub const NODE_NAME: &str = "olm-rs-e2e-node";
/// The API server on the node's address, Services on a range only kube-proxy's rules serve.
pub const NETWORK: Network = Network {
    address: NODE_IP,
    service_range: "10.96.0.0/20",
    first_service_ip: "10.96.0.1",
    pods_run: true,
};
/// Registries whose names the local registry serves (images keep their repository path).
pub const MIRRORED: [&str; 4] = ["registry.k8s.io", "example.com", "quay.io", KIND_REGISTRY];
/// kind's local-registry recipe: images are named `localhost:5001/…`, which only the node's
/// containerd resolves (mirrored to the registry); in a pod, `localhost:5001` is nothing.
pub const KIND_REGISTRY: &str = "localhost:5001";
/// The sandbox ("pause") image every pod starts with.
pub const PAUSE_IMAGE: &str = "registry.k8s.io/pause:3.10";
const START_TIMEOUT: Duration = Duration::from_secs(120);

/// Why a real node cannot run here (the reason a skipped check prints), or `None`.
pub fn unavailable(bin: &Binaries) -> Option<String> {
    // SAFETY: geteuid(2) has no preconditions and touches no memory.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root (containerd, bridges and iptables need root)".to_owned());
    }
    let mut missing = Vec::new();
    for program in ["kube-scheduler", "kubelet", "kube-proxy", "coredns"] {
        if bin.program(program).is_none() {
            missing.push(format!("{program} (../shared/k8s/bin)"));
        }
    }
    for (path, package) in [
        ("/usr/bin/containerd", "containerd"),
        ("/usr/bin/ctr", "containerd"),
        ("/usr/sbin/runc", "runc"),
        ("/usr/lib/cni/bridge", "containernetworking-plugins"),
        ("/usr/lib/cni/host-local", "containernetworking-plugins"),
        ("/usr/lib/cni/portmap", "containernetworking-plugins"),
        ("/usr/lib/cni/loopback", "containernetworking-plugins"),
        ("/usr/sbin/iptables", "iptables"),
        ("/usr/sbin/ip", "iproute2"),
        ("/bin/busybox", "busybox-static"),
        ("/usr/bin/docker-registry", "docker-registry"),
    ] {
        if !Path::new(path).exists() && which(path).is_none() {
            missing.push(format!("{path} (apt-get install {package})"));
        }
    }
    if !Path::new("/sys/fs/cgroup").is_dir() {
        missing.push("/sys/fs/cgroup".to_owned());
    }
    (!missing.is_empty()).then(|| format!("missing {}", missing.join(", ")))
}

/// The file name of `path` found on `PATH` (Debian puts runc in /usr/sbin, others in /usr/bin).
fn which(path: &str) -> Option<PathBuf> {
    let name = Path::new(path).file_name()?;
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// The node's bridge with its address (which the API server binds to, so it comes first), and
/// the FORWARD rule that keeps the pods' traffic on it; both removed when dropped. Holds the
/// machine-wide lock of the real node (the bridge, the node address and its ports are shared):
/// a second run on the machine waits for the first.
pub struct Bridge {
    _lock: std::fs::File,
}

/// Taken by whichever real-node run owns the bridge; released when the process ends, however.
const LOCK_FILE: &str = "/tmp/olm-rs-real-node.lock";

impl Bridge {
    pub fn create() -> anyhow::Result<Self> {
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(LOCK_FILE)
            .with_context(|| format!("opening {LOCK_FILE}"))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                println!("e2e-real: another real-node run holds {LOCK_FILE}; waiting for it");
                lock.lock()
                    .with_context(|| format!("locking {LOCK_FILE}"))?;
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(e).with_context(|| format!("locking {LOCK_FILE}"));
            }
        }
        // A bridge left by a killed run is replaced.
        let _ = run_quiet("ip", &["link", "del", BRIDGE]);
        run("ip", &["link", "add", BRIDGE, "type", "bridge"])?;
        let bridge = Self { _lock: lock };
        run(
            "ip",
            &["addr", "add", &format!("{NODE_IP}/24"), "dev", BRIDGE],
        )?;
        run("ip", &["link", "set", BRIDGE, "up"])?;
        // Pods talk to each other, to the node and through Services; nothing of theirs is
        // forwarded anywhere else (the CNI bridge plugin turns IP forwarding on).
        let rule = forward_rule();
        if run_quiet("iptables", &[&["-C"], &rule[..]].concat()).is_err() {
            run("iptables", &[&["-I"], &rule[..]].concat())?;
        }
        Ok(bridge)
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        let rule = forward_rule();
        let _ = run_quiet("iptables", &[&["-D"], &rule[..]].concat());
        let _ = run_quiet("ip", &["link", "del", BRIDGE]);
    }
}

/// The running node; stopped and cleaned up when dropped.
pub struct RealNode {
    pub registry: TestRegistry,
    /// The node's state: containerd's root and state, the kubelet's root, CNI state, configs.
    pub dir: PathBuf,
    socket: PathBuf,
    kubelet: Option<Process>,
    /// containerd last: the others stop first.
    others: Vec<Process>,
    containerd: Option<Process>,
    kube_proxy: PathBuf,
    kubeconfig: PathBuf,
    /// Network namespaces that existed before the node started (left alone at the end).
    netns_before: Vec<String>,
    /// Dropped after everything else.
    _bridge: Bridge,
}

impl RealNode {
    /// Starts the registry, pushes the sandbox image, sets up the bridge and starts every node
    /// program; returns once the Node is Ready and the `kubernetes` Service has an endpoint.
    pub async fn start(
        plane: &ControlPlane,
        bin: &Binaries,
        bridge: Bridge,
    ) -> anyhow::Result<Self> {
        ensure!(
            plane.network.pods_run,
            "the control plane must run on real_node::NETWORK"
        );
        let started = Instant::now();
        let registry =
            TestRegistry::try_start_on(Kind::Plain, NODE_IP).map_err(anyhow::Error::msg)?;
        super::images::pause_image()?
            .push(&registry, "pause", "3.10")
            .await?;

        let dir = plane.dir.join("node");
        std::fs::create_dir_all(&dir)?;
        let netns_before = netns_list();
        let mut node = Self {
            registry,
            socket: dir.join("containerd/containerd.sock"),
            dir: dir.clone(),
            kubelet: None,
            others: Vec::new(),
            containerd: None,
            kube_proxy: bin.program("kube-proxy").context("kube-proxy")?,
            kubeconfig: dir.join("admin.kubeconfig"),
            netns_before,
            _bridge: bridge,
        };
        node.write_configs(plane)?;
        let logs = &plane.dir;

        let mut containerd = Command::new("containerd");
        containerd
            .arg("--config")
            .arg(dir.join("containerd/config.toml"));
        node.containerd = Some(Process::spawn("containerd", containerd, logs)?);
        wait_for("containerd's socket", Duration::from_secs(20), || {
            Ok(node.socket.exists())
        })
        .await?;

        let program = |name: &str| bin.program(name).with_context(|| name.to_owned());
        let kubeconfig = node.kubeconfig.clone();
        let mut scheduler = Command::new(program("kube-scheduler")?);
        scheduler
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .args([
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                "--secure-port=0",
                "--profiling=false",
                "--v=1",
            ]);
        node.others
            .push(Process::spawn("kube-scheduler", scheduler, logs)?);

        let mut coredns = Command::new(program("coredns")?);
        coredns.arg("-conf").arg(dir.join("Corefile"));
        node.others.push(Process::spawn("coredns", coredns, logs)?);

        let [proxy_metrics, proxy_health] = super::free_ports::<2>()?;
        let mut proxy = Command::new(&node.kube_proxy);
        proxy
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg(format!("--hostname-override={NODE_NAME}"))
            .args(["--proxy-mode=iptables", "--v=1"])
            .arg(format!("--cluster-cidr={POD_CIDR}"))
            .arg(format!("--metrics-bind-address=127.0.0.1:{proxy_metrics}"))
            .arg(format!("--healthz-bind-address=127.0.0.1:{proxy_health}"));
        node.others.push(Process::spawn("kube-proxy", proxy, logs)?);

        let mut kubelet = Command::new(program("kubelet")?);
        kubelet
            .arg("--config")
            .arg(dir.join("kubelet.yaml"))
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg("--root-dir")
            .arg(dir.join("kubelet"))
            .arg(format!("--hostname-override={NODE_NAME}"))
            .arg(format!("--node-ip={NODE_IP}"))
            .arg("--v=1");
        node.kubelet = Some(Process::spawn("kubelet", kubelet, logs)?);

        node.wait_ready(plane).await?;
        println!(
            "e2e-real: node {NODE_NAME} Ready in {:.1}s (registry {}, bridge {BRIDGE} {NODE_IP})",
            started.elapsed().as_secs_f64(),
            node.registry.host()
        );
        Ok(node)
    }

    fn write_configs(&self, plane: &ControlPlane) -> anyhow::Result<()> {
        let dir = &self.dir;
        let write = |path: PathBuf, text: String| -> anyhow::Result<()> {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
        };
        write(
            self.kubeconfig.clone(),
            plane.kubeconfig(&User::Cert(
                &plane.pki.admin.cert_pem,
                &plane.pki.admin.key_pem,
            )),
        )?;
        write(
            dir.join("cni/conf/10-olmrs.conflist"),
            serde_json::json!({
                "cniVersion": "0.4.0",
                "name": "olmrs",
                "plugins": [
                    {
                        "type": "bridge",
                        "bridge": BRIDGE,
                        "isGateway": true,
                        "ipMasq": false,
                        "hairpinMode": true,
                        "ipam": {
                            "type": "host-local",
                            "dataDir": dir.join("cni/ipam"),
                            "ranges": [[{"subnet": POD_CIDR, "gateway": NODE_IP}]],
                            "routes": [{"dst": "0.0.0.0/0"}],
                        },
                    },
                    {"type": "portmap", "capabilities": {"portMappings": true}},
                ],
            })
            .to_string(),
        )?;
        let registry = format!("http://{}", self.registry.host());
        let hosts = dir.join("containerd/hosts");
        for name in MIRRORED
            .iter()
            .copied()
            .chain([self.registry.host().as_str()])
        {
            write(
                hosts.join(name).join("hosts.toml"),
                format!(
                    "server = \"{registry}\"\n[host.\"{registry}\"]\n  capabilities = \
                     [\"pull\", \"resolve\"]\n  skip_verify = true\n"
                ),
            )?;
        }
        let ctd = dir.join("containerd");
        write(
            ctd.join("config.toml"),
            format!(
                r#"version = 2
root = "{root}"
state = "{state}"
[grpc]
  address = "{socket}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  # Lowering a process's oom_score_adj needs CAP_SYS_RESOURCE, which this machine lacks.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{cni}"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "{hosts}"
"#,
                root = ctd.join("root").display(),
                state = ctd.join("state").display(),
                socket = self.socket.display(),
                cni = dir.join("cni/conf").display(),
                hosts = hosts.display(),
            ),
        )?;
        let [kubelet_port] = super::free_ports::<1>()?;
        write(
            dir.join("kubelet.yaml"),
            format!(
                r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://{socket}
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
failCgroupV1: false
localStorageCapacityIsolation: false
authentication:
  anonymous: {{enabled: false}}
  webhook: {{enabled: true}}
  x509: {{clientCAFile: "{ca}"}}
authorization: {{mode: Webhook}}
address: {NODE_IP}
port: {kubelet_port}
readOnlyPort: 0
healthzPort: 0
clusterDNS: ["{NODE_IP}"]
clusterDomain: cluster.local
resolvConf: ""
podLogsDir: "{logs}"
serializeImagePulls: false
imageGCHighThresholdPercent: 100
evictionHard: {{memory.available: "1Mi", nodefs.available: "1%", imagefs.available: "1%"}}
"#,
                socket = self.socket.display(),
                ca = plane.pki.ca_cert.display(),
                logs = dir.join("pod-logs").display(),
            ),
        )?;
        write(
            dir.join("Corefile"),
            format!(
                ".:53 {{\n    bind {NODE_IP}\n    errors\n    kubernetes cluster.local \
                 in-addr.arpa {{\n        kubeconfig {kubeconfig}\n        pods insecure\n        \
                 fallthrough in-addr.arpa\n    }}\n    cache 5\n}}\n",
                kubeconfig = self.kubeconfig.display()
            ),
        )?;
        Ok(())
    }

    async fn wait_ready(&mut self, plane: &ControlPlane) -> anyhow::Result<()> {
        let nodes: Api<Node> = Api::all(plane.client.clone());
        let endpoints: Api<Endpoints> = Api::namespaced(plane.client.clone(), "default");
        let started = Instant::now();
        let mut last = String::from("not asked yet");
        loop {
            self.check_alive()?;
            let ready = match nodes.get_opt(NODE_NAME).await {
                Ok(Some(node)) => node
                    .status
                    .and_then(|s| s.conditions)
                    .unwrap_or_default()
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True"),
                Ok(None) => {
                    last = "the Node is not registered yet".to_owned();
                    false
                }
                Err(err) => {
                    last = format!("reading the Node: {err}");
                    false
                }
            };
            if ready {
                match endpoints.get_opt("kubernetes").await {
                    Ok(Some(e)) if e.subsets.as_ref().is_some_and(|s| !s.is_empty()) => {
                        return Ok(());
                    }
                    Ok(_) => last = "the kubernetes Service has no endpoint yet".to_owned(),
                    Err(err) => last = format!("reading the kubernetes endpoints: {err}"),
                }
            } else if last.starts_with("not asked") {
                last = "the Node is not Ready yet".to_owned();
            }
            if started.elapsed() > START_TIMEOUT {
                bail!(
                    "the node was not ready after {}s ({last})\n{}",
                    START_TIMEOUT.as_secs(),
                    self.logs()
                );
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// An error naming the node program that exited, with the logs.
    pub fn check_alive(&mut self) -> anyhow::Result<()> {
        let exited: Vec<String> = self
            .kubelet
            .iter_mut()
            .chain(self.others.iter_mut())
            .chain(self.containerd.iter_mut())
            .filter_map(Process::exited)
            .collect();
        if exited.is_empty() {
            Ok(())
        } else {
            bail!("{}\n{}", exited.join("; "), self.logs())
        }
    }

    /// The last lines of each node program's log.
    pub fn logs(&self) -> String {
        self.kubelet
            .iter()
            .chain(self.others.iter())
            .chain(self.containerd.iter())
            .map(|p| format!("---- {} ({})\n{}", p.name, p.log.display(), p.log_tail(20)))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Process ids of the node's programs (for memory figures).
    pub fn pids(&self) -> Vec<u32> {
        self.kubelet
            .iter()
            .chain(self.others.iter())
            .chain(self.containerd.iter())
            .map(Process::id)
            .collect()
    }

    /// `ctr` against this node's containerd, in the kubelet's namespace.
    fn ctr(&self, args: &[&str]) -> anyhow::Result<String> {
        let output = Command::new("ctr")
            .arg("--address")
            .arg(&self.socket)
            .args(["-n", "k8s.io"])
            .args(args)
            .output()
            .context("running ctr")?;
        ensure!(
            output.status.success(),
            "ctr {args:?}: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// Kills every container (the kubelet is stopped first, or it starts them again).
    fn stop_containers(&self) {
        let Ok(tasks) = self.ctr(&["tasks", "ls", "-q"]) else {
            return;
        };
        for task in tasks.lines().filter(|t| !t.trim().is_empty()) {
            let _ = self.ctr(&["tasks", "kill", "-s", "SIGKILL", task.trim()]);
        }
        // Their shims exit once the containers are gone.
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            match self.ctr(&["tasks", "ls", "-q"]) {
                Ok(left) if left.trim().is_empty() => break,
                Ok(_) => std::thread::sleep(Duration::from_millis(200)),
                Err(_) => break,
            }
        }
        if let Ok(tasks) = self.ctr(&["tasks", "ls", "-q"]) {
            for task in tasks.lines().filter(|t| !t.trim().is_empty()) {
                let _ = self.ctr(&["tasks", "delete", "-f", task.trim()]);
            }
        }
    }
}

impl Drop for RealNode {
    fn drop(&mut self) {
        if let Some(kubelet) = self.kubelet.take() {
            kubelet.terminate();
            drop(kubelet);
        }
        self.stop_containers();
        while let Some(process) = self.others.pop() {
            drop(process);
        }
        drop(self.containerd.take());
        kill_shims(&self.socket);
        // kube-proxy's chains and rules.
        let _ = Command::new(&self.kube_proxy)
            .arg("--cleanup")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
        // The kubelet's canary chains (kube-proxy's own went with --cleanup).
        for table in ["mangle", "nat", "filter"] {
            let _ = run_quiet("iptables", &["-t", table, "-F", "KUBE-KUBELET-CANARY"]);
            let _ = run_quiet("iptables", &["-t", table, "-X", "KUBE-KUBELET-CANARY"]);
        }
        unmount_below(&self.dir);
        for netns in netns_list() {
            if netns.starts_with("cni-") && !self.netns_before.contains(&netns) {
                let _ = run_quiet("ip", &["netns", "del", &netns]);
            }
        }
    }
}

/// `FORWARD`: drop what comes from the pod network and would leave by another interface.
fn forward_rule() -> [&'static str; 8] {
    ["FORWARD", "-s", POD_CIDR, "!", "-o", BRIDGE, "-j", "DROP"]
}

/// containerd's shims of containers that outlived it (a killed test): killed by their
/// command line, which names this node's socket.
fn kill_shims(socket: &Path) {
    let socket = socket.display().to_string();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains("containerd-shim") && cmdline.contains(&socket) {
            // SAFETY: kill(2) on a process id read from /proc; no memory is shared.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
    }
}

/// Unmounts every mount point under `dir` (the pods' volumes, containerd's snapshots), deepest
/// first.
fn unmount_below(dir: &Path) {
    let prefix = dir.display().to_string();
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    let mut points: Vec<&str> = mounts
        .lines()
        .filter_map(|line| line.split_whitespace().nth(1))
        .filter(|point| point.starts_with(&prefix))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.len()));
    for point in points {
        let _ = run_quiet("umount", &["-l", point]);
    }
}

fn netns_list() -> Vec<String> {
    std::fs::read_dir("/run/netns")
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Runs `program`; fails with its stderr (also the real-OLM harness's).
pub(super) fn run(program: &str, args: &[&str]) -> anyhow::Result<()> {
    let output = Command::new(program)
        .args(args)
        .output()
        .with_context(|| format!("running {program}"))?;
    ensure!(
        output.status.success(),
        "{program} {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr).trim()
    );
    Ok(())
}

/// Runs `program` with its output discarded.
pub(super) fn run_quiet(program: &str, args: &[&str]) -> anyhow::Result<()> {
    let status = Command::new(program)
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()?;
    ensure!(status.success(), "{program} failed");
    Ok(())
}

/// Polls `ready` every 100 ms until it says yes or `timeout` passes.
async fn wait_for(
    what: &str,
    timeout: Duration,
    mut ready: impl FnMut() -> anyhow::Result<bool>,
) -> anyhow::Result<()> {
    let started = Instant::now();
    while !ready()? {
        if started.elapsed() > timeout {
            bail!("timed out after {}s waiting for {what}", timeout.as_secs());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

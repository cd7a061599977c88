//! A real Kubernetes control plane for tests: etcd, kube-apiserver (v1.36) and
//! kube-controller-manager on free loopback ports with a throw-away directory and certificates
//! (`../shared/k8s/README.md`), plus a node simulator that plays the kubelet. Everything it
//! starts is stopped when the [`ControlPlane`] is dropped.

pub mod binaries;
pub mod chart;
pub mod front_proxy;
pub mod images;
pub mod node;
pub mod pki;
pub mod process;
pub mod real_node;
pub mod real_olm;
pub mod shared_data;
pub mod skip;
pub mod suite_runner;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use base64::Engine as _;
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::Api;

use binaries::Binaries;
use pki::Pki;
use process::Process;

/// Where the API server listens and which Service addresses it hands out.
#[derive(Debug, Clone, Copy)]
pub struct Network {
    /// The API server's bind and advertised address.
    pub address: &'static str,
    pub service_range: &'static str,
    /// The `kubernetes` Service's address, which the serving certificate names.
    pub first_service_ip: &'static str,
    /// A real node runs pods: the `kubernetes` Service gets an endpoint (lease reconciler) and
    /// webhooks and APIServices are dialled at pod addresses (aggregator routing).
    pub pods_run: bool,
}

/// No real node: Service IPs come from a loopback range, so nothing ever dials off the machine.
pub const LOOPBACK: Network = Network {
    address: "127.0.0.1",
    service_range: "127.0.96.0/20",
    first_service_ip: "127.0.96.1",
    pods_run: false,
};
/// The longest start-up the harness waits for before failing with the programs' logs.
const START_TIMEOUT: Duration = Duration::from_secs(90);

pub struct ControlPlane {
    /// `https://127.0.0.1:<port>` (on a real node's bridge: its address).
    pub url: String,
    pub network: Network,
    pub pki: Pki,
    /// The admin's kubeconfig (`system:masters`), as a file and parsed.
    pub admin_kubeconfig: PathBuf,
    pub admin_config: kube::Config,
    pub client: kube::Client,
    /// Scratch space for the tests (controller logs, kubeconfigs, caches).
    pub dir: PathBuf,
    /// etcd's client URL (`http://127.0.0.1:<port>`; its JSON gateway answers `/v3/...`).
    pub etcd_url: String,
    /// The API server's audit log: one JSON line per write request (create, update, patch,
    /// delete), per list and per read of a Lease, at the `Metadata` level — who did what to
    /// which object, never the bodies.
    pub audit_log: PathBuf,
    // Dropped in this order: the processes (in reverse start order) before their directories.
    // Behind a lock so that a fault check can kill and restart one while others read the plane.
    processes: std::sync::Mutex<Vec<Process>>,
    _etcd_data: tempfile::TempDir,
    _dir: tempfile::TempDir,
}

impl ControlPlane {
    /// Starts etcd, kube-apiserver and kube-controller-manager at once (the API server retries
    /// etcd, the controller-manager retries the API server) and waits until `/readyz` answers
    /// and the `default` ServiceAccount exists.
    pub async fn start(bin: &Binaries) -> anyhow::Result<Self> {
        Self::start_on(bin, LOOPBACK).await
    }

    /// [`Self::start`] on `network` (a real node's bridge: [`real_node::NETWORK`]).
    pub async fn start_on(bin: &Binaries, network: Network) -> anyhow::Result<Self> {
        let started = Instant::now();
        let dir = tempfile::Builder::new()
            .prefix("olm-rs-e2e-real-")
            .tempdir()
            .context("creating the control plane's directory")?;
        // etcd syncs every write; on tmpfs that costs nothing. The name carries this process's
        // id so that a later run can remove what a killed one left in memory.
        let shm = Path::new("/dev/shm");
        let prefix = format!("{ETCD_DIR_PREFIX}{}-", std::process::id());
        let etcd_data = if shm.is_dir() {
            remove_stale_etcd_dirs(shm);
            tempfile::Builder::new().prefix(&prefix).tempdir_in(shm)
        } else {
            tempfile::Builder::new().prefix(&prefix).tempdir()
        }
        .context("creating etcd's data directory")?;
        let root = dir.path().to_path_buf();
        let pki = Pki::create(&root, network.first_service_ip, network.address)?;

        let [etcd_port, etcd_peer, api_port, kcm_port] = free_ports::<4>()?;
        let url = format!("https://{}:{api_port}", network.address);
        let admin_yaml = kubeconfig(
            &url,
            &pki.ca_pem,
            &User::Cert(&pki.admin.cert_pem, &pki.admin.key_pem),
        );
        let admin_kubeconfig = root.join("admin.kubeconfig");
        std::fs::write(&admin_kubeconfig, &admin_yaml)?;
        let kcm_kubeconfig = root.join("kcm.kubeconfig");
        std::fs::write(
            &kcm_kubeconfig,
            kubeconfig(
                &url,
                &pki.ca_pem,
                &User::Cert(
                    &pki.controller_manager.cert_pem,
                    &pki.controller_manager.key_pem,
                ),
            ),
        )?;

        let mut processes = Vec::new();
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let peer_url = format!("http://127.0.0.1:{etcd_peer}");
        let mut etcd = Command::new(&bin.etcd);
        etcd.arg("--name=e2e")
            .arg(format!("--data-dir={}", etcd_data.path().display()))
            .arg(format!("--listen-client-urls={etcd_url}"))
            .arg(format!("--advertise-client-urls={etcd_url}"))
            .arg(format!("--listen-peer-urls={peer_url}"))
            .arg(format!("--initial-advertise-peer-urls={peer_url}"))
            .arg(format!("--initial-cluster=e2e={peer_url}"))
            .arg("--initial-cluster-state=new")
            .args(["--log-level=warn", "--logger=zap"]);
        processes.push(Process::spawn("etcd", etcd, &root)?);

        let path = |p: &Path| p.display().to_string();
        let mut apiserver = Command::new(&bin.kube_apiserver);
        apiserver
            .arg(format!("--etcd-servers={etcd_url}"))
            .arg(format!("--bind-address={}", network.address))
            .arg(format!("--advertise-address={}", network.address))
            .arg(format!("--secure-port={api_port}"))
            .arg(format!("--tls-cert-file={}", path(&pki.serving_cert)))
            .arg(format!("--tls-private-key-file={}", path(&pki.serving_key)))
            .arg(format!("--client-ca-file={}", path(&pki.ca_cert)))
            .arg("--service-account-issuer=https://kubernetes.default.svc.cluster.local")
            .arg(format!(
                "--service-account-key-file={}",
                path(&pki.service_account_public)
            ))
            .arg(format!(
                "--service-account-signing-key-file={}",
                path(&pki.service_account_key)
            ))
            .arg(format!(
                "--service-cluster-ip-range={}",
                network.service_range
            ))
            .args([
                "--authorization-mode=Node,RBAC",
                "--profiling=false",
                "--v=1",
            ]);
        if network.pods_run {
            apiserver
                .args([
                    "--endpoint-reconciler-type=lease",
                    "--enable-aggregator-routing=true",
                    "--allow-privileged=true",
                    "--kubelet-preferred-address-types=InternalIP,Hostname",
                ])
                // `kubectl logs` and `exec` reach the kubelet as the admin.
                .arg(format!(
                    "--kubelet-client-certificate={}",
                    path(&pki.admin_cert)
                ))
                .arg(format!("--kubelet-client-key={}", path(&pki.admin_key)));
        } else {
            apiserver.arg("--endpoint-reconciler-type=none");
        }
        // Every write, for checks that count who writes what (reads are not logged: they are
        // most requests and tell nothing about changes).
        let audit_policy = root.join("audit-policy.yaml");
        std::fs::write(&audit_policy, AUDIT_POLICY)?;
        let audit_log = root.join("audit.log");
        apiserver
            .arg(format!("--audit-policy-file={}", path(&audit_policy)))
            .arg(format!("--audit-log-path={}", path(&audit_log)))
            .args(["--audit-log-format=json", "--audit-log-mode=blocking"]);
        // The aggregation layer (APIServices served by a process on this host or a pod, such as
        // the PackageManifest API): the front proxy's CA and client certificate.
        apiserver.args(front_proxy::apiserver_args(&root)?);
        processes.push(Process::spawn("kube-apiserver", apiserver, &root)?);

        let mut kcm = Command::new(&bin.kube_controller_manager);
        kcm.arg(format!("--kubeconfig={}", path(&kcm_kubeconfig)))
            // No --authentication/authorization-kubeconfig: the controller-manager would read
            // kube-system's extension-apiserver-authentication ConfigMap at start and exit if
            // the API server's bootstrap roles are not there yet. Nobody calls its own port.
            .args(["--bind-address=127.0.0.1", "--leader-elect=false"])
            .arg(format!("--secure-port={kcm_port}"))
            .arg("--use-service-account-credentials=true")
            .arg(format!(
                "--service-account-private-key-file={}",
                path(&pki.service_account_key)
            ))
            .arg(format!("--root-ca-file={}", path(&pki.ca_cert)))
            .arg(format!(
                "--cluster-signing-cert-file={}",
                path(&pki.ca_cert)
            ))
            .arg(format!("--cluster-signing-key-file={}", path(&pki.ca_key)))
            .arg(format!(
                "--service-cluster-ip-range={}",
                network.service_range
            ))
            .args(["--cluster-name=olm-rs-e2e", "--profiling=false", "--v=1"]);
        processes.push(Process::spawn("kube-controller-manager", kcm, &root)?);

        let admin_config = kube::Config::from_custom_kubeconfig(
            kube::config::Kubeconfig::from_yaml(&admin_yaml)?,
            &Default::default(),
        )
        .await
        .context("the admin kubeconfig")?;
        let client = kube::Client::try_from(admin_config.clone())?;
        let plane = Self {
            url,
            network,
            pki,
            admin_kubeconfig,
            admin_config,
            client,
            dir: root,
            etcd_url,
            audit_log,
            processes: std::sync::Mutex::new(processes),
            _etcd_data: etcd_data,
            _dir: dir,
        };
        plane.wait_ready(started).await?;
        println!(
            "e2e-real: control plane {} ready in {:.1}s",
            plane.url,
            started.elapsed().as_secs_f64()
        );
        Ok(plane)
    }

    async fn wait_ready(&self, started: Instant) -> anyhow::Result<()> {
        let mut last = String::from("not asked yet");
        let mut api_ready = false;
        loop {
            self.check_alive()?;
            if !api_ready {
                let request = http::Request::get("/readyz").body(Vec::new())?;
                match self.client.request_text(request).await {
                    Ok(_) => api_ready = true,
                    Err(err) => last = format!("/readyz: {err}"),
                }
            }
            if api_ready {
                let accounts: Api<ServiceAccount> = Api::namespaced(self.client.clone(), "default");
                match accounts.get_opt("default").await {
                    Ok(Some(_)) => return Ok(()),
                    Ok(None) => last = "no ServiceAccount default/default yet".to_owned(),
                    Err(err) => last = format!("ServiceAccount default/default: {err}"),
                }
            }
            if started.elapsed() > START_TIMEOUT {
                bail!(
                    "the control plane was not ready after {}s (last: {last})\n{}",
                    START_TIMEOUT.as_secs(),
                    self.logs()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// An error naming the program that exited, with the logs.
    pub fn check_alive(&self) -> anyhow::Result<()> {
        let exited: Vec<String> = self
            .processes()
            .iter_mut()
            .filter_map(Process::exited)
            .collect();
        if exited.is_empty() {
            Ok(())
        } else {
            bail!("{}\n{}", exited.join("; "), self.logs())
        }
    }

    /// The last lines of each program's log.
    pub fn logs(&self) -> String {
        self.processes()
            .iter()
            .map(|p| format!("---- {} ({})\n{}", p.name, p.log.display(), p.log_tail(20)))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// A kubeconfig for `user` on this control plane.
    pub fn kubeconfig(&self, user: &User<'_>) -> String {
        kubeconfig(&self.url, &self.pki.ca_pem, user)
    }

    /// Process ids of the control plane's programs (for memory figures).
    pub fn pids(&self) -> Vec<u32> {
        self.processes().iter().map(Process::id).collect()
    }

    fn processes(&self) -> std::sync::MutexGuard<'_, Vec<Process>> {
        // A panic while the lock was held leaves the processes as they were; use them.
        self.processes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Kills `program` (`etcd`, `kube-apiserver`, …) with SIGKILL: a crash, no clean shut-down.
    pub fn kill(&self, program: &str) -> anyhow::Result<()> {
        let mut processes = self.processes();
        let process = processes
            .iter_mut()
            .find(|p| p.name == program)
            .with_context(|| format!("the control plane runs no {program}"))?;
        process.kill();
        Ok(())
    }

    /// Starts `program` again, as it was first started plus the flags `extra`, on the same data
    /// (etcd's directory, the API server's certificates, ports and audit log).
    pub fn restart(&self, program: &str, extra: &[String]) -> anyhow::Result<()> {
        let mut processes = self.processes();
        let process = processes
            .iter_mut()
            .find(|p| p.name == program)
            .with_context(|| format!("the control plane runs no {program}"))?;
        process.restart(extra)
    }

    /// Waits until the API server answers `/readyz` (after a restart), at most `timeout`.
    pub async fn wait_api_ready(&self, timeout: Duration) -> anyhow::Result<()> {
        let started = Instant::now();
        loop {
            let request = http::Request::get("/readyz").body(Vec::new())?;
            let last = match self.client.request_text(request).await {
                Ok(_) => return Ok(()),
                Err(err) => err.to_string(),
            };
            if started.elapsed() > timeout {
                bail!(
                    "the API server was not ready {}s after its restart (last: {last})\n{}",
                    timeout.as_secs(),
                    self.logs()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        // Stop the API server's clients first: the controller-manager, then the API server,
        // then etcd.
        let mut processes = self.processes();
        while let Some(process) = processes.pop() {
            drop(process);
        }
    }
}

/// Status writes to OLM's kinds at the `Request` level (their body holds the resourceVersion
/// the status was computed from: the fault suite's "no status written backwards"), other write
/// requests at the `Metadata` level, reads of Leases (a replica's life as a standby, for the
/// fault suite's partition check) and lists (who listed again after its watch expired);
/// nothing else: watches and other reads are most requests and tell nothing about changes.
const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\n\
rules:\n- level: Request\n  verbs: [update, patch]\n  resources: [{group: operators.coreos.com, resources: [\"*/status\"]}]\n\
- level: Metadata\n  verbs: [create, update, patch, delete, deletecollection]\n\
- level: Metadata\n  verbs: [get]\n  resources: [{group: coordination.k8s.io, resources: [leases]}]\n\
- level: Metadata\n  verbs: [list]\n\
- level: None\n";

/// etcd data directories are named `<prefix><pid>-<random>`.
const ETCD_DIR_PREFIX: &str = "olm-rs-etcd-";

/// Removes etcd data directories in `dir` whose test process is gone (killed before it could
/// clean up; tmpfs holds them in memory).
fn remove_stale_etcd_dirs(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(ETCD_DIR_PREFIX)
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Who a kubeconfig authenticates as.
pub enum User<'a> {
    /// A client certificate and key (PEM).
    Cert(&'a str, &'a str),
    /// A bearer token (a service account's, from the TokenRequest API).
    Token(&'a str),
}

/// A kubeconfig with one cluster, one user and one context.
pub fn kubeconfig(url: &str, ca_pem: &str, user: &User<'_>) -> String {
    let b64 = |text: &str| base64::engine::general_purpose::STANDARD.encode(text);
    let user = match user {
        User::Cert(cert, key) => format!(
            "    client-certificate-data: {}\n    client-key-data: {}\n",
            b64(cert),
            b64(key)
        ),
        User::Token(token) => format!("    token: {token}\n"),
    };
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: e2e-real\n  cluster:\n    server: {url}\n    \
         certificate-authority-data: {}\nusers:\n- name: user\n  user:\n{user}contexts:\n\
         - name: e2e-real\n  context:\n    cluster: e2e-real\n    user: user\n\
         current-context: e2e-real\n",
        b64(ca_pem)
    )
}

/// `N` distinct free ports on 127.0.0.1 (held together while chosen, so they differ).
pub fn free_ports<const N: usize>() -> anyhow::Result<[u16; N]> {
    let listeners: Vec<std::net::TcpListener> = (0..N)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<_, _>>()
        .context("binding free ports")?;
    let ports: Vec<u16> = listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect::<Result<_, _>>()?;
    ports
        .try_into()
        .map_err(|_| anyhow::anyhow!("port count mismatch"))
}

//! The Helm chart, for real: `helm template charts/olm-rs` applied to the control plane (all but
//! the controller Deployment, since no kubelet runs its pod) and `olm-rs run` started as a
//! process with the Deployment's arguments and the chart ServiceAccount's identity — a token
//! from the TokenRequest API — so the API server's RBAC authorizer decides what it may do.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::{self, Scope};
use serde_json::{Value, json};

use super::process::Process;
use super::{ControlPlane, User};

/// The namespace the chart installs the controller into (`globalCatalogNamespace`).
pub const NAMESPACE: &str = "olm";
/// The chart's ServiceAccount, ClusterRole and Deployment name.
pub const NAME: &str = "olm-rs-controller";
/// The field manager of what the test applies in the user's place.
const MANAGER: &str = "olm-rs-e2e-helm";

/// The helm binary `.ci/helm` provides, or why there is none.
pub fn helm() -> Result<PathBuf, String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/helm");
    let output = Command::new(&script)
        .output()
        .map_err(|err| format!("{}: {err}", script.display()))?;
    if !output.status.success() {
        return Err(format!(
            "{} failed: {}",
            script.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(PathBuf::from(
        String::from_utf8_lossy(&output.stdout).trim().to_owned(),
    ))
}

/// What `helm template` rendered, sorted by what it is.
#[derive(Debug, Clone)]
pub struct Rendered {
    pub crds: Vec<Value>,
    /// The controller Deployment: not applied; its container's args and env are what the
    /// processes run with.
    pub deployment: Value,
    /// Namespaces, the ServiceAccount and RBAC: what the controller's identity needs.
    pub identity: Vec<Value>,
    /// Everything else (the Service, the OperatorGroups, ...), which needs the CRDs.
    pub rest: Vec<Value>,
}

impl Rendered {
    /// `helm template olm-rs charts/olm-rs --include-crds` with `sets` (`key=value`).
    pub fn render(helm: &Path, sets: &[&str]) -> anyhow::Result<Self> {
        let chart = Path::new(env!("CARGO_MANIFEST_DIR")).join("charts/olm-rs");
        let mut command = Command::new(helm);
        command.args(["template", "olm-rs"]).arg(&chart).args([
            "--include-crds",
            "--namespace",
            NAMESPACE,
        ]);
        for set in sets {
            command.args(["--set", set]);
        }
        let output = command.output().context("running helm template")?;
        ensure!(
            output.status.success(),
            "helm template failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let text = String::from_utf8(output.stdout).context("helm template: not UTF-8")?;
        let mut rendered = Self {
            crds: Vec::new(),
            deployment: Value::Null,
            identity: Vec::new(),
            rest: Vec::new(),
        };
        for document in serde_yaml_ng::Deserializer::from_str(&text) {
            let doc: Value = serde::Deserialize::deserialize(document)
                .context("helm template printed a document that is not YAML")?;
            if !doc.is_object() {
                continue;
            }
            match doc["kind"].as_str().unwrap_or_default() {
                "CustomResourceDefinition" => rendered.crds.push(doc),
                "Deployment" => rendered.deployment = doc,
                "Namespace" | "ServiceAccount" | "ClusterRole" | "ClusterRoleBinding" | "Role"
                | "RoleBinding" => rendered.identity.push(doc),
                _ => rendered.rest.push(doc),
            }
        }
        ensure!(
            !rendered.crds.is_empty() && rendered.deployment.is_object(),
            "helm template rendered no CRDs or no Deployment"
        );
        // The release namespace, as `helm install --namespace olm --create-namespace` makes it
        // (the chart creates only the operators' namespace when it differs).
        if !rendered
            .identity
            .iter()
            .any(|doc| doc["kind"] == "Namespace" && doc["metadata"]["name"] == NAMESPACE)
        {
            rendered
                .identity
                .push(json!({"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": NAMESPACE}}));
        }
        // Namespaces before what lives in them.
        rendered
            .identity
            .sort_by_key(|doc| doc["kind"].as_str() != Some("Namespace"));
        Ok(rendered)
    }

    /// The controller container's args, as the Deployment runs them.
    pub fn controller_args(&self) -> anyhow::Result<Vec<String>> {
        let args = self.deployment["spec"]["template"]["spec"]["containers"][0]["args"]
            .as_array()
            .context("the Deployment's container has no args")?;
        Ok(args
            .iter()
            .filter_map(|a| a.as_str().map(str::to_owned))
            .collect())
    }

    /// The chart rendered for one replica: the election flags dropped from the args (the
    /// replicas before may still hold the Lease).
    pub fn without_leader_election(&self) -> Self {
        let mut rendered = self.clone();
        if let Some(args) =
            rendered.deployment["spec"]["template"]["spec"]["containers"][0]["args"].as_array_mut()
        {
            args.retain(|a| !a.as_str().unwrap_or_default().starts_with("--leader-elect"));
        }
        rendered
    }

    /// The rendered ClusterRole `olm-rs-controller`, mutable.
    pub fn cluster_role_mut(&mut self) -> Option<&mut Value> {
        self.identity
            .iter_mut()
            .find(|doc| doc["kind"] == "ClusterRole" && doc["metadata"]["name"] == NAME)
    }
}

/// Server-side applies each manifest (as `kubectl apply --server-side` would), retrying kinds
/// the API server does not serve yet (a CRD just created) for up to `timeout`.
pub async fn apply(client: &kube::Client, docs: &[Value], timeout: Duration) -> anyhow::Result<()> {
    for doc in docs {
        let started = Instant::now();
        loop {
            match apply_one(client, doc).await {
                Ok(()) => break,
                Err(err) if started.elapsed() < timeout && not_served_yet(&err) => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(err) => return Err(err),
            }
        }
    }
    Ok(())
}

fn not_served_yet(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        matches!(cause.downcast_ref::<kube::Error>(),
            Some(kube::Error::Api(s)) if s.code == 404)
            || matches!(
                cause.downcast_ref::<kube::Error>(),
                Some(kube::Error::Discovery(_))
            )
    })
}

async fn apply_one(client: &kube::Client, doc: &Value) -> anyhow::Result<()> {
    let (group, version) = match doc["apiVersion"]
        .as_str()
        .unwrap_or_default()
        .split_once('/')
    {
        Some((group, version)) => (group, version),
        None => ("", doc["apiVersion"].as_str().unwrap_or_default()),
    };
    let kind = doc["kind"].as_str().unwrap_or_default();
    let name = doc["metadata"]["name"].as_str().unwrap_or_default();
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let (resource, capabilities) = discovery::pinned_kind(client, &gvk)
        .await
        .with_context(|| format!("discovering {kind} {group}/{version}"))?;
    let api: Api<DynamicObject> = match capabilities.scope {
        Scope::Cluster => Api::all_with(client.clone(), &resource),
        Scope::Namespaced => Api::namespaced_with(
            client.clone(),
            doc["metadata"]["namespace"].as_str().unwrap_or(NAMESPACE),
            &resource,
        ),
    };
    api.patch(
        name,
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(doc),
    )
    .await
    .with_context(|| format!("applying {kind} {name}"))?;
    Ok(())
}

/// A token for the chart's ServiceAccount from the TokenRequest API (valid for an hour).
pub async fn service_account_token(client: &kube::Client) -> anyhow::Result<String> {
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), NAMESPACE);
    let request = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                         "spec": {"expirationSeconds": 3600}});
    let response: Value = accounts
        .create_subresource("token", NAME, &PostParams::default(), &request)
        .await
        .with_context(|| format!("requesting a token for ServiceAccount {NAMESPACE}/{NAME}"))?;
    response["status"]["token"]
        .as_str()
        .map(str::to_owned)
        .context("the TokenRequest answer has no status.token")
}

/// One `olm-rs run` replica.
pub struct Controller {
    pub name: String,
    pub probe_url: String,
    pub process: Process,
}

impl Controller {
    /// Starts `olm-rs run` with the chart's args (the probe address and the bundle cache moved
    /// to this machine's free port and a scratch directory, `extra` appended) as the chart's
    /// ServiceAccount (`token`).
    pub fn spawn(
        plane: &ControlPlane,
        rendered: &Rendered,
        token: &str,
        name: &str,
        extra: &[String],
    ) -> anyhow::Result<Self> {
        let binary = Path::new(env!("CARGO_BIN_EXE_olm-rs"));
        Self::spawn_binary(plane, rendered, token, name, extra, binary)
    }

    /// [`Self::spawn`] with another build of `olm-rs` (a bench measuring the image's build).
    pub fn spawn_binary(
        plane: &ControlPlane,
        rendered: &Rendered,
        token: &str,
        name: &str,
        extra: &[String],
        binary: &Path,
    ) -> anyhow::Result<Self> {
        let [port, package_port] = super::free_ports::<2>()?;
        // Replicas share this host: each serves the PackageManifest API on a port of its own,
        // unless `extra` names the address (the check that reaches it through the aggregator).
        let own_package_addr = extra.iter().any(|a| a.starts_with("--package-api-addr="));
        let dir = plane.dir.join(name);
        std::fs::create_dir_all(&dir)?;
        let kubeconfig = dir.join("kubeconfig");
        std::fs::write(&kubeconfig, plane.kubeconfig(&User::Token(token)))?;
        let args: Vec<String> = rendered
            .controller_args()?
            .into_iter()
            .filter(|arg| !(own_package_addr && arg.starts_with("--package-api-addr=")))
            .map(|arg| {
                if arg.starts_with("--package-api-addr=") {
                    format!("--package-api-addr=127.0.0.1:{package_port}")
                } else if arg.starts_with("--probe-addr=") {
                    format!("--probe-addr=127.0.0.1:{port}")
                } else if let Some(level) = arg
                    .starts_with("--log-level=")
                    .then(|| std::env::var("OLM_RS_E2E_REAL_LOG_LEVEL").ok())
                    .flatten()
                {
                    // `OLM_RS_E2E_REAL_LOG_LEVEL=olm_rs=debug` for a closer look.
                    format!("--log-level={level}")
                } else if arg.starts_with("--bundle-cache-dir=") {
                    format!("--bundle-cache-dir={}", dir.join("bundles").display())
                } else if arg.starts_with("--catalog-cache-dir=") {
                    format!("--catalog-cache-dir={}", dir.join("catalogs").display())
                } else {
                    arg
                }
            })
            .chain(extra.iter().cloned())
            .collect();
        let mut command = Command::new(binary);
        command
            .args(&args)
            .env("KUBECONFIG", &kubeconfig)
            .env("POD_NAMESPACE", NAMESPACE)
            .env("POD_NAME", name)
            .env_remove("RUST_LOG");
        let process = Process::spawn(name, command, &dir)?;
        Ok(Self {
            name: name.to_owned(),
            probe_url: format!("http://127.0.0.1:{port}"),
            process,
        })
    }

    /// Waits until `/readyz` answers 200; fails with its last answer and log when the process
    /// exits or `timeout` passes.
    pub async fn wait_ready(&mut self, timeout: Duration) -> anyhow::Result<Duration> {
        let started = Instant::now();
        let url = format!("{}/readyz", self.probe_url);
        loop {
            if let Some(exit) = self.process.exited() {
                bail!(
                    "{exit} before it was ready; its log:\n{}",
                    self.process.log_tail(30)
                );
            }
            let last = match crate::cluster::local_get(&url).await {
                Ok((200, _)) => return Ok(started.elapsed()),
                Ok((status, body)) => format!("{status}: {body}"),
                Err(err) => format!("{err:#}"),
            };
            if started.elapsed() > timeout {
                bail!(
                    "{} not ready after {}s; last /readyz: {last}; its log:\n{}",
                    self.name,
                    timeout.as_secs(),
                    self.process.log_tail(30)
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// `GET <probe>/<path>`.
    pub async fn get(&self, path: &str) -> anyhow::Result<(u16, String)> {
        crate::cluster::local_get(&format!("{}{path}", self.probe_url)).await
    }
}

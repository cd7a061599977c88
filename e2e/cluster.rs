//! The cluster the journeys drive, as a user with `kubectl` would: plain JSON objects through the
//! API (no olm-rs types, so a bug in them cannot hide a bug in the controller), and waits that
//! say what they were waiting for and what they last saw.

use std::fmt::Display;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, Config};
use serde_json::Value;

/// Where the controller runs (the chart's `globalCatalogNamespace`).
pub const DEFAULT_CONTROLLER_NAMESPACE: &str = "olm";
/// Where the chart puts its all-namespaces OperatorGroup.
pub const DEFAULT_OPERATORS_NAMESPACE: &str = "operators";
/// The catalog image `e2e/kind.sh` pushes to the cluster's local registry.
pub const DEFAULT_CATALOG_IMAGE: &str = "localhost:5001/olm-rs-e2e-catalog:dev";

/// Settings read from the environment (documented in e2e/README.md).
#[derive(Debug, Clone)]
pub struct Settings {
    pub controller_namespace: String,
    /// The namespace of the chart's all-namespaces OperatorGroup (`operatorsNamespace`).
    pub operators_namespace: String,
    pub catalog_image: String,
    /// The longest any single wait may take.
    pub timeout: Duration,
    /// Keep the journeys' namespaces for inspection.
    pub keep: bool,
    /// Where the controller runs.
    pub controller: ControllerAccess,
    /// `OLM_RS_E2E_NO_PODS`: the cluster runs no pods, whatever its node list says (a node
    /// simulator binds pods and marks them running, but no container starts).
    pub no_pods: bool,
}

/// How the journeys reach the controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ControllerAccess {
    /// The Helm chart's Deployment `olm-rs-controller` in the controller namespace; `/metrics`
    /// through the API server's pod proxy.
    InCluster,
    /// An `olm-rs run` process outside the cluster (`OLM_RS_E2E_CONTROLLER_URL`, its probe
    /// address, e.g. `http://127.0.0.1:8080`): `/readyz` and `/metrics` are read there.
    Local { probe_url: String },
}

impl Settings {
    pub fn from_env() -> anyhow::Result<Self> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let timeout = match var("OLM_RS_E2E_TIMEOUT") {
            None => Duration::from_secs(180),
            Some(text) => {
                let secs: u64 = text.trim_end_matches('s').parse().with_context(|| {
                    format!("OLM_RS_E2E_TIMEOUT={text:?}: expected seconds, like 180 or 180s")
                })?;
                Duration::from_secs(secs)
            }
        };
        Ok(Self {
            controller_namespace: var("OLM_RS_E2E_NAMESPACE")
                .unwrap_or_else(|| DEFAULT_CONTROLLER_NAMESPACE.to_owned()),
            operators_namespace: var("OLM_RS_E2E_OPERATORS_NAMESPACE")
                .unwrap_or_else(|| DEFAULT_OPERATORS_NAMESPACE.to_owned()),
            catalog_image: var("OLM_RS_E2E_CATALOG_IMAGE")
                .unwrap_or_else(|| DEFAULT_CATALOG_IMAGE.to_owned()),
            timeout,
            keep: var("OLM_RS_E2E_KEEP").is_some_and(|v| v != "0"),
            controller: match var("OLM_RS_E2E_CONTROLLER_URL") {
                None => ControllerAccess::InCluster,
                Some(url) => ControllerAccess::Local {
                    probe_url: url.trim_end_matches('/').to_owned(),
                },
            },
            no_pods: var("OLM_RS_E2E_NO_PODS").is_some_and(|v| v != "0"),
        })
    }
}

pub struct Cluster {
    pub client: Client,
    pub settings: Settings,
}

/// The variable that names the cluster the journeys drive. It is the suite's own, never
/// `KUBECONFIG`: a developer's shell usually exports `KUBECONFIG` for a cluster of their own,
/// and `cargo test` must not create namespaces there (e2e/README.md).
pub const KUBECONFIG_VAR: &str = "OLM_RS_E2E_KUBECONFIG";

/// The kubeconfig file named by [`KUBECONFIG_VAR`], or why the journeys do not run.
pub fn kubeconfig_path() -> Result<std::path::PathBuf, String> {
    match std::env::var_os(KUBECONFIG_VAR) {
        Some(path) if !path.is_empty() => Ok(path.into()),
        _ => Err(format!(
            "no cluster named ({KUBECONFIG_VAR} unset; KUBECONFIG is never read). To run them: \
             e2e/kind.sh, then {KUBECONFIG_VAR}=$PWD/e2e/.kind/kubeconfig cargo test --test e2e"
        )),
    }
}

impl Cluster {
    /// Connects to the cluster in the kubeconfig `path` (its current context) and checks olm-rs
    /// is installed there. A named but unusable cluster is an error, not a skip.
    pub async fn connect(path: &std::path::Path, settings: Settings) -> anyhow::Result<Self> {
        let kubeconfig = kube::config::Kubeconfig::read_from(path)
            .with_context(|| format!("{KUBECONFIG_VAR}={}: reading it", path.display()))?;
        let config = Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .with_context(|| format!("{KUBECONFIG_VAR}={}: no usable context", path.display()))?;
        Self::connect_with(config, settings).await
    }

    /// As [`Cluster::connect`], with an explicit client configuration.
    pub async fn connect_with(config: Config, settings: Settings) -> anyhow::Result<Self> {
        let url = config.cluster_url.clone();
        let client = Client::try_from(config).context("building a client for the cluster")?;
        let version = client
            .apiserver_version()
            .await
            .with_context(|| format!("the cluster at {url} does not answer"))?;
        println!("e2e: cluster {url} (Kubernetes {})", version.git_version);
        let cluster = Self { client, settings };
        cluster.check_olm_rs_installed().await?;
        Ok(cluster)
    }

    async fn check_olm_rs_installed(&self) -> anyhow::Result<()> {
        if let ControllerAccess::Local { probe_url } = &self.settings.controller {
            let url = format!("{probe_url}/readyz");
            return self
                .wait_for(format!("the controller at {url} to be ready"), || async {
                    Ok(match local_get(&url).await {
                        Ok((200, _)) => Progress::Done(()),
                        Ok((status, body)) => Progress::Pending(format!("{status}: {body}")),
                        Err(err) => Progress::Pending(format!("{err:#}")),
                    })
                })
                .await;
        }
        let ns = &self.settings.controller_namespace;
        let deployments = self.api(&core("apps", "v1", "Deployment", "deployments"), ns);
        let Some(controller) = deployments.get_opt("olm-rs-controller").await? else {
            bail!(
                "olm-rs is not installed: no Deployment {ns}/olm-rs-controller \
                 (run e2e/kind.sh, or helm install olm-rs charts/olm-rs)"
            );
        };
        let available = field(&controller, "/status/availableReplicas")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if available < 1 {
            bail!("Deployment {ns}/olm-rs-controller has no available replica");
        }
        Ok(())
    }

    /// Whether the cluster runs pods (kind does; an API server without nodes, such as
    /// olm-rs's embedded one, does not). Catalogs from an image need a registry pod.
    pub async fn why_no_pods(&self) -> anyhow::Result<Option<String>> {
        if self.settings.no_pods {
            return Ok(Some(
                "pods do not run on this cluster (OLM_RS_E2E_NO_PODS)".to_owned(),
            ));
        }
        let nodes: Api<DynamicObject> =
            Api::all_with(self.client.clone(), &core("", "v1", "Node", "nodes"));
        match nodes.list(&ListParams::default().limit(1)).await {
            Ok(list) if list.items.is_empty() => Ok(Some("the cluster has no nodes".to_owned())),
            Ok(_) => Ok(None),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(Some(
                "the cluster does not serve nodes (an API server without kubelets)".to_owned(),
            )),
            Err(err) => Err(err).context("listing nodes"),
        }
    }

    /// What happened in `namespace`, for a failure message: its events (oldest first) and its
    /// pods with their phase and readiness.
    #[allow(dead_code)] // the real-node harness's (tests/e2e_node)
    pub async fn describe_namespace(&self, namespace: &str) -> String {
        let events = self.api(&core("", "v1", "Event", "events"), namespace);
        let pods = self.api(&core("", "v1", "Pod", "pods"), namespace);
        let mut out = String::new();
        if let Ok(list) = events.list(&ListParams::default()).await {
            let mut items = list.items;
            items.sort_by(|a, b| text(a, "/lastTimestamp").cmp(text(b, "/lastTimestamp")));
            for e in &items {
                out.push_str(&format!(
                    "\n  event {} {}/{} {}: {} (x{})",
                    text(e, "/lastTimestamp"),
                    text(e, "/involvedObject/kind"),
                    text(e, "/involvedObject/name"),
                    text(e, "/reason"),
                    text(e, "/message"),
                    field(e, "/count").cloned().unwrap_or(Value::Null),
                ));
            }
        }
        if let Ok(list) = pods.list(&ListParams::default()).await {
            for p in &list.items {
                let ready = field(p, "/status/conditions")
                    .and_then(Value::as_array)
                    .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
                    .map(|c| c["status"].clone())
                    .unwrap_or(Value::Null);
                out.push_str(&format!(
                    "\n  pod {} phase {} ready {ready} deleting {} annotations {}",
                    p.metadata.name.as_deref().unwrap_or_default(),
                    text(p, "/status/phase"),
                    p.metadata.deletion_timestamp.is_some(),
                    serde_json::to_string(&p.metadata.annotations).unwrap_or_default(),
                ));
            }
        }
        out
    }

    pub fn api(&self, resource: &ApiResource, namespace: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), namespace, resource)
    }

    /// Creates `object` (a JSON manifest) in `namespace`.
    pub async fn create(
        &self,
        resource: &ApiResource,
        namespace: &str,
        object: Value,
    ) -> anyhow::Result<DynamicObject> {
        let object: DynamicObject = serde_json::from_value(object)?;
        let name = object.metadata.name.clone().unwrap_or_default();
        self.api(resource, namespace)
            .create(&PostParams::default(), &object)
            .await
            .with_context(|| format!("creating {} {namespace}/{name}", resource.kind))
    }

    /// A JSON merge patch, as `kubectl patch --type merge`.
    pub async fn merge_patch(
        &self,
        resource: &ApiResource,
        namespace: &str,
        name: &str,
        patch: Value,
    ) -> anyhow::Result<DynamicObject> {
        self.api(resource, namespace)
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .with_context(|| format!("patching {} {namespace}/{name}", resource.kind))
    }

    pub async fn get(
        &self,
        resource: &ApiResource,
        namespace: &str,
        name: &str,
    ) -> anyhow::Result<Option<DynamicObject>> {
        self.api(resource, namespace)
            .get_opt(name)
            .await
            .with_context(|| format!("reading {} {namespace}/{name}", resource.kind))
    }

    pub async fn get_cluster_scoped(
        &self,
        resource: &ApiResource,
        name: &str,
    ) -> anyhow::Result<Option<DynamicObject>> {
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), resource);
        api.get_opt(name)
            .await
            .with_context(|| format!("reading {} {name}", resource.kind))
    }

    /// `(kind, name)` of the ClusterRoles and ClusterRoleBindings matching `selector`.
    pub async fn cluster_rbac(&self, selector: &str) -> anyhow::Result<Vec<(String, String)>> {
        let mut found = Vec::new();
        for (kind, plural) in [
            ("ClusterRole", "clusterroles"),
            ("ClusterRoleBinding", "clusterrolebindings"),
        ] {
            let api: Api<DynamicObject> = Api::all_with(
                self.client.clone(),
                &core("rbac.authorization.k8s.io", "v1", kind, plural),
            );
            let list = api
                .list(&ListParams::default().labels(selector))
                .await
                .with_context(|| format!("listing {plural} with {selector}"))?;
            found.extend(
                list.items
                    .into_iter()
                    .map(|o| (kind.to_owned(), o.metadata.name.unwrap_or_default())),
            );
        }
        Ok(found)
    }

    pub async fn delete(
        &self,
        resource: &ApiResource,
        namespace: &str,
        name: &str,
    ) -> anyhow::Result<()> {
        match self
            .api(resource, namespace)
            .delete(name, &DeleteParams::background())
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            Err(err) => {
                Err(err).with_context(|| format!("deleting {} {namespace}/{name}", resource.kind))
            }
        }
    }

    /// What `kubectl get <plural> -n <namespace>` prints: the server-side Table's column names
    /// and the cells of each row, as text.
    pub async fn table(
        &self,
        resource: &ApiResource,
        namespace: &str,
    ) -> anyhow::Result<(Vec<String>, Vec<Vec<String>>)> {
        let prefix = if resource.group.is_empty() {
            format!("/api/{}", resource.version)
        } else {
            format!("/apis/{}/{}", resource.group, resource.version)
        };
        let path = format!("{prefix}/namespaces/{namespace}/{}", resource.plural);
        let request = http::Request::get(&path)
            .header(
                http::header::ACCEPT,
                "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
            )
            .body(Vec::new())?;
        let table: Value = serde_json::from_str(
            &self
                .client
                .request_text(request)
                .await
                .with_context(|| format!("reading {path} as a table"))?,
        )
        .with_context(|| format!("{path}: the table is not JSON"))?;
        let columns: Vec<String> = table["columnDefinitions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|column| column["priority"].as_i64().unwrap_or(0) == 0)
            .map(|column| column["name"].as_str().unwrap_or_default().to_uppercase())
            .collect();
        let rows = table["rows"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|row| {
                row["cells"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .take(columns.len())
                    .map(|cell| match cell {
                        Value::String(text) => text.clone(),
                        Value::Null => String::new(),
                        other => other.to_string(),
                    })
                    .collect()
            })
            .collect();
        Ok((columns, rows))
    }

    /// Creates a fresh namespace named `<prefix><random>`.
    pub async fn create_namespace(&self, prefix: &str) -> anyhow::Result<String> {
        let namespaces: Api<DynamicObject> = Api::all_with(
            self.client.clone(),
            &core("", "v1", "Namespace", "namespaces"),
        );
        let object: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"generateName": prefix, "labels": {"olm-rs.dev/e2e": "true"}},
        }))?;
        let created = namespaces.create(&PostParams::default(), &object).await?;
        created
            .metadata
            .name
            .context("the API server returned a namespace without a name")
    }

    pub async fn delete_namespace(&self, name: &str) {
        let namespaces: Api<DynamicObject> = Api::all_with(
            self.client.clone(),
            &core("", "v1", "Namespace", "namespaces"),
        );
        if let Err(err) = namespaces.delete(name, &DeleteParams::background()).await {
            println!("e2e: could not delete namespace {name}: {err}");
        }
    }

    /// Hastens the deletion of `namespace`, already asked for: its pods go at once (grace
    /// period 0) and its CSVs are deleted now, so olm-rs has released their finalizers before
    /// the namespace controller starts, 5 s after the request. Otherwise the controller finds
    /// pods to wait out and CSVs still finalizing, and looks again seconds later.
    #[allow(dead_code)] // the fault suite's (tests/e2e_faults)
    pub async fn hasten_namespace_deletion(&self, namespace: &str) {
        let now = DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::background()
        };
        for resource in [core("", "v1", "Pod", "pods"), csvs()] {
            let api = self.api(&resource, namespace);
            if let Err(err) = api.delete_collection(&now, &Default::default()).await {
                println!(
                    "e2e: could not delete the {} of namespace {namespace}: {err}",
                    resource.plural
                );
            }
        }
    }

    /// Calls `check` every second until it returns `Done`, or fails after the configured timeout
    /// naming `what` and the last state `check` described.
    pub async fn wait_for<T, F, Fut>(&self, what: impl Display, check: F) -> anyhow::Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = anyhow::Result<Progress<T>>>,
    {
        self.wait_for_within(self.settings.timeout, what, check)
            .await
    }

    /// [`Self::wait_for`] with its own timeout (a wait known to take longer than the usual).
    pub async fn wait_for_within<T, F, Fut>(
        &self,
        timeout: Duration,
        what: impl Display,
        mut check: F,
    ) -> anyhow::Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = anyhow::Result<Progress<T>>>,
    {
        let started = Instant::now();
        loop {
            let last = match check().await {
                Ok(Progress::Done(value)) => return Ok(value),
                Ok(Progress::Pending(state)) => state,
                // Transient API errors are part of life on a real cluster; keep them as state.
                Err(err) => format!("error: {err:#}"),
            };
            if started.elapsed() >= timeout {
                bail!(
                    "timed out after {}s waiting for {what}; last seen: {last}",
                    timeout.as_secs()
                );
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
}

/// `GET url` over plain HTTP (the controller's probe port): status and body.
pub async fn local_get(url: &str) -> anyhow::Result<(u16, String)> {
    use http_body_util::BodyExt as _;
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<http_body_util::Empty<bytes::Bytes>>();
    let uri: http::Uri = url.parse().with_context(|| format!("{url}: not a URL"))?;
    let response = client
        .get(uri)
        .await
        .with_context(|| format!("GET {url}"))?;
    let status = response.status().as_u16();
    let body = response
        .into_body()
        .collect()
        .await
        .with_context(|| format!("reading the body of {url}"))?
        .to_bytes();
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

/// One look at the cluster while waiting.
pub enum Progress<T> {
    Done(T),
    /// Not yet; the text says what is there now.
    Pending(String),
}

/// An OLM kind (`operators.coreos.com`).
pub fn olm(version: &str, kind: &str, plural: &str) -> ApiResource {
    core("operators.coreos.com", version, kind, plural)
}

/// Any kind, by group (`""` for core), version, kind and plural.
pub fn core(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

pub fn subscriptions() -> ApiResource {
    olm("v1alpha1", "Subscription", "subscriptions")
}

pub fn csvs() -> ApiResource {
    olm(
        "v1alpha1",
        "ClusterServiceVersion",
        "clusterserviceversions",
    )
}

pub fn install_plans() -> ApiResource {
    olm("v1alpha1", "InstallPlan", "installplans")
}

pub fn catalog_sources() -> ApiResource {
    olm("v1alpha1", "CatalogSource", "catalogsources")
}

pub fn operator_groups() -> ApiResource {
    olm("v1", "OperatorGroup", "operatorgroups")
}

pub fn deployments() -> ApiResource {
    core("apps", "v1", "Deployment", "deployments")
}

/// A field of an object by JSON pointer (`/status/phase`); metadata is not reachable this way.
pub fn field<'a>(object: &'a DynamicObject, pointer: &str) -> Option<&'a Value> {
    object.data.pointer(pointer)
}

/// A string field, `""` when absent.
pub fn text<'a>(object: &'a DynamicObject, pointer: &str) -> &'a str {
    field(object, pointer).and_then(Value::as_str).unwrap_or("")
}

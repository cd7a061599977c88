//! The cluster the journeys drive, as a user with `kubectl` would: plain JSON objects through the
//! API (no olm-rs types, so a bug in them cannot hide a bug in the controller), and waits that
//! say what they were waiting for and what they last saw.

use std::fmt::Display;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, Config};
use serde_json::Value;

/// Where the controller runs (the chart's `globalCatalogNamespace`).
pub const DEFAULT_CONTROLLER_NAMESPACE: &str = "olm";
/// The catalog image `e2e/kind.sh` pushes to the cluster's local registry.
pub const DEFAULT_CATALOG_IMAGE: &str = "localhost:5001/olm-rs-e2e-catalog:dev";

/// Settings read from the environment (documented in e2e/README.md).
#[derive(Debug, Clone)]
pub struct Settings {
    pub controller_namespace: String,
    pub catalog_image: String,
    /// The longest any single wait may take.
    pub timeout: Duration,
    /// Keep the journeys' namespaces for inspection.
    pub keep: bool,
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
            catalog_image: var("OLM_RS_E2E_CATALOG_IMAGE")
                .unwrap_or_else(|| DEFAULT_CATALOG_IMAGE.to_owned()),
            timeout,
            keep: var("OLM_RS_E2E_KEEP").is_some_and(|v| v != "0"),
        })
    }
}

pub struct Cluster {
    pub client: Client,
    pub settings: Settings,
}

/// Why the journeys do not run: no cluster was configured. Only an explicit `KUBECONFIG` counts,
/// so that `cargo test` never touches whatever cluster `~/.kube/config` points at.
pub fn skip_reason() -> Option<String> {
    match std::env::var("KUBECONFIG") {
        Ok(path) if !path.is_empty() => None,
        _ => Some(
            "no cluster configured (set KUBECONFIG to run the journeys, e.g. after e2e/kind.sh: \
             KUBECONFIG=$PWD/e2e/.kind/kubeconfig cargo test --test e2e)"
                .to_owned(),
        ),
    }
}

impl Cluster {
    /// Connects to the cluster in `KUBECONFIG` and checks olm-rs is installed there. A configured
    /// but unusable cluster is an error, not a skip.
    pub async fn connect(settings: Settings) -> anyhow::Result<Self> {
        let config = Config::infer()
            .await
            .context("reading the cluster configuration from KUBECONFIG")?;
        let url = config.cluster_url.clone();
        let client = Client::try_from(config).context("building a client for KUBECONFIG")?;
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

    /// Calls `check` every second until it returns `Done`, or fails after the configured timeout
    /// naming `what` and the last state `check` described.
    pub async fn wait_for<T, F, Fut>(&self, what: impl Display, mut check: F) -> anyhow::Result<T>
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
            if started.elapsed() >= self.settings.timeout {
                bail!(
                    "timed out after {}s waiting for {what}; last seen: {last}",
                    self.settings.timeout.as_secs()
                );
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
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

//! Shared set-up of the OperatorGroup and copied-CSV tests: an embedded API server with OLM's
//! CRDs, the OperatorGroup side of the controller running against it, and builders for the
//! objects the tests create.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use olm_rs::api::{
    ClusterServiceVersion, ClusterServiceVersionStatus, OperatorGroup, OperatorGroupSpec,
};
use olm_rs::k8s::clock::SystemClock;
use olm_rs::reconcile::operator_group::{OperatorGroupOptions, run_with};
use olm_rs::reconcile::{Context, ControllerOptions};
use olm_rs::sandbox::ApiServer;

/// How long a test waits for the controller to converge.
pub const CONVERGE: Duration = Duration::from_secs(20);

/// An API server with OLM's CRDs and the OperatorGroup side running.
pub struct Cluster {
    /// Held so the server lives as long as the cluster.
    _server: ApiServer,
    pub client: Client,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Options for tests: no resync during a test (every reaction must come from a watch).
pub fn test_options() -> OperatorGroupOptions {
    OperatorGroupOptions {
        resync: Duration::from_secs(3600),
        ..OperatorGroupOptions::default()
    }
}

impl Cluster {
    pub async fn start() -> Self {
        Self::start_with(test_options()).await
    }

    pub async fn start_with(options: OperatorGroupOptions) -> Self {
        // Logs of failing syncs show up with `--nocapture`.
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(
                std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()),
            ))
            .with_test_writer()
            .try_init();
        let server = ApiServer::new();
        let client = server.client();
        install_crds(&client).await;
        let ctx = Arc::new(Context::new(
            client.clone(),
            Arc::new(SystemClock),
            ControllerOptions::default(),
        ));
        let task = tokio::spawn(run_with(ctx, options));
        Self {
            _server: server,
            client,
            task,
        }
    }

    pub fn groups(&self, namespace: &str) -> Api<OperatorGroup> {
        Api::namespaced(self.client.clone(), namespace)
    }

    pub fn csvs(&self, namespace: &str) -> Api<ClusterServiceVersion> {
        Api::namespaced(self.client.clone(), namespace)
    }

    pub fn namespaces(&self) -> Api<Namespace> {
        Api::all(self.client.clone())
    }

    pub async fn create_namespace(&self, name: &str, labels: &[(&str, &str)]) {
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..Default::default()
            },
            ..Default::default()
        };
        self.namespaces()
            .create(&PostParams::default(), &ns)
            .await
            .unwrap_or_else(|e| panic!("create namespace {name}: {e}"));
    }

    pub async fn create_group(
        &self,
        namespace: &str,
        name: &str,
        spec: OperatorGroupSpec,
    ) -> OperatorGroup {
        let mut og = OperatorGroup::new(name, spec);
        og.metadata.namespace = Some(namespace.to_owned());
        self.groups(namespace)
            .create(&PostParams::default(), &og)
            .await
            .unwrap_or_else(|e| panic!("create OperatorGroup {namespace}/{name}: {e}"))
    }

    pub async fn create_csv(&self, csv: &ClusterServiceVersion) -> ClusterServiceVersion {
        let namespace = csv.metadata.namespace.clone().unwrap_or_default();
        self.csvs(&namespace)
            .create(&PostParams::default(), csv)
            .await
            .unwrap_or_else(|e| panic!("create CSV: {e}"))
    }

    /// Writes a CSV status as the CSV controller would.
    pub async fn set_csv_status(
        &self,
        namespace: &str,
        name: &str,
        status: ClusterServiceVersionStatus,
    ) {
        let body = serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "ClusterServiceVersion",
            "status": status,
        });
        self.csvs(namespace)
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&body))
            .await
            .unwrap_or_else(|e| panic!("status of CSV {namespace}/{name}: {e}"));
    }

    /// Copies of `name` from `from`, by namespace.
    pub async fn copies_of(
        &self,
        from: &str,
        name: &str,
    ) -> BTreeMap<String, ClusterServiceVersion> {
        let list = Api::<ClusterServiceVersion>::all(self.client.clone())
            .list(&kube::api::ListParams::default().labels(&format!("olm.copiedFrom={from}")))
            .await
            .unwrap_or_else(|e| panic!("list copies: {e}"));
        list.items
            .into_iter()
            .filter(|c| c.metadata.name.as_deref() == Some(name))
            .map(|c| (c.metadata.namespace.clone().unwrap_or_default(), c))
            .collect()
    }
}

async fn install_crds(client: &Client) {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in olm_rs::api::crd::all().expect("olm-rs CRDs build") {
        api.create(&PostParams::default(), &crd)
            .await
            .unwrap_or_else(|e| panic!("install CRD {:?}: {e}", crd.metadata.name));
    }
}

/// Polls `probe` until it returns `Some`, or panics after [`CONVERGE`] naming `what`.
pub async fn eventually<T, F, Fut>(what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + CONVERGE;
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("timed out after {CONVERGE:?} waiting for: {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A CSV in `namespace` supporting `modes`, owning the CRD `demos.example.com`.
pub fn csv(namespace: &str, name: &str, modes: &[&str]) -> ClusterServiceVersion {
    let modes: Vec<serde_json::Value> = [
        "OwnNamespace",
        "SingleNamespace",
        "MultiNamespace",
        "AllNamespaces",
    ]
    .iter()
    .map(|t| serde_json::json!({"type": t, "supported": modes.contains(t)}))
    .collect();
    serde_json::from_value(serde_json::json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"olm.managed": "true", "operators.coreos.com/demo.ops": ""},
            "annotations": {"alm-examples": "[]", "capabilities": "Basic Install"}
        },
        "spec": {
            "displayName": "Demo",
            "version": "0.3.0",
            "installModes": modes,
            "install": {"strategy": "deployment", "spec": {"deployments": []}},
            "customresourcedefinitions": {"owned": [
                {"name": "demos.example.com", "version": "v1alpha1", "kind": "Demo"}
            ]}
        }
    }))
    .expect("test CSV is valid")
}

/// A CSV status in `phase` with `reason`.
pub fn status(phase: &str, reason: &str) -> ClusterServiceVersionStatus {
    serde_json::from_value(serde_json::json!({
        "phase": phase,
        "reason": reason,
        "message": format!("{phase} for the test"),
        "lastUpdateTime": "2026-01-01T00:00:00Z",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }))
    .expect("test status is valid")
}

pub fn spec_targets(targets: &[&str]) -> OperatorGroupSpec {
    OperatorGroupSpec {
        target_namespaces: Some(targets.iter().map(|s| s.to_string()).collect()),
        ..Default::default()
    }
}

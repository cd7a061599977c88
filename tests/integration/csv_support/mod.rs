//! Shared set-up of the `csv_*` flow tests: the embedded API server with OLM's CRDs, the CSV
//! reconciler running against it with a manual clock, and builders for the usual objects.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use olm_rs::api::{ClusterServiceVersion, CsvPhase, CsvReason, OperatorGroup};
use olm_rs::k8s::clock::ManualClock;
use olm_rs::reconcile::{Context, ControllerOptions};
use olm_rs::sandbox::ApiServer;
use serde_json::{Value, json};

pub const NS: &str = "demo";

/// Polls `f` every 25 ms until it returns `Some`, for at most 20 s; panics naming `what`.
pub async fn eventually<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("timed out waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

pub struct Harness {
    pub server: ApiServer,
    pub client: Client,
    pub clock: ManualClock,
    ctx: Arc<Context>,
    reconciler: tokio::task::JoinHandle<()>,
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.reconciler.abort();
    }
}

async fn create<K>(api: &Api<K>, value: Value)
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let obj: K = serde_json::from_value(value).expect("test object is valid");
    api.create(&PostParams::default(), &obj)
        .await
        .expect("create test object");
}

impl Harness {
    /// An API server with OLM's CRDs, the `demos.example.com` CRD, namespace `demo`, and the
    /// CSV reconciler running.
    pub async fn start() -> Self {
        Self::start_with(ControllerOptions::default()).await
    }

    /// Like [`Harness::start`], with the CSV reconciler's options (e.g. a short resync period).
    pub async fn start_with(options: ControllerOptions) -> Self {
        Self::start_running(options, |ctx| {
            Box::pin(olm_rs::reconcile::cluster_service_version::run(ctx))
        })
        .await
    }

    /// Like [`Harness::start`], but with every reconciler of the process running, as
    /// `olm-rs run` starts them (`controller::run_reconcilers`): the OperatorGroup controller
    /// computes targets and annotates CSVs, copied CSVs are made, and so on.
    pub async fn start_all_controllers() -> Self {
        Self::start_running(ControllerOptions::default(), |ctx| {
            Box::pin(olm_rs::controller::run_reconcilers(ctx))
        })
        .await
    }

    /// [`Harness::start_all_controllers`] with the controllers' client made by `through` from
    /// the API server's (a client that loses requests, say); the test's own client is not.
    pub async fn start_all_controllers_through(through: impl FnOnce(Client) -> Client) -> Self {
        Self::start_running_through(ControllerOptions::default(), through, |ctx| {
            Box::pin(olm_rs::controller::run_reconcilers(ctx))
        })
        .await
    }

    async fn start_running(
        options: ControllerOptions,
        reconcilers: impl FnOnce(Arc<Context>) -> futures::future::BoxFuture<'static, ()>,
    ) -> Self {
        Self::start_running_through(options, |c| c, reconcilers).await
    }

    async fn start_running_through(
        options: ControllerOptions,
        through: impl FnOnce(Client) -> Client,
        reconcilers: impl FnOnce(Arc<Context>) -> futures::future::BoxFuture<'static, ()>,
    ) -> Self {
        // `RUST_LOG=olm_rs=debug cargo test --test integration csv_install` shows the reconciler's view.
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
        let server = ApiServer::new();
        let client = server.client();
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        for crd in olm_rs::api::crd::all().expect("OLM CRDs build") {
            crds.create(&PostParams::default(), &crd)
                .await
                .expect("create OLM CRD");
        }
        create(&crds, demo_crd("demos.example.com", "Demo", "demos")).await;
        let namespaces: Api<Namespace> = Api::all(client.clone());
        create(&namespaces, json!({"metadata": {"name": NS}})).await;
        // Start at the wall clock: the API server stamps managedFields with it, and the NoRetry
        // trigger compares those stamps with the CSV's lastUpdateTime (docs/csv-phases.md §1.1).
        let clock = ManualClock::new(jiff::Timestamp::now());
        let ctx = Arc::new(Context::new(
            through(client.clone()),
            Arc::new(clock.clone()),
            options,
        ));
        let reconciler = tokio::spawn(reconcilers(ctx.clone()));
        Harness {
            server,
            client,
            clock,
            ctx,
            reconciler,
        }
    }

    pub fn csvs(&self) -> Api<ClusterServiceVersion> {
        Api::namespaced(self.client.clone(), NS)
    }

    pub fn deployments(&self) -> Api<Deployment> {
        Api::namespaced(self.client.clone(), NS)
    }

    /// Metrics and events of the running reconcilers.
    pub fn ctx(&self) -> &Arc<Context> {
        &self.ctx
    }

    pub fn groups(&self, ns: &str) -> Api<OperatorGroup> {
        Api::namespaced(self.client.clone(), ns)
    }

    /// An OperatorGroup whose status already lists `targets` (the OperatorGroup controller is
    /// not part of these tests).
    pub async fn operator_group(&self, ns: &str, name: &str, targets: &[&str]) {
        create(
            &self.groups(ns),
            json!({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
                   "metadata": {"name": name, "namespace": ns}, "spec": {}}),
        )
        .await;
        self.set_targets(ns, name, targets).await;
    }

    pub async fn set_targets(&self, ns: &str, name: &str, targets: &[&str]) {
        self.groups(ns)
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"namespaces": targets, "lastUpdated": "2026-01-01T00:00:00Z"}})),
            )
            .await
            .expect("set OperatorGroup status");
    }

    /// The ServiceAccount `op-sa` with a Role and RoleBinding granting [`csv`]'s rule.
    pub async fn service_account_with_rbac(&self) {
        self.service_account("op-sa").await;
        self.rbac_for("op-sa").await;
    }

    pub async fn service_account(&self, name: &str) {
        let api: Api<ServiceAccount> = Api::namespaced(self.client.clone(), NS);
        create(&api, json!({"metadata": {"name": name}})).await;
    }

    pub async fn rbac_for(&self, sa: &str) {
        let roles: Api<Role> = Api::namespaced(self.client.clone(), NS);
        create(
            &roles,
            json!({"metadata": {"name": "op-role"}, "rules": [rule()]}),
        )
        .await;
        let bindings: Api<RoleBinding> = Api::namespaced(self.client.clone(), NS);
        create(
            &bindings,
            json!({"metadata": {"name": "op-rb"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "op-role"},
                   "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": NS}]}),
        )
        .await;
    }

    /// A Role `name` with `rules` and a RoleBinding `name` granting it to ServiceAccount `sa`.
    pub async fn grant(&self, name: &str, sa: &str, rules: Value) {
        let roles: Api<Role> = Api::namespaced(self.client.clone(), NS);
        create(&roles, json!({"metadata": {"name": name}, "rules": rules})).await;
        let bindings: Api<RoleBinding> = Api::namespaced(self.client.clone(), NS);
        create(
            &bindings,
            json!({"metadata": {"name": name},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                   "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": NS}]}),
        )
        .await;
    }

    pub async fn create_csv(&self, csv: Value) {
        create(&self.csvs(), csv).await;
    }

    /// Waits until CSV `name` is in `phase` with `reason`; returns it. On timeout the panic
    /// names the last phase, reason and message seen.
    pub async fn wait_for(
        &self,
        name: &str,
        phase: CsvPhase,
        reason: CsvReason,
    ) -> ClusterServiceVersion {
        let api = self.csvs();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        let mut last = None;
        loop {
            if let Ok(Some(csv)) = api.get_opt(name).await {
                let status = csv.status.clone().unwrap_or_default();
                if status.phase() == phase && status.reason.as_ref() == Some(&reason) {
                    return csv;
                }
                last = Some((status.phase(), status.reason, status.message));
            }
            if tokio::time::Instant::now() > deadline {
                panic!(
                    "timed out waiting for CSV {name} in {}/{}; last seen {last:?}",
                    phase.as_str(),
                    reason.as_str()
                );
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Waits until CSV `name`'s condition history holds `phase`/`reason` (for states a CSV
    /// passes through quickly); returns that entry's message.
    pub async fn wait_for_history(&self, name: &str, phase: CsvPhase, reason: CsvReason) -> String {
        let api = self.csvs();
        let what = format!(
            "{}/{} in the history of CSV {name}",
            phase.as_str(),
            reason.as_str()
        );
        eventually(&what, || {
            let api = api.clone();
            let (phase, reason) = (phase.clone(), reason.clone());
            async move {
                let csv = api.get_opt(name).await.ok()??;
                let history = csv.status?.conditions?;
                history
                    .into_iter()
                    .find(|c| {
                        c.phase.as_ref() == Some(&phase) && c.reason.as_ref() == Some(&reason)
                    })
                    .map(|c| c.message.unwrap_or_default())
            }
        })
        .await
    }

    pub async fn wait_gone(&self, name: &str) {
        let api = self.csvs();
        eventually(&format!("CSV {name} deleted"), || {
            let api = api.clone();
            async move { api.get_opt(name).await.ok()?.is_none().then_some(()) }
        })
        .await;
    }
}

pub fn rule() -> Value {
    json!({"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["configmaps"]})
}

pub fn demo_crd(name: &str, kind: &str, plural: &str) -> Value {
    let group = name.split_once('.').map(|(_, g)| g).unwrap_or_default();
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": name},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase(), "listKind": format!("{kind}List")},
            "versions": [{"name": "v1", "served": true, "storage": true,
                          "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]
        }
    })
}

/// A CSV `name` owning `demos.example.com`, with Deployment `deployment` running as `op-sa`.
pub fn csv(name: &str, deployment: &str) -> Value {
    json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "displayName": "Demo Operator",
            "version": name.rsplit_once(".v").map(|(_, v)| v).unwrap_or("0.1.0"),
            "installModes": [
                {"type": "OwnNamespace", "supported": true},
                {"type": "SingleNamespace", "supported": true},
                {"type": "MultiNamespace", "supported": false},
                {"type": "AllNamespaces", "supported": false}
            ],
            "customresourcedefinitions": {
                "owned": [{"name": "demos.example.com", "version": "v1", "kind": "Demo"}]
            },
            "install": {
                "strategy": "deployment",
                "spec": {
                    "deployments": [deployment_entry(deployment)],
                    "permissions": [{"serviceAccountName": "op-sa", "rules": [rule()]}]
                }
            }
        }
    })
}

pub fn deployment_entry(name: &str) -> Value {
    json!({
        "name": name,
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "serviceAccountName": "op-sa",
                    "containers": [{"name": "manager", "image": "example.com/op:v1",
                                    "ports": [{"containerPort": 8080}]}]
                }
            }
        }
    })
}

/// `csv` with `spec.replaces`.
pub fn replacing(mut csv: Value, old: &str) -> Value {
    csv["spec"]["replaces"] = json!(old);
    csv
}

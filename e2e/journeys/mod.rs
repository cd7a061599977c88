//! The user journeys, each in its own namespace, and the checks they share.

pub mod adoption;
pub mod automatic;
pub mod global;
pub mod image;
pub mod leader;
pub mod manual;

use std::sync::{Arc, Mutex};

use anyhow::{Context as _, ensure};
use futures::StreamExt as _;
use kube::api::{Api, DynamicObject, ListParams};
use kube_runtime::WatchStreamExt as _;
use kube_runtime::watcher;
use serde_json::Value;

use crate::cluster::{self, Cluster, Progress, field, text};
use crate::{configmap_catalog, fixtures};

/// What a journey did: ran to the end, or could not run on this cluster (and why).
pub enum Outcome {
    Ran,
    Skipped(String),
}

/// Creates an OperatorGroup targeting `namespace` and a CatalogSource `name` read from a
/// ConfigMap of the demo bundles, and waits until it is ready.
pub async fn configmap_catalog_ready(
    c: &Cluster,
    namespace: &str,
    name: &str,
) -> anyhow::Result<()> {
    c.create(
        &cluster::operator_groups(),
        namespace,
        fixtures::operator_group(namespace),
    )
    .await?;
    configmap_catalog_only(c, namespace, name).await
}

/// A CatalogSource `name` (and its ConfigMap `<name>-data`) of the demo bundles in
/// `namespace`, ready.
pub async fn configmap_catalog_only(
    c: &Cluster,
    namespace: &str,
    name: &str,
) -> anyhow::Result<()> {
    let data = configmap_catalog::data(
        &fixtures::e2e_dir().join("bundles"),
        &fixtures::e2e_dir().join("catalog"),
        fixtures::PACKAGE,
    )?;
    let config_map = format!("{name}-data");
    c.create(
        &cluster::core("", "v1", "ConfigMap", "configmaps"),
        namespace,
        configmap_catalog::config_map(namespace, &config_map, &data),
    )
    .await?;
    c.create(
        &cluster::catalog_sources(),
        namespace,
        fixtures::configmap_catalog(namespace, name, &config_map),
    )
    .await?;
    wait_catalog_ready(c, namespace, name).await?;
    println!("e2e:   catalog {name} from ConfigMap {config_map} is ready");
    Ok(())
}

/// Uninstalls as OLM documents it — delete the Subscription, then the CSV — and checks what
/// goes with them: the operator Deployment, its ServiceAccount, Role and RoleBinding. The CRD
/// stays (OLM never deletes an API with its data).
pub async fn uninstall(c: &Cluster, namespace: &str, csv: &str) -> anyhow::Result<()> {
    let rbac = operator_rbac(c, namespace).await?;
    ensure!(
        rbac.iter().any(|(kind, _)| kind == "Role")
            && rbac.iter().any(|(kind, _)| kind == "RoleBinding"),
        "before uninstalling, the operator's Role and RoleBinding should exist; found {rbac:?}"
    );
    c.delete(&cluster::subscriptions(), namespace, "demo")
        .await?;
    c.delete(&cluster::csvs(), namespace, csv).await?;
    wait_gone(c, &cluster::deployments(), namespace, fixtures::DEPLOYMENT)
        .await
        .context("uninstalling: the operator Deployment must go with its CSV")?;
    wait_gone(c, &service_accounts(), namespace, fixtures::DEPLOYMENT)
        .await
        .context("uninstalling: the operator's ServiceAccount must go with its CSV")?;
    c.wait_for(
        format!("the operator's Roles and RoleBindings in {namespace} to be deleted"),
        || async {
            let left = operator_rbac(c, namespace).await?;
            Ok(if left.is_empty() {
                Progress::Done(())
            } else {
                Progress::Pending(format!("still there: {left:?}"))
            })
        },
    )
    .await?;
    ensure!(
        c.get_cluster_scoped(&crds(), fixtures::CRD)
            .await?
            .is_some(),
        "uninstalling removed the CRD {}: OLM leaves CRDs (and their data) behind",
        fixtures::CRD
    );
    println!(
        "e2e:   uninstalled: Subscription, CSV, Deployment, ServiceAccount, Role, RoleBinding \
         gone; CRD {} kept",
        fixtures::CRD
    );
    Ok(())
}

/// The Roles and RoleBindings of `namespace` that OLM made for the demo operator's
/// ServiceAccount (those that name it as subject, or are owned by a CSV).
async fn operator_rbac(c: &Cluster, namespace: &str) -> anyhow::Result<Vec<(String, String)>> {
    let mut found = Vec::new();
    for (kind, plural) in [("Role", "roles"), ("RoleBinding", "rolebindings")] {
        let api: Api<DynamicObject> = c.api(
            &cluster::core("rbac.authorization.k8s.io", "v1", kind, plural),
            namespace,
        );
        let list = api
            .list(&ListParams::default())
            .await
            .with_context(|| format!("listing {plural} in {namespace}"))?;
        for object in list.items {
            let owned_by_csv = object
                .metadata
                .owner_references
                .iter()
                .flatten()
                .any(|owner| owner.kind == "ClusterServiceVersion");
            let for_operator = field(&object, "/subjects")
                .and_then(Value::as_array)
                .is_some_and(|subjects| subjects.iter().any(|s| s["name"] == fixtures::DEPLOYMENT));
            if owned_by_csv || for_operator {
                found.push((kind.to_owned(), object.metadata.name.unwrap_or_default()));
            }
        }
    }
    Ok(found)
}

fn service_accounts() -> kube::core::ApiResource {
    cluster::core("", "v1", "ServiceAccount", "serviceaccounts")
}

fn crds() -> kube::core::ApiResource {
    cluster::core(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
    )
}

/// Waits until the CatalogSource serves: a READY gRPC connection (image and address catalogs),
/// or a loaded ConfigMap without an error (ConfigMap catalogs, read without a registry pod).
pub async fn wait_catalog_ready(c: &Cluster, namespace: &str, name: &str) -> anyhow::Result<()> {
    c.wait_for(
        format!("CatalogSource {namespace}/{name} to be ready"),
        || async {
            let Some(catalog) = c.get(&cluster::catalog_sources(), namespace, name).await? else {
                return Ok(Progress::Pending("not found".to_owned()));
            };
            let state = text(&catalog, "/status/connectionState/lastObservedState");
            let config_map_loaded = field(&catalog, "/status/configMapReference").is_some()
                && text(&catalog, "/status/reason").is_empty();
            if state == "READY" || config_map_loaded {
                Ok(Progress::Done(()))
            } else {
                Ok(Progress::Pending(format!(
                    "status {}",
                    catalog.data.get("status").unwrap_or(&Value::Null)
                )))
            }
        },
    )
    .await
}

/// Waits until the Subscription reports `installed` as its installed CSV and that CSV is
/// Succeeded.
pub async fn wait_installed(
    c: &Cluster,
    namespace: &str,
    subscription: &str,
    installed: &str,
) -> anyhow::Result<()> {
    c.wait_for(
        format!("Subscription {namespace}/{subscription} to install {installed}"),
        || async {
            let sub = c
                .get(&cluster::subscriptions(), namespace, subscription)
                .await?
                .context("the Subscription is gone")?;
            let now = text(&sub, "/status/installedCSV");
            let state = text(&sub, "/status/state");
            if now != installed {
                // The plan the Subscription waits on says why, when it is not done.
                let plan_name = text(&sub, "/status/installPlanRef/name");
                let plan = match c.get(&cluster::install_plans(), namespace, plan_name).await {
                    Ok(Some(plan)) if !plan_name.is_empty() => format!(
                        "; InstallPlan {plan_name} {:?}: {:?}, conditions {}",
                        text(&plan, "/status/phase"),
                        text(&plan, "/status/message"),
                        field(&plan, "/status/conditions").unwrap_or(&Value::Null)
                    ),
                    _ => String::new(),
                };
                return Ok(Progress::Pending(format!(
                    "installedCSV {now:?}, state {state:?}, conditions {}{plan}",
                    field(&sub, "/status/conditions").unwrap_or(&Value::Null)
                )));
            }
            let phase = match c.get(&cluster::csvs(), namespace, installed).await? {
                Some(csv) => text(&csv, "/status/phase").to_owned(),
                None => "absent".to_owned(),
            };
            if phase == "Succeeded" {
                Ok(Progress::Done(()))
            } else {
                Ok(Progress::Pending(format!(
                    "CSV {installed} phase {phase:?}"
                )))
            }
        },
    )
    .await
}

/// Waits until `name` of `resource` no longer exists.
pub async fn wait_gone(
    c: &Cluster,
    resource: &kube::core::ApiResource,
    namespace: &str,
    name: &str,
) -> anyhow::Result<()> {
    c.wait_for(
        format!("{} {namespace}/{name} to be deleted", resource.kind),
        || async {
            Ok(match c.get(resource, namespace, name).await? {
                None => Progress::Done(()),
                Some(object) => Progress::Pending(format!(
                    "still there (deletionTimestamp {:?})",
                    object.metadata.deletion_timestamp
                )),
            })
        },
    )
    .await
}

/// The value of the `DEMO_VERSION` variable of the operator Deployment: which version runs.
pub async fn running_version(c: &Cluster, namespace: &str) -> anyhow::Result<Option<String>> {
    let Some(deployment) = c
        .get(&cluster::deployments(), namespace, fixtures::DEPLOYMENT)
        .await?
    else {
        return Ok(None);
    };
    let env = field(&deployment, "/spec/template/spec/containers/0/env")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    Ok(env
        .iter()
        .find(|var| var["name"] == "DEMO_VERSION")
        .and_then(|var| var["value"].as_str())
        .map(str::to_owned))
}

/// Records the phases every CSV of a namespace (or of every namespace) goes through, from a
/// watch started before what is checked happens (so no transition is missed).
pub struct PhaseRecorder {
    /// (CSV key, phase), in the order seen: the key is the name for one namespace,
    /// `namespace/name` for all.
    seen: Arc<Mutex<Vec<(String, String)>>>,
    task: tokio::task::JoinHandle<()>,
}

impl PhaseRecorder {
    /// The CSVs of `namespace`, each known by its name.
    pub async fn start(c: &Cluster, namespace: &str) -> anyhow::Result<Self> {
        Self::watch(c.api(&cluster::csvs(), namespace), namespace, |_, name| {
            name
        })
        .await
    }

    /// The CSVs of every namespace, each known as `namespace/name` (the takeover test's view;
    /// the e2e journeys watch one namespace).
    #[allow(dead_code)]
    pub async fn everywhere(client: &kube::Client) -> anyhow::Result<Self> {
        let api = Api::all_with(client.clone(), &cluster::csvs());
        Self::watch(api, "all namespaces", |ns, name| format!("{ns}/{name}")).await
    }

    async fn watch(
        api: Api<DynamicObject>,
        scope: &str,
        key: fn(String, String) -> String,
    ) -> anyhow::Result<Self> {
        // Fail now, with a clear error, rather than inside the background task.
        api.list(&ListParams::default().limit(1))
            .await
            .with_context(|| format!("listing CSVs in {scope}"))?;
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&seen);
        let task = tokio::spawn(async move {
            let mut objects = watcher(api, watcher::Config::default())
                .applied_objects()
                .boxed();
            while let Some(next) = objects.next().await {
                let Ok(csv) = next else { continue };
                let name = key(
                    csv.metadata.namespace.clone().unwrap_or_default(),
                    csv.metadata.name.clone().unwrap_or_default(),
                );
                let phase = text(&csv, "/status/phase").to_owned();
                if let Ok(mut seen) = sink.lock() {
                    seen.push((name, phase));
                }
            }
        });
        Ok(Self { seen, task })
    }

    /// The phases `csv` went through, in order, without repeats or the empty phase of a CSV
    /// just created (an empty phase later on, a status wiped, is kept).
    pub fn phases_of(&self, csv: &str) -> Vec<String> {
        let seen = self.seen.lock().map(|s| s.clone()).unwrap_or_default();
        let mut phases: Vec<String> = Vec::new();
        for (name, phase) in seen {
            let initial = phases.is_empty() && phase.is_empty();
            if name == csv && !initial && phases.last() != Some(&phase) {
                phases.push(phase);
            }
        }
        phases
    }
}

impl Drop for PhaseRecorder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The Events about `kind`/`name` in `namespace` (what `kubectl describe` shows), as
/// `reason: note` lines, read through `events.k8s.io/v1` (what olm-rs writes).
pub async fn events_about(
    c: &Cluster,
    namespace: &str,
    kind: &str,
    name: &str,
) -> anyhow::Result<Vec<String>> {
    let events: Api<DynamicObject> = c.api(
        &cluster::core("events.k8s.io", "v1", "Event", "events"),
        namespace,
    );
    let list = events
        .list(&ListParams::default())
        .await
        .with_context(|| format!("listing events in {namespace}"))?;
    Ok(list
        .items
        .iter()
        .filter(|e| text(e, "/regarding/kind") == kind && text(e, "/regarding/name") == name)
        .map(|e| format!("{}: {}", text(e, "/reason"), text(e, "/note")))
        .collect())
}

//! The user journeys, each in its own namespace, and the checks they share.

pub mod automatic;
pub mod leader;
pub mod manual;

use std::sync::{Arc, Mutex};

use anyhow::Context as _;
use futures::StreamExt as _;
use kube::api::{Api, DynamicObject, ListParams};
use kube_runtime::WatchStreamExt as _;
use kube_runtime::watcher;
use serde_json::Value;

use crate::cluster::{self, Cluster, Progress, field, text};
use crate::fixtures;

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
                return Ok(Progress::Pending(format!(
                    "installedCSV {now:?}, state {state:?}, conditions {}",
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

/// Records the phases every CSV of a namespace goes through, from a watch started before
/// anything is installed (so no transition is missed).
pub struct PhaseRecorder {
    seen: Arc<Mutex<Vec<(String, String)>>>,
    task: tokio::task::JoinHandle<()>,
}

impl PhaseRecorder {
    pub async fn start(c: &Cluster, namespace: &str) -> anyhow::Result<Self> {
        let api: Api<DynamicObject> = c.api(&cluster::csvs(), namespace);
        // Fail now, with a clear error, rather than inside the background task.
        api.list(&ListParams::default().limit(1))
            .await
            .with_context(|| format!("listing CSVs in {namespace}"))?;
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&seen);
        let task = tokio::spawn(async move {
            let mut objects = watcher(api, watcher::Config::default())
                .applied_objects()
                .boxed();
            while let Some(next) = objects.next().await {
                let Ok(csv) = next else { continue };
                let name = csv.metadata.name.clone().unwrap_or_default();
                let phase = text(&csv, "/status/phase").to_owned();
                if let Ok(mut seen) = sink.lock() {
                    seen.push((name, phase));
                }
            }
        });
        Ok(Self { seen, task })
    }

    /// The phases `csv` went through, in order, without repeats or the empty initial phase.
    pub fn phases_of(&self, csv: &str) -> Vec<String> {
        let seen = self.seen.lock().map(|s| s.clone()).unwrap_or_default();
        let mut phases: Vec<String> = Vec::new();
        for (name, phase) in seen {
            if name == csv && !phase.is_empty() && phases.last() != Some(&phase) {
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
/// `reason: message` lines.
pub async fn events_about(
    c: &Cluster,
    namespace: &str,
    kind: &str,
    name: &str,
) -> anyhow::Result<Vec<String>> {
    let events: Api<DynamicObject> = c.api(&cluster::core("", "v1", "Event", "events"), namespace);
    let selector = format!("involvedObject.kind={kind},involvedObject.name={name}");
    let list = events
        .list(&ListParams::default().fields(&selector))
        .await
        .with_context(|| format!("listing events about {kind} {namespace}/{name}"))?;
    Ok(list
        .items
        .iter()
        .map(|e| format!("{}: {}", text(e, "/reason"), text(e, "/message")))
        .collect())
}

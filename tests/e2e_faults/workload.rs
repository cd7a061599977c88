//! The workload every fault runs against (issue #37): a 3-hop upgrade chain (the demo package
//! from v0.1.0 through v0.2.0 to v0.3.0, one InstallPlan per hop), a package with a dependency
//! (olm-rs-e2e-dependent, which brings the demo package at v0.2.0), an all-namespaces operator
//! copied to `copies` namespaces, all from one catalog image in the global catalog namespace
//! that is polled (`registryPoll`) throughout.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use kube::api::ListParams;
use serde_json::{Value, json};

use crate::cluster::{self, Cluster, Progress, field, text};
use crate::fixtures::{self, DEPENDENT, V010, V020, V030};
use crate::real_control_plane::images;
use crate::real_control_plane::real_node::RealNode;

/// The CatalogSource in the global catalog namespace every run subscribes from.
pub const CATALOG: &str = "faults";
/// A package owning no API, installed for all namespaces (no conflict with the demo package's
/// own-namespace installs, which own the Widget API).
pub const GLOBAL: &str = "olm-rs-e2e-global";
const GLOBAL_CSV: &str = "olm-rs-e2e-global.v1.0.0";
const DEPENDENT_CSV: &str = "olm-rs-e2e-dependent.v1.0.0";
/// The catalog's poll interval: several polls fall in every run.
const POLL: &str = "8s";

/// Builds the workload's catalog image, pushes it to the node's registry and serves it from
/// the global catalog namespace, polled; returns once it is READY.
pub async fn prepare(c: &Cluster, node: &RealNode) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    catalog(dir.path())?;
    let image = images::catalog_image(
        &images::olm_rs_image(Path::new(env!("CARGO_BIN_EXE_olm-rs")))?,
        dir.path(),
    )?
    .push(&node.registry, "olm-rs-e2e-catalog-faults", "latest")
    .await?;
    let catalogs = &c.settings.controller_namespace;
    let mut source = fixtures::image_catalog(catalogs, CATALOG, &image);
    // By tag, so the poll has something to compare.
    source["spec"]["image"] = json!(format!(
        "{}/olm-rs-e2e-catalog-faults:latest",
        node.registry.host()
    ));
    source["spec"]["updateStrategy"] = json!({"registryPoll": {"interval": POLL}});
    c.create(&cluster::catalog_sources(), catalogs, source)
        .await?;
    crate::journeys::wait_catalog_ready(c, catalogs, CATALOG).await
}

/// The demo package with its `fast` channel a chain of `replaces` only (no `skipRange`, so
/// v0.1.0 goes to v0.2.0 first), the dependent package, and the all-namespaces package.
fn catalog(to: &Path) -> anyhow::Result<()> {
    fixtures::dependent_catalog(&fixtures::e2e_dir().join("catalog"), to)?;
    let package = to.join(fixtures::PACKAGE).join("package.yaml");
    let text = std::fs::read_to_string(&package)?;
    let mut documents = Vec::new();
    for document in serde_yaml_ng::Deserializer::from_str(&text) {
        let mut doc: Value = serde::Deserialize::deserialize(document)?;
        for entry in doc["entries"].as_array_mut().into_iter().flatten() {
            entry.as_object_mut().map(|e| e.remove("skipRange"));
        }
        documents.push(serde_yaml_ng::to_string(&doc)?);
    }
    std::fs::write(&package, documents.join("---\n"))?;

    // The dependent package's bundle, renamed, without its requirements.
    let dependent = std::fs::read_to_string(to.join(DEPENDENT).join("catalog.yaml"))?;
    let mut documents = Vec::new();
    for document in serde_yaml_ng::Deserializer::from_str(&dependent) {
        let doc: Value = serde::Deserialize::deserialize(document)?;
        let text = serde_json::to_string(&doc)?;
        let mut doc: Value = serde_json::from_str(&text.replace(DEPENDENT, GLOBAL))?;
        if doc["schema"] == "olm.bundle" {
            use base64::Engine as _;
            let b64 = base64::engine::general_purpose::STANDARD;
            let props = doc["properties"]
                .as_array_mut()
                .context("a bundle without properties")?;
            props.retain(|p| p["type"] == "olm.package" || p["type"] == "olm.bundle.object");
            for p in props.iter_mut() {
                if p["type"] == "olm.bundle.object" {
                    let data = p["value"]["data"].as_str().unwrap_or_default();
                    let csv = String::from_utf8(b64.decode(data)?)?.replace(DEPENDENT, GLOBAL);
                    let mut csv: Value = serde_json::from_str(&csv)?;
                    csv["spec"]["customresourcedefinitions"] = json!({});
                    csv["spec"]["displayName"] = json!("olm-rs e2e all-namespaces");
                    p["value"]["data"] = json!(b64.encode(serde_json::to_vec(&csv)?));
                }
            }
        }
        documents.push(serde_yaml_ng::to_string(&doc)?);
    }
    let out = to.join(GLOBAL);
    std::fs::create_dir_all(&out)?;
    std::fs::write(out.join("catalog.yaml"), documents.join("---\n"))?;
    Ok(())
}

/// One run of the workload: its namespaces, made fresh.
#[derive(Debug, Clone)]
pub struct Run {
    pub chain: String,
    pub dependency: String,
    pub global: String,
    pub copies: Vec<String>,
}

impl Run {
    /// Makes the namespaces and OperatorGroups, then subscribes to all three packages at once.
    pub async fn start(c: &Cluster, copies: usize) -> anyhow::Result<Self> {
        let chain = c.create_namespace("faults-chain-").await?;
        let dependency = c.create_namespace("faults-dep-").await?;
        let global = c.create_namespace("faults-global-").await?;
        let mut copy_namespaces = Vec::new();
        for _ in 0..copies {
            copy_namespaces.push(c.create_namespace("faults-copy-").await?);
        }
        let run = Self {
            chain,
            dependency,
            global,
            copies: copy_namespaces,
        };
        for ns in [&run.chain, &run.dependency] {
            c.create(
                &cluster::operator_groups(),
                ns,
                fixtures::operator_group(ns),
            )
            .await?;
        }
        let mut all = fixtures::operator_group(&run.global);
        all["spec"] = json!({});
        c.create(&cluster::operator_groups(), &run.global, all)
            .await?;
        let catalogs = c.settings.controller_namespace.clone();
        let subscribe = |ns: &str, name: &str, package: &str, channel: &str, from: Option<&str>| {
            let mut sub = fixtures::subscription(ns, CATALOG, channel, "Automatic", from);
            sub["metadata"]["name"] = json!(name);
            sub["spec"]["name"] = json!(package);
            sub["spec"]["sourceNamespace"] = json!(catalogs);
            sub
        };
        c.create(
            &cluster::subscriptions(),
            &run.chain,
            subscribe(&run.chain, "demo", fixtures::PACKAGE, "fast", Some(V010)),
        )
        .await?;
        c.create(
            &cluster::subscriptions(),
            &run.dependency,
            subscribe(&run.dependency, "dependent", DEPENDENT, "stable", None),
        )
        .await?;
        c.create(
            &cluster::subscriptions(),
            &run.global,
            subscribe(&run.global, "global", GLOBAL, "stable", None),
        )
        .await?;
        Ok(run)
    }

    /// The run's Subscriptions, by namespace and name.
    pub fn subscriptions(&self) -> [(&str, &str); 3] {
        [
            (self.chain.as_str(), "demo"),
            (self.dependency.as_str(), "dependent"),
            (self.global.as_str(), "global"),
        ]
    }

    /// Every namespace of the run.
    pub fn namespaces(&self) -> Vec<&str> {
        let mut all = vec![
            self.chain.as_str(),
            self.dependency.as_str(),
            self.global.as_str(),
        ];
        all.extend(self.copies.iter().map(String::as_str));
        all
    }

    /// What is not yet as the workload needs it (empty: converged). An InstallPlan `Failed` is
    /// an error: no fault may fail a plan.
    pub async fn missing(&self, c: &Cluster) -> anyhow::Result<Vec<String>> {
        let mut missing = Vec::new();
        installed(c, &self.chain, "demo", V030, &mut missing).await?;
        for gone in [V010, V020] {
            if let Some(csv) = c.get(&cluster::csvs(), &self.chain, gone).await? {
                missing.push(format!(
                    "{}: {gone} not yet replaced ({} {}: {})",
                    self.chain,
                    text(&csv, "/status/phase"),
                    text(&csv, "/status/reason"),
                    text(&csv, "/status/message")
                ));
            }
        }
        // What a CSV waiting in Installing waits for: the controller-manager to observe the
        // Deployment's new generation.
        if let Some(d) = c
            .get(&cluster::deployments(), &self.chain, fixtures::DEPLOYMENT)
            .await?
        {
            let generation = d.metadata.generation.unwrap_or_default();
            let observed = field(&d, "/status/observedGeneration").and_then(Value::as_i64);
            if observed != Some(generation) {
                missing.push(format!(
                    "{}: Deployment generation {generation} observed {observed:?}",
                    self.chain
                ));
            }
        }
        installed(
            c,
            &self.dependency,
            "dependent",
            DEPENDENT_CSV,
            &mut missing,
        )
        .await?;
        csv_succeeded(c, &self.dependency, V020, &mut missing).await?;
        installed(c, &self.global, "global", GLOBAL_CSV, &mut missing).await?;
        for ns in &self.copies {
            match c.get(&cluster::csvs(), ns, GLOBAL_CSV).await? {
                Some(copy) if text(&copy, "/status/reason") == "Copied" => {}
                Some(copy) => missing.push(format!(
                    "{ns}: copy of {GLOBAL_CSV} reason {:?}",
                    text(&copy, "/status/reason")
                )),
                None => missing.push(format!("{ns}: no copy of {GLOBAL_CSV}")),
            }
        }
        for ns in [&self.chain, &self.dependency, &self.global] {
            let plans = c
                .api(&cluster::install_plans(), ns)
                .list(&ListParams::default())
                .await?;
            for plan in &plans.items {
                let phase = text(plan, "/status/phase");
                let name = plan.metadata.name.as_deref().unwrap_or_default();
                if phase == "Failed" {
                    bail!(
                        "InstallPlan {ns}/{name} Failed: {}",
                        field(plan, "/status/conditions").unwrap_or(&Value::Null)
                    );
                }
                if phase != "Complete" {
                    missing.push(format!("{ns}: InstallPlan {name} {phase:?}"));
                }
            }
        }
        let catalog = c
            .get(
                &cluster::catalog_sources(),
                &c.settings.controller_namespace,
                CATALOG,
            )
            .await?
            .context("the CatalogSource is gone")?;
        let state = text(&catalog, "/status/connectionState/lastObservedState");
        if state != "READY" {
            missing.push(format!("CatalogSource {CATALOG}: {state:?}"));
        }
        Ok(missing)
    }

    /// Waits until nothing is missing; returns how long it took. `Err` names what is still
    /// missing after `timeout`, or a Failed plan.
    pub async fn wait_converged(&self, c: &Cluster, timeout: Duration) -> anyhow::Result<Duration> {
        let started = Instant::now();
        let mut said = Duration::ZERO;
        loop {
            let last = match self.missing(c).await {
                Ok(missing) if missing.is_empty() => return Ok(started.elapsed()),
                Ok(missing) => missing.join("; "),
                Err(err) if err.to_string().contains("Failed") => return Err(err),
                Err(err) => format!("error: {err:#}"),
            };
            // What a slow convergence waits for, for the report.
            if started.elapsed() >= said + Duration::from_secs(10) {
                said = started.elapsed();
                println!(
                    "e2e-faults:     {:.0}s: waiting for {last}",
                    said.as_secs_f64()
                );
            }
            if started.elapsed() > timeout {
                bail!(
                    "not converged {}s after the fault: {last}\n{}",
                    timeout.as_secs(),
                    c.describe_namespace(&self.chain).await
                );
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// InstallPlans of the chain's namespace (one per hop when nothing was planned twice).
    pub async fn chain_plans(&self, c: &Cluster) -> anyhow::Result<usize> {
        Ok(c.api(&cluster::install_plans(), &self.chain)
            .list(&ListParams::default())
            .await?
            .items
            .len())
    }

    /// Deletes the run's namespaces and waits until they are gone, so that the next run's
    /// history holds none of this run's clean-up.
    pub async fn clean(&self, c: &Cluster) -> anyhow::Result<()> {
        for ns in self.namespaces() {
            c.delete_namespace(ns).await;
        }
        for ns in self.namespaces() {
            c.hasten_namespace_deletion(ns).await;
        }
        let namespaces = cluster::core("", "v1", "Namespace", "namespaces");
        c.wait_for_within(
            Duration::from_secs(180),
            "the run's namespaces to be deleted",
            || async {
                let mut left = Vec::new();
                for ns in self.namespaces() {
                    if c.get_cluster_scoped(&namespaces, ns).await?.is_some() {
                        left.push(ns.to_owned());
                    }
                }
                Ok(if left.is_empty() {
                    Progress::Done(())
                } else {
                    Progress::Pending(format!("left: {left:?}"))
                })
            },
        )
        .await
    }
}

/// Subscription `ns/name` reports `csv` installed, and that CSV is Succeeded.
async fn installed(
    c: &Cluster,
    ns: &str,
    name: &str,
    csv: &str,
    missing: &mut Vec<String>,
) -> anyhow::Result<()> {
    let sub = c
        .get(&cluster::subscriptions(), ns, name)
        .await?
        .with_context(|| format!("Subscription {ns}/{name} is gone"))?;
    let now = text(&sub, "/status/installedCSV");
    if now != csv {
        missing.push(format!("{ns}/{name}: installedCSV {now:?}, not {csv}"));
    }
    csv_succeeded(c, ns, csv, missing).await
}

async fn csv_succeeded(
    c: &Cluster,
    ns: &str,
    csv: &str,
    missing: &mut Vec<String>,
) -> anyhow::Result<()> {
    // The phase with its reason and message: a wait that lasts is read from this line.
    let (phase, why) = match c.get(&cluster::csvs(), ns, csv).await? {
        Some(object) => (
            text(&object, "/status/phase").to_owned(),
            format!(
                " ({}: {})",
                text(&object, "/status/reason"),
                text(&object, "/status/message")
            ),
        ),
        None => ("absent".to_owned(), String::new()),
    };
    if phase != "Succeeded" {
        missing.push(format!("{ns}: CSV {csv} {phase}{why}"));
    }
    Ok(())
}

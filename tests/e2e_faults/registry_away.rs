//! F6: the catalog image's registry goes away during a poll and comes back. What must hold
//! meanwhile (docs/reliability.md §2.1): the last content keeps serving — the CatalogSource
//! stays `READY` — and no Subscription loses its catalog (`CatalogSourcesUnhealthy` or
//! `ResolutionFailed` True).

use std::collections::BTreeSet;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context as _, ensure};
use jiff::Timestamp;
use serde_json::Value;

use crate::cluster::{self, Cluster};
use crate::workload::{CATALOG, Run};

/// How long the registry is away: two of the catalog's 8 s polls fall in it at least.
pub const AWAY: Duration = Duration::from_secs(20);

/// What F6 saw while the registry was away.
#[derive(Debug, Clone, Default)]
pub struct Away {
    /// Polls of the catalog that fell in the window (`status.latestImageRegistryPoll` moved).
    pub polls: usize,
    /// Each way the catalog was lost, once: the CatalogSource not READY, a Subscription with
    /// its catalog unhealthy or its resolution failed.
    pub lost: Vec<String>,
}

/// The registry at `host:port` refuses every connection (as a registry that stopped: the
/// host answers with a reset) for [`AWAY`], then serves again. Reads the CatalogSource and
/// the run's Subscriptions every second meanwhile.
pub async fn registry_away(c: &Cluster, run: &Run, registry: &str) -> anyhow::Result<Away> {
    let (host, port) = registry
        .rsplit_once(':')
        .with_context(|| format!("registry address {registry} has no port"))?;
    let refusal = Refusal::install(host, port)?;
    let started = Instant::now();
    let mut polls = BTreeSet::new();
    let mut lost = BTreeSet::new();
    while started.elapsed() < AWAY {
        let catalog = c
            .get(
                &cluster::catalog_sources(),
                &c.settings.controller_namespace,
                CATALOG,
            )
            .await;
        match catalog {
            Ok(Some(catalog)) => {
                let state = text(&catalog, "/status/connectionState/lastObservedState");
                if state != "READY" {
                    lost.insert(format!("CatalogSource {CATALOG} {state:?}"));
                }
                polls.insert(text(&catalog, "/status/latestImageRegistryPoll").to_owned());
            }
            Ok(None) => {
                lost.insert(format!("CatalogSource {CATALOG} gone"));
            }
            Err(err) => println!("e2e-faults:   reading the CatalogSource: {err:#}"),
        }
        for (ns, name) in run.subscriptions() {
            let Ok(Some(sub)) = c.get(&cluster::subscriptions(), ns, name).await else {
                continue;
            };
            for condition in ["CatalogSourcesUnhealthy", "ResolutionFailed"] {
                if let Some(message) = true_condition(&sub, condition) {
                    lost.insert(format!("{ns}/{name}: {condition}: {message}"));
                }
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    drop(refusal);
    let back = Timestamp::now();
    println!(
        "e2e-faults:   registry {registry} away {:.0}s, back at {back}; catalog polls seen \
         meanwhile: {}",
        started.elapsed().as_secs_f64(),
        polls.len().saturating_sub(1)
    );
    Ok(Away {
        // The first value read is the poll before the registry went away.
        polls: polls.len().saturating_sub(1),
        lost: lost.into_iter().collect(),
    })
}

fn text<'a>(object: &'a kube::api::DynamicObject, pointer: &str) -> &'a str {
    object
        .data
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The message of `object`'s condition `kind` when it is True.
fn true_condition(object: &kube::api::DynamicObject, kind: &str) -> Option<String> {
    object
        .data
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind && c["status"] == "True")
        .map(|c| c["message"].as_str().unwrap_or_default().to_owned())
}

/// An iptables rule on the host refusing TCP connections to the registry; removed when
/// dropped. The host's INPUT chain sees both the node's pulls (containerd, on the host) and
/// the controller's in-process pulls (from its pod, over the bridge).
struct Refusal {
    rule: Vec<String>,
}

impl Refusal {
    fn install(host: &str, port: &str) -> anyhow::Result<Self> {
        let rule: Vec<String> = [
            "INPUT",
            "-p",
            "tcp",
            "-d",
            host,
            "--dport",
            port,
            "-j",
            "REJECT",
            "--reject-with",
            "tcp-reset",
        ]
        .into_iter()
        .map(str::to_owned)
        .collect();
        iptables("-I", &rule)?;
        Ok(Self { rule })
    }
}

fn iptables(op: &str, rule: &[String]) -> anyhow::Result<()> {
    let output = Command::new("iptables")
        .args(["-w", op])
        .args(rule)
        .output()?;
    ensure!(
        output.status.success(),
        "iptables {op} {rule:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(())
}

impl Drop for Refusal {
    fn drop(&mut self) {
        if let Err(err) = iptables("-D", &self.rule) {
            println!("e2e-faults: could not remove the registry's refusal: {err:#}");
        }
    }
}

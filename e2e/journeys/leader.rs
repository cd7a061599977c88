//! With several controller replicas, exactly one holds the leader Lease, and it is a running
//! controller pod; its `/metrics` (read through the API server's pod proxy) is what the other
//! journeys check.

use anyhow::{Context as _, bail, ensure};
use kube::api::{Api, DynamicObject, ListParams};
use serde_json::Value;

use crate::cluster::{self, Cluster, ControllerAccess, Progress, field, text};

/// The Lease the controller's replicas compete for.
const LEASE: &str = "olm-rs-controller";

pub async fn run(c: &Cluster) -> anyhow::Result<()> {
    if let ControllerAccess::Local { probe_url } = &c.settings.controller {
        return run_local(c, probe_url).await;
    }
    let ns = &c.settings.controller_namespace;
    let deployment = c
        .get(&cluster::deployments(), ns, "olm-rs-controller")
        .await?
        .context("the controller Deployment is gone")?;
    let args = field(&deployment, "/spec/template/spec/containers/0/args")
        .cloned()
        .unwrap_or(Value::Null);
    let elects = args
        .as_array()
        .is_some_and(|args| args.iter().any(|a| a == "--leader-elect"));
    let replicas = field(&deployment, "/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    if !elects {
        ensure!(
            replicas <= 1,
            "{replicas} replicas without --leader-elect would all act at once"
        );
        println!("e2e:   leader election is off (1 replica): nothing to check");
        return Ok(());
    }
    let pods = running_controller_pods(c).await?;
    let holder = lease_holder(c).await?;
    ensure!(
        pods.contains(&holder),
        "Lease {ns}/{LEASE} is held by {holder:?}, which is not a running controller pod ({pods:?})"
    );
    println!("e2e:   {holder} leads; {} replica(s) running", pods.len());
    Ok(())
}

/// A controller outside the cluster: it runs with `--leader-elect` (it is the only replica), so
/// a held Lease whose renewals keep coming proves it acts, and its `/metrics` says it leads.
async fn run_local(c: &Cluster, probe_url: &str) -> anyhow::Result<()> {
    let ns = &c.settings.controller_namespace;
    let first = lease_renewal(c).await?;
    let holder = lease_holder(c).await?;
    c.wait_for(format!("Lease {ns}/{LEASE} to be renewed"), || async {
        let now = lease_renewal(c).await?;
        Ok(if now != first {
            Progress::Done(())
        } else {
            Progress::Pending(format!("renewTime still {now:?}"))
        })
    })
    .await?;
    let metrics = leader_metrics(c).await?;
    ensure!(
        metrics
            .lines()
            .any(|line| line.starts_with("leader_election_master_status") && line.ends_with(" 1")),
        "{probe_url}/metrics does not report leader_election_master_status 1"
    );
    println!("e2e:   {holder} leads and renews its Lease");
    Ok(())
}

async fn lease_renewal(c: &Cluster) -> anyhow::Result<String> {
    let ns = &c.settings.controller_namespace;
    let lease = c
        .get(
            &cluster::core("coordination.k8s.io", "v1", "Lease", "leases"),
            ns,
            LEASE,
        )
        .await?
        .with_context(|| format!("no Lease {ns}/{LEASE}"))?;
    Ok(text(&lease, "/spec/renewTime").to_owned())
}

/// The names of the controller's running pods.
async fn running_controller_pods(c: &Cluster) -> anyhow::Result<Vec<String>> {
    let ns = &c.settings.controller_namespace;
    let pods: Api<DynamicObject> = c.api(&cluster::core("", "v1", "Pod", "pods"), ns);
    let list = pods
        .list(&ListParams::default().labels("app.kubernetes.io/name=olm-rs"))
        .await
        .with_context(|| format!("listing controller pods in {ns}"))?;
    Ok(list
        .items
        .iter()
        .filter(|pod| text(pod, "/status/phase") == "Running")
        .filter_map(|pod| pod.metadata.name.clone())
        .collect())
}

async fn lease_holder(c: &Cluster) -> anyhow::Result<String> {
    let ns = &c.settings.controller_namespace;
    let lease = c
        .get(
            &cluster::core("coordination.k8s.io", "v1", "Lease", "leases"),
            ns,
            LEASE,
        )
        .await?
        .with_context(|| format!("no Lease {ns}/{LEASE} although --leader-elect is set"))?;
    let holder = text(&lease, "/spec/holderIdentity");
    if holder.is_empty() {
        bail!("Lease {ns}/{LEASE} has no holder");
    }
    Ok(holder.to_owned())
}

/// `/metrics` of the replica that acts: the Lease holder, or the only pod without election.
pub async fn leader_metrics(c: &Cluster) -> anyhow::Result<String> {
    if let ControllerAccess::Local { probe_url } = &c.settings.controller {
        let url = format!("{probe_url}/metrics");
        let (status, body) = cluster::local_get(&url).await?;
        ensure!(status == 200, "GET {url}: {status} {body}");
        return Ok(body);
    }
    let ns = &c.settings.controller_namespace;
    let pod = match lease_holder(c).await {
        Ok(holder) => holder,
        Err(_) => running_controller_pods(c)
            .await?
            .into_iter()
            .next()
            .with_context(|| format!("no running controller pod in {ns}"))?,
    };
    // The probe port serves /metrics too (`probes`, 8080 in the chart).
    let path = format!("/api/v1/namespaces/{ns}/pods/{pod}:8080/proxy/metrics");
    let request = http::Request::get(&path).body(Vec::new())?;
    c.client
        .request_text(request)
        .await
        .with_context(|| format!("reading {path}"))
}

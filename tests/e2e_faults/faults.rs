//! The faults (issue #37), each injected while the workload runs, then the operation-history
//! check of the run (docs/reliability.md §1).

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams};

use crate::audit;
use crate::chart_install::{self, NAMESPACE};
use crate::cluster::Cluster;
use crate::real_control_plane::ControlPlane;
use crate::real_control_plane::chart;
use crate::real_control_plane::real_node::NODE_IP;
use crate::workload::Run;

#[path = "fault_proxy.rs"]
mod fault_proxy;
#[path = "partition.rs"]
mod partition;
#[path = "registry_away.rs"]
mod registry_away;

use partition::{back_in_touch, fenced, partition_leader, stepped_down};

/// The chart's leader-election timing (charts/olm-rs/values.yaml, docs/leader-election.md §1).
pub const LEASE_DURATION: Duration = Duration::from_secs(15);
pub const RENEW_DEADLINE: Duration = Duration::from_secs(10);
pub const RETRY_PERIOD: Duration = Duration::from_secs(2);
/// The kubernetes Service's address: how pods reach the API server.
const KUBERNETES_SERVICE: &str = "10.96.0.1";
/// The longest a run may take to converge after its fault ended.
const CONVERGE: Duration = Duration::from_secs(240);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// No fault: the workload's own time, to read the others against.
    None,
    /// kube-apiserver SIGKILLed and restarted 5 times.
    F1,
    /// etcd stopped for 20 s, then started.
    F2,
    /// Every watch expires: etcd compacted past every client's revision while the API server
    /// restarts without its watch cache; a namespace made at once must get its copy.
    F3,
    /// API Priority and Fairness: olm-rs's requests on a priority level of one seat and a
    /// queue of one.
    F4,
    /// The leader's traffic to the API server dropped for twice the lease duration.
    F5,
    /// The catalog image's registry away for two polls, then back.
    F6,
    /// The leader pod deleted 5 times.
    F7,
    /// A proxy between the controller pods and the API server fails 1 request in 7 (not
    /// watches) with 429, 500 `etcdserver: request timed out`, 504 or a dropped connection,
    /// for the whole workload (issue #36 item 4).
    F8,
}

impl Fault {
    /// In the order the suite runs them (the order of value).
    pub const ALL: [Fault; 8] = [
        Fault::F1,
        Fault::F7,
        Fault::F5,
        Fault::F2,
        Fault::F3,
        Fault::F6,
        Fault::F4,
        Fault::F8,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Fault::None => "none (the workload alone)",
            Fault::F1 => "F1 kube-apiserver SIGKILLed + restarted ×5",
            Fault::F2 => "F2 etcd stopped 20 s",
            Fault::F3 => "F3 watches expire (etcd compacted, no watch cache)",
            Fault::F4 => "F4 APF: 1 seat, queue of 1",
            Fault::F5 => "F5 leader partitioned 2 × lease",
            Fault::F6 => "F6 catalog image's registry away 20 s",
            Fault::F7 => "F7 leader pod deleted ×5",
            Fault::F8 => "F8 proxy fails 1 request in 7 (429/500/504/dropped)",
        }
    }

    pub fn short(self) -> &'static str {
        match self {
            Fault::None => "none",
            Fault::F3 => "F3",
            Fault::F4 => "F4",
            Fault::F1 => "F1",
            Fault::F2 => "F2",
            Fault::F5 => "F5",
            Fault::F6 => "F6",
            Fault::F7 => "F7",
            Fault::F8 => "F8",
        }
    }
}

/// What one run of a fault measured.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    pub converged: bool,
    /// From the fault's end to the workload complete.
    pub convergence: Option<Duration>,
    /// Objects olm-rs created twice (audit log).
    pub duplicates: Vec<String>,
    /// What the workload still lacked when the wait ended.
    pub lost: Vec<String>,
    /// InstallPlans in the chain's namespace (3 when no hop was planned twice).
    pub chain_plans: usize,
    /// olm-rs's successful writes in the run's namespaces and cluster-scoped objects.
    pub writes: usize,
    /// The longest time from a fault to another replica holding the Lease (F5, F7).
    pub takeover: Option<Duration>,
    /// F5: writes of the partitioned pod the API server received after the pod's renew
    /// deadline (audit log).
    pub writes_after_deadline: Option<AfterDeadline>,
    /// F3: lists by the leading pod after the watches expired (audit log).
    pub relists: Option<usize>,
    /// F4: olm-rs's requests per second through the throttled priority level while the
    /// workload converged, and how many of them were rejected (429).
    pub throttled: Option<Throttled>,
    /// olm-rs's accepted status writes to OLM's kinds, and those written backwards (audit
    /// log; `audit::backwards`).
    pub status_writes: usize,
    pub backwards: Vec<String>,
    /// F6: what was seen while the catalog image's registry was away.
    pub registry_away: Option<registry_away::Away>,
    /// F8: the requests the fault proxy saw and the failures it injected.
    pub injected: Option<fault_proxy::Injections>,
}

/// F5's writes after the renew deadline, by the API server's answer. Any of them fails the
/// run: a write the fence let out before the deadline, into a network already cut, is cut off
/// at the deadline with its connection reset, so the kernel cannot deliver it once the network
/// is back (docs/leader-election.md §2.1; before that fix, docs/reliability.md §3.5, two runs
/// of five had one such write each, refused by the API server).
#[derive(Debug, Clone, Default)]
pub struct AfterDeadline {
    pub accepted: Vec<String>,
    pub refused: Vec<String>,
}

/// What olm-rs's requests looked like under APF throttling (F4), from the API server's metrics.
#[derive(Debug, Clone, Copy, Default)]
pub struct Throttled {
    pub seats: f64,
    pub requests_per_second: f64,
    pub rejected: f64,
}

impl Outcome {
    /// `Err` naming every property the run broke.
    pub fn verdict(&self) -> anyhow::Result<()> {
        let mut broken = Vec::new();
        if !self.converged {
            broken.push(format!("not converged, missing: {:?}", self.lost));
        }
        if !self.duplicates.is_empty() {
            broken.push(format!("created twice: {:?}", self.duplicates));
        }
        if self.chain_plans != 3 {
            broken.push(format!(
                "{} InstallPlans for the 3-hop chain",
                self.chain_plans
            ));
        }
        if let Some(after) = &self.writes_after_deadline
            && !(after.accepted.is_empty() && after.refused.is_empty())
        {
            broken.push(format!(
                "writes received after the renew deadline: accepted {:?}, refused {:?}",
                after.accepted, after.refused
            ));
        }
        if !self.backwards.is_empty() {
            broken.push(format!("status written backwards: {:?}", self.backwards));
        }
        if self.injected.is_some_and(|i| i.total() == 0) {
            broken.push("the fault proxy injected no failure".to_owned());
        }
        if let Some(away) = &self.registry_away {
            if away.polls == 0 {
                broken.push("no poll of the catalog fell while its registry was away".to_owned());
            }
            if !away.lost.is_empty() {
                broken.push(format!(
                    "the catalog was lost while its registry was away: {:?}",
                    away.lost
                ));
            }
        }
        if broken.is_empty() {
            Ok(())
        } else {
            bail!("{}", broken.join("; "))
        }
    }
}

/// Runs the workload with `fault` injected, waits for convergence and checks the history.
pub async fn run(
    fault: Fault,
    plane: &ControlPlane,
    c: &Cluster,
    copies: usize,
    registry: &str,
) -> anyhow::Result<Outcome> {
    let from = Timestamp::now();
    // F4's throttling is in place before the workload starts: every request of it is throttled.
    let throttle = match fault {
        Fault::F4 => Some(Throttle::install(plane).await?),
        _ => None,
    };
    // F8's proxy too: every request of the workload passes it.
    let proxy = match fault {
        Fault::F8 => Some(fault_proxy::FaultProxy::install(plane).await?),
        _ => None,
    };
    let mut phases = Phases::new();
    let mut run = Run::start(c, copies).await?;
    phases.mark("workload started");
    let mut outcome = Outcome::default();
    let mut watches_expired = None;
    let partitioned = match fault {
        Fault::None => None,
        Fault::F3 => {
            let (namespace, restarted) = expire_watches(plane, c).await?;
            run.copies.push(namespace);
            watches_expired = Some(restarted);
            None
        }
        Fault::F4 | Fault::F8 => None,
        Fault::F1 => {
            restart_api_server(plane, 5).await?;
            None
        }
        Fault::F2 => {
            stop_etcd(plane, Duration::from_secs(20)).await?;
            None
        }
        Fault::F6 => {
            outcome.registry_away = Some(registry_away::registry_away(c, &run, registry).await?);
            None
        }
        Fault::F7 => {
            outcome.takeover = Some(delete_leader(plane, 5).await?);
            None
        }
        Fault::F5 => {
            let (pod, takeover) = partition_leader(plane).await?;
            outcome.takeover = Some(takeover);
            Some(pod)
        }
    };
    phases.mark("fault");
    match run.wait_converged(c, CONVERGE).await {
        Ok(took) => {
            outcome.converged = true;
            outcome.convergence = Some(took);
        }
        Err(err) => {
            outcome.lost = run.missing(c).await.unwrap_or_default();
            if outcome.lost.is_empty() {
                outcome.lost.push(format!("{err:#}"));
            }
        }
    }
    if let Some(restarted) = watches_expired {
        outcome.relists = Some(relists_after(plane, restarted)?);
    }
    if let Some(throttle) = throttle {
        outcome.throttled = Some(throttle.remove(plane).await?);
    }
    if let Some(proxy) = proxy {
        outcome.injected = Some(proxy.remove(plane).await?);
    }
    outcome.chain_plans = run.chain_plans(c).await?;
    if let Some((pod, partition_end)) = &partitioned {
        back_in_touch(plane, pod, *partition_end).await?;
        stepped_down(plane, pod, *partition_end).await?;
    }
    phases.mark("converged and checked");
    let to = Timestamp::now();
    let writes = audit::read(&plane.audit_log)?;
    phases.mark("audit log read");
    let namespaces = run.namespaces();
    let history = audit::check(
        &writes,
        |w| {
            w.user
                .starts_with(&format!("system:serviceaccount:{NAMESPACE}:"))
        },
        from,
        to,
        |w| w.namespace.is_empty() || namespaces.contains(&w.namespace.as_str()),
    );
    outcome.duplicates = history.duplicates;
    outcome.writes = history.writes;
    outcome.status_writes = history.status_writes;
    outcome.backwards = history.backwards;
    if let Some((pod, partition_end)) = partitioned {
        outcome.writes_after_deadline = Some(fenced(&writes, &pod, partition_end)?);
    }
    phases.mark("history checked");
    run.clean(c).await?;
    phases.mark("namespaces deleted");
    println!("e2e-faults:   {}: {}", fault.short(), phases.line());
    Ok(outcome)
}

/// Where a run's time went, phase by phase: the suite's time is CI's budget (issue #37).
struct Phases {
    last: Instant,
    took: Vec<(&'static str, Duration)>,
}

impl Phases {
    fn new() -> Self {
        Self {
            last: Instant::now(),
            took: Vec::new(),
        }
    }

    fn mark(&mut self, phase: &'static str) {
        self.took.push((phase, self.last.elapsed()));
        self.last = Instant::now();
    }

    fn line(&self) -> String {
        let parts: Vec<String> = self
            .took
            .iter()
            .map(|(phase, took)| format!("{phase} {:.1}s", took.as_secs_f64()))
            .collect();
        parts.join(", ")
    }
}

/// F1: SIGKILL the API server, start it again, wait until it is ready, `times` times, a few
/// seconds of work between two restarts.
async fn restart_api_server(plane: &ControlPlane, times: usize) -> anyhow::Result<()> {
    for i in 0..times {
        tokio::time::sleep(Duration::from_secs(4)).await;
        plane.kill("kube-apiserver")?;
        tokio::time::sleep(Duration::from_secs(1)).await;
        plane.restart("kube-apiserver", &[])?;
        let started = Instant::now();
        plane.wait_api_ready(Duration::from_secs(90)).await?;
        println!(
            "e2e-faults:   kube-apiserver restart {}: ready again in {:.1}s",
            i + 1,
            started.elapsed().as_secs_f64()
        );
    }
    Ok(())
}

/// F3: every watch expires. The API server is killed; while it is down etcd's revision is moved
/// on past every client's (two writes outside the API server's keys) and compacted there; the
/// API server comes back without its watch cache, so each watch resumed at the revision its
/// client last saw is refused `410 Gone` by etcd and the client lists again. A namespace is
/// made the moment the API server answers, before or while the clients list again: it must
/// get its copy of the all-namespaces operator. Returns the namespace and when the API server
/// was back. The API server keeps running without its watch cache until the suite ends.
async fn expire_watches(plane: &ControlPlane, c: &Cluster) -> anyhow::Result<(String, Timestamp)> {
    tokio::time::sleep(Duration::from_secs(4)).await;
    plane.kill("kube-apiserver")?;
    etcd_json(
        &plane.etcd_url,
        "/v3/kv/put",
        &serde_json::json!({"key": "b2xtLXJzLWZhdWx0cw==", "value": "MQ=="}),
    )?;
    let put = etcd_json(
        &plane.etcd_url,
        "/v3/kv/put",
        &serde_json::json!({"key": "b2xtLXJzLWZhdWx0cw==", "value": "Mg=="}),
    )?;
    let revision = put["header"]["revision"]
        .as_str()
        .context("etcd's put answered no revision")?
        .to_owned();
    etcd_json(
        &plane.etcd_url,
        "/v3/kv/compaction",
        &serde_json::json!({"revision": revision, "physical": true}),
    )?;
    plane.restart("kube-apiserver", &["--watch-cache=false".to_owned()])?;
    let started = Instant::now();
    let namespace = loop {
        match c.create_namespace("faults-gap-").await {
            Ok(namespace) => break namespace,
            Err(err) if started.elapsed() > Duration::from_secs(90) => {
                return Err(err.context("creating a namespace after the API server's restart"));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    };
    println!(
        "e2e-faults:   etcd compacted at revision {revision}; namespace {namespace} made {:.1}s \
         after the API server's restart",
        started.elapsed().as_secs_f64()
    );
    Ok((
        namespace,
        Timestamp::now() - jiff::SignedDuration::try_from(started.elapsed())?,
    ))
}

/// How many lists the controller pods made after `since` (their watches' relists).
fn relists_after(plane: &ControlPlane, since: Timestamp) -> anyhow::Result<usize> {
    let requests = audit::read(&plane.audit_log)?;
    Ok(requests
        .iter()
        .filter(|r| {
            r.verb == "list"
                && r.at >= since
                && r.user
                    .starts_with(&format!("system:serviceaccount:{NAMESPACE}:"))
        })
        .count())
}

/// A JSON request to etcd's gRPC gateway (`POST <url><path>`), its answer.
fn etcd_json(url: &str, path: &str, body: &serde_json::Value) -> anyhow::Result<serde_json::Value> {
    use std::io::{Read as _, Write as _};
    let address = url
        .strip_prefix("http://")
        .context("etcd's URL is not http://")?;
    let body = body.to_string();
    let mut stream = std::net::TcpStream::connect(address)
        .with_context(|| format!("connecting to etcd at {address}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        stream,
        "POST {path} HTTP/1.0\r\nHost: {address}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    let (head, json) = answer
        .split_once("\r\n\r\n")
        .with_context(|| format!("etcd's answer to {path} has no body: {answer}"))?;
    ensure!(
        head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"),
        "etcd {path}: {head}"
    );
    Ok(serde_json::from_str(json)?)
}

/// F4: olm-rs's ServiceAccount on a priority level of its own with one seat and a queue of
/// one (FlowSchema + PriorityLevelConfiguration), its Lease requests left on the
/// `leader-election` level as Kubernetes' own components' are (throttled renewals would be a
/// different fault, F5). The API server runs with a smaller total of seats so that the one
/// nominal share is one seat (docs/reliability.md).
struct Throttle {
    started: Instant,
    before: (f64, f64),
}

const THROTTLED: &str = "olm-rs-throttled";
const LEASES: &str = "olm-rs-leases";

impl Throttle {
    async fn install(plane: &ControlPlane) -> anyhow::Result<Self> {
        // 150 seats over the built-in levels' 245 shares and this one's 1: 0.6, rounded up to 1.
        plane.kill("kube-apiserver")?;
        plane.restart(
            "kube-apiserver",
            &[
                "--max-requests-inflight=100".to_owned(),
                "--max-mutating-requests-inflight=50".to_owned(),
            ],
        )?;
        plane.wait_api_ready(Duration::from_secs(90)).await?;
        let pods: Api<Pod> = Api::namespaced(plane.client.clone(), NAMESPACE);
        let account = pods
            .list(&kube::api::ListParams::default().labels("app.kubernetes.io/name=olm-rs"))
            .await?
            .items
            .into_iter()
            .find_map(|p| p.spec.and_then(|s| s.service_account_name))
            .context("no controller pod names its ServiceAccount")?;
        let subject = serde_json::json!([{"kind": "ServiceAccount",
            "serviceAccount": {"namespace": NAMESPACE, "name": account}}]);
        let level = serde_json::json!({
            "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
            "kind": "PriorityLevelConfiguration",
            "metadata": {"name": THROTTLED},
            "spec": {"type": "Limited", "limited": {
                "nominalConcurrencyShares": 1, "lendablePercent": 0, "borrowingLimitPercent": 0,
                "limitResponse": {"type": "Queue",
                    "queuing": {"queues": 1, "handSize": 1, "queueLengthLimit": 1}}}},
        });
        let leases = serde_json::json!({
            "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
            "kind": "FlowSchema",
            "metadata": {"name": LEASES},
            "spec": {"priorityLevelConfiguration": {"name": "leader-election"},
                "matchingPrecedence": 400, "distinguisherMethod": {"type": "ByUser"},
                "rules": [{"subjects": subject, "resourceRules": [{"verbs": ["*"],
                    "apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                    "namespaces": [NAMESPACE]}]}]},
        });
        let all = serde_json::json!({
            "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
            "kind": "FlowSchema",
            "metadata": {"name": THROTTLED},
            "spec": {"priorityLevelConfiguration": {"name": THROTTLED},
                "matchingPrecedence": 500, "distinguisherMethod": {"type": "ByUser"},
                "rules": [{"subjects": subject,
                    "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                        "clusterScope": true, "namespaces": ["*"]}],
                    "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]},
        });
        for (plural, kind, object) in [
            (
                "prioritylevelconfigurations",
                "PriorityLevelConfiguration",
                level,
            ),
            ("flowschemas", "FlowSchema", leases),
            ("flowschemas", "FlowSchema", all),
        ] {
            let resource = crate::cluster::core("flowcontrol.apiserver.k8s.io", "v1", kind, plural);
            let api: Api<kube::api::DynamicObject> = Api::all_with(plane.client.clone(), &resource);
            api.create(&Default::default(), &serde_json::from_value(object)?)
                .await
                .with_context(|| format!("creating the {kind}"))?;
        }
        // The API server takes the new schema within a second or so.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let before = counts(&metrics(plane).await?);
        Ok(Self {
            started: Instant::now(),
            before,
        })
    }

    /// The figures since the throttle went in; then the FlowSchemas and the level removed.
    async fn remove(self, plane: &ControlPlane) -> anyhow::Result<Throttled> {
        let text = metrics(plane).await?;
        let (dispatched, rejected) = counts(&text);
        let seats = metric(
            &text,
            "apiserver_flowcontrol_nominal_limit_seats",
            &format!("priority_level=\"{THROTTLED}\""),
        );
        let secs = self.started.elapsed().as_secs_f64();
        let figures = Throttled {
            seats,
            requests_per_second: (dispatched - self.before.0 + rejected - self.before.1) / secs,
            rejected: rejected - self.before.1,
        };
        println!(
            "e2e-faults:   APF: {} seat(s); {:.1} requests/s of olm-rs over {secs:.0}s, {} \
             rejected (429)",
            figures.seats, figures.requests_per_second, figures.rejected
        );
        for (plural, kind, name) in [
            ("flowschemas", "FlowSchema", THROTTLED),
            ("flowschemas", "FlowSchema", LEASES),
            (
                "prioritylevelconfigurations",
                "PriorityLevelConfiguration",
                THROTTLED,
            ),
        ] {
            let resource = crate::cluster::core("flowcontrol.apiserver.k8s.io", "v1", kind, plural);
            let api: Api<kube::api::DynamicObject> = Api::all_with(plane.client.clone(), &resource);
            api.delete(name, &DeleteParams::default()).await?;
        }
        ensure!(
            seats == 1.0,
            "the throttled priority level has {seats} seats, not 1"
        );
        Ok(figures)
    }
}

/// The API server's `/metrics` text.
async fn metrics(plane: &ControlPlane) -> anyhow::Result<String> {
    let request = http::Request::get("/metrics").body(Vec::new())?;
    Ok(plane.client.request_text(request).await?)
}

/// Requests of the throttled flow schema dispatched and rejected so far.
fn counts(text: &str) -> (f64, f64) {
    let schema = format!("flow_schema=\"{THROTTLED}\"");
    (
        metric(
            text,
            "apiserver_flowcontrol_dispatched_requests_total",
            &schema,
        ),
        metric(
            text,
            "apiserver_flowcontrol_rejected_requests_total",
            &schema,
        ),
    )
}

/// The sum of the samples of `name` whose labels contain `label`.
fn metric(text: &str, name: &str, label: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) && l.contains(label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// F2: etcd killed, `down` without it, started again on its data.
async fn stop_etcd(plane: &ControlPlane, down: Duration) -> anyhow::Result<()> {
    tokio::time::sleep(Duration::from_secs(4)).await;
    plane.kill("etcd")?;
    tokio::time::sleep(down).await;
    plane.restart("etcd", &[])?;
    plane.wait_api_ready(Duration::from_secs(90)).await
}

/// F7: the leader pod deleted `times` times, each time once another pod leads; returns the
/// longest time until another pod held the Lease.
async fn delete_leader(plane: &ControlPlane, times: usize) -> anyhow::Result<Duration> {
    let pods: Api<Pod> = Api::namespaced(plane.client.clone(), NAMESPACE);
    let mut longest = Duration::ZERO;
    for _ in 0..times {
        let leader =
            chart_install::wait_leader_other_than(&plane.client, &[], None, CONVERGE).await?;
        pods.delete(&leader, &DeleteParams::default())
            .await
            .with_context(|| format!("deleting the leader pod {leader}"))?;
        let started = Instant::now();
        let next =
            chart_install::wait_leader_other_than(&plane.client, &[], Some(&leader), CONVERGE)
                .await?;
        let took = started.elapsed();
        println!(
            "e2e-faults:   {next} took the Lease {:.1}s after {leader} was deleted",
            took.as_secs_f64()
        );
        longest = longest.max(took);
    }
    Ok(longest)
}

//! F5's parts: the leader partitioned from the API server by iptables in its network
//! namespace, and the check that it wrote nothing after its renew deadline
//! (docs/leader-election.md §2).

use super::*;

/// F5: the leader's traffic to the API server dropped in its network namespace for twice the
/// lease duration. Returns the partitioned pod with the moment the partition ended, and how
/// long after the leader's last renewal (as its standby saw it at the latest) another pod led.
pub(super) async fn partition_leader(
    plane: &ControlPlane,
) -> anyhow::Result<((String, Timestamp), Duration)> {
    tokio::time::sleep(Duration::from_secs(3)).await;
    let leader = chart_install::wait_leader_other_than(&plane.client, &[], None, CONVERGE).await?;
    let pods: Api<Pod> = Api::namespaced(plane.client.clone(), NAMESPACE);
    let ip = pods
        .get(&leader)
        .await?
        .status
        .and_then(|s| s.pod_ip)
        .with_context(|| format!("pod {leader} has no IP"))?;
    let netns = pod_netns(&ip)?;
    let port = plane
        .url
        .rsplit(':')
        .next()
        .context("the API server's URL has no port")?
        .to_owned();
    let partition = Partition::drop_to_api_server(&netns, &port)?;
    let started = Instant::now();
    let partition_start = Timestamp::now();
    let next =
        chart_install::wait_leader_other_than(&plane.client, &[], Some(&leader), CONVERGE).await?;
    let takeover_after_start = started.elapsed();
    println!(
        "e2e-faults:   {leader} ({ip}, netns {netns}) cut off from the API server; {next} took \
         the Lease {:.1}s later",
        takeover_after_start.as_secs_f64()
    );
    tokio::time::sleep((2 * LEASE_DURATION).saturating_sub(started.elapsed())).await;
    drop(partition);
    let partition_end = Timestamp::now();
    // Measured from the last renewal the partitioned leader made (audit log): the standby
    // waits the lease duration from when it saw that renewal, then tries at its next retry.
    let writes = audit::read(&plane.audit_log)?;
    let renewed = audit::last_renewal(&writes, &leader, chart::NAME, partition_start)
        .with_context(|| {
            format!(
                "no renewal of Lease {} by pod {leader} in the audit log",
                chart::NAME
            )
        })?;
    let takeover_at =
        partition_start + jiff::SignedDuration::try_from(takeover_after_start).unwrap_or_default();
    let takeover = Duration::try_from(takeover_at.duration_since(renewed)).unwrap_or_default();
    println!(
        "e2e-faults:   takeover {:.1}s after {leader}'s last renewal (lease duration {}s)",
        takeover.as_secs_f64(),
        LEASE_DURATION.as_secs()
    );
    ensure!(
        takeover <= LEASE_DURATION + RETRY_PERIOD * 2,
        "the standby took {:.1}s after the leader's last renewal to lead, more than the lease \
         duration ({}s) and one retry",
        takeover.as_secs_f64(),
        LEASE_DURATION.as_secs()
    );
    Ok(((leader, partition_end), takeover))
}

/// Waits until the partitioned pod, its network back, has talked to the API server again (the
/// audit log holds a request of it after `partition_end`: a read of the Lease at least), so
/// that the fence is checked also once the network is back. At most a minute: a pod in
/// crash-loop back-off may take that long to start its replica again.
pub(super) async fn back_in_touch(
    plane: &ControlPlane,
    pod: &str,
    partition_end: Timestamp,
) -> anyhow::Result<()> {
    let started = Instant::now();
    loop {
        let writes = audit::read(&plane.audit_log)?;
        if writes
            .iter()
            .any(|w| w.pod.as_deref() == Some(pod) && w.at >= partition_end)
        {
            return Ok(());
        }
        if started.elapsed() > Duration::from_secs(60) {
            bail!("pod {pod} made no request in the minute after its network came back");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The partitioned pod's own account of stepping down: the line the elector logs as
/// leadership ends, with the fence's tally of writes refused before sending and cut off in
/// flight (docs/leader-election.md §2.1). The replica exits after it, so the line is in the
/// previous container's log once the kubelet has restarted it.
pub(super) async fn stepped_down(
    plane: &ControlPlane,
    pod: &str,
    partition_end: Timestamp,
) -> anyhow::Result<String> {
    const LINE: &str = "leadership lost";
    let partition_start = partition_end - jiff::SignedDuration::try_from(2 * LEASE_DURATION)?;
    let pods: Api<Pod> = Api::namespaced(plane.client.clone(), NAMESPACE);
    // The previous container is this partition's only if it ended after the partition began
    // (an earlier fault may have restarted the pod too).
    let restarted = pods
        .get(pod)
        .await?
        .status
        .and_then(|s| s.container_statuses)
        .unwrap_or_default()
        .iter()
        .filter_map(|c| {
            c.last_state
                .as_ref()?
                .terminated
                .as_ref()?
                .finished_at
                .as_ref()
        })
        .any(|finished| finished.0 >= partition_start);
    let params = kube::api::LogParams {
        previous: restarted,
        ..Default::default()
    };
    let log = pods
        .logs(pod, &params)
        .await
        .with_context(|| format!("reading the log of pod {pod} (previous: {restarted})"))?;
    let line = log.lines().find(|l| l.contains(LINE)).with_context(|| {
        format!("pod {pod} (previous container: {restarted}) never logged {LINE:?}")
    })?;
    println!("e2e-faults:   {pod} stepped down: {line}");
    Ok(line.to_owned())
}

/// The writes of `pod` after its renew deadline (its last renewal before the partition ended +
/// the renew deadline), until the end of the log: these must be none, also once its network is
/// back (`partition_end`).
pub(super) fn fenced(
    writes: &[audit::Request],
    pod: &str,
    partition_end: Timestamp,
) -> anyhow::Result<AfterDeadline> {
    let renewed = audit::last_renewal(writes, pod, chart::NAME, partition_end)
        .with_context(|| format!("no renewal of the Lease by pod {pod} in the audit log"))?;
    let deadline = renewed + jiff::SignedDuration::try_from(RENEW_DEADLINE)?;
    let after = audit::writes_by_pod_after(writes, pod, deadline);
    let mut since_restore: BTreeMap<String, usize> = BTreeMap::new();
    for w in writes
        .iter()
        .filter(|w| w.pod.as_deref() == Some(pod) && w.at >= partition_end)
    {
        *since_restore
            .entry(format!("{} {} {}", w.verb, w.resource, w.code))
            .or_default() += 1;
    }
    println!(
        "e2e-faults:   {pod}: last renewal {renewed}, renew deadline {deadline}; its requests \
         logged after the network came back: {since_restore:?}; writes to anything but the \
         Lease and its own Pod after the deadline: {}",
        after.len()
    );
    let text = |w: &&audit::Request| format!("{} {} at {} ({})", w.verb, w.object(), w.at, w.code);
    Ok(AfterDeadline {
        accepted: after.iter().filter(|w| w.succeeded()).map(text).collect(),
        refused: after.iter().filter(|w| !w.succeeded()).map(text).collect(),
    })
}

/// The network namespace (under /var/run/netns, where containerd's CNI puts them) holding
/// the address `ip`.
fn pod_netns(ip: &str) -> anyhow::Result<String> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir("/var/run/netns").context("listing /var/run/netns")? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        let output = Command::new("ip")
            .args(["netns", "exec", &name, "ip", "-o", "-4", "addr", "show"])
            .output()?;
        if String::from_utf8_lossy(&output.stdout).contains(&format!(" {ip}/")) {
            return Ok(name);
        }
        names.push(name);
    }
    bail!("no network namespace holds {ip} (looked at {names:?})")
}

/// iptables rules in a pod's network namespace that drop its packets to the API server (the
/// `kubernetes` Service's address, and the node address with the API server's port); removed
/// when dropped.
struct Partition {
    netns: String,
    rules: Vec<Vec<String>>,
}

impl Partition {
    fn drop_to_api_server(netns: &str, port: &str) -> anyhow::Result<Self> {
        let rules: Vec<Vec<String>> = [
            vec!["OUTPUT", "-d", KUBERNETES_SERVICE, "-j", "DROP"],
            vec![
                "OUTPUT", "-d", NODE_IP, "-p", "tcp", "--dport", port, "-j", "DROP",
            ],
        ]
        .into_iter()
        .map(|r| r.into_iter().map(str::to_owned).collect())
        .collect();
        let mut partition = Self {
            netns: netns.to_owned(),
            rules: Vec::new(),
        };
        for rule in rules {
            partition.iptables("-I", &rule)?;
            partition.rules.push(rule);
        }
        Ok(partition)
    }

    fn iptables(&self, op: &str, rule: &[String]) -> anyhow::Result<()> {
        let output = Command::new("ip")
            .args(["netns", "exec", &self.netns, "iptables", "-w", op])
            .args(rule)
            .output()?;
        ensure!(
            output.status.success(),
            "iptables {op} {rule:?} in {}: {}",
            self.netns,
            String::from_utf8_lossy(&output.stderr)
        );
        Ok(())
    }
}

impl Drop for Partition {
    fn drop(&mut self) {
        for rule in std::mem::take(&mut self.rules) {
            if let Err(err) = self.iptables("-D", &rule) {
                println!("e2e-faults: could not remove a partition rule: {err:#}");
            }
        }
    }
}

//! The fault matrix: the chart-deployed controller (two replicas) installed once, the
//! workload's catalog served once, then each fault run `repeat` times on a fresh workload, and
//! the table of docs/reliability.md printed at the end.

use std::time::{Duration, Instant};

use crate::chart_install;
use crate::cluster::{Cluster, ControllerAccess, Settings};
use crate::faults::{self, Fault, Outcome};
use crate::real_control_plane::ControlPlane;
use crate::real_control_plane::real_node::RealNode;
use crate::real_control_plane::suite_runner::Report;
use crate::workload;

const WAIT: Duration = Duration::from_secs(180);

/// How many times and how large (from the command line: `--repeat=N`, `--copies=N`).
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    pub repeat: usize,
    /// Namespaces the all-namespaces operator is copied to.
    pub copies: usize,
    /// Also run the workload without a fault first (`--baseline`): its own time to converge,
    /// to read the faults' against.
    pub baseline: bool,
    /// The faults run without a filter word (`--all`: every one); a filter word picks among
    /// all of them.
    pub faults: &'static [Fault],
}

impl Plan {
    /// `default` with what the command line overrides.
    pub fn from_args(default: Plan) -> Plan {
        let mut plan = default;
        for arg in std::env::args().skip(1) {
            if let Some(n) = arg.strip_prefix("--repeat=").and_then(|n| n.parse().ok()) {
                plan.repeat = n;
            }
            if let Some(n) = arg.strip_prefix("--copies=").and_then(|n| n.parse().ok()) {
                plan.copies = n;
            }
            if arg == "--baseline" {
                plan.baseline = true;
            }
            if arg == "--all" {
                plan.faults = &Fault::ALL;
            }
        }
        plan
    }
}

/// Runs the plan's faults, or those whose check name contains `filter`, `plan.repeat` times
/// each; the outcomes go to `report`.
pub async fn run(
    plane: &ControlPlane,
    node: &RealNode,
    report: &mut Report,
    plan: Plan,
    filter: Option<&str>,
) {
    let started = Instant::now();
    let cluster = match install(plane, node).await {
        Ok(cluster) => {
            report.check("faults::install", started, Ok(()));
            cluster
        }
        Err(err) => {
            report.check("faults::install", started, Err(err));
            return;
        }
    };
    let mut table = Vec::new();
    let baseline = plan.baseline.then_some(Fault::None);
    let faults: Vec<Fault> = match filter {
        None => plan.faults.to_vec(),
        Some(word) => Fault::ALL
            .into_iter()
            .filter(|f| format!("faults::{}", f.short()).contains(word))
            .collect(),
    };
    for fault in baseline.into_iter().chain(faults) {
        let name = format!("faults::{}", fault.short());
        let mut outcomes = Vec::new();
        for i in 0..plan.repeat {
            let started = Instant::now();
            let result =
                faults::run(fault, plane, &cluster, plan.copies, &node.registry.host()).await;
            let result = match result {
                Ok(outcome) => {
                    let verdict = outcome.verdict();
                    print_outcome(fault, &outcome);
                    outcomes.push(outcome);
                    verdict
                }
                Err(err) => Err(err),
            };
            let label = if plan.repeat == 1 {
                name.clone()
            } else {
                format!("{name} (run {})", i + 1)
            };
            report.check(&label, started, result);
        }
        table.push((fault, plan.repeat, outcomes));
    }
    print_table(&table, plan);
}

/// `helm install` with two replicas, both Ready, one leading; then the workload's catalog.
async fn install(plane: &ControlPlane, node: &RealNode) -> anyhow::Result<Cluster> {
    chart_install::push_images(node).await?;
    chart_install::helm_install(plane, node, &["replicas=2".to_owned()], &[])?;
    let pods = chart_install::wait_pods_ready(&plane.client, 2, WAIT).await?;
    let leader = chart_install::wait_leader(&plane.client, &pods, WAIT).await?;
    println!("e2e-faults:   controller pods {pods:?} Ready; {leader} leads");
    let settings = Settings {
        controller_namespace: chart_install::NAMESPACE.to_owned(),
        operators_namespace: "operators".to_owned(),
        catalog_image: String::new(),
        timeout: WAIT,
        keep: false,
        controller: ControllerAccess::InCluster,
        no_pods: false,
    };
    let cluster = Cluster::connect_with(plane.admin_config.clone(), settings).await?;
    workload::prepare(&cluster, node).await?;
    Ok(cluster)
}

fn secs(d: Option<Duration>) -> String {
    d.map_or("—".to_owned(), |d| format!("{:.1}", d.as_secs_f64()))
}

fn print_outcome(fault: Fault, o: &Outcome) {
    println!(
        "e2e-faults:   {}: converged {} ({} s after the fault), InstallPlans of the chain {}, \
         olm-rs writes {}, created twice {}, lost {}, takeover {} s, writes after the renew \
         deadline {}",
        fault.short(),
        o.converged,
        secs(o.convergence),
        o.chain_plans,
        o.writes,
        o.duplicates.len(),
        o.lost.len(),
        secs(o.takeover),
        o.writes_after_deadline
            .as_ref()
            .map_or("—".to_owned(), |w| format!(
                "{} accepted, {} refused {:?}",
                w.accepted.len(),
                w.refused.len(),
                w.refused
            )),
    );
    println!(
        "e2e-faults:   {}: status writes accepted {}, written backwards {:?}",
        fault.short(),
        o.status_writes,
        o.backwards
    );
    if let Some(away) = &o.registry_away {
        println!(
            "e2e-faults:   {}: catalog polls while its registry was away: {}, catalog lost: {:?}",
            fault.short(),
            away.polls,
            away.lost
        );
    }
    if let Some(i) = o.injected {
        println!(
            "e2e-faults:   {}: the proxy failed {} of {} requests: {} × 429, {} × 500, {} × 504, \
             {} dropped",
            fault.short(),
            i.total(),
            i.requests,
            i.too_many,
            i.internal,
            i.timeout,
            i.dropped
        );
    }
    if let Some(relists) = o.relists {
        println!(
            "e2e-faults:   {}: lists by olm-rs after the watches expired: {relists}",
            fault.short()
        );
    }
}

/// The table of docs/reliability.md §2.
fn print_table(table: &[(Fault, usize, Vec<Outcome>)], plan: Plan) {
    println!(
        "\nfault matrix ({} repetition(s), all-namespaces copies in {} namespaces)\n",
        plan.repeat, plan.copies
    );
    println!(
        "| fault | runs | converged | longest convergence after the fault (s) | created twice | \
         lost | InstallPlans per 3-hop chain | status written backwards (of accepted) | \
         longest takeover (s) | writes after lease loss | relists after expiry | requests/s \
         under throttling (429s) | failures injected (of requests) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (fault, runs, outcomes) in table {
        let converged = outcomes.iter().filter(|o| o.converged).count();
        let longest = outcomes.iter().filter_map(|o| o.convergence).max();
        let duplicates: usize = outcomes.iter().map(|o| o.duplicates.len()).sum();
        // F6: a catalog lost while its registry was away counts as lost.
        let lost: usize = outcomes
            .iter()
            .map(|o| o.lost.len() + o.registry_away.as_ref().map_or(0, |a| a.lost.len()))
            .sum();
        let plans: Vec<String> = outcomes.iter().map(|o| o.chain_plans.to_string()).collect();
        let takeover = outcomes.iter().filter_map(|o| o.takeover).max();
        let backwards: usize = outcomes.iter().map(|o| o.backwards.len()).sum();
        let status_writes: usize = outcomes.iter().map(|o| o.status_writes).sum();
        let after: Vec<String> = outcomes
            .iter()
            .filter_map(|o| {
                o.writes_after_deadline
                    .as_ref()
                    .map(|w| format!("{} (+{} refused)", w.accepted.len(), w.refused.len()))
            })
            .collect();
        let relists: Vec<String> = outcomes
            .iter()
            .filter_map(|o| o.relists.map(|n| n.to_string()))
            .collect();
        let throttled: Vec<String> = outcomes
            .iter()
            .filter_map(|o| o.throttled)
            .map(|t| format!("{:.1} ({})", t.requests_per_second, t.rejected))
            .collect();
        let injected: Vec<String> = outcomes
            .iter()
            .filter_map(|o| o.injected)
            .map(|i| format!("{} ({})", i.total(), i.requests))
            .collect();
        let or_dash = |v: Vec<String>| {
            if v.is_empty() {
                "—".to_owned()
            } else {
                v.join(", ")
            }
        };
        println!(
            "| {} | {runs} | {converged}/{runs} | {} | {duplicates} | {lost} | {} | {backwards} \
             ({status_writes}) | {} | {} | {} | {} | {} |",
            fault.name(),
            secs(longest),
            plans.join(", "),
            secs(takeover),
            or_dash(after),
            or_dash(relists),
            or_dash(throttled),
            or_dash(injected),
        );
    }
}

//! The checks run against one control plane, in order, each building on the one before: the
//! plane runs workloads; the test operator's webhooks and aggregated API answer the API server;
//! the chart's CRDs and the first replica start in the same instant; the user journeys with two
//! replicas; the leader's Lease passes to the standby; a registry pod passes PodSecurity
//! admission; a ClusterRole missing a rule is reported; bundle images from a real registry
//! install.

use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use serde_json::{Value, json};

use crate::cluster::{self, Cluster, ControllerAccess, Settings};
use crate::real_control_plane::ControlPlane;
use crate::real_control_plane::chart::{self, Controller, Rendered};
use crate::real_control_plane::node::NodeSimulator;
use crate::real_control_plane::suite_runner::Report;
use crate::suite;

/// The longest any one wait of the checks takes.
const WAIT: Duration = Duration::from_secs(60);

/// Prints each check's outcome and counts the failures.
/// Runs every check; returns how many failed.
pub async fn run(plane: ControlPlane) -> usize {
    let mut report = crate::SUITE.report();
    match NodeSimulator::start(plane.client.clone()).await {
        Ok(node) => {
            run_checks(&plane, &mut report).await;
            drop(node);
        }
        Err(err) => {
            report.check("plane::node_simulator", Instant::now(), Err(err));
        }
    }
    println!("e2e-real: control plane memory: {}", memory(&plane.pids()));
    // `OLM_RS_E2E_REAL_LOGS=<dir>` keeps every program's log (the control plane's and each
    // olm-rs replica's) for reading; the scratch directory goes with the plane.
    if let Some(keep) = std::env::var_os("OLM_RS_E2E_REAL_LOGS")
        && let Err(err) = keep_logs(&plane.dir, std::path::Path::new(&keep))
    {
        println!("e2e-real: could not keep the logs: {err:#}");
    }
    report.failures
}

async fn run_checks(plane: &ControlPlane, report: &mut Report) {
    let started = Instant::now();
    report.check(
        "plane::workloads_run",
        started,
        workloads_run(&plane.client).await,
    );
    let started = Instant::now();
    report.check(
        "plane::test_operator",
        started,
        crate::test_operator::run(plane).await,
    );
    let started = Instant::now();
    report.check(
        "plane::crd_update_keeps_later_annotations",
        started,
        crate::crd_annotations::run(&plane.client).await,
    );

    let helm = match chart::helm() {
        Ok(helm) => helm,
        Err(why) => {
            let why = format!("helm cannot be had: {why}");
            for name in crate::CHECKS.iter().filter(|c| c.starts_with("chart::")) {
                report.skip(name, &why);
            }
            return;
        }
    };
    let started = Instant::now();
    let setup = async {
        // Two replicas on one host cannot both listen on the package API's Service port: the
        // PackageManifest API has a check of its own (chart::package_manifests), last.
        let rendered = Rendered::render(&helm, &["replicas=2", "packageServer.enabled=false"])?;
        chart::apply(&plane.client, &rendered.identity, WAIT).await?;
        let token = chart::service_account_token(&plane.client).await?;
        anyhow::Ok((rendered, token))
    };
    let (rendered, token) = match setup.await {
        Ok(setup) => setup,
        Err(err) => {
            report.check("chart::setup", started, Err(err));
            return;
        }
    };

    let started = Instant::now();
    let mut leader = match startup_race(plane, &rendered, &token).await {
        Ok(leader) => {
            report.check("chart::startup_race", started, Ok(()));
            leader
        }
        Err(err) => {
            report.check("chart::startup_race", started, Err(err));
            return;
        }
    };

    let started = Instant::now();
    let mut standby = match Controller::spawn(plane, &rendered, &token, "olm-rs-controller-b", &[])
    {
        Ok(standby) => standby,
        Err(err) => {
            report.check("chart::journeys", started, Err(err));
            return;
        }
    };
    let result = journeys(plane, &mut leader, &mut standby).await;
    report.check("chart::journeys", started, result);
    let started = Instant::now();
    let result = leader_failover(plane, &mut leader, &mut standby).await;
    report.check("chart::leader_failover", started, result);
    let started = Instant::now();
    let result = crate::registry_pod::run(plane).await;
    report.check("chart::registry_pod_admitted", started, result);
    drop(leader);
    standby.process.terminate();
    standby.process.wait_exit(Duration::from_secs(10));
    drop(standby);

    let started = Instant::now();
    let result = crate::missing_rbac::run(plane, &rendered, &token).await;
    report.check("chart::missing_rbac_rule", started, result);
    let started = Instant::now();
    match crate::bundle_images::run(plane, &rendered, &token).await {
        Ok(true) => report.check("chart::bundle_images", started, Ok(())),
        Ok(false) => report.skip(
            "chart::bundle_images",
            "no /usr/bin/docker-registry (apt-get install docker-registry)",
        ),
        Err(err) => report.check("chart::bundle_images", started, Err(err)),
    }
    let started = Instant::now();
    let result = crate::package_manifests::run(plane, &helm, &token).await;
    report.check("chart::package_manifests", started, result);
}

/// A Deployment's pods are bound, run and become available; a Job's pod succeeds; deleting the
/// namespace finishes (terminating pods are removed at once).
async fn workloads_run(client: &kube::Client) -> anyhow::Result<()> {
    let ns = "e2e-real-workloads";
    let namespaces: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &cluster::core("", "v1", "Namespace", "namespaces"),
    );
    create(
        &namespaces,
        json!({"apiVersion": "v1", "kind": "Namespace",
                               "metadata": {"name": ns}}),
    )
    .await?;
    let pod = json!({"metadata": {"labels": {"app": "sleeper"}},
                     "spec": {"containers": [{"name": "main", "image": "example.invalid/sleep"}]}});
    let deployments = Api::namespaced_with(client.clone(), ns, &cluster::deployments());
    create(
        &deployments,
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "sleeper"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "sleeper"}}, "template": pod}}),
    )
    .await?;
    let jobs = Api::namespaced_with(
        client.clone(),
        ns,
        &cluster::core("batch", "v1", "Job", "jobs"),
    );
    create(
        &jobs,
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "once"},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "main", "image": "example.invalid/once"}]}}}}),
    )
    .await?;
    wait(
        format!("Deployment {ns}/sleeper to have 2 available replicas"),
        || async {
            let d = deployments.get("sleeper").await?;
            let available = d
                .data
                .pointer("/status/availableReplicas")
                .and_then(Value::as_i64);
            Ok((available == Some(2))
                .then_some(())
                .ok_or(format!("availableReplicas {available:?}")))
        },
    )
    .await?;
    wait(format!("Job {ns}/once to succeed"), || async {
        let j = jobs.get("once").await?;
        let succeeded = j.data.pointer("/status/succeeded").and_then(Value::as_i64);
        Ok((succeeded == Some(1))
            .then_some(())
            .ok_or(format!("succeeded {succeeded:?}")))
    })
    .await?;
    namespaces.delete(ns, &DeleteParams::background()).await?;
    wait(format!("namespace {ns} to be gone"), || async {
        Ok(match namespaces.get_opt(ns).await? {
            None => Ok(()),
            Some(n) => Err(format!("phase {:?}", n.data.pointer("/status/phase"))),
        })
    })
    .await
}

/// The chart's CRDs (and what needs them) are applied in the instant the first replica starts:
/// it waits for them, becomes ready and leads.
async fn startup_race(
    plane: &ControlPlane,
    rendered: &Rendered,
    token: &str,
) -> anyhow::Result<Controller> {
    let mut leader = Controller::spawn(plane, rendered, token, "olm-rs-controller-a", &[])?;
    let apply = async {
        chart::apply(&plane.client, &rendered.crds, WAIT).await?;
        chart::apply(&plane.client, &rendered.rest, WAIT).await
    };
    let (applied, ready) = tokio::join!(apply, leader.wait_ready(WAIT));
    applied.context("applying the chart's CRDs and objects")?;
    let took = ready?;
    // Whether the race was run: the replica looked before the CRDs were served.
    let log = std::fs::read_to_string(&leader.process.log).unwrap_or_default();
    let waited = log.contains("waiting for the CRDs");
    println!(
        "e2e-real:   olm-rs-controller-a ready {:.1}s after it started with the CRDs (it saw \
         them missing first: {waited})",
        took.as_secs_f64()
    );
    Ok(leader)
}

/// The journeys, with replica `a` leading (its probe address is the journeys' controller) and
/// `b` a ready standby that does not act.
async fn journeys(
    plane: &ControlPlane,
    leader: &mut Controller,
    standby: &mut Controller,
) -> anyhow::Result<()> {
    standby.wait_ready(WAIT).await?;
    // One replica leads and the other knows it does not: whichever won the Lease (a busy
    // machine may let the second take it from the first). `leader` becomes the one that leads.
    settle_leadership(leader, standby).await?;
    let settings = Settings {
        controller_namespace: chart::NAMESPACE.to_owned(),
        operators_namespace: "operators".to_owned(),
        catalog_image: cluster::DEFAULT_CATALOG_IMAGE.to_owned(),
        timeout: WAIT,
        keep: false,
        controller: ControllerAccess::Local {
            probe_url: leader.probe_url.clone(),
        },
        // The node simulator runs no containers: a registry pod would never answer.
        no_pods: true,
    };
    let cluster = Cluster::connect_with(plane.admin_config.clone(), settings).await?;
    let summary = suite::run_journeys(&cluster, |name| JOURNEYS.contains(&name)).await;
    for controller in [&mut *leader, &mut *standby] {
        if let Some(exit) = controller.process.exited() {
            bail!("{exit}; its log:\n{}", controller.process.log_tail(40));
        }
    }
    ensure!(
        summary.failed.is_empty(),
        "journeys failed: {:#?}; last lines of the leader's log:\n{}",
        summary.failed,
        leader.process.log_tail(40)
    );
    ensure!(
        summary.passed == JOURNEYS && summary.skipped.is_empty(),
        "journeys that passed: {:?}, skipped: {:?}",
        summary.passed,
        summary.skipped
    );
    Ok(())
}

/// The journeys run here: the two replicas under the chart's RBAC, one leading, serve an
/// own-namespace and an all-namespaces install. The others run on real pods under the same
/// chart in e2e_node's `chart::journeys` and on the embedded API server in e2e_embedded; here
/// they cost CI 45 s more and found nothing those do not (issue #37's time budget).
const JOURNEYS: [&str; 2] = ["leader", "global"];

/// Waits until exactly one of the two replicas reports that it leads (and the other that it
/// does not); swaps them so that `leader` is the one leading.
async fn settle_leadership(
    leader: &mut Controller,
    standby: &mut Controller,
) -> anyhow::Result<()> {
    let (a, b) = (&*leader, &*standby);
    let started = Instant::now();
    let statuses = loop {
        let statuses = (master_status(a).await, master_status(b).await);
        match &statuses {
            (Ok(1), Ok(0)) | (Ok(0), Ok(1)) => break statuses,
            _ if started.elapsed() > WAIT => bail!(
                "timed out after {}s waiting for one replica to lead and the other to stand \
                 by; leader_election_master_status of {}: {:?}, of {}: {:?}",
                WAIT.as_secs(),
                a.name,
                statuses.0,
                b.name,
                statuses.1
            ),
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    };
    if matches!(statuses, (Ok(0), Ok(1))) {
        std::mem::swap(leader, standby);
    }
    println!(
        "e2e-real:   {} leads, {} stands by",
        leader.name, standby.name
    );
    Ok(())
}

/// The leader stops (SIGTERM, as on a rolling update); the standby takes the Lease and acts.
/// Which replica leads is read first: under load the Lease may have changed hands.
async fn leader_failover(
    plane: &ControlPlane,
    leader: &mut Controller,
    standby: &mut Controller,
) -> anyhow::Result<()> {
    settle_leadership(leader, standby).await?;
    leader.process.terminate();
    ensure!(
        leader.process.wait_exit(Duration::from_secs(15)),
        "{} did not exit within 15s of SIGTERM",
        leader.name
    );
    let leases: Api<DynamicObject> = Api::namespaced_with(
        plane.client.clone(),
        chart::NAMESPACE,
        &cluster::core("coordination.k8s.io", "v1", "Lease", "leases"),
    );
    wait(format!("{} to lead", standby.name), || async {
        let holder = leases.get(chart::NAME).await?;
        let holder = holder
            .data
            .pointer("/spec/holderIdentity")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let status = master_status(standby).await?;
        Ok((status == 1 && holder == standby.name)
            .then_some(())
            .ok_or(format!(
                "holder {holder:?}, {}'s leader_election_master_status {status}",
                standby.name
            )))
    })
    .await
}

/// `leader_election_master_status` on a replica's /metrics.
async fn master_status(controller: &Controller) -> anyhow::Result<i64> {
    let (status, body) = controller.get("/metrics").await?;
    ensure!(status == 200, "{}/metrics: {status}", controller.probe_url);
    body.lines()
        .find(|line| line.starts_with("leader_election_master_status"))
        .and_then(|line| line.rsplit(' ').next()?.parse().ok())
        .with_context(|| {
            format!(
                "{}/metrics has no leader_election_master_status",
                controller.name
            )
        })
}

async fn create(api: &Api<DynamicObject>, object: Value) -> anyhow::Result<()> {
    let object: DynamicObject = serde_json::from_value(object)?;
    let name = object.metadata.name.clone().unwrap_or_default();
    api.create(&PostParams::default(), &object)
        .await
        .with_context(|| format!("creating {name}"))?;
    Ok(())
}

/// Calls `check` every 200 ms until it returns `Ok(Ok(()))`; `Ok(Err(state))` is "not yet".
pub async fn wait<F, Fut>(what: String, mut check: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Result<(), String>>>,
{
    let started = Instant::now();
    loop {
        let last = match check().await {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(state)) => state,
            Err(err) => format!("error: {err:#}"),
        };
        if started.elapsed() > WAIT {
            bail!(
                "timed out after {}s waiting for {what}; last seen: {last}",
                WAIT.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The programs' resident memory, from /proc.
fn memory(pids: &[u32]) -> String {
    let kib: u64 = pids
        .iter()
        .filter_map(|pid| {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
            status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))?
                .trim()
                .trim_end_matches(" kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
        .sum();
    format!(
        "{} MiB RSS (etcd, kube-apiserver, kube-controller-manager)",
        kib / 1024
    )
}

/// Copies every `*.log` under `from` (one level of subdirectories) into `to`.
fn keep_logs(from: &std::path::Path, to: &std::path::Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(to)?;
    let mut dirs = vec![from.to_path_buf()];
    for entry in std::fs::read_dir(from)? {
        let path = entry?.path();
        if path.is_dir() {
            dirs.push(path);
        }
    }
    for dir in dirs {
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.extension().is_some_and(|e| e == "log")
                && let Some(name) = path.file_name()
            {
                std::fs::copy(&path, to.join(name))?;
            }
        }
    }
    println!("e2e-real: logs kept in {}", to.display());
    Ok(())
}

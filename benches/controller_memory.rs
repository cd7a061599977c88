//! The controller's memory on a real API server, as a cluster operator would read it: the real
//! `olm-rs run` (see [`controller_binary`] for which build) deployed the chart's way (its args, its
//! ServiceAccount and RBAC) against etcd + kube-apiserver + kube-controller-manager v1.36 from
//! `../shared/k8s` (tests/real_control_plane/), with a node simulator in place of a kubelet.
//!
//! The load is the one that grows with a cluster: an all-namespaces operator (the e2e demo
//! package from a ConfigMap catalog in `olm`, subscribed in `operators`) whose CSV olm-rs copies
//! into every namespace. The bench creates namespaces in steps (`OLM_RS_BENCH_NAMESPACES`,
//! default `100,2000`; add `10000` for the big one), waits until every namespace holds its copy,
//! lets the controller settle and reads its resident memory (`VmRSS`) and peak (`VmHWM`) from
//! /proc. Idle is the controller ready with the chart applied and nothing installed.
//!
//! It fails (exit code 1) when the controller's resident memory at 2,000 namespaces exceeds
//! `OLM_RS_BENCH_MAX_MIB` (default 40): memory is a feature, and this is its gate.
//! Run: `cargo build --profile image --no-default-features --bin olm-rs` (the build the container
//! image ships, which the bench measures when present), then `cargo bench --bench
//! controller_memory`; `OLM_RS_BENCH_BIN=<path>` measures another build. Without `../shared/k8s`, etcd or helm it says
//! why and passes.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or bench: a panic is the report

#[allow(dead_code)]
#[path = "../e2e/cluster.rs"]
mod cluster;
#[allow(dead_code)]
#[path = "../e2e/configmap_catalog.rs"]
mod configmap_catalog;
#[allow(dead_code)]
#[path = "../e2e/fixtures.rs"]
mod fixtures;
#[allow(dead_code)]
#[path = "../tests/real_control_plane/mod.rs"]
mod real_control_plane;
#[path = "../tests/integration/registry_support/mod.rs"]
mod registry_support;

/// What tests/integration/registry_support uses of the integration tests' `common` module.
#[allow(dead_code)]
mod common {
    pub use crate::real_control_plane::shared_data::operators_dir;
    pub use crate::real_control_plane::skip::skip;
}

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use futures::StreamExt as _;
use kube::api::{Api, DynamicObject, ListParams, PostParams};

use cluster::Cluster;
use real_control_plane::ControlPlane;
use real_control_plane::binaries::{self, Unavailable};
use real_control_plane::chart::{self, Controller, Rendered};
use real_control_plane::node::NodeSimulator;

const WAIT: Duration = Duration::from_secs(120);
/// The size the gate is read at.
const GATED_SIZE: usize = 2000;

struct Reading {
    namespaces: usize,
    seconds_to_copy: f64,
    rss_mib: f64,
    peak_mib: f64,
    /// Of the RSS: heap, stacks (anonymous) and the binary's pages (file).
    anon_mib: f64,
    file_mib: f64,
}

fn main() -> ExitCode {
    // `cargo bench` passes `--bench`; a filter word that is not ours means another bench.
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args
        .iter()
        .any(|a| !a.starts_with('-') && !"controller_memory".contains(a.as_str()))
    {
        return ExitCode::SUCCESS;
    }
    let sizes: Vec<usize> = std::env::var("OLM_RS_BENCH_NAMESPACES")
        .ok()
        .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![100, GATED_SIZE]);
    let max_mib: f64 = std::env::var("OLM_RS_BENCH_MAX_MIB")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(40.0);
    let bin = match binaries::locate() {
        Ok(Ok(bin)) => bin,
        Ok(Err(Unavailable(why))) => {
            println!("controller_memory: skipped — {why}");
            return ExitCode::SUCCESS;
        }
        Err(err) => {
            println!("controller_memory: FAILED preparing the control plane: {err:#}");
            return ExitCode::FAILURE;
        }
    };
    let helm = match chart::helm() {
        Ok(helm) => helm,
        Err(why) => {
            println!("controller_memory: skipped — helm cannot be had: {why}");
            return ExitCode::SUCCESS;
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let result = runtime.block_on(async {
        let plane = ControlPlane::start(&bin).await?;
        let _node = NodeSimulator::start(plane.client.clone()).await?;
        measure(&plane, &helm, &sizes).await
    });
    let (idle, readings) = match result {
        Ok(r) => r,
        Err(err) => {
            println!("controller_memory: FAILED: {err:#}");
            return ExitCode::FAILURE;
        }
    };
    println!("\ncontroller memory on the real API server (olm-rs run):");
    println!(
        "  idle (chart applied, nothing installed): {:.1} MiB RSS ({:.1} anonymous + {:.1} file)",
        idle.0, idle.1, idle.2
    );
    println!(
        "  namespaces  seconds until all copied  RSS after settling  (anonymous + file)  peak RSS so far"
    );
    for r in &readings {
        println!(
            "  {:>10}  {:>24.1}  {:>14.1} MiB  ({:>6.1} + {:>5.1})  {:>11.1} MiB",
            r.namespaces, r.seconds_to_copy, r.rss_mib, r.anon_mib, r.file_mib, r.peak_mib
        );
    }
    match readings.iter().find(|r| r.namespaces == GATED_SIZE) {
        Some(r) if r.rss_mib > max_mib => {
            println!(
                "controller_memory: FAILED: {:.1} MiB at {GATED_SIZE} namespaces is above the \
                 {max_mib} MiB gate",
                r.rss_mib
            );
            ExitCode::FAILURE
        }
        _ => ExitCode::SUCCESS,
    }
}

async fn measure(
    plane: &ControlPlane,
    helm: &std::path::Path,
    sizes: &[usize],
) -> anyhow::Result<((f64, f64, f64), Vec<Reading>)> {
    let rendered = Rendered::render(helm, &["replicas=1", "packageServer.enabled=false"])?
        .without_leader_election();
    chart::apply(&plane.client, &rendered.identity, WAIT).await?;
    chart::apply(&plane.client, &rendered.crds, WAIT).await?;
    chart::apply(&plane.client, &rendered.rest, WAIT).await?;
    let token = chart::service_account_token(&plane.client).await?;
    let binary = controller_binary();
    println!("controller_memory: measuring {}", binary.display());
    let mut controller =
        Controller::spawn_binary(plane, &rendered, &token, "olm-rs-controller", &[], &binary)?;
    controller.wait_ready(WAIT).await?;
    let pid = controller.process.id();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let idle = (
        status_mib(pid, "VmRSS:")?,
        status_mib(pid, "RssAnon:")?,
        status_mib(pid, "RssFile:")?,
    );

    let settings = cluster::Settings {
        controller_namespace: chart::NAMESPACE.to_owned(),
        operators_namespace: "operators".to_owned(),
        catalog_image: cluster::DEFAULT_CATALOG_IMAGE.to_owned(),
        timeout: WAIT,
        keep: false,
        controller: cluster::ControllerAccess::Local {
            probe_url: controller.probe_url.clone(),
        },
        no_pods: true,
    };
    let c = Cluster::connect_with(plane.admin_config.clone(), settings).await?;
    install_global_operator(&c).await?;

    let mut readings = Vec::new();
    let mut created = 0;
    for &size in sizes {
        let started = Instant::now();
        create_namespaces(&plane.client, created, size).await?;
        created = created.max(size);
        wait_for_copies(&plane.client, created).await?;
        let seconds_to_copy = started.elapsed().as_secs_f64();
        // Let the copies' status writes, watch events and caches settle.
        tokio::time::sleep(Duration::from_secs(10)).await;
        if let Some(exit) = controller.process.exited() {
            bail!("the controller stopped: {exit}");
        }
        readings.push(Reading {
            namespaces: created,
            seconds_to_copy,
            rss_mib: status_mib(pid, "VmRSS:")?,
            peak_mib: status_mib(pid, "VmHWM:")?,
            anon_mib: status_mib(pid, "RssAnon:")?,
            file_mib: status_mib(pid, "RssFile:")?,
        });
    }
    Ok((idle, readings))
}

/// The build to measure: `OLM_RS_BENCH_BIN`; else the build that ships in the container image
/// (`--profile image --no-default-features`, `target/image/olm-rs`) when it was built; else this
/// bench's own release build (with the `sandbox` feature and `opt-level = 3`, about 10 MiB more
/// code resident).
fn controller_binary() -> std::path::PathBuf {
    if let Some(bin) = std::env::var_os("OLM_RS_BENCH_BIN") {
        return bin.into();
    }
    let image = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/image/olm-rs");
    if image.is_file() {
        return image;
    }
    env!("CARGO_BIN_EXE_olm-rs").into()
}

/// The demo package from a ConfigMap catalog in `olm`, subscribed in `operators` (the chart's
/// all-namespaces OperatorGroup), installed.
async fn install_global_operator(c: &Cluster) -> anyhow::Result<()> {
    let data = configmap_catalog::data(
        &fixtures::e2e_dir().join("bundles"),
        &fixtures::e2e_dir().join("catalog"),
        fixtures::PACKAGE,
    )?;
    c.create(
        &cluster::core("", "v1", "ConfigMap", "configmaps"),
        chart::NAMESPACE,
        configmap_catalog::config_map(chart::NAMESPACE, "demo-data", &data),
    )
    .await?;
    c.create(
        &cluster::catalog_sources(),
        chart::NAMESPACE,
        fixtures::configmap_catalog(chart::NAMESPACE, "demo", "demo-data"),
    )
    .await?;
    let mut subscription = fixtures::subscription("operators", "demo", "stable", "Automatic", None);
    subscription["spec"]["sourceNamespace"] = chart::NAMESPACE.into();
    c.create(&cluster::subscriptions(), "operators", subscription)
        .await?;
    c.wait_for(
        format!("{} Succeeded in operators", fixtures::V020),
        || async {
            let csv = c.get(&cluster::csvs(), "operators", fixtures::V020).await?;
            let phase = csv
                .as_ref()
                .map(|c| cluster::text(c, "/status/phase").to_owned())
                .unwrap_or_default();
            Ok(if phase == "Succeeded" {
                cluster::Progress::Done(())
            } else {
                cluster::Progress::Pending(format!("phase {phase:?}"))
            })
        },
    )
    .await
}

/// Creates namespaces `bench-<from>` … `bench-<to - 1>`, 16 at a time.
async fn create_namespaces(client: &kube::Client, from: usize, to: usize) -> anyhow::Result<()> {
    let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let results: Vec<anyhow::Result<()>> = futures::stream::iter(from..to)
        .map(|i| {
            let api = api.clone();
            async move {
                let ns = k8s_openapi::api::core::v1::Namespace {
                    metadata: kube::api::ObjectMeta {
                        name: Some(format!("bench-{i:05}")),
                        ..Default::default()
                    },
                    ..Default::default()
                };
                api.create(&PostParams::default(), &ns)
                    .await
                    .with_context(|| format!("creating namespace bench-{i:05}"))?;
                Ok(())
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    results.into_iter().collect()
}

/// Waits until `expected` bench namespaces hold the copied CSV.
async fn wait_for_copies(client: &kube::Client, expected: usize) -> anyhow::Result<()> {
    let csvs: Api<DynamicObject> = Api::all_with(client.clone(), &cluster::csvs());
    let started = Instant::now();
    // Copying grows with the namespaces: allow a second per 50 beyond the usual wait.
    let deadline = WAIT + Duration::from_secs((expected / 50) as u64);
    loop {
        let copies = count_copies(&csvs).await?;
        if copies >= expected {
            return Ok(());
        }
        if started.elapsed() > deadline {
            bail!("{copies} of {expected} namespaces hold their copy after {deadline:?}");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Copies in `bench-*` namespaces, listed by page (label `olm.copiedFrom`).
async fn count_copies(csvs: &Api<DynamicObject>) -> anyhow::Result<usize> {
    let mut params = ListParams::default()
        .labels("olm.copiedFrom=operators")
        .limit(500);
    let mut count = 0;
    loop {
        let page = csvs.list_metadata(&params).await?;
        count += page
            .items
            .iter()
            .filter(|c| {
                c.metadata
                    .namespace
                    .as_deref()
                    .is_some_and(|ns| ns.starts_with("bench-"))
            })
            .count();
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(count),
        }
    }
}

/// A `/proc/<pid>/status` field in MiB.
fn status_mib(pid: u32, field: &str) -> anyhow::Result<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .context(field.to_owned())?
        .trim()
        .trim_end_matches(" kB")
        .trim()
        .parse()?;
    Ok(kib / 1024.0)
}

//! The e2e user journeys (e2e/journeys/) and the chart's RBAC against a real Kubernetes control
//! plane: etcd, kube-apiserver and kube-controller-manager v1.36 from `../shared/k8s/`, started
//! by this test on loopback (tests/real_control_plane/), with a node simulator in place of a
//! kubelet. The controller is the real `olm-rs run`, two replicas with leader election, as the
//! chart's ServiceAccount: the API server's RBAC authorizer decides what it may do.
//!
//! Without the binaries (a clone without `../shared`) or etcd, it prints why and passes.
//! `harness = false`: one control plane serves every check, in a fixed order.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or bench: a panic is the report

#[path = "e2e_real/bundle_images.rs"]
mod bundle_images;
#[path = "e2e_real/checks.rs"]
mod checks;
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
#[path = "../e2e/journeys/mod.rs"]
mod journeys;
#[path = "e2e_real/missing_rbac.rs"]
mod missing_rbac;
#[path = "e2e_real/package_manifests.rs"]
mod package_manifests;
#[path = "integration/package_manifests_expected.rs"]
mod package_manifests_expected;
#[path = "e2e_real/registry_pod.rs"]
mod registry_pod;
#[path = "integration/registry_support/mod.rs"]
mod registry_support;
#[path = "e2e_real/test_operator.rs"]
mod test_operator;

/// What tests/integration/registry_support uses of the integration tests' `common` module.
#[allow(dead_code)]
mod common {
    pub fn operators_dir() -> std::path::PathBuf {
        let crate_dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        std::env::var_os("OLM_RS_SHARED")
            .map(std::path::PathBuf::from)
            .into_iter()
            .chain([crate_dir.join("../shared"), "/work/shared".into()])
            .find(|p| p.join("data").is_dir())
            .unwrap_or_else(|| crate_dir.join("../shared"))
            .join("data/catalogs/community-operators-prod/operators")
    }
}
#[allow(dead_code)]
mod real_control_plane;
#[allow(dead_code)]
#[path = "../e2e/suite.rs"]
mod suite;

use std::process::ExitCode;
use std::time::Instant;

use real_control_plane::ControlPlane;
use real_control_plane::binaries::{self, Unavailable};

/// The checks, in the order they run (`--list` prints them).
const CHECKS: &[&str] = &[
    "plane::workloads_run",
    "plane::test_operator",
    "chart::startup_race",
    "chart::journeys",
    "chart::leader_failover",
    "chart::registry_pod_admitted",
    "chart::missing_rbac_rule",
    "chart::bundle_images",
    "chart::package_manifests",
];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        for name in CHECKS {
            println!("{name}: test");
        }
        return ExitCode::SUCCESS;
    }
    // A bare word filters, as with the default test runner: `cargo test foo` runs nothing here
    // unless "foo" is part of a check's name; then all of them run (each builds on the one
    // before).
    let filter = args.iter().find(|a| !a.starts_with('-')).cloned();
    let selected: Vec<&str> = CHECKS
        .iter()
        .copied()
        .filter(|name| filter.as_deref().is_none_or(|f| name.contains(f)))
        .collect();
    if selected.is_empty() {
        return ExitCode::SUCCESS;
    }
    let bin = match binaries::locate() {
        Ok(Ok(bin)) => bin,
        Ok(Err(Unavailable(why))) => {
            println!("e2e-real: skipped — {why}");
            return ExitCode::SUCCESS;
        }
        Err(err) => {
            println!("e2e-real: FAILED preparing the control plane's programs: {err:#}");
            return ExitCode::FAILURE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            println!("e2e-real: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let started = Instant::now();
    let failures = runtime.block_on(async {
        let plane = match ControlPlane::start(&bin).await {
            Ok(plane) => plane,
            Err(err) => {
                println!("e2e-real: FAILED starting the control plane: {err:#}");
                return 1;
            }
        };
        checks::run(plane).await
    });
    println!(
        "e2e-real: {} in {:.1}s",
        if failures == 0 { "ok" } else { "FAILED" },
        started.elapsed().as_secs_f64()
    );
    if failures == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

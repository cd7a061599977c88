//! Moving a cluster that real OLM v0.31 manages to olm-rs, and back (issue #29), on the real
//! control plane and a real node (tests/real_control_plane/): real OLM (`real_olm.rs`) installs
//! operators from catalogs served by `olm-rs catalog serve`, is stopped, olm-rs is installed by
//! its chart over OLM's namespace, and the test checks that nothing OLM made was recreated,
//! rewritten or restarted; then the way back. The checks are described in
//! `e2e_takeover/takeover.rs`; the findings in docs/migrating-from-olm.md §5–6.
//!
//! Where the node or OLM's programs cannot run here it prints why and passes. `harness = false`:
//! one cluster serves every check, in a fixed order.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is the report

#[path = "e2e_takeover/audit.rs"]
mod audit;
#[allow(dead_code)]
#[path = "e2e_node/chart_install.rs"]
mod chart_install;
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
#[path = "e2e_takeover/own_namespace.rs"]
mod own_namespace;
#[path = "integration/registry_support/mod.rs"]
mod registry_support;
#[path = "e2e_takeover/snapshot.rs"]
mod snapshot;
#[path = "e2e_takeover/takeover.rs"]
mod takeover;
#[path = "e2e_takeover/waits.rs"]
mod waits;

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

use std::process::ExitCode;
use std::time::Instant;

use real_control_plane::ControlPlane;
use real_control_plane::binaries::{self, Unavailable};
use real_control_plane::real_node::{self, RealNode};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        for name in takeover::CHECKS {
            println!("{name}: test");
        }
        return ExitCode::SUCCESS;
    }
    let filter = args.iter().find(|a| !a.starts_with('-')).cloned();
    if filter
        .as_deref()
        .is_some_and(|f| !takeover::CHECKS.iter().any(|name| name.contains(f)))
    {
        return ExitCode::SUCCESS;
    }
    let bin = match binaries::locate() {
        Ok(Ok(bin)) => bin,
        Ok(Err(Unavailable(why))) => {
            println!("e2e-takeover: skipped — {why}");
            return ExitCode::SUCCESS;
        }
        Err(err) => {
            println!("e2e-takeover: FAILED preparing the cluster's programs: {err:#}");
            return ExitCode::FAILURE;
        }
    };
    let olm = match binaries::olm() {
        Ok(Ok(olm)) => olm,
        Ok(Err(Unavailable(why))) => {
            println!("e2e-takeover: skipped — {why}");
            return ExitCode::SUCCESS;
        }
        Err(err) => {
            println!("e2e-takeover: FAILED unpacking real OLM: {err:#}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(why) = real_node::unavailable(&bin) {
        println!("e2e-takeover: skipped — a real node cannot run here: {why}");
        return ExitCode::SUCCESS;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            println!("e2e-takeover: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let started = Instant::now();
    let failures = runtime.block_on(async {
        let bridge = match real_node::Bridge::create() {
            Ok(bridge) => bridge,
            Err(err) => {
                println!("e2e-takeover: FAILED creating the node's bridge: {err:#}");
                return 1;
            }
        };
        let plane = match ControlPlane::start_on(&bin, real_node::NETWORK).await {
            Ok(plane) => plane,
            Err(err) => {
                println!("e2e-takeover: FAILED starting the control plane: {err:#}");
                return 1;
            }
        };
        let node = match RealNode::start(&plane, &bin, bridge).await {
            Ok(node) => node,
            Err(err) => {
                println!("e2e-takeover: FAILED starting the node: {err:#}");
                return 1;
            }
        };
        let failures = takeover::run(&plane, &node, &olm, filter.as_deref()).await;
        drop(node);
        drop(plane);
        failures
    });
    println!(
        "e2e-takeover: {} in {:.1}s",
        if failures == 0 { "ok" } else { "FAILED" },
        started.elapsed().as_secs_f64()
    );
    if failures == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

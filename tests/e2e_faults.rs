//! The fault suite of issue #37 on a node that really runs pods (tests/real_control_plane/
//! real_node.rs): the chart-deployed controller with two replicas, a workload (a 3-hop upgrade
//! chain, a package with a dependency, an all-namespaces operator copied to several
//! namespaces, a polled catalog image), and faults: the API server SIGKILLed and restarted
//! (F1), the leader pod deleted (F7), the leader partitioned from the API server (F5), every
//! watch expired (F3), etcd stopped (F2), the catalog image's registry away during polls (F6),
//! APF throttling (F4). After each, the operation history is checked from the API server's
//! audit log (docs/reliability.md).
//!
//! `cargo test --test e2e_faults -- --repeat=N --copies=N` runs the matrix N times and prints
//! the table (`benches/fault_matrix.rs` is the same with the sizes). A filter word
//! (`F5`) runs one fault. Where the node cannot start it prints why and passes (in CI: fails).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is the report

#[path = "e2e_faults/audit.rs"]
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
#[path = "e2e_faults/faults.rs"]
mod faults;
#[allow(dead_code)]
#[path = "../e2e/fixtures.rs"]
mod fixtures;
#[path = "injected_faults/mod.rs"]
mod injected_faults;
#[allow(dead_code)]
#[path = "../e2e/journeys/mod.rs"]
mod journeys;
#[path = "e2e_faults/matrix.rs"]
mod matrix;
#[path = "integration/registry_support/mod.rs"]
mod registry_support;
#[allow(dead_code)]
#[path = "../e2e/suite.rs"]
mod suite;
#[path = "e2e_faults/workload.rs"]
mod workload;

/// What tests/integration/registry_support uses of the integration tests' `common` module.
mod common {
    pub use crate::real_control_plane::shared_data::operators_dir;
    pub use crate::real_control_plane::skip::skip;
}
#[allow(dead_code)]
mod real_control_plane;

use std::process::ExitCode;

use faults::Fault;
use real_control_plane::suite_runner::Suite;

const SUITE: Suite = Suite {
    label: "e2e-faults",
    checks: &[
        "faults::install",
        "faults::F1",
        "faults::F7",
        "faults::F5",
        "faults::F2",
        "faults::F3",
        "faults::F6",
        "faults::F4",
        "faults::F8",
    ],
};

/// In CI each fault runs once, the all-namespaces operator copied to 10 namespaces: 6.5 to 7.5
/// minutes in all (docs/reliability.md §2.4); `benches/fault_matrix.rs` runs the same with
/// the 50 namespaces and N repetitions.
const CI_PLAN: matrix::Plan = matrix::Plan {
    repeat: 1,
    copies: 10,
    baseline: false,
    faults: &Fault::ALL,
};

fn main() -> ExitCode {
    let Some(filter) = SUITE.selected() else {
        return ExitCode::SUCCESS;
    };
    let plan = matrix::Plan::from_args(CI_PLAN);
    let bin = match SUITE.binaries() {
        Ok(bin) => bin,
        Err(exit) => return exit,
    };
    if let Err(exit) = SUITE.node_available(&bin) {
        return exit;
    }
    SUITE.run(SUITE.on_real_node(&bin, async |plane, node| {
        let mut report = SUITE.report();
        matrix::run(plane, node, &mut report, plan, filter.as_deref()).await;
        report.failures
    }))
}

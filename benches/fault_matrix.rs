//! The fault matrix of issue #37 at the issue's sizes: each fault of tests/e2e_faults.rs run
//! `--repeat=N` times (default 3) on a node that really runs pods, the all-namespaces operator
//! copied to `--copies=N` namespaces (default 50), and the table of docs/reliability.md printed
//! at the end. The same code as the CI suite (`cargo test --test e2e_faults`, once each, 10
//! namespaces); a filter word (`F5`) runs one fault.
//!
//! Run as root on a machine where tests/e2e_node.rs runs: `cargo bench --bench fault_matrix --
//! --repeat=5`. Where the node cannot start it says why and passes.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or bench: a panic is the report

#[path = "../tests/e2e_faults/audit.rs"]
mod audit;
#[allow(dead_code)]
#[path = "../tests/e2e_node/chart_install.rs"]
mod chart_install;
#[allow(dead_code)]
#[path = "../e2e/cluster.rs"]
mod cluster;
#[allow(dead_code)]
#[path = "../e2e/configmap_catalog.rs"]
mod configmap_catalog;
#[path = "../tests/e2e_faults/faults.rs"]
mod faults;
#[allow(dead_code)]
#[path = "../e2e/fixtures.rs"]
mod fixtures;
#[path = "../tests/injected_faults/mod.rs"]
mod injected_faults;
#[allow(dead_code)]
#[path = "../e2e/journeys/mod.rs"]
mod journeys;
#[path = "../tests/e2e_faults/matrix.rs"]
mod matrix;
#[allow(dead_code)]
#[path = "../tests/real_control_plane/mod.rs"]
mod real_control_plane;
#[path = "../tests/integration/registry_support/mod.rs"]
mod registry_support;
#[allow(dead_code)]
#[path = "../e2e/suite.rs"]
mod suite;
#[path = "../tests/e2e_faults/workload.rs"]
mod workload;

/// What tests/integration/registry_support uses of the integration tests' `common` module.
mod common {
    pub use crate::real_control_plane::shared_data::operators_dir;
    pub use crate::real_control_plane::skip::skip;
}

use std::process::ExitCode;

use faults::Fault;
use real_control_plane::suite_runner::Suite;

const SUITE: Suite = Suite {
    label: "fault-matrix",
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

const ISSUE_PLAN: matrix::Plan = matrix::Plan {
    repeat: 3,
    copies: 50,
    baseline: true,
    faults: &Fault::ALL,
};

fn main() -> ExitCode {
    let Some(filter) = SUITE.selected() else {
        return ExitCode::SUCCESS;
    };
    let plan = matrix::Plan::from_args(ISSUE_PLAN);
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

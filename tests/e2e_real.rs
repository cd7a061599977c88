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
#[path = "e2e_real/crd_annotations.rs"]
mod crd_annotations;
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
mod common {
    pub use crate::real_control_plane::shared_data::operators_dir;
    pub use crate::real_control_plane::skip::skip;
}
#[allow(dead_code)]
mod real_control_plane;
#[allow(dead_code)]
#[path = "../e2e/suite.rs"]
mod suite;

use std::process::ExitCode;

use real_control_plane::ControlPlane;
use real_control_plane::suite_runner::Suite;

/// The checks, in the order they run (`--list` prints them).
const CHECKS: &[&str] = &[
    "plane::workloads_run",
    "plane::test_operator",
    "plane::crd_update_keeps_later_annotations",
    "chart::startup_race",
    "chart::journeys",
    "chart::leader_failover",
    "chart::registry_pod_admitted",
    "chart::missing_rbac_rule",
    "chart::bundle_images",
    "chart::package_manifests",
];

const SUITE: Suite = Suite {
    label: "e2e-real",
    checks: CHECKS,
};

fn main() -> ExitCode {
    // A bare word filters, as with the default test runner: `cargo test foo` runs nothing here
    // unless "foo" is part of a check's name; then all of them run (each builds on the one
    // before).
    if SUITE.selected().is_none() {
        return ExitCode::SUCCESS;
    }
    let bin = match SUITE.binaries() {
        Ok(bin) => bin,
        Err(exit) => return exit,
    };
    SUITE.run(async {
        match ControlPlane::start(&bin).await {
            Ok(plane) => checks::run(plane).await,
            Err(err) => {
                println!("e2e-real: FAILED starting the control plane: {err:#}");
                1
            }
        }
    })
}

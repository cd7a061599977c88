//! olm-rs as users run it, on a node that really runs pods (tests/real_control_plane/
//! real_node.rs): containerd, kubelet, kube-proxy, kube-scheduler and CoreDNS beside the real
//! control plane, images assembled here and pushed to a local registry, the chart installed with
//! `helm install`, and the user journeys with real operator pods, webhooks and APIServices.
//!
//! Where the node cannot start (not root, a package or program missing) it prints why and
//! passes. `harness = false`: one cluster serves every check, in a fixed order.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is the report

#[path = "e2e_node/chart_install.rs"]
mod chart_install;
#[path = "e2e_node/checks.rs"]
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
#[path = "e2e_node/install_checks.rs"]
mod install_checks;
#[allow(dead_code)]
#[path = "../e2e/journeys/mod.rs"]
mod journeys;
#[path = "e2e_node/kind_recipe.rs"]
mod kind_recipe;
#[path = "e2e_node/kubectl_operator.rs"]
mod kubectl_operator;
#[path = "e2e_node/operator_checks.rs"]
mod operator_checks;
#[path = "integration/registry_support/mod.rs"]
mod registry_support;
#[path = "e2e_node/rollback_checks.rs"]
mod rollback_checks;
#[path = "e2e_node/signature_checks.rs"]
mod signature_checks;
// Its own `#![allow(dead_code)]`: each program uses a subset.
#[path = "integration_needs/signature_support/mod.rs"]
mod signature_support;
#[allow(dead_code)]
#[path = "../e2e/suite.rs"]
mod suite;
#[path = "e2e_node/upgrade_checks.rs"]
mod upgrade_checks;

/// What tests/integration/registry_support uses of the integration tests' `common` module.
mod common {
    pub use crate::real_control_plane::shared_data::operators_dir;
    pub use crate::real_control_plane::skip::skip;
}
#[allow(dead_code)]
mod real_control_plane;

use std::process::ExitCode;

use real_control_plane::suite_runner::Suite;

const SUITE: Suite = Suite {
    label: "e2e-node",
    checks: checks::CHECKS,
};

fn main() -> ExitCode {
    let Some(filter) = SUITE.selected() else {
        return ExitCode::SUCCESS;
    };
    let bin = match SUITE.binaries() {
        Ok(bin) => bin,
        Err(exit) => return exit,
    };
    if let Err(exit) = SUITE.node_available(&bin) {
        return exit;
    }
    SUITE.run(SUITE.on_real_node(&bin, async |plane, node| {
        checks::run(plane, node, filter.as_deref()).await
    }))
}

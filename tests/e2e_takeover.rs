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
#[path = "e2e_takeover/resubscribe.rs"]
mod resubscribe;
#[path = "e2e_takeover/snapshot.rs"]
mod snapshot;
#[path = "e2e_takeover/takeover.rs"]
mod takeover;
#[path = "e2e_takeover/waits.rs"]
mod waits;

/// What tests/integration/registry_support uses of the integration tests' `common` module.
mod common {
    pub use crate::real_control_plane::shared_data::operators_dir;
    pub use crate::real_control_plane::skip::skip;
}
#[allow(dead_code)]
mod real_control_plane;

use std::process::ExitCode;

use real_control_plane::binaries::{self, Unavailable};
use real_control_plane::suite_runner::Suite;

const SUITE: Suite = Suite {
    label: "e2e-takeover",
    checks: takeover::CHECKS,
};

fn main() -> ExitCode {
    let Some(filter) = SUITE.selected() else {
        return ExitCode::SUCCESS;
    };
    let bin = match SUITE.binaries() {
        Ok(bin) => bin,
        Err(exit) => return exit,
    };
    let olm = match binaries::olm() {
        Ok(Ok(olm)) => olm,
        Ok(Err(Unavailable(why))) => return SUITE.skip_all(&why),
        Err(err) => {
            println!("e2e-takeover: FAILED unpacking real OLM: {err:#}");
            return ExitCode::FAILURE;
        }
    };
    if let Err(exit) = SUITE.node_available(&bin) {
        return exit;
    }
    SUITE.run(SUITE.on_real_node(&bin, async |plane, node| {
        takeover::run(plane, node, &olm, filter.as_deref()).await
    }))
}

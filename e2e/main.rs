//! olm-rs end-to-end tests: the user journeys against a real cluster (`KUBECONFIG`).
//!
//! Run with `cargo test --test e2e` (see e2e/README.md). Without `KUBECONFIG` the journeys are
//! skipped with a message and only the static checks run — that is what CI does. A configured
//! cluster that cannot be used is a failure, not a skip.
//!
//! This target has its own runner (`harness = false`) so that the skip message is always
//! printed and the journeys run one after the other in a fixed order.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or bench: a panic is the report

mod cluster;
mod configmap_catalog;
mod fixtures;
mod journeys;
mod static_checks;
mod suite;

use std::process::ExitCode;

use cluster::{Cluster, Settings};
use suite::JOURNEYS;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // Test-runner conventions: `--list` names the tests, a bare word filters them.
    if args.iter().any(|a| a == "--list") {
        for (name, _) in static_checks::ALL {
            println!("static::{name}: test");
        }
        for (name, _) in JOURNEYS {
            println!("journey::{name}: test");
        }
        return ExitCode::SUCCESS;
    }
    let filter = args.iter().find(|a| !a.starts_with('-')).cloned();
    let selected = |name: &str| filter.as_deref().is_none_or(|f| name.contains(f));

    let mut failures = 0;
    for (name, check) in static_checks::ALL {
        let full = format!("static::{name}");
        if !selected(&full) {
            continue;
        }
        match check() {
            Ok(()) => println!("e2e: {full} ... ok"),
            Err(err) => {
                failures += 1;
                println!("e2e: {full} ... FAILED\n  {err:#}");
            }
        }
    }

    if let Some(reason) = cluster::skip_reason() {
        println!("e2e: journeys skipped — {reason}");
    } else {
        failures += run_journeys(|name| selected(&format!("journey::{name}")));
    }
    if failures == 0 {
        ExitCode::SUCCESS
    } else {
        println!("e2e: {failures} failed");
        ExitCode::FAILURE
    }
}

/// Runs the selected journeys; returns how many failed.
fn run_journeys(selected: impl Fn(&str) -> bool) -> usize {
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(err) => {
            println!("e2e: cannot start the async runtime: {err}");
            return 1;
        }
    };
    runtime.block_on(async {
        let cluster = match Settings::from_env() {
            Ok(settings) => Cluster::connect(settings).await,
            Err(err) => Err(err),
        };
        match cluster {
            Ok(cluster) => suite::run_journeys(&cluster, selected).await.failed.len(),
            Err(err) => {
                println!("e2e: KUBECONFIG is set but the cluster cannot be used: {err:#}");
                1
            }
        }
    })
}

//! olm-rs end-to-end tests: the user journeys against the cluster named by
//! `OLM_RS_E2E_KUBECONFIG` (never `KUBECONFIG`, which usually names a cluster of the user's own).
//!
//! Run with `cargo test --test e2e` (see e2e/README.md). Without `OLM_RS_E2E_KUBECONFIG` the
//! journeys are reported skipped, one line each, and only the static checks run — that is what
//! CI does: the same journeys run there on a real control plane (`e2e_real`) and on a real node
//! (`e2e_node`), so this opt-in skip does not fail CI. A named cluster that cannot be used is a
//! failure, not a skip.
//!
//! This target has its own runner (`harness = false`) so that the skip lines are always printed
//! and the journeys run one after the other in a fixed order; it closes with
//! `e2e: N passed, N failed, N skipped`.

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

    let mut tally = Tally::default();
    for (name, check) in static_checks::ALL {
        let full = format!("static::{name}");
        if !selected(&full) {
            continue;
        }
        match check() {
            Ok(()) => {
                tally.passed += 1;
                println!("e2e: {full} ... ok");
            }
            Err(err) => {
                tally.failed += 1;
                println!("e2e: {full} ... FAILED\n  {err:#}");
            }
        }
    }

    let journeys: Vec<&str> = JOURNEYS
        .iter()
        .map(|(name, _)| *name)
        .filter(|name| selected(&format!("journey::{name}")))
        .collect();
    match cluster::kubeconfig_path() {
        Err(reason) => {
            for name in &journeys {
                println!("e2e: journey::{name} ... skipped: {reason}");
            }
            tally.skipped += journeys.len();
        }
        Ok(path) => run_journeys(&path, |name| journeys.contains(&name), &mut tally),
    }
    // The plain closing line (the counts a reader of the output takes as the result).
    println!(
        "e2e: {} passed, {} failed, {} skipped",
        tally.passed, tally.failed, tally.skipped
    );
    if tally.failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// What ran: each static check and journey counts once.
#[derive(Default)]
struct Tally {
    passed: usize,
    failed: usize,
    skipped: usize,
}

/// Runs the selected journeys against the cluster of the kubeconfig `path`.
fn run_journeys(path: &std::path::Path, selected: impl Fn(&str) -> bool, tally: &mut Tally) {
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(err) => {
            println!("e2e: cannot start the async runtime: {err}");
            tally.failed += 1;
            return;
        }
    };
    runtime.block_on(async {
        let cluster = match Settings::from_env() {
            Ok(settings) => Cluster::connect(path, settings).await,
            Err(err) => Err(err),
        };
        match cluster {
            Ok(cluster) => {
                let summary = suite::run_journeys(&cluster, selected).await;
                tally.passed += summary.passed.len();
                tally.failed += summary.failed.len();
                tally.skipped += summary.skipped.len();
            }
            Err(err) => {
                println!(
                    "e2e: {}={} names a cluster that cannot be used: {err:#}",
                    cluster::KUBECONFIG_VAR,
                    path.display()
                );
                tally.failed += 1;
            }
        }
    })
}

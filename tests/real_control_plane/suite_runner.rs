//! What the real-cluster test programs (`e2e_real`, `e2e_node`, `e2e_takeover`; `harness =
//! false`) share: their command line (`--list`, a filter word), the report of their checks, the
//! runtime they run in, and the start of a control plane with a real node.
//!
//! Each program ends with the plain line `<label>: N passed, N failed, N skipped`. A check that
//! cannot run here is reported `skipped` with the reason on its own line; with `CI` set a skip
//! is a failure instead, since `.ci/run` installs everything the checks need.

use std::future::Future;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use super::ControlPlane;
use super::binaries::{self, Binaries, Unavailable};
use super::real_node::{self, RealNode};
use super::skip::in_ci;

/// One test program: the prefix of its lines (`e2e-node`) and its checks, in the order they run.
#[derive(Debug, Clone, Copy)]
pub struct Suite {
    pub label: &'static str,
    pub checks: &'static [&'static str],
}

impl Suite {
    /// What the command line asks: `None` when there is nothing to run (`--list` printed the
    /// checks, or the filter word names none of them, as the default test runner does);
    /// otherwise the filter word, if any.
    pub fn selected(&self) -> Option<Option<String>> {
        let args: Vec<String> = std::env::args().skip(1).collect();
        if args.iter().any(|a| a == "--list") {
            for name in self.checks {
                println!("{name}: test");
            }
            return None;
        }
        let filter = args.iter().find(|a| !a.starts_with('-')).cloned();
        if filter
            .as_deref()
            .is_some_and(|f| !self.checks.iter().any(|name| name.contains(f)))
        {
            return None;
        }
        Some(filter)
    }

    /// The checks the command line selects (all without a filter word).
    fn selected_checks(&self) -> Vec<&'static str> {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let filter = args.iter().find(|a| !a.starts_with('-'));
        self.checks
            .iter()
            .copied()
            .filter(|name| filter.is_none_or(|f| name.contains(f.as_str())))
            .collect()
    }

    /// Nothing can run here: each selected check is reported skipped with `why`, then the
    /// closing line. The exit is success outside CI and failure in CI (see the module's doc).
    pub fn skip_all(&self, why: &str) -> ExitCode {
        let label = self.label;
        let checks = self.selected_checks();
        if in_ci() {
            println!("{label}: FAILED — cannot run in CI, where nothing may be skipped: {why}");
            println!("{label}: 0 passed, {} failed, 0 skipped", checks.len());
            return ExitCode::FAILURE;
        }
        for name in &checks {
            println!("{label}: {name} ... skipped: {why}");
        }
        println!("{label}: 0 passed, 0 failed, {} skipped", checks.len());
        ExitCode::SUCCESS
    }

    /// The cluster's programs; `Err` is the exit when they are not here (every check skipped,
    /// see [`Suite::skip_all`]) or could not be prepared (failure).
    pub fn binaries(&self) -> Result<Binaries, ExitCode> {
        match binaries::locate() {
            Ok(Ok(bin)) => Ok(bin),
            Ok(Err(Unavailable(why))) => Err(self.skip_all(&why)),
            Err(err) => {
                println!(
                    "{}: FAILED preparing the cluster's programs: {err:#}",
                    self.label
                );
                Err(ExitCode::FAILURE)
            }
        }
    }

    /// `Err` with the exit of [`Suite::skip_all`] when no real node can run here.
    pub fn node_available(&self, bin: &Binaries) -> Result<(), ExitCode> {
        match real_node::unavailable(bin) {
            Some(why) => Err(self.skip_all(&format!("a real node cannot run here: {why}"))),
            None => Ok(()),
        }
    }

    /// Runs `checks` (returning how many failed) on a two-thread runtime and prints the
    /// program's last lines: its time, then the counts.
    pub fn run(&self, checks: impl Future<Output = usize>) -> ExitCode {
        let runtime = match tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
        {
            Ok(runtime) => runtime,
            Err(err) => {
                println!("{}: cannot start the async runtime: {err}", self.label);
                return ExitCode::FAILURE;
            }
        };
        let started = Instant::now();
        let failures = runtime.block_on(checks);
        println!(
            "{}: {} in {:.1}s",
            self.label,
            if failures == 0 { "ok" } else { "FAILED" },
            started.elapsed().as_secs_f64()
        );
        println!(
            "{}: {} passed, {failures} failed, {} skipped",
            self.label,
            PASSED.load(Ordering::Relaxed),
            SKIPPED.load(Ordering::Relaxed)
        );
        if failures == 0 {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        }
    }

    /// A control plane on the node's network and a real node beside it, handed to `checks`;
    /// both are stopped after it (the node first). A failure to start counts as one.
    pub async fn on_real_node(
        &self,
        bin: &Binaries,
        checks: impl AsyncFnOnce(&ControlPlane, &RealNode) -> usize,
    ) -> usize {
        let label = self.label;
        let bridge = match real_node::Bridge::create() {
            Ok(bridge) => bridge,
            Err(err) => {
                println!("{label}: FAILED creating the node's bridge: {err:#}");
                return 1;
            }
        };
        let plane = match ControlPlane::start_on(bin, real_node::NETWORK).await {
            Ok(plane) => plane,
            Err(err) => {
                println!("{label}: FAILED starting the control plane: {err:#}");
                return 1;
            }
        };
        let node = match RealNode::start(&plane, bin, bridge).await {
            Ok(node) => node,
            Err(err) => {
                println!("{label}: FAILED starting the node: {err:#}");
                return 1;
            }
        };
        let failures = checks(&plane, &node).await;
        drop(node);
        drop(plane);
        failures
    }

    /// A new report of this program's checks.
    pub fn report(&self) -> Report {
        Report {
            label: self.label,
            failures: 0,
        }
    }
}

/// Checks passed and skipped in this process, for the closing line (one program per process;
/// failures are what the checks return).
static PASSED: AtomicUsize = AtomicUsize::new(0);
static SKIPPED: AtomicUsize = AtomicUsize::new(0);

/// The outcome of each check, printed as it ends, and how many failed.
#[derive(Debug)]
pub struct Report {
    label: &'static str,
    pub failures: usize,
}

impl Report {
    /// Prints `name`'s outcome and time since `started`.
    pub fn check(&mut self, name: &str, started: Instant, result: anyhow::Result<()>) {
        let secs = started.elapsed().as_secs_f64();
        match result {
            Ok(()) => {
                PASSED.fetch_add(1, Ordering::Relaxed);
                println!("{}: {name} ... ok ({secs:.1}s)", self.label);
            }
            Err(err) => {
                self.failures += 1;
                println!("{}: {name} ... FAILED ({secs:.1}s)\n  {err:#}", self.label);
            }
        }
    }

    /// `name` cannot run here because of `why` (which says what to install): a visible skip,
    /// or in CI a failure.
    pub fn skip(&mut self, name: &str, why: &str) {
        if in_ci() {
            self.failures += 1;
            println!("{}: {name} ... FAILED (skipped in CI): {why}", self.label);
        } else {
            SKIPPED.fetch_add(1, Ordering::Relaxed);
            println!("{}: {name} ... skipped: {why}", self.label);
        }
    }
}

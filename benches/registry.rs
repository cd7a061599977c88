//! Registry serving on the community catalog (`catalogs/v4.20`, 37 packages, 15 MB of FBC).
//!
//! - `serve_startup`: `olm-rs catalog serve` as a child process, from spawn until the health
//!   check answers SERVING (load + validate + index + listen). `opm serve` needs about 2 s.
//! - peak memory: after a full ListBundles, the child's `VmHWM` (peak RSS) from
//!   `/proc/<pid>/status`, printed once. `opm serve` needs about 115 MB.
//! - `load_for_serving` and `list_bundles`: the same work in-process, without process start-up.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or bench: a panic is the report

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use olm_rs::catalog::validated;
use olm_rs::registry::client::{ClientTimeouts, RegistryClient};
use olm_rs::registry::queries;

// The one place that finds the shared reference data (`$OLM_RS_SHARED`, else `../shared`).
#[allow(dead_code)]
#[path = "../tests/real_control_plane/shared_data.rs"]
mod shared_data;
#[allow(dead_code)]
#[path = "../tests/real_control_plane/skip.rs"]
mod skip;

use shared_data::shared_dir;

fn catalog() -> PathBuf {
    shared_dir().join("data/catalogs/community-operators-prod/catalogs/v4.20")
}

fn free_address() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

struct Served {
    child: Child,
    address: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the server and returns once it answers SERVING, with the time that took.
async fn start_server() -> (Served, Duration) {
    let address = free_address();
    let started = Instant::now();
    let child = Command::new(env!("CARGO_BIN_EXE_olm-rs"))
        .args(["catalog", "serve"])
        .arg(catalog())
        .args(["--addr", &address, "--log-level", "warn"])
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn olm-rs catalog serve");
    let served = Served { child, address };
    let timeouts = ClientTimeouts {
        connect: Duration::from_millis(200),
        ..ClientTimeouts::default()
    };
    loop {
        if let Ok(client) = RegistryClient::connect(&served.address, timeouts).await
            && client.check_health().await.is_ok()
        {
            return (served, started.elapsed());
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "server did not come up"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

fn serve_process(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().unwrap();

    // Peak memory, measured once after a full ListBundles.
    runtime.block_on(async {
        let (served, took) = start_server().await;
        let client = RegistryClient::connect(&served.address, ClientTimeouts::default())
            .await
            .unwrap();
        let bundles = client.list_bundles().await.unwrap();
        let rss = peak_rss_kib(served.child.id());
        eprintln!(
            "catalog serve v4.20: SERVING after {:.0} ms; {} ListBundles messages; peak RSS (VmHWM) {} MiB",
            took.as_secs_f64() * 1000.0,
            bundles.len(),
            rss.map_or("unknown".to_owned(), |k| format!("{:.1}", k as f64 / 1024.0)),
        );
    });

    let mut group = c.benchmark_group("serve_process");
    group.sample_size(10);
    group.bench_function("startup_until_serving_v4.20", |b| {
        b.iter_custom(|iterations| {
            runtime.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iterations {
                    let (served, took) = start_server().await;
                    total += took;
                    drop(served);
                }
                total
            })
        })
    });
    group.finish();
}

fn in_process(c: &mut Criterion) {
    let path = catalog();
    let mut group = c.benchmark_group("in_process");
    group.sample_size(10);
    group.bench_function("load_for_serving_v4.20", |b| {
        b.iter(|| validated::load_for_serving(&path).unwrap())
    });
    let index = Arc::new(validated::load_for_serving(&path).unwrap().index);
    group.bench_function("list_bundles_render_v4.20", |b| {
        b.iter(|| queries::list_bundles(&index).count())
    });
    group.finish();
}

criterion_group!(benches, serve_process, in_process);
criterion_main!(benches);

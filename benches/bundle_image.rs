//! Bundle images from a real registry on loopback (docker-registry, started here; the bench
//! says so and does nothing when it is absent).
//!
//! - `pull_and_render`: a typical bundle (one CSV, a few CRDs) pulled by digest with an empty
//!   cache, unpacked, checked and rendered. Target ≤ 50 ms.
//! - `memory_cache_hit`: the same pull once cached. Target ≤ 1 ms, no network.
//! - `disk_cache_hit`: a new puller (a restarted controller) reading the disk cache.
//! - peak memory: `VmHWM` (peak RSS) of this process before and after pulling 50 different
//!   bundles, printed once.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or bench: a panic is the report

#[path = "../tests/integration/common/mod.rs"]
mod common;
#[path = "../tests/integration/registry_support/mod.rs"]
mod registry_support;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use olm_rs::oci::{BundlePuller, Credentials, PullerConfig};
use registry_support::{Kind, TestRegistry};

fn vm_hwm_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn bench(c: &mut Criterion) {
    let reg = match TestRegistry::try_start(Kind::Plain) {
        Ok(reg) => reg,
        Err(why) => {
            eprintln!("bundle_image bench skipped: {why}");
            return;
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let work = tempfile::tempdir().unwrap();
    let (conf, _) = reg.write_client_files(work.path());
    let none = Credentials::anonymous();
    let config = |cache: Option<std::path::PathBuf>| {
        PullerConfig::from_files(Some(&conf), None, cache).unwrap()
    };

    // Peak memory while 50 different bundles are pulled (first, before criterion allocates).
    let dirs = registry_support::real_bundle_dirs(50);
    let images: Vec<String> = runtime.block_on(async {
        let mut out = Vec::new();
        for (package, dir) in &dirs {
            out.push(
                reg.push_bundle_dir(&format!("rss/{package}"), "v1", dir)
                    .await
                    .0,
            );
        }
        out
    });
    let before = vm_hwm_kib();
    let puller = BundlePuller::new(config(Some(work.path().join("rss-cache")))).unwrap();
    runtime.block_on(async {
        for image in &images {
            puller.pull(image, &none).await.unwrap();
        }
    });
    println!(
        "peak RSS (VmHWM): {} KiB before, {} KiB after pulling {} different bundles",
        before,
        vm_hwm_kib(),
        images.len()
    );
    drop(puller);

    let typical = &dirs[0].1;
    let (image, _) = runtime.block_on(reg.push_bundle_dir("bench/typical", "v1", typical));
    println!("typical bundle: {} ({image})", typical.display());

    c.bench_function("pull_and_render", |b| {
        b.iter_batched(
            || BundlePuller::new(config(None)).unwrap(),
            |p| runtime.block_on(p.pull(&image, &none)).unwrap(),
            BatchSize::PerIteration,
        )
    });

    let warm = BundlePuller::new(config(Some(work.path().join("cache")))).unwrap();
    runtime.block_on(warm.pull(&image, &none)).unwrap();
    c.bench_function("memory_cache_hit", |b| {
        b.iter(|| runtime.block_on(warm.pull(&image, &none)).unwrap())
    });

    c.bench_function("disk_cache_hit", |b| {
        b.iter_batched(
            || BundlePuller::new(config(Some(work.path().join("cache")))).unwrap(),
            |p| runtime.block_on(p.pull(&image, &none)).unwrap(),
            BatchSize::PerIteration,
        )
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);

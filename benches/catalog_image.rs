//! Catalog images served in-process (docs/catalog-images.md), measured with the real community
//! catalog `catalogs/v4.20` pushed as a catalog image to a real registry on loopback
//! (docker-registry, started here; the bench says so and does nothing when it is absent), and
//! the CatalogSource controller running against the embedded API server.
//!
//! Printed once (one-shot figures, not loops):
//! - time from the CatalogSource created to `READY` (digest, pull, unpack, validate, index);
//! - resident memory (`VmRSS`) of this process idle (API server + controller, no catalog) and
//!   serving the catalog, after the pull's buffers are returned (`malloc_trim`);
//! - time to swap in a new digest pushed under the same tag (from the poll to served);
//! - time to `READY` for a second controller on the same disk cache (a restart: no pull).
//!
//! Criterion loops: resolution of one Subscription against the served index, and a digest poll
//! (one manifest HEAD).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or bench: a panic is the report

#[allow(dead_code)] // the harness's in-process gRPC registries are not used here
#[path = "../tests/integration/catalog_source_common/mod.rs"]
mod catalog_source_common;
#[path = "../tests/integration/common/mod.rs"]
mod common;
#[path = "../tests/integration/registry_support/mod.rs"]
mod registry_support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use catalog_source_common::{Setup, catalog_source, create, start, state_of, status_where};
use criterion::{Criterion, criterion_group, criterion_main};
use jiff::{SignedDuration, Timestamp};
use kube::api::{Api, Patch, PatchParams};
use olm_rs::api::CatalogRef;
use olm_rs::api::{CatalogSource, Subscription, SubscriptionSpec};
use olm_rs::catalog_source::in_process::CONTENT_CONDITION;
use olm_rs::oci::{BundlePuller, Credentials, PullerConfig};
use olm_rs::resolve::{
    CatalogContent, CatalogInput, InstalledCsv, NamespaceInput, OperatorGroups, decide,
};
use registry_support::{Kind, TestRegistry};

fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn trimmed_rss_kib() -> u64 {
    // Returns freed heap to the system, so RSS shows what is held, not what was once used.
    // SAFETY: malloc_trim only walks glibc's own heap.
    unsafe {
        libc::malloc_trim(0);
    }
    status_kib("VmRSS:")
}

fn serving(s: &olm_rs::api::CatalogSourceStatus, digest: &str) -> bool {
    state_of(s).as_deref() == Some("READY")
        && s.conditions.iter().flatten().any(|c| {
            c.type_ == CONTENT_CONDITION && c.status == "True" && c.message.contains(digest)
        })
}

fn sub(package: &str, installed: Option<&str>) -> Subscription {
    let mut s = Subscription::new(
        package,
        SubscriptionSpec {
            source: "community".into(),
            source_namespace: "olm".into(),
            name: package.into(),
            channel: None,
            starting_csv: None,
            install_plan_approval: None,
            config: None,
        },
    );
    s.metadata.namespace = Some("bench".into());
    s.metadata.uid = Some(format!("uid-{package}"));
    if let Some(csv) = installed {
        let mut status = olm_rs::api::SubscriptionStatus::new(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Timestamp::UNIX_EPOCH),
        );
        status.installed_csv = Some(csv.into());
        status.current_csv = Some(csv.into());
        s.status = Some(status);
    }
    s
}

fn bench(c: &mut Criterion) {
    let reg = match TestRegistry::try_start(Kind::Plain) {
        Ok(reg) => reg,
        Err(why) => {
            eprintln!("catalog_image bench skipped: {why}");
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
    let cache = work.path().join("catalog-cache");
    let files = registry_support::files_of(&common::fbc_v420());
    let total: usize = files.iter().map(|(_, d)| d.len()).sum();
    let (image, first) =
        runtime.block_on(reg.push_catalog("bench/community", "v4.20", &files, true));
    println!(
        "catalog image {image}: {} files, {:.1} MiB of FBC, digest {first}",
        files.len(),
        total as f64 / (1024.0 * 1024.0)
    );
    // The next digest: the same catalog less one package.
    let fewer: Vec<(String, Vec<u8>)> = files
        .iter()
        .filter(|(p, _)| !p.starts_with("libredb-studio-operator/"))
        .cloned()
        .collect();

    let key = CatalogRef::new(catalog_source_common::GLOBAL_NS, "community");
    let (index, idle, ready_at) = runtime.block_on(async {
        let h = start(Setup {
            manual_clock: true,
            registries_conf: Some(conf.clone()),
            catalog_cache_dir: Some(cache.clone()),
            ..Setup::default()
        })
        .await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        let idle = trimmed_rss_kib();
        let started = Instant::now();
        create(
            &h,
            &catalog_source(
                catalog_source_common::GLOBAL_NS,
                "community",
                serde_json::json!({"sourceType": "grpc", "image": image,
                    "updateStrategy": {"registryPoll": {"interval": "10m"}}}),
            ),
        )
        .await;
        status_where(&h, "olm", "community", "READY", |s| serving(s, &first)).await;
        let ready = started.elapsed();
        tokio::time::sleep(Duration::from_secs(1)).await;
        let serving_rss = trimmed_rss_kib();
        println!(
            "created → READY: {:.2} s (digest, pull, unpack, validate, index)",
            ready.as_secs_f64()
        );
        println!(
            "VmRSS: idle {} KiB, serving v4.20 {} KiB: +{:.1} MiB (peak VmHWM {} KiB)",
            idle,
            serving_rss,
            (serving_rss as f64 - idle as f64) / 1024.0,
            status_kib("VmHWM:")
        );

        // Swap: a new digest under the same tag, found by the next poll.
        let (_, second) = reg
            .push_catalog("bench/community", "v4.20", &fewer, true)
            .await;
        let clock = h.clock.clone().unwrap();
        clock.advance(SignedDuration::from_mins(11));
        let started = Instant::now();
        let api: Api<CatalogSource> = Api::namespaced(h.client.clone(), "olm");
        api.patch(
            "community",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"labels": {"poll": "now"}}})),
        )
        .await
        .unwrap();
        status_where(&h, "olm", "community", "swapped", |s| serving(s, &second)).await;
        println!(
            "new digest swapped in: {:.2} s from the poll (HEAD, pull, unpack, validate, index)",
            started.elapsed().as_secs_f64()
        );
        let index = h.ctx.catalogs.get(&key).unwrap().index.unwrap();
        (index, idle, second)
    });

    // A restart: a second controller on the same disk cache, pinned to the digest (no pull).
    runtime.block_on(async {
        let h = start(Setup {
            registries_conf: Some(conf.clone()),
            catalog_cache_dir: Some(cache.clone()),
            ..Setup::default()
        })
        .await;
        let started = Instant::now();
        let pinned = format!("{}/bench/community@{ready_at}", reg.host());
        create(
            &h,
            &catalog_source(
                "olm",
                "community",
                serde_json::json!({"sourceType": "grpc", "image": pinned}),
            ),
        )
        .await;
        status_where(&h, "olm", "community", "READY", |s| serving(s, &ready_at)).await;
        println!(
            "restart on the disk cache → READY: {:.2} s (no pull; idle RSS was {idle} KiB)",
            started.elapsed().as_secs_f64()
        );
    });

    let cats = vec![CatalogInput {
        key: CatalogRef::new("olm", "community"),
        priority: 0,
        uid: Some("uid-community".into()),
        content: CatalogContent::Ready(Arc::clone(&index)),
        healthy: true,
    }];
    let groups = OperatorGroups {
        names: vec!["og".into()],
        exclude_global_catalogs: false,
    };
    let installed = vec![InstalledCsv {
        name: "kube-green.v0.5.0".into(),
        version: olm_rs::catalog::semver_range::parse_tolerant("0.5.0").ok(),
        package: Some("kube-green".into()),
        provided: vec![],
        phase: "Succeeded".into(),
        properties: Vec::new(),
    }];
    let upgrade = [sub("kube-green", Some("kube-green.v0.5.0"))];
    c.bench_function(
        "resolve one subscription against the served v4.20 image",
        |b| {
            b.iter(|| {
                decide(&NamespaceInput {
                    namespace: "bench",
                    subscriptions: &upgrade,
                    installed: &installed,
                    catalogs: &cats,
                    operator_groups: &groups,
                    global_catalog_namespace: "olm",
                })
            })
        },
    );

    let puller =
        BundlePuller::new(PullerConfig::from_files(Some(&conf), None, None).unwrap()).unwrap();
    let none = Credentials::anonymous();
    let tag = format!("{}/bench/community:v4.20", reg.host());
    c.bench_function("digest poll (manifest HEAD)", |b| {
        b.iter(|| runtime.block_on(puller.digest(&tag, &none)).unwrap())
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);

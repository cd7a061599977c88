//! The PackageManifest API on the community catalog (`catalogs/v4.20`, 37 packages): what a
//! `kubectl get packagemanifests` costs once the manifests are built (OLM's package server:
//! 3.7 ms per list after its cache, 3.8 s before it had one).
//!
//! - `build`: every PackageManifest of the catalog built from its index (once per catalog
//!   content; not per request).
//! - `list_all_json`: an all-namespaces list, serialised as the API answers it.
//! - `list_namespace_table`: a namespaced list as `kubectl get` asks for it (Table).
//! - `get_json`: one package.
//! - memory: resident memory before and after building the store, printed once.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or bench: a panic is the report

use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use olm_rs::catalog::validated;
use olm_rs::package_manifest::table::{IncludeObject, table};
use olm_rs::package_manifest::{CatalogMeta, LabelSelector, ManifestStore, Scope};

// The one place that finds the shared reference data (`$OLM_RS_SHARED`, else `../shared`).
#[allow(dead_code)]
#[path = "../tests/real_control_plane/shared_data.rs"]
mod shared_data;
#[allow(dead_code)]
#[path = "../tests/real_control_plane/skip.rs"]
mod skip;

use shared_data::shared_dir;

fn vm_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn meta() -> CatalogMeta {
    CatalogMeta {
        namespace: "olm".into(),
        name: "community".into(),
        labels: Default::default(),
        creation_timestamp: Some("2026-01-01T00:00:00Z".into()),
        display_name: "Community Operators".into(),
        publisher: "OperatorHub.io".into(),
    }
}

fn bench(c: &mut Criterion) {
    let path = shared_dir().join("data/catalogs/community-operators-prod/catalogs/v4.20");
    let index = Arc::new(validated::load_for_serving(&path).unwrap().index);

    let before = vm_rss_kib();
    let store = ManifestStore::new("olm");
    store.sync(vec![(meta(), Arc::clone(&index))]);
    let after = vm_rss_kib();
    let json =
        serde_json::to_vec(&store.list(Scope::AllNamespaces, &LabelSelector::default(), None))
            .unwrap();
    println!(
        "package_manifests: {} PackageManifests; store +{} KiB resident; an all-namespaces list is {} KiB of JSON",
        store.len(),
        after.saturating_sub(before),
        json.len() / 1024
    );

    c.bench_function("package_manifests/build", |b| {
        b.iter(|| olm_rs::package_manifest::build_catalog(&meta(), &index))
    });
    let everything = LabelSelector::default();
    c.bench_function("package_manifests/list_all_json", |b| {
        b.iter(|| serde_json::to_vec(&store.list(Scope::AllNamespaces, &everything, None)).unwrap())
    });
    let now = jiff::Timestamp::now();
    c.bench_function("package_manifests/list_namespace_table", |b| {
        b.iter(|| {
            let items = store.list(Scope::Namespace("team-a"), &everything, None);
            serde_json::to_vec(&table(&items, IncludeObject::Metadata, now)).unwrap()
        })
    });
    let name = store.list(Scope::AllNamespaces, &everything, None)[0]
        .metadata
        .name
        .clone();
    c.bench_function("package_manifests/get_json", |b| {
        b.iter(|| serde_json::to_vec(&store.get("team-a", &name).unwrap().0).unwrap())
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = bench
}
criterion_main!(benches);

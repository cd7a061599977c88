//! Catalog engine benchmarks on the real community-operators data:
//! load + validate catalogs/v4.20, render every bundle directory, and compute the upgrade path
//! from every entry of every channel.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or bench: a panic is the report

use std::path::PathBuf;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use olm_rs::catalog::bundle_dir::{self, render};
use olm_rs::catalog::fbc::{CsvMetadataHold, LoadOptions};
use olm_rs::catalog::{CatalogIndex, fbc, validate};

// The one place that finds the shared reference data (`$OLM_RS_SHARED`, else `../shared`).
#[allow(dead_code)]
#[path = "../tests/real_control_plane/shared_data.rs"]
mod shared_data;
#[allow(dead_code)]
#[path = "../tests/real_control_plane/skip.rs"]
mod skip;

use shared_data::shared_dir;

fn catalogs() -> PathBuf {
    shared_dir().join("data/catalogs/community-operators-prod")
}

fn bundle_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for pkg in std::fs::read_dir(catalogs().join("operators"))
        .unwrap()
        .flatten()
    {
        for version in std::fs::read_dir(pkg.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            if bundle_dir::is_bundle_dir(&version.path()) {
                dirs.push(version.path());
            }
        }
    }
    dirs.sort();
    dirs
}

fn load_and_validate(c: &mut Criterion) {
    let root = catalogs().join("catalogs/v4.20");
    let mut group = c.benchmark_group("catalog");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(10));
    group.bench_function("load_validate_v4.20", |b| {
        b.iter(|| {
            let loaded = fbc::load_dir(&root).unwrap();
            let problems = validate::validate(&loaded.config);
            assert!(loaded.problems.is_empty() && problems.is_empty());
            CatalogIndex::new(loaded.config)
        })
    });
    // What `olm-rs catalog validate` does: CSV metadata only checked (its strings emptied while
    // transcoding), no index built.
    let check_only = LoadOptions {
        csv_metadata: CsvMetadataHold::CheckOnly,
    };
    group.bench_function("validate_command_v4.20", |b| {
        b.iter(|| {
            let loaded = fbc::load_dir_with(&root, check_only).unwrap();
            let problems = validate::validate(&loaded.config);
            assert!(loaded.problems.is_empty() && problems.is_empty());
            loaded.config.bundles.len()
        })
    });
    group.finish();
}

fn render_all(c: &mut Criterion) {
    let dirs = bundle_dirs();
    let mut group = c.benchmark_group("catalog");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(30));
    group.bench_function("render_all_bundle_dirs", |b| {
        b.iter(|| {
            fbc::parallel_map(&dirs, |d| {
                let dir = bundle_dir::read(d).unwrap();
                render::render(&dir, "").unwrap().bundle.objects.len()
            })
        })
    });
    group.finish();
}

fn upgrade_paths(c: &mut Criterion) {
    let loaded = fbc::load_dir(&catalogs().join("catalogs/v4.20")).unwrap();
    let index = CatalogIndex::new(loaded.config);
    let mut group = c.benchmark_group("catalog");
    group.bench_function("upgrade_path_every_entry_v4.20", |b| {
        b.iter(|| {
            let mut steps = 0;
            for p in index.packages() {
                for ch in p.channels() {
                    let g = ch.graph();
                    for e in g.entries() {
                        steps += g.upgrade_path(&e.name, None).steps.len();
                    }
                }
            }
            steps
        })
    });
    group.finish();
}

criterion_group!(benches, load_and_validate, render_all, upgrade_paths);
criterion_main!(benches);

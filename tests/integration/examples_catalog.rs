//! `examples/catalog`, the sample catalog of `olm-rs sandbox`: it validates, its bundles are what
//! the bundle directories render to, and its upgrade paths are the ones examples/README.md
//! promises.

use std::path::{Path, PathBuf};
use std::process::Command;

use olm_rs::catalog::bundle_dir::{self, render};
use olm_rs::catalog::{CatalogIndex, EdgeKind, load_catalog, validate};
use serde::Deserialize;
use serde_json::Value;

const PACKAGE: &str = "greeter-operator";

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples")
}

fn index() -> CatalogIndex {
    let (_, config, problems) = load_catalog(&examples().join("catalog")).expect("catalog loads");
    assert!(problems.is_empty(), "{problems:?}");
    CatalogIndex::new(config)
}

/// `(bundle, via)` steps OLM takes from `from` in `channel`, one InstallPlan each.
fn path(index: &CatalogIndex, channel: &str, from: &str) -> Vec<(String, EdgeKind)> {
    let graph = index
        .package(PACKAGE)
        .and_then(|p| p.channel(channel))
        .expect("channel exists")
        .graph();
    let path = graph.upgrade_path(&format!("{PACKAGE}.v{from}"), None);
    assert!(path.stopped.is_none(), "{:?}", path.stopped);
    path.steps
        .iter()
        .map(|s| (s.entry.name.trim_start_matches(PACKAGE).to_owned(), s.via))
        .collect()
}

fn steps(list: &[(&str, EdgeKind)]) -> Vec<(String, EdgeKind)> {
    list.iter().map(|(v, e)| (format!(".v{v}"), *e)).collect()
}

#[test]
fn the_sample_catalog_passes_catalog_validate() {
    let (_, config, mut problems) =
        load_catalog(&examples().join("catalog")).expect("catalog loads");
    problems.extend(validate::validate(&config));
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(
        (
            config.packages.len(),
            config.channels.len(),
            config.bundles.len()
        ),
        (1, 2, 5)
    );

    let out = Command::new(env!("CARGO_BIN_EXE_olm-rs"))
        .args(["catalog", "validate"])
        .arg(examples().join("catalog"))
        .output()
        .expect("olm-rs runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("is valid: 1 packages, 2 channels, 5 bundles"),
        "{stdout}"
    );
}

#[test]
fn upgrade_paths_are_the_ones_the_examples_readme_describes() {
    let index = index();
    let package = index.package(PACKAGE).unwrap();
    assert_eq!(package.default_channel_name(), Some("stable"));
    use EdgeKind::*;
    assert_eq!(
        path(&index, "stable", "1.0.0"),
        steps(&[("1.1.0", Replaces), ("1.2.0", Replaces)])
    );
    assert_eq!(
        path(&index, "fast", "1.0.0"),
        steps(&[("1.1.0", Replaces), ("2.0.0", SkipRange)])
    );
    assert_eq!(path(&index, "stable", "1.1.1"), steps(&[("1.2.0", Skips)]));
    assert_eq!(
        path(&index, "fast", "1.1.1"),
        steps(&[("2.0.0", SkipRange)])
    );
    assert_eq!(path(&index, "fast", "1.2.0"), steps(&[("2.0.0", Replaces)]));
    let head = |c: &str| {
        package
            .channel(c)
            .unwrap()
            .graph()
            .channel_head()
            .unwrap()
            .name
            .clone()
    };
    assert_eq!(head("stable"), "greeter-operator.v1.2.0");
    assert_eq!(head("fast"), "greeter-operator.v2.0.0");

    let readme = std::fs::read_to_string(examples().join("README.md")).unwrap();
    for line in [
        "`stable` from 1.0.0: 1.0.0 → 1.1.0 → 1.2.0",
        "`fast` from 1.0.0: 1.0.0 → 1.1.0 → 2.0.0",
        "from 1.1.1: → 1.2.0 in `stable` (via skips), → 2.0.0 in `fast` (via skipRange)",
        "from `stable` to `fast`: → 2.0.0 (via replaces)",
    ] {
        assert!(readme.contains(line), "examples/README.md lost: {line}");
    }
}

fn yaml_documents(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|doc| Value::deserialize(doc).expect("valid YAML"))
        .filter(|v| !v.is_null())
        .collect()
}

/// `bundles.yaml` is exactly what the bundle directories render to (as JSON values), so the
/// manifests InstallPlans apply are the readable ones in `examples/bundles`.
/// `OLM_RS_UPDATE_EXAMPLES=1 cargo test --test integration examples_catalog` rewrites it.
#[test]
fn bundles_yaml_is_rendered_from_the_bundle_directories() {
    let bundles = examples().join("bundles").join(PACKAGE);
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&bundles)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    dirs.sort();
    let rendered: Vec<Value> = dirs
        .iter()
        .map(|dir| {
            let out = render::render(&bundle_dir::read(dir).unwrap(), "").unwrap();
            assert!(
                out.warnings.is_empty(),
                "{}: {:?}",
                dir.display(),
                out.warnings
            );
            render::bundle_blob(&out.bundle)
        })
        .collect();
    let target = examples()
        .join("catalog")
        .join(PACKAGE)
        .join("bundles.yaml");
    if std::env::var_os("OLM_RS_UPDATE_EXAMPLES").is_some() {
        let mut text = format!(
            "# Rendered from examples/bundles/{PACKAGE}/*/ (olm-rs catalog render).\n\
             # Do not edit: OLM_RS_UPDATE_EXAMPLES=1 cargo test --test integration examples_catalog \
             rewrites it.\n"
        );
        for blob in &rendered {
            text.push_str("---\n");
            text.push_str(&serde_yaml_ng::to_string(blob).unwrap());
        }
        std::fs::write(&target, text).unwrap();
    }
    assert!(
        yaml_documents(&target) == rendered,
        "{} is not what examples/bundles renders to; regenerate it with \
         OLM_RS_UPDATE_EXAMPLES=1 cargo test --test integration examples_catalog",
        target.display()
    );
}

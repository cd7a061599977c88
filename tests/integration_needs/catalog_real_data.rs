//! The catalog engine on the real community-operators data: the FBC validates, every bundle
//! directory renders, and upgrade paths follow OLM's rules (docs/resolution.md §4).

use crate::common;

use olm_rs::catalog::bundle_dir::{self, render};
use olm_rs::catalog::semver_range::parse_tolerant;
use olm_rs::catalog::upgrade_graph::{EdgeKind, NoUpdate};
use olm_rs::catalog::{CatalogIndex, fbc, load_catalog, validate};

fn v420() -> CatalogIndex {
    let loaded = fbc::load_dir(&common::fbc_v420()).unwrap();
    assert!(loaded.problems.is_empty(), "{:#?}", loaded.problems);
    CatalogIndex::new(loaded.config)
}

fn path(
    index: &CatalogIndex,
    package: &str,
    channel: &str,
    from: &str,
    version: Option<&str>,
) -> (Vec<String>, Option<NoUpdate>) {
    let graph = index
        .package(package)
        .unwrap()
        .channel(channel)
        .unwrap()
        .graph();
    let version = version.map(|v| parse_tolerant(v).unwrap());
    let p = graph.upgrade_path(from, version.as_ref());
    (
        p.steps.iter().map(|c| c.entry.name.clone()).collect(),
        p.stopped,
    )
}

fn v420_validates_and_indexes() {
    let loaded = fbc::load_dir(&common::fbc_v420()).unwrap();
    assert_eq!(loaded.problems, vec![]);
    assert_eq!(validate::validate(&loaded.config), vec![]);
    let index = CatalogIndex::new(loaded.config);
    assert_eq!(index.packages().len(), 37);
    assert_eq!(index.bundle_count(), 803);
    for p in index.packages() {
        let default = p
            .default_channel()
            .unwrap_or_else(|| panic!("{} has no default channel", p.name()));
        assert!(default.graph().channel_head().is_ok());
        for c in p.channels() {
            let head = c.graph().channel_head().unwrap();
            let order = c.graph().channel_order().unwrap();
            assert_eq!(order[0].name, head.name, "{}/{}", p.name(), c.name());
            assert!(p.bundle(&head.name).is_some());
        }
    }
}

fn long_chain_moves_one_replaces_edge_per_plan() {
    let index = v420();
    let (steps, stopped) = path(
        &index,
        "project-quay",
        "stable-3.17",
        "quay-operator.v3.16.2",
        None,
    );
    assert_eq!(
        steps,
        [
            "quay-operator.v3.17.0",
            "quay-operator.v3.17.1",
            "quay-operator.v3.17.2",
            "quay-operator.v3.17.3",
            "quay-operator.v3.17.4"
        ]
    );
    assert!(stopped.is_none());
    let (steps, _) = path(
        &index,
        "project-quay",
        "stable-3.10",
        "quay-operator.v3.10.0",
        None,
    );
    assert_eq!(steps.len(), 25);
    assert_eq!(steps.last().unwrap(), "quay-operator.v3.10.25");
}

fn skip_range_on_the_head_is_one_hop() {
    let index = v420();
    let graph = index
        .package("sailoperator")
        .unwrap()
        .default_channel()
        .unwrap()
        .graph();
    let next = graph.next_bundle_for("sailoperator.v1.25.0", None).unwrap();
    assert_eq!(
        (next.entry.name.as_str(), next.via),
        ("sailoperator.v1.30.3", EdgeKind::SkipRange)
    );
    // An installed version no longer in the catalog needs its version.
    let (steps, _) = path(
        &index,
        "sailoperator",
        "stable",
        "sailoperator.v1.0.0",
        Some("1.0.0"),
    );
    assert_eq!(steps, ["sailoperator.v1.30.3"]);
    let (steps, stopped) = path(
        &index,
        "sailoperator",
        "stable",
        "sailoperator.v1.0.0",
        None,
    );
    assert!(steps.is_empty());
    assert!(
        stopped
            .unwrap()
            .to_string()
            .contains("skipRanges were not checked")
    );
    // At the head: nothing to do, and it says so.
    let (steps, stopped) = path(
        &index,
        "sailoperator",
        "stable",
        "sailoperator.v1.30.3",
        None,
    );
    assert!(steps.is_empty());
    assert!(matches!(stopped, Some(NoUpdate::AtHead { .. })));
}

fn skips_then_replaces_then_skip_range() {
    let index = v420();
    let (steps, stopped) = path(
        &index,
        "infinispan",
        "stable",
        "infinispan-operator.v2.3.2",
        None,
    );
    assert!(stopped.is_none());
    assert_eq!(
        steps.first().unwrap(),
        "infinispan-operator.v2.3.8",
        "skipped bundle jumps to its skipper"
    );
    assert_eq!(steps[1], "infinispan-operator.v2.4.0");
    assert_eq!(steps.last().unwrap(), "infinispan-operator.v2.5.14");
    assert_eq!(
        steps.len(),
        21,
        "v2.4.18's version is in the head's skipRange: no 2.5.x stops"
    );
    // Nearest-to-head candidate wins: v2.28.0 is the newest entry whose skipRange holds 2.11.0.
    let (steps, _) = path(
        &index,
        "opendatahub-operator",
        "fast",
        "opendatahub-operator.v2.11.0",
        None,
    );
    assert_eq!(steps[0], "opendatahub-operator.v2.28.0");
    assert_eq!(steps.last().unwrap(), "opendatahub-operator.v2.35.0");
}

fn every_path_from_every_entry_ends_at_the_head_or_says_why() {
    let index = v420();
    let mut checked = 0;
    for p in index.packages() {
        for c in p.channels() {
            let g = c.graph();
            let head = g.channel_head().unwrap().name.clone();
            for e in g.entries() {
                let result = g.upgrade_path(&e.name, None);
                match (&result.stopped, result.steps.last()) {
                    (None, Some(last)) => assert_eq!(last.entry.name, head),
                    (Some(reason), _) => assert!(!reason.to_string().is_empty()),
                    (None, None) => panic!("empty path without reason for {}", e.name),
                }
                checked += 1;
            }
        }
    }
    assert!(checked > 900, "{checked}");
}

fn every_bundle_directory_renders() {
    let mut rendered = 0;
    for pkg in std::fs::read_dir(common::operators_dir()).unwrap() {
        let pkg = pkg.unwrap().path();
        if !pkg.is_dir() {
            continue;
        }
        for version in std::fs::read_dir(&pkg).unwrap() {
            let dir = version.unwrap().path();
            if !bundle_dir::is_bundle_dir(&dir) {
                continue;
            }
            let read = bundle_dir::read(&dir).unwrap_or_else(|e| panic!("{e}"));
            let out = render::render(&read, "").unwrap_or_else(|e| panic!("{e}"));
            let b = &out.bundle;
            assert!(
                !b.name.is_empty() && !b.package.is_empty(),
                "{}",
                dir.display()
            );
            let packages: Vec<_> = olm_rs::catalog::properties::packages(&b.properties).collect();
            assert_eq!(packages.len(), 1, "{}", dir.display());
            assert_eq!(b.objects.len(), read.manifests.len());
            rendered += 1;
        }
    }
    assert!(rendered > 1500, "{rendered}");
}

fn render_derives_properties_like_opm() {
    let dir = bundle_dir::read(&common::operators_dir().join("etcd/0.9.4")).unwrap();
    let out = render::render(&dir, "").unwrap();
    let blob = render::bundle_blob(&out.bundle);
    let keys: Vec<&String> = blob.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "schema",
            "name",
            "package",
            "image",
            "properties",
            "relatedImages"
        ]
    );
    assert_eq!(blob["name"], "etcdoperator.v0.9.4");
    let props = blob["properties"].as_array().unwrap();
    let types: Vec<&str> = props.iter().map(|p| p["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        [
            "olm.gvk",
            "olm.gvk",
            "olm.gvk",
            "olm.package",
            "olm.bundle.object",
            "olm.bundle.object",
            "olm.bundle.object",
            "olm.bundle.object"
        ]
    );
    assert_eq!(
        props[3]["value"],
        serde_json::json!({"packageName": "etcd", "version": "0.9.4"})
    );
    assert_eq!(
        props[0]["value"],
        serde_json::json!({"group": "etcd.database.coreos.com", "kind": "EtcdBackup", "version": "v1beta2"})
    );
    // Bundle objects are ordered by their base64 text.
    let data: Vec<&str> = props[4..]
        .iter()
        .map(|p| p["value"]["data"].as_str().unwrap())
        .collect();
    let mut sorted = data.clone();
    sorted.sort();
    assert_eq!(data, sorted);
    let images: Vec<&str> = blob["relatedImages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["image"].as_str().unwrap())
        .collect();
    assert!(images.windows(2).all(|w| w[0] <= w[1]));
    assert!(!images.is_empty());
}

fn dependencies_file_becomes_required_properties() {
    // Find a bundle with a dependencies.yaml declaring an olm.package dependency.
    let mut found = false;
    'outer: for pkg in std::fs::read_dir(common::operators_dir()).unwrap() {
        for version in std::fs::read_dir(pkg.unwrap().path()).into_iter().flatten() {
            let dir = version.unwrap().path();
            let deps = dir.join("metadata/dependencies.yaml");
            let Ok(text) = std::fs::read_to_string(&deps) else {
                continue;
            };
            if !text.contains("olm.package") || !bundle_dir::is_bundle_dir(&dir) {
                continue;
            }
            let out = render::render(&bundle_dir::read(&dir).unwrap(), "").unwrap();
            let required: Vec<_> =
                olm_rs::catalog::properties::required_packages(&out.bundle.properties).collect();
            assert!(!required.is_empty(), "{}", dir.display());
            assert!(
                required
                    .iter()
                    .all(|r| !r.package_name.is_empty() && !r.version_range.is_empty())
            );
            found = true;
            break 'outer;
        }
    }
    assert!(found);
}

fn bundle_directories_read_in_replaces_mode() {
    let (_, config, problems) = load_catalog(&common::operators_dir().join("etcd")).unwrap();
    assert_eq!(problems, vec![]);
    assert_eq!(validate::validate(&config), vec![]);
    let index = CatalogIndex::new(config);
    let etcd = index.package("etcd").unwrap();
    assert_eq!(etcd.default_channel_name(), Some("singlenamespace-alpha"));
    let g = etcd.default_channel().unwrap().graph();
    let steps: Vec<_> = g
        .upgrade_path("etcdoperator.v0.9.0", None)
        .steps
        .iter()
        .map(|c| c.entry.name.clone())
        .collect();
    assert_eq!(steps, ["etcdoperator.v0.9.2", "etcdoperator.v0.9.4"]);
    assert_eq!(
        etcd.bundle("etcdoperator.v0.9.4").unwrap().channels(),
        ["singlenamespace-alpha"]
    );
}

crate::trials! {
    sync v420_validates_and_indexes,
    sync long_chain_moves_one_replaces_edge_per_plan,
    sync skip_range_on_the_head_is_one_hop,
    sync skips_then_replaces_then_skip_range,
    sync every_path_from_every_entry_ends_at_the_head_or_says_why,
    sync every_bundle_directory_renders,
    sync render_derives_properties_like_opm,
    sync dependencies_file_becomes_required_properties,
    sync bundle_directories_read_in_replaces_mode,
}

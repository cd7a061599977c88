//! Every `api.Registry` RPC that returns a bundle (or a channel entry of one) agrees with
//! ListBundles on every field opm fills, for every bundle of the test catalogs and of the real
//! v4.20 catalog: inline bundles, image bundles, bundles in several channels, skips, skipRanges.
//!
//! What opm's file-based server fills, per RPC (operator-registry `pkg/cache`):
//! - ListBundles: the whole bundle per channel membership, with the entry's `replaces`, `skips`
//!   and `skipRange`; `csvJson` and `object` left out when `bundlePath` is set.
//! - GetBundle, GetBundleForChannel, GetBundleThatReplaces, GetDefaultBundleThatProvides: the
//!   same bundle of that channel with `csvJson` and `object` always, and `replaces`/`skips`
//!   always empty (opm "trims" them; its comment: the SQLite server never filled them).
//! - Channel entries: `replaces` is the entry's own (or one skipped name per extra message for
//!   the provider queries).
//!
//! The checks call the server's query functions directly (the gRPC server hands their answers
//! over unchanged, see `registry_server`); one small catalog also goes over a real socket.

use crate::common;
use crate::subscription_support::{gadget_catalog, merged, widget_catalog};

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use olm_rs::catalog::properties::GvkValue;
use olm_rs::catalog::validated;
use olm_rs::catalog::{CatalogIndex, load_catalog};
use olm_rs::registry::client::{ClientTimeouts, RegistryClient};
use olm_rs::registry::{proto, queries, server};
use pretty_assertions::assert_eq;

type Key = (String, String, String);

fn key(b: &proto::Bundle) -> Key {
    (
        b.package_name.clone(),
        b.channel_name.clone(),
        b.csv_name.clone(),
    )
}

/// What a Get* RPC must answer for the bundle ListBundles sent as `listed`, except `csvJson` and
/// `object` of an image bundle, which ListBundles leaves out (checked separately).
fn trimmed(listed: &proto::Bundle) -> proto::Bundle {
    proto::Bundle {
        replaces: String::new(),
        skips: Vec::new(),
        ..listed.clone()
    }
}

/// `got` (from a Get* RPC) is the trimmed `listed`, with the manifests always present.
fn assert_full_bundle(rpc: &str, listed: &proto::Bundle, got: &proto::Bundle) {
    let what = format!("{rpc} for {:?}", key(listed));
    if listed.bundle_path.is_empty() {
        assert_eq!(*got, trimmed(listed), "{what}");
        return;
    }
    assert!(
        listed.csv_json.is_empty() && listed.object.is_empty(),
        "ListBundles leaves the manifests of an image bundle to the image: {what}"
    );
    let mut without_manifests = got.clone();
    without_manifests.csv_json.clear();
    without_manifests.object.clear();
    assert_eq!(without_manifests, trimmed(listed), "{what}");
}

fn gvk(g: &proto::GroupVersionKind) -> GvkValue {
    queries::requested_gvk(&g.group, &g.version, &g.kind)
}

/// Checks every RPC against ListBundles on `index`; returns how many bundles were checked.
fn check_catalog(name: &str, index: &CatalogIndex) -> usize {
    let listed: Vec<proto::Bundle> = queries::list_bundles(index).collect();
    let by_key: BTreeMap<Key, &proto::Bundle> = listed.iter().map(|b| (key(b), b)).collect();
    assert_eq!(
        by_key.len(),
        listed.len(),
        "{name}: one message per membership"
    );

    for b in &listed {
        // GetBundle: the same bundle of the same channel.
        let got = queries::get_bundle(index, &b.package_name, &b.channel_name, &b.csv_name)
            .unwrap_or_else(|e| panic!("{name}: GetBundle {:?}: {e}", key(b)));
        assert_full_bundle("GetBundle", b, &got);
        if !b.bundle_path.is_empty() {
            let has_manifests = index
                .package(&b.package_name)
                .and_then(|p| p.bundle(&b.csv_name))
                .is_some_and(|ib| {
                    !ib.bundle().objects.is_empty()
                        || ib
                            .properties()
                            .iter()
                            .any(|p| p.type_ == "olm.csv.metadata")
                });
            assert_eq!(
                !got.csv_json.is_empty(),
                has_manifests,
                "{name}: GetBundle {:?} sends the CSV whenever the catalog has one",
                key(b)
            );
        }

        // GetBundleThatReplaces, for everything this entry replaces or skips: one of the
        // bundles of the channel that replace or skip it (opm picks any).
        for replaced in std::iter::once(&b.replaces)
            .filter(|r| !r.is_empty())
            .chain(&b.skips)
        {
            let got =
                queries::bundle_that_replaces(index, replaced, &b.package_name, &b.channel_name)
                    .unwrap_or_else(|e| panic!("{name}: GetBundleThatReplaces {replaced}: {e}"));
            let listed_got = by_key
                .get(&key(&got))
                .unwrap_or_else(|| panic!("{name}: {:?} not listed", key(&got)));
            assert!(
                listed_got.replaces == *replaced || listed_got.skips.contains(replaced),
                "{name}: GetBundleThatReplaces {replaced} answered {:?}",
                key(&got)
            );
            assert_full_bundle("GetBundleThatReplaces", listed_got, &got);
        }

        // GetChannelEntriesThatReplace: this entry is among the answers, with its replaces.
        for replaced in std::iter::once(&b.replaces)
            .filter(|r| !r.is_empty())
            .chain(&b.skips)
        {
            let entries = queries::entries_that_replace(index, replaced).unwrap();
            let mine = proto::ChannelEntry {
                package_name: b.package_name.clone(),
                channel_name: b.channel_name.clone(),
                bundle_name: b.csv_name.clone(),
                replaces: b.replaces.clone(),
            };
            assert!(
                entries.contains(&mine),
                "{name}: GetChannelEntriesThatReplace {replaced} lacks {mine:?}"
            );
        }
    }

    // GetPackage and GetBundleForChannel: each channel's head is a listed bundle of it.
    for pkg in index.packages() {
        let package = queries::get_package(index, pkg.name()).unwrap();
        for ch in &package.channels {
            let k = (package.name.clone(), ch.name.clone(), ch.csv_name.clone());
            let listed_head = by_key
                .get(&k)
                .unwrap_or_else(|| panic!("{name}: GetPackage head {k:?} not listed"));
            let got = queries::get_bundle_for_channel(index, &package.name, &ch.name).unwrap();
            assert_full_bundle("GetBundleForChannel", listed_head, &got);
        }
    }

    // The provider queries, for every provided API.
    let heads: Vec<Key> = index
        .packages()
        .iter()
        .flat_map(|p| {
            p.channels().iter().filter_map(move |c| {
                let head = c.graph().channel_head().ok()?;
                Some((p.name().to_owned(), c.name().to_owned(), head.name.clone()))
            })
        })
        .collect();
    let provided: BTreeSet<(String, String, String)> = listed
        .iter()
        .flat_map(|b| &b.provided_apis)
        .map(|g| (g.group.clone(), g.version.clone(), g.kind.clone()))
        .collect();
    for (group, version, kind) in &provided {
        let wanted = queries::requested_gvk(group, version, kind);
        let provides = |k: &Key| by_key[k].provided_apis.iter().any(|g| gvk(g) == wanted);
        for (rpc, entries) in [
            (
                "GetChannelEntriesThatProvide",
                queries::entries_that_provide(index, &wanted).unwrap(),
            ),
            (
                "GetLatestChannelEntriesThatProvide",
                // An API that only older bundles provide has no latest provider.
                queries::latest_entries_that_provide(index, &wanted).unwrap_or_else(|_| {
                    assert!(
                        !heads.iter().any(&provides),
                        "{name}: a channel head provides {kind} but no latest entry was found"
                    );
                    Vec::new()
                }),
            ),
        ] {
            for e in entries {
                let k = (e.package_name, e.channel_name, e.bundle_name);
                assert!(by_key.contains_key(&k), "{name}: {rpc}: {k:?} not listed");
                assert!(provides(&k), "{name}: {rpc}: {k:?} does not provide {kind}");
                let b = by_key[&k];
                assert!(
                    e.replaces == b.replaces || b.skips.contains(&e.replaces),
                    "{name}: {rpc}: {k:?} replaces {:?}",
                    e.replaces
                );
            }
        }
        if let Ok(got) = queries::default_bundle_that_provides(index, &wanted) {
            let b = by_key
                .get(&key(&got))
                .unwrap_or_else(|| panic!("{name}: default provider {:?} not listed", key(&got)));
            assert!(provides(&key(&got)));
            assert_full_bundle("GetDefaultBundleThatProvides", b, &got);
        }
    }
    listed.len()
}

fn load_dir(path: &Path) -> CatalogIndex {
    validated::load_for_serving(path).unwrap().index
}

fn every_rpc_agrees_with_list_bundles_on_the_test_catalogs() {
    // Inline bundles in two channels each, with replaces, skips and a skipRange.
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/catalog");
    let (_, config, problems) = load_catalog(&examples).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    let greeter = CatalogIndex::new(config);
    let n = check_catalog("examples/catalog", &greeter);
    assert_eq!(n, 9, "4 stable + 5 fast memberships");
    let v120_in_fast = queries::get_bundle(
        &greeter,
        "greeter-operator",
        "fast",
        "greeter-operator.v1.2.0",
    )
    .unwrap();
    assert_eq!(v120_in_fast.channel_name, "fast");
    let v200 = queries::get_bundle(
        &greeter,
        "greeter-operator",
        "fast",
        "greeter-operator.v2.0.0",
    )
    .unwrap();
    assert_eq!(v200.skip_range, ">=1.1.0 <2.0.0");
    assert!(
        v200.replaces.is_empty(),
        "opm trims replaces outside ListBundles"
    );

    // Image bundles with manifests, plus a package with one inline bundle.
    let widget = CatalogIndex::new(merged(widget_catalog(), gadget_catalog()));
    assert_eq!(check_catalog("widget+gadget", &widget), 5);

    // A directory of bundle directories (inline, no images).
    let etcd = load_dir(&common::operators_dir().join("etcd"));
    assert!(check_catalog("operators/etcd", &etcd) > 5);
}

fn every_rpc_agrees_with_list_bundles_on_the_v420_catalog() {
    let index = load_dir(&common::fbc_v420());
    let n = check_catalog("v4.20", &index);
    assert!(n >= 803, "every bundle, once per channel: {n}");
}

/// The same agreement over a real socket, so the gRPC layer is covered too.
async fn the_server_sends_what_the_queries_answer() {
    let index = Arc::new(CatalogIndex::new(merged(
        widget_catalog(),
        gadget_catalog(),
    )));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(server::serve(Arc::clone(&index), listener, async move {
        let _ = stopped.await;
    }));
    let client = RegistryClient::connect(&address, ClientTimeouts::default())
        .await
        .unwrap();
    let mut listed = client.list_bundles().await.unwrap();
    listed.sort_by_key(key);
    let mut want: Vec<proto::Bundle> = queries::list_bundles(&index).collect();
    want.sort_by_key(key);
    assert_eq!(listed, want);
    for b in &listed {
        let got = client
            .get_bundle(&b.package_name, &b.channel_name, &b.csv_name)
            .await
            .unwrap();
        assert_full_bundle("GetBundle (gRPC)", b, &got);
    }
    let _ = stop.send(());
    task.await.unwrap().unwrap();
}

crate::trials! {
    sync every_rpc_agrees_with_list_bundles_on_the_test_catalogs,
    sync every_rpc_agrees_with_list_bundles_on_the_v420_catalog,
    multi the_server_sends_what_the_queries_answer,
}

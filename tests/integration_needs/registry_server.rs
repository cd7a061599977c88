//! Our registry client against our registry server, in-process over a real socket, on the real
//! community-operators catalog; answers checked against the catalog engine.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use olm_rs::api::CatalogRef;
use olm_rs::catalog::validated;
use olm_rs::catalog::{CatalogIndex, properties};
use olm_rs::registry::client::{ClientError, ClientTimeouts, RegistryClient};
use olm_rs::registry::connection::build_index;
use olm_rs::registry::{proto, server};
use pretty_assertions::assert_eq;
use tokio::sync::oneshot;

struct Running {
    address: String,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), server::ServeError>>,
}

impl Running {
    async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.task.await.unwrap().unwrap();
    }
}

async fn start(index: Arc<CatalogIndex>) -> Running {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(server::serve(index, listener, async move {
        let _ = stopped.await;
    }));
    Running {
        address,
        stop: Some(stop),
        task,
    }
}

fn load(path: &std::path::Path) -> Arc<CatalogIndex> {
    Arc::new(validated::load_for_serving(path).unwrap().index)
}

/// The v4.20 catalog, loaded once for all tests of this file.
fn community() -> Arc<CatalogIndex> {
    static INDEX: std::sync::OnceLock<Arc<CatalogIndex>> = std::sync::OnceLock::new();
    Arc::clone(INDEX.get_or_init(|| load(&common::fbc_v420())))
}

/// (package, channel, bundle) of every entry, from the engine.
fn engine_memberships(index: &CatalogIndex) -> BTreeSet<(String, String, String)> {
    let mut out = BTreeSet::new();
    for p in index.packages() {
        for c in p.channels() {
            for e in c.graph().entries() {
                out.insert((p.name().to_owned(), c.name().to_owned(), e.name.clone()));
            }
        }
    }
    out
}

async fn list_bundles_and_packages_match_the_engine_on_community_catalog() {
    let index = community();
    let server = start(Arc::clone(&index)).await;
    let client = RegistryClient::connect(&server.address, ClientTimeouts::default())
        .await
        .unwrap();
    client.check_health().await.unwrap();

    let names: BTreeSet<String> = client.list_packages().await.unwrap().into_iter().collect();
    let engine_names: BTreeSet<String> = index
        .packages()
        .iter()
        .map(|p| p.name().to_owned())
        .collect();
    assert_eq!(names, engine_names);
    assert_eq!(names.len(), 37);

    let bundles = client.list_bundles().await.unwrap();
    let listed: BTreeSet<(String, String, String)> = bundles
        .iter()
        .map(|b| {
            (
                b.package_name.clone(),
                b.channel_name.clone(),
                b.csv_name.clone(),
            )
        })
        .collect();
    assert_eq!(
        listed.len(),
        bundles.len(),
        "one message per (bundle, channel)"
    );
    assert_eq!(listed, engine_memberships(&index));

    for b in &bundles {
        let pkg = index.package(&b.package_name).unwrap();
        let ch = pkg.channel(&b.channel_name).unwrap();
        let entry = ch.graph().entry(&b.csv_name).unwrap();
        let bundle = pkg.bundle(&b.csv_name).unwrap();
        assert_eq!(b.bundle_path, bundle.image(), "{}", b.csv_name);
        assert!(!b.bundle_path.is_empty());
        // With an image, ListBundles leaves the manifests to the image.
        assert!(
            b.csv_json.is_empty() && b.object.is_empty(),
            "{}",
            b.csv_name
        );
        assert_eq!(Some(b.version.clone()), bundle.version_string());
        assert_eq!(b.replaces, entry.replaces.clone().unwrap_or_default());
        assert_eq!(b.skips, entry.skips);
        assert_eq!(b.skip_range, entry.skip_range.clone().unwrap_or_default());
        let provided: BTreeSet<(String, String, String)> = b
            .provided_apis
            .iter()
            .map(|g| (g.group.clone(), g.version.clone(), g.kind.clone()))
            .collect();
        let engine_provided: BTreeSet<(String, String, String)> = bundle
            .provided_gvks()
            .map(|g| (g.group, g.version, g.kind))
            .collect();
        assert_eq!(provided, engine_provided);
        assert!(
            b.properties
                .iter()
                .all(|p| p.r#type != properties::CSV_METADATA
                    && p.r#type != properties::BUNDLE_OBJECT),
            "manifests are never repeated as properties"
        );
        assert_eq!(
            b.properties.len(),
            bundle
                .properties()
                .iter()
                .filter(|p| p.type_ != properties::CSV_METADATA)
                .count()
        );
    }

    for pkg in index.packages() {
        let answer = client.get_package(pkg.name()).await.unwrap();
        assert_eq!(answer.name, pkg.name());
        assert_eq!(
            Some(answer.default_channel_name.as_str()),
            pkg.default_channel_name()
        );
        let heads: Vec<(String, String)> = answer
            .channels
            .iter()
            .map(|c| (c.name.clone(), c.csv_name.clone()))
            .collect();
        let engine_heads: Vec<(String, String)> = pkg
            .channels()
            .iter()
            .map(|c| {
                (
                    c.name().to_owned(),
                    c.graph().channel_head().unwrap().name.clone(),
                )
            })
            .collect();
        assert_eq!(
            heads, engine_heads,
            "channels sorted by name with their heads"
        );
    }
    server.shutdown().await;
}

async fn get_bundle_and_replacements_match_the_engine() {
    let index = community();
    let server = start(Arc::clone(&index)).await;
    let client = RegistryClient::connect(&server.address, ClientTimeouts::default())
        .await
        .unwrap();

    // Every csv name that something replaces or skips, with the engine's replacers.
    let mut expected: BTreeMap<String, Vec<(String, String, String, String)>> = BTreeMap::new();
    for p in index.packages() {
        for c in p.channels() {
            for e in c.graph().entries() {
                let replaces = e.replaces.clone().unwrap_or_default();
                let mut targets: Vec<&String> = e.replaces.iter().collect();
                targets.extend(e.skips.iter().filter(|s| **s != replaces));
                for t in targets {
                    expected.entry(t.clone()).or_default().push((
                        p.name().to_owned(),
                        c.name().to_owned(),
                        e.name.clone(),
                        replaces.clone(),
                    ));
                }
            }
        }
    }
    assert!(expected.len() > 100, "the catalog has upgrade edges");
    for (replaced, mut want) in expected {
        let mut got: Vec<(String, String, String, String)> = client
            .entries_that_replace(&replaced)
            .await
            .unwrap()
            .into_iter()
            .map(|e| (e.package_name, e.channel_name, e.bundle_name, e.replaces))
            .collect();
        got.sort();
        want.sort();
        assert_eq!(got, want, "GetChannelEntriesThatReplace({replaced})");
    }
    let none = client
        .entries_that_replace("nothing.v0.0.0")
        .await
        .unwrap_err();
    assert_call_error(
        &none,
        "no channel entries found that replace nothing.v0.0.0",
    );

    // Every channel's first and last entry (checking all ~900 takes long in debug builds).
    let mut checked = 0;
    for p in index.packages() {
        for c in p.channels() {
            let entries = c.graph().entries();
            let sample = [entries.first(), entries.last()];
            for e in sample.into_iter().flatten() {
                let got = client
                    .get_bundle(p.name(), c.name(), &e.name)
                    .await
                    .unwrap();
                let bundle = p.bundle(&e.name).unwrap();
                assert_eq!(got.csv_name, e.name);
                assert_eq!(got.channel_name, c.name());
                assert_eq!(got.bundle_path, bundle.image());
                // opm's trimmed bundle: no edges, but the skipRange stays.
                assert!(got.replaces.is_empty() && got.skips.is_empty());
                assert_eq!(got.skip_range, e.skip_range.clone().unwrap_or_default());
                let has_metadata = bundle
                    .properties()
                    .iter()
                    .any(|p| p.type_ == properties::CSV_METADATA);
                if has_metadata {
                    let csv: serde_json::Value = serde_json::from_str(&got.csv_json).unwrap();
                    assert_eq!(csv["kind"], "ClusterServiceVersion");
                    assert_eq!(csv["metadata"]["name"], e.name.as_str());
                    assert_eq!(got.object, vec![got.csv_json.clone()]);
                }
                checked += 1;
            }
        }
    }
    assert!(checked > 100, "{checked}");

    let missing = client.get_package("no-such-package").await.unwrap_err();
    assert_call_error(&missing, "package \"no-such-package\" not found");
    let pkg = &index.packages()[0];
    let missing = client
        .get_bundle(pkg.name(), "no-such-channel", "x")
        .await
        .unwrap_err();
    assert_call_error(
        &missing,
        &format!(
            "package \"{}\", channel \"no-such-channel\" not found",
            pkg.name()
        ),
    );
    server.shutdown().await;
}

fn assert_call_error(err: &ClientError, message: &str) {
    match err {
        ClientError::Call {
            status_code,
            message: got,
            ..
        } => {
            assert_eq!(*status_code, tonic::Code::Unknown, "opm sends plain errors");
            assert_eq!(got, message);
        }
        other => panic!("expected a call error, got {other}"),
    }
}

async fn what_the_client_reads_rebuilds_the_same_catalog() {
    let index = community();
    let server = start(Arc::clone(&index)).await;
    let client = RegistryClient::connect(&server.address, ClientTimeouts::default())
        .await
        .unwrap();
    let content = client.fetch_content().await.unwrap();
    assert!(content.skipped.is_empty());
    let rebuilt = build_index(&CatalogRef::new("olm", "community"), &content)
        .expect("what our server sends validates");
    assert_eq!(engine_memberships(&rebuilt), engine_memberships(&index));
    for p in index.packages() {
        let q = rebuilt.package(p.name()).unwrap();
        assert_eq!(q.default_channel_name(), p.default_channel_name());
        for c in p.channels() {
            let d = q.channel(c.name()).unwrap();
            assert_eq!(
                d.graph().channel_head().unwrap().name,
                c.graph().channel_head().unwrap().name
            );
            let edges = |g: &olm_rs::catalog::UpgradeGraph| -> Vec<String> {
                g.entries()
                    .iter()
                    .map(|e| {
                        format!(
                            "{} {:?} {:?} {:?}",
                            e.name, e.replaces, e.skips, e.skip_range
                        )
                    })
                    .collect()
            };
            assert_eq!(edges(d.graph()), edges(c.graph()));
        }
        for b in p.bundles() {
            let r = q.bundle(b.name()).unwrap();
            assert_eq!(r.image(), b.image());
            assert_eq!(r.version_string(), b.version_string());
            let req = |x: &olm_rs::catalog::IndexedBundle| -> BTreeSet<String> {
                x.required_gvks()
                    .map(|g| format!("{}/{}/{}", g.group, g.version, g.kind))
                    .collect()
            };
            assert_eq!(req(r), req(b));
        }
    }
    server.shutdown().await;
}

async fn bundle_directories_are_served_inline() {
    // A directory of registry+v1 bundle directories: no images, so the manifests travel inline.
    let dir = common::operators_dir().join("etcd");
    let index = load(&dir);
    let server = start(Arc::clone(&index)).await;
    let client = RegistryClient::connect(&server.address, ClientTimeouts::default())
        .await
        .unwrap();
    let bundles = client.list_bundles().await.unwrap();
    assert!(!bundles.is_empty());
    for b in &bundles {
        assert!(b.bundle_path.is_empty());
        let csv: serde_json::Value = serde_json::from_str(&b.csv_json).unwrap();
        assert_eq!(csv["kind"], "ClusterServiceVersion");
        assert_eq!(csv["metadata"]["name"], b.csv_name.as_str());
        assert!(b.object.len() >= 2, "CSV and CRDs");
        assert!(b.object.contains(&b.csv_json));
        let kinds: BTreeSet<String> = b
            .object
            .iter()
            .map(|o| {
                serde_json::from_str::<serde_json::Value>(o).unwrap()["kind"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        assert!(kinds.contains("CustomResourceDefinition"), "{kinds:?}");
    }
    server.shutdown().await;
}

async fn unreachable_registry_is_a_connect_error_naming_the_address() {
    // Bind and drop: nothing listens on that port any more.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let address = format!("127.0.0.1:{port}");
    let err = RegistryClient::connect(&address, ClientTimeouts::default())
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::Connect { .. }), "{err}");
    assert!(err.to_string().contains(&address), "{err}");
    let err = RegistryClient::connect("not an address", ClientTimeouts::default())
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::InvalidAddress { .. }), "{err}");
}

fn wire_field_numbers_are_operator_registrys() {
    use prost::Message;
    // (message bytes, expected first tag = field number << 3 | wire type)
    let tag = |bytes: Vec<u8>| bytes[0] >> 3;
    let s = || "x".to_owned();
    let b = |f: fn(&mut proto::Bundle)| {
        let mut m = proto::Bundle::default();
        f(&mut m);
        tag(m.encode_to_vec())
    };
    assert_eq!(b(|m| m.csv_name = "x".into()), 1);
    assert_eq!(b(|m| m.package_name = "x".into()), 2);
    assert_eq!(b(|m| m.channel_name = "x".into()), 3);
    assert_eq!(b(|m| m.csv_json = "x".into()), 4);
    assert_eq!(b(|m| m.object = vec!["x".into()]), 5);
    assert_eq!(b(|m| m.bundle_path = "x".into()), 6);
    assert_eq!(
        b(|m| m.provided_apis = vec![proto::GroupVersionKind::default()]),
        7
    );
    assert_eq!(
        b(|m| m.required_apis = vec![proto::GroupVersionKind::default()]),
        8
    );
    assert_eq!(b(|m| m.version = "x".into()), 9);
    assert_eq!(b(|m| m.skip_range = "x".into()), 10);
    assert_eq!(
        b(|m| m.dependencies = vec![proto::Dependency::default()]),
        11
    );
    assert_eq!(b(|m| m.properties = vec![proto::Property::default()]), 12);
    assert_eq!(b(|m| m.replaces = "x".into()), 13);
    assert_eq!(b(|m| m.skips = vec!["x".into()]), 14);
    assert_eq!(
        b(|m| m.deprecation = Some(proto::Deprecation::default())),
        15
    );

    let p = proto::Package {
        deprecation: Some(proto::Deprecation { message: s() }),
        ..Default::default()
    };
    assert_eq!(tag(p.encode_to_vec()), 4);
    let c = proto::Channel {
        deprecation: Some(proto::Deprecation { message: s() }),
        ..Default::default()
    };
    assert_eq!(tag(c.encode_to_vec()), 3);
    let c = proto::Channel {
        csv_name: s(),
        ..Default::default()
    };
    assert_eq!(tag(c.encode_to_vec()), 2);
    assert_eq!(
        tag(proto::GroupVersionKind {
            plural: s(),
            ..Default::default()
        }
        .encode_to_vec()),
        4
    );
    assert_eq!(
        tag(proto::Dependency {
            value: s(),
            ..Default::default()
        }
        .encode_to_vec()),
        2
    );
    assert_eq!(
        tag(proto::ChannelEntry {
            replaces: s(),
            ..Default::default()
        }
        .encode_to_vec()),
        4
    );
    assert_eq!(
        tag(proto::GetBundleRequest {
            csv_name: s(),
            ..Default::default()
        }
        .encode_to_vec()),
        3
    );
    assert_eq!(
        tag(proto::GetReplacementRequest {
            channel_name: s(),
            ..Default::default()
        }
        .encode_to_vec()),
        3
    );
    assert_eq!(
        tag(proto::GetAllProvidersRequest {
            plural: s(),
            ..Default::default()
        }
        .encode_to_vec()),
        4
    );
    assert_eq!(
        tag(proto::GetDefaultProviderRequest {
            kind: s(),
            ..Default::default()
        }
        .encode_to_vec()),
        3
    );

    // Paths on the wire: package `api`, service `Registry`.
    assert_eq!(
        <proto::registry_server::RegistryServer<server::RegistryService> as tonic::server::NamedService>::NAME,
        "api.Registry"
    );
}

crate::trials! {
    multi list_bundles_and_packages_match_the_engine_on_community_catalog,
    multi get_bundle_and_replacements_match_the_engine,
    multi what_the_client_reads_rebuilds_the_same_catalog,
    multi bundle_directories_are_served_inline,
    current unreachable_registry_is_a_connect_error_naming_the_address,
    sync wire_field_numbers_are_operator_registrys,
}

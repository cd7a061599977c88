//! Table tests of the PackageManifest rules against small catalogs written here, with the
//! objects OLM's package server would show for them written out by hand
//! (docs/packagemanifests.md §3–§4).

use std::sync::Arc;

use jiff::Timestamp;
use serde_json::{Value, json};

use super::build::CatalogMeta;
use super::icon::{DEFAULT_ICON_MEDIA_TYPE, icon_response};
use super::selector::LabelSelector;
use super::store::{ManifestStore, Scope};
use super::table::{IncludeObject, table};
use crate::catalog::CatalogIndex;
use crate::catalog::fbc::load_text;

fn csv(name: &str, version: &str, provider: &str, extra_spec: Value, labels: Value) -> String {
    let mut spec = json!({
        "displayName": format!("{name} display"),
        "version": version,
        "provider": {"name": provider, "url": format!("https://{provider}.example")},
        "description": format!("about {name}"),
        "installModes": [{"type": "AllNamespaces", "supported": true}],
        "install": {"strategy": "deployment", "spec": {"deployments": [{"name": "d", "spec": {"template": {"spec": {
            "containers": [{"name": "m", "image": format!("quay.io/acme/{name}:v{version}")}]
        }}}}]}},
        "customresourcedefinitions": {"owned": [{
            "name": "widgets.acme.io", "version": "v1", "kind": "Widget",
            "displayName": "Widget", "description": "a widget",
            "specDescriptors": [{"path": "size", "displayName": "Size"}]
        }]},
    });
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra_spec.as_object()) {
        spec.extend(extra.clone());
    }
    json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {"name": name, "labels": labels, "annotations": {"capabilities": "Basic Install"}},
        "spec": spec,
    })
    .to_string()
}

fn bundle(package: &str, name: &str, version: &str, csv_json: &str) -> String {
    use base64::Engine as _;
    let data = base64::engine::general_purpose::STANDARD.encode(csv_json);
    json!({
        "schema": "olm.bundle", "name": name, "package": package, "image": format!("quay.io/acme/{name}-bundle"),
        "properties": [
            {"type": "olm.package", "value": {"packageName": package, "version": version}},
            {"type": "olm.bundle.object", "value": {"data": data}},
        ],
    })
    .to_string()
}

/// `widgets`: stable (head 1.1.0, default) and fast (head 2.0.0); 1.0.1 deprecated; the fast
/// head carries an icon. `gadgets`: one channel, its CSV labels its os support.
fn catalog() -> Arc<CatalogIndex> {
    catalog_with_default("stable")
}

fn catalog_with_default(default_channel: &str) -> Arc<CatalogIndex> {
    let widgets = [
        ("widgets.v1.0.0", "1.0.0", "Acme", json!({}), json!({})),
        ("widgets.v1.0.1", "1.0.1", "Acme", json!({}), json!({})),
        (
            "widgets.v1.1.0",
            "1.1.0",
            "Acme",
            json!({"keywords": ["w"], "maturity": "stable", "links": [{"name": "site", "url": "https://w"}],
                   "maintainers": [{"name": "ops", "email": "ops@acme"}], "minKubeVersion": "1.28.0",
                   "relatedImages": [{"name": "x", "image": "quay.io/acme/extra:1"}]}),
            json!({"team": "widgets"}),
        ),
        (
            "widgets.v2.0.0",
            "2.0.0",
            "Acme Labs",
            json!({"icon": [{"base64data": "PHN2Zy8+", "mediatype": "image/svg+xml"}]}),
            json!({"team": "fast"}),
        ),
    ];
    let mut docs: Vec<String> = vec![
        json!({"schema": "olm.package", "name": "widgets", "defaultChannel": default_channel}).to_string(),
        json!({"schema": "olm.channel", "package": "widgets", "name": "stable", "entries": [
            {"name": "widgets.v1.0.0"},
            {"name": "widgets.v1.0.1", "replaces": "widgets.v1.0.0"},
            {"name": "widgets.v1.1.0", "replaces": "widgets.v1.0.1"},
        ]})
        .to_string(),
        json!({"schema": "olm.channel", "package": "widgets", "name": "fast", "entries": [
            {"name": "widgets.v1.1.0"},
            {"name": "widgets.v2.0.0", "replaces": "widgets.v1.1.0"},
        ]})
        .to_string(),
        json!({"schema": "olm.deprecations", "package": "widgets", "entries": [
            {"reference": {"schema": "olm.bundle", "name": "widgets.v1.0.1"}, "message": "1.0.1 loses data"},
            {"reference": {"schema": "olm.channel", "name": "fast"}, "message": "fast is going away"},
        ]})
        .to_string(),
        json!({"schema": "olm.package", "name": "gadgets", "defaultChannel": "alpha"}).to_string(),
        json!({"schema": "olm.channel", "package": "gadgets", "name": "alpha", "entries": [{"name": "gadgets.v0.1.0"}]}).to_string(),
        json!({"schema": "olm.deprecations", "package": "gadgets", "entries": [
            {"reference": {"schema": "olm.package"}, "message": "use widgets"},
        ]})
        .to_string(),
    ];
    for (name, version, provider, extra, labels) in widgets {
        docs.push(bundle(
            "widgets",
            name,
            version,
            &csv(name, version, provider, extra, labels),
        ));
    }
    docs.push(bundle(
        "gadgets",
        "gadgets.v0.1.0",
        "0.1.0",
        &csv(
            "gadgets.v0.1.0",
            "0.1.0",
            "Gizmo",
            json!({}),
            json!({"operatorframework.io/os.zos": "supported"}),
        ),
    ));
    let (config, problems) = load_text("catalog.json".into(), &docs.join("\n"));
    assert!(problems.is_empty(), "{problems:?}");
    Arc::new(CatalogIndex::new(config))
}

fn meta(namespace: &str, name: &str) -> CatalogMeta {
    CatalogMeta {
        namespace: namespace.into(),
        name: name.into(),
        labels: [("tier".to_string(), "gold".to_string())].into(),
        creation_timestamp: Some("2026-01-01T00:00:00Z".into()),
        display_name: format!("{name} operators"),
        publisher: "Acme Inc".into(),
    }
}

fn store() -> ManifestStore {
    let store = ManifestStore::new("olm");
    let index = catalog();
    let report = store.sync(vec![
        (meta("olm", "community"), Arc::clone(&index)),
        (meta("team-a", "private"), index),
    ]);
    assert_eq!(report.rebuilt.len(), 2);
    store
}

/// The whole `widgets` object as OLM v0.31's package server shows it for catalog olm/community
/// (written from its rules, not produced by this code).
fn expected_widgets() -> Value {
    let desc = |name: &str, version: &str, provider: &str, extra: Value| {
        let mut d = json!({
            "displayName": format!("{name} display"),
            "version": version,
            "provider": {"name": provider, "url": format!("https://{provider}.example")},
            "annotations": {"capabilities": "Basic Install"},
            "description": format!("about {name}"),
            "installModes": [{"type": "AllNamespaces", "supported": true}],
            "customresourcedefinitions": {"owned": [{
                "name": "widgets.acme.io", "version": "v1", "kind": "Widget",
                "displayName": "Widget", "description": "a widget"
            }]},
            "apiservicedefinitions": {},
            "relatedImages": [format!("quay.io/acme/{name}:v{version}")],
        });
        if let (Some(d), Some(extra)) = (d.as_object_mut(), extra.as_object()) {
            d.extend(extra.clone());
        }
        d
    };
    json!({
        "apiVersion": "packages.operators.coreos.com/v1",
        "kind": "PackageManifest",
        "metadata": {
            "name": "widgets",
            "namespace": "olm",
            "labels": {
                "tier": "gold",
                "catalog": "community",
                "catalog-namespace": "olm",
                "provider": "Acme",
                "provider-url": "https://Acme.example",
                "team": "widgets",
                "operatorframework.io/os.linux": "supported",
                "operatorframework.io/arch.amd64": "supported",
            },
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {},
        "status": {
            "catalogSource": "community",
            "catalogSourceDisplayName": "community operators",
            "catalogSourcePublisher": "Acme Inc",
            "catalogSourceNamespace": "olm",
            "provider": {"name": "Acme", "url": "https://Acme.example"},
            "packageName": "widgets",
            "channels": [
                {
                    "name": "fast",
                    "currentCSV": "widgets.v2.0.0",
                    "currentCSVDesc": desc("widgets.v2.0.0", "2.0.0", "Acme Labs", json!({})),
                    "deprecation": {"message": "fast is going away"},
                    "entries": [
                        {"name": "widgets.v2.0.0", "version": "2.0.0"},
                        {"name": "widgets.v1.1.0", "version": "1.1.0"},
                    ],
                },
                {
                    "name": "stable",
                    "currentCSV": "widgets.v1.1.0",
                    "currentCSVDesc": desc("widgets.v1.1.0", "1.1.0", "Acme", json!({
                        "keywords": ["w"], "maturity": "stable",
                        "links": [{"name": "site", "url": "https://w"}],
                        "maintainers": [{"name": "ops", "email": "ops@acme"}],
                        "minKubeVersion": "1.28.0",
                        "relatedImages": ["quay.io/acme/extra:1", "quay.io/acme/widgets.v1.1.0:v1.1.0"],
                    })),
                    "entries": [
                        {"name": "widgets.v1.1.0", "version": "1.1.0"},
                        {"name": "widgets.v1.0.0", "version": "1.0.0"},
                    ],
                },
            ],
            "defaultChannel": "stable",
        },
    })
}

fn as_json<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap()
}

#[test]
fn a_package_reads_as_olm_shows_it() {
    let store = store();
    let all = store.list(
        Scope::AllNamespaces,
        &LabelSelector::default(),
        Some("widgets"),
    );
    let community: Vec<_> = all
        .iter()
        .filter(|m| m.status.catalog_source == "community")
        .collect();
    assert_eq!(community.len(), 1);
    assert_eq!(as_json(community[0]), expected_widgets());
}

#[test]
fn package_deprecation_and_own_os_label() {
    let store = store();
    let (gadgets, icon) = store.get("olm", "gadgets").unwrap();
    let v = as_json(&gadgets);
    assert_eq!(
        v["status"]["deprecation"],
        json!({"message": "use widgets"})
    );
    let labels = &v["metadata"]["labels"];
    assert_eq!(labels["operatorframework.io/os.zos"], "supported");
    assert!(
        labels.get("operatorframework.io/os.linux").is_none(),
        "own os label: no default"
    );
    assert_eq!(labels["operatorframework.io/arch.amd64"], "supported");
    assert_eq!(icon, None);
    let response = icon_response(icon.as_ref());
    assert_eq!(response.media_type, DEFAULT_ICON_MEDIA_TYPE);
    assert_eq!(response.etag, "");
    assert!(response.bytes.starts_with(b"<svg"));
}

#[test]
fn icon_comes_from_the_default_channel_head_and_is_stripped_from_objects() {
    let store = ManifestStore::new("olm");
    store.sync(vec![(meta("olm", "community"), catalog())]);
    let (widgets, icon) = store.get("olm", "widgets").unwrap();
    assert!(
        icon.is_none(),
        "the default channel (stable) head has no icon"
    );
    assert!(
        !serde_json::to_string(&widgets)
            .unwrap()
            .contains("base64data"),
        "icons are never in get/list"
    );

    store.sync(vec![(
        meta("olm", "community"),
        catalog_with_default("fast"),
    )]);
    let (widgets, icon) = store.get("olm", "widgets").unwrap();
    assert_eq!(widgets.status.default_channel, "fast");
    assert_eq!(
        widgets.status.provider.name, "Acme Labs",
        "provider of the default head"
    );
    assert!(
        !serde_json::to_string(&widgets)
            .unwrap()
            .contains("base64data")
    );
    let response = icon_response(icon.as_ref());
    assert_eq!(response.bytes, b"<svg/>");
    assert_eq!(response.media_type, "image/svg+xml");
    assert_eq!(response.etag, "\"widgets.fast.widgets.v2.0.0\"");
}

#[test]
fn a_default_channel_the_catalog_lacks_is_kept_as_written() {
    let store = ManifestStore::new("olm");
    store.sync(vec![(
        meta("olm", "community"),
        catalog_with_default("missing"),
    )]);
    let (widgets, _) = store.get("olm", "widgets").unwrap();
    // OLM keeps a default channel it cannot find as written; only an elided one is replaced.
    assert_eq!(widgets.status.default_channel, "missing");
}

#[test]
fn scope_namespace_shows_own_and_global_catalogs_in_the_namespace() {
    let store = store();
    let everything = LabelSelector::default();
    let in_a = store.list(Scope::Namespace("team-a"), &everything, None);
    let seen: Vec<(String, String, String)> = in_a
        .iter()
        .map(|m| {
            (
                m.metadata.name.clone(),
                m.metadata.namespace.clone(),
                m.status.catalog_source.clone(),
            )
        })
        .collect();
    let want = |n: &str, c: &str| (n.to_string(), "team-a".to_string(), c.to_string());
    assert_eq!(
        seen,
        [
            want("gadgets", "private"),
            want("gadgets", "community"),
            want("widgets", "private"),
            want("widgets", "community"),
        ]
    );
    // Another namespace sees the global catalog only.
    let in_b = store.list(Scope::Namespace("team-b"), &everything, None);
    assert_eq!(in_b.len(), 2);
    assert!(in_b.iter().all(|m| m.metadata.namespace == "team-b"));
    // All namespaces: each in its catalog's namespace.
    let all = store.list(Scope::AllNamespaces, &everything, None);
    let namespaces: Vec<&str> = all.iter().map(|m| m.metadata.namespace.as_str()).collect();
    assert_eq!(namespaces, ["olm", "team-a", "olm", "team-a"]);
    // A get prefers the namespace's own catalog.
    assert_eq!(
        store
            .get("team-a", "widgets")
            .unwrap()
            .0
            .status
            .catalog_source,
        "private"
    );
    assert_eq!(
        store
            .get("team-b", "widgets")
            .unwrap()
            .0
            .status
            .catalog_source,
        "community"
    );
    assert!(store.get("team-b", "nothing").is_none());
}

#[test]
fn selectors_filter_on_manifest_labels_and_names() {
    let store = store();
    let select = |s: &str| LabelSelector::parse(s).unwrap();
    let names = |items: Vec<super::PackageManifest>| -> Vec<String> {
        items
            .iter()
            .map(|m| format!("{}/{}", m.status.catalog_source, m.metadata.name))
            .collect()
    };
    assert_eq!(
        names(store.list(Scope::AllNamespaces, &select("catalog=private"), None)),
        ["private/gadgets", "private/widgets"]
    );
    assert_eq!(
        names(store.list(
            Scope::AllNamespaces,
            &select("provider=Gizmo,catalog-namespace=olm"),
            None
        )),
        ["community/gadgets"]
    );
    assert_eq!(
        names(store.list(Scope::Namespace("team-b"), &select("team"), Some("widgets"))),
        ["community/widgets"]
    );
}

#[test]
fn only_changed_catalogs_are_rebuilt_and_gone_ones_forgotten() {
    let store = store();
    let index = catalog();
    // Same metadata, new content for one; the other catalog is gone.
    let report = store.sync(vec![(meta("olm", "community"), index)]);
    assert_eq!(report.rebuilt.len(), 1);
    assert_eq!(report.removed.len(), 1);
    assert_eq!(store.len(), 2);
}

#[test]
fn the_table_prints_name_catalog_age() {
    let store = store();
    let items = store.list(Scope::Namespace("team-b"), &LabelSelector::default(), None);
    let now: Timestamp = "2026-01-03T00:00:00Z".parse().unwrap();
    let t = table(&items, IncludeObject::Metadata, now);
    let columns: Vec<&str> = t["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(columns, ["Name", "Catalog", "Age"]);
    assert_eq!(
        t["rows"][0]["cells"],
        json!(["gadgets", "community operators", "2d"])
    );
    assert_eq!(t["rows"][0]["object"]["metadata"]["namespace"], "team-b");
}

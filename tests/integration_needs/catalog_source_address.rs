//! `sourceType: grpc` + `address` catalogs against the embedded API server: connection state,
//! loaded content in the shared cache, visibility across namespaces, an unreachable catalog
//! marking only itself, and spec errors.

use crate::catalog_source_common;

use catalog_source_common::*;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use olm_rs::api::CatalogRef;
use olm_rs::api::{CatalogSource, CatalogSourceReason};
use olm_rs::catalog_cache::HealthReason;

async fn address_catalog_connects_and_loads_into_the_cache() {
    let registry = serve_index(etcd_index()).await;
    let h = start(Setup::default()).await;
    create(
        &h,
        &catalog_source(
            GLOBAL_NS,
            "community",
            serde_json::json!({"sourceType": "grpc", "address": registry.address, "priority": 5}),
        ),
    )
    .await;

    let cs = status_where(&h, GLOBAL_NS, "community", "READY", |s| {
        state_of(s).as_deref() == Some("READY")
    })
    .await;
    let status = cs.status.unwrap();
    let conn = status.connection_state.unwrap();
    assert_eq!(conn.address.as_deref(), Some(registry.address.as_str()));
    assert!(conn.last_connect.is_some());
    let service = status.registry_service.unwrap();
    assert_eq!(service.protocol.as_deref(), Some("grpc"));
    assert!(service.service_name.is_none() && service.created_at.is_some());
    assert!(status.reason.is_none() && status.message.is_none());

    let key = CatalogRef::new(GLOBAL_NS, "community");
    let snapshot = eventually("catalog loaded", || async {
        h.ctx.catalogs.get(&key).filter(|s| s.index.is_some())
    })
    .await;
    assert!(snapshot.health.healthy, "{:?}", snapshot.health);
    assert_eq!(snapshot.priority, 5);
    let index = snapshot.index.unwrap();
    let etcd = index.package("etcd").expect("etcd package read over gRPC");
    assert_eq!(
        etcd.default_channel_name(),
        etcd_index().package("etcd").unwrap().default_channel_name()
    );
    assert_eq!(index.bundle_count(), etcd_index().bundle_count());

    // Global catalogs are visible from every namespace.
    let visible: Vec<String> = h
        .ctx
        .catalogs
        .visible_from("team-a", GLOBAL_NS)
        .iter()
        .map(|s| s.key.to_string())
        .collect();
    assert_eq!(visible, ["olm/community"]);

    // Deleting the catalog forgets it.
    let api: Api<CatalogSource> = Api::namespaced(h.client.clone(), GLOBAL_NS);
    api.delete("community", &DeleteParams::default())
        .await
        .unwrap();
    eventually("catalog forgotten", || async {
        h.ctx.catalogs.get(&key).is_none().then_some(())
    })
    .await;
}

async fn unreachable_catalog_marks_only_itself() {
    let registry = serve_index(etcd_index()).await;
    let h = start(Setup::default()).await;
    let dead = closed_address();
    create(
        &h,
        &catalog_source(
            "team-a",
            "good",
            serde_json::json!({"sourceType": "grpc", "address": registry.address}),
        ),
    )
    .await;
    create(
        &h,
        &catalog_source(
            "team-a",
            "gone",
            serde_json::json!({"sourceType": "grpc", "address": dead}),
        ),
    )
    .await;

    let gone = status_where(
        &h,
        "team-a",
        "gone",
        "TRANSIENT_FAILURE with a reason",
        |s| state_of(s).as_deref() == Some("TRANSIENT_FAILURE") && s.reason.is_some(),
    )
    .await
    .status
    .unwrap();
    assert_eq!(gone.reason, Some(CatalogSourceReason::RegistryServerError));
    let message = gone.message.unwrap();
    assert!(
        message.starts_with("couldn't connect to registry - "),
        "{message}"
    );
    assert!(message.contains(&dead), "{message}");

    status_where(&h, "team-a", "good", "good READY", |s| {
        state_of(s).as_deref() == Some("READY")
    })
    .await;
    let good = eventually("good loaded", || async {
        h.ctx
            .catalogs
            .get(&CatalogRef::new("team-a", "good"))
            .filter(|s| s.health.healthy)
    })
    .await;
    assert!(good.index.is_some());
    let bad = h
        .ctx
        .catalogs
        .get(&CatalogRef::new("team-a", "gone"))
        .unwrap();
    assert!(!bad.health.healthy);
    assert_eq!(bad.health.reason, HealthReason::Unreachable);
    assert!(bad.health.message.contains(&dead), "{}", bad.health.message);

    // Only visible from its own namespace.
    assert_eq!(h.ctx.catalogs.visible_from("team-b", GLOBAL_NS).len(), 0);
    assert_eq!(h.ctx.catalogs.visible_from("team-a", GLOBAL_NS).len(), 2);

    // The registry comes up at that address: the catalog recovers by itself.
    let listener = tokio::net::TcpListener::bind(&dead).await.unwrap();
    let _revived = serve_on(etcd_index(), listener);
    status_where(&h, "team-a", "gone", "recovered", |s| {
        state_of(s).as_deref() == Some("READY") && s.reason.is_none()
    })
    .await;
    eventually("recovered in cache", || async {
        h.ctx
            .catalogs
            .get(&CatalogRef::new("team-a", "gone"))
            .filter(|s| s.health.healthy)
    })
    .await;
}

async fn invalid_spec_is_reported_and_cleared_when_fixed() {
    let registry = serve_index(etcd_index()).await;
    let h = start(Setup::default()).await;
    create(
        &h,
        &catalog_source(
            "team-b",
            "broken",
            serde_json::json!({"sourceType": "grpc"}),
        ),
    )
    .await;
    let status = status_where(&h, "team-b", "broken", "SpecInvalidError", |s| {
        s.reason.is_some()
    })
    .await
    .status
    .unwrap();
    assert_eq!(status.reason, Some(CatalogSourceReason::SpecInvalidError));
    assert_eq!(
        status.message.as_deref(),
        Some("image and address unset: at least one must be set for sourcetype: grpc")
    );
    let snap = h
        .ctx
        .catalogs
        .get(&CatalogRef::new("team-b", "broken"))
        .unwrap();
    assert_eq!(snap.health.reason, HealthReason::SpecInvalid);

    let api: Api<CatalogSource> = Api::namespaced(h.client.clone(), "team-b");
    api.patch(
        "broken",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"spec": {"address": registry.address}})),
    )
    .await
    .unwrap();
    status_where(&h, "team-b", "broken", "fixed and READY", |s| {
        s.reason.is_none() && state_of(s).as_deref() == Some("READY")
    })
    .await;

    create(
        &h,
        &catalog_source("team-b", "ftp", serde_json::json!({"sourceType": "ftp"})),
    )
    .await;
    let status = status_where(&h, "team-b", "ftp", "unknown type", |s| s.reason.is_some())
        .await
        .status
        .unwrap();
    assert_eq!(status.message.as_deref(), Some("unknown sourcetype: ftp"));
}

async fn catalog_serving_an_invalid_catalog_is_unhealthy_with_the_problems() {
    use olm_rs::catalog::{Bundle, Channel, ChannelEntry, DeclarativeConfig, Package, Property};
    // Two heads in one channel: what a broken remote registry might serve.
    let bundle = |name: &str, version: &str| Bundle {
        package: "broken".into(),
        name: name.into(),
        image: format!("quay.io/example/{name}"),
        properties: vec![
            Property::from_value(
                "olm.package",
                &serde_json::json!({"packageName": "broken", "version": version}),
            )
            .unwrap(),
        ],
        ..Bundle::default()
    };
    let config = DeclarativeConfig {
        packages: vec![Package {
            name: "broken".into(),
            default_channel: Some("stable".into()),
            ..Package::default()
        }],
        channels: vec![Channel {
            package: "broken".into(),
            name: "stable".into(),
            entries: vec![
                ChannelEntry {
                    name: "broken.v1".into(),
                    ..ChannelEntry::default()
                },
                ChannelEntry {
                    name: "broken.v2".into(),
                    ..ChannelEntry::default()
                },
            ],
            ..Channel::default()
        }],
        bundles: vec![bundle("broken.v1", "1.0.0"), bundle("broken.v2", "2.0.0")],
        ..DeclarativeConfig::default()
    };
    let registry = serve_index(std::sync::Arc::new(olm_rs::catalog::CatalogIndex::new(
        config,
    )))
    .await;
    let h = start(Setup::default()).await;
    create(
        &h,
        &catalog_source(
            "team-a",
            "bad",
            serde_json::json!({"sourceType": "grpc", "address": registry.address}),
        ),
    )
    .await;
    let status = status_where(&h, "team-a", "bad", "invalid content reported", |s| {
        s.message.is_some()
    })
    .await
    .status
    .unwrap();
    let message = status.message.unwrap();
    assert!(
        message.contains("multiple channel heads found in graph: broken.v1, broken.v2"),
        "{message}"
    );
    let snap = h
        .ctx
        .catalogs
        .get(&CatalogRef::new("team-a", "bad"))
        .unwrap();
    assert_eq!(snap.health.reason, HealthReason::Invalid);
    assert!(
        snap.index.is_none(),
        "invalid content is not resolved against"
    );
}

async fn kubectl_get_catsrc_shows_olms_columns() {
    let h = start(Setup::default()).await;
    create(
        &h,
        &catalog_source(
            GLOBAL_NS,
            "operatorhubio-catalog",
            serde_json::json!({
                "sourceType": "grpc",
                "address": closed_address(),
                "displayName": "Community Operators",
                "publisher": "OperatorHub.io"
            }),
        ),
    )
    .await;
    // What `kubectl get catsrc` asks for: a server-side Table.
    let request =
        http::Request::get("/apis/operators.coreos.com/v1alpha1/namespaces/olm/catalogsources")
            .header("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
            .body(Vec::new())
            .unwrap();
    let table: serde_json::Value = h.client.request(request).await.unwrap();
    let columns: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(columns, ["Name", "Display", "Type", "Publisher", "Age"]);
    let cells = &table["rows"][0]["cells"];
    assert_eq!(cells[0], "operatorhubio-catalog");
    assert_eq!(cells[1], "Community Operators");
    assert_eq!(cells[2], "grpc");
    assert_eq!(cells[3], "OperatorHub.io");
}

crate::trials! {
    multi address_catalog_connects_and_loads_into_the_cache,
    multi unreachable_catalog_marks_only_itself,
    multi invalid_spec_is_reported_and_cleared_when_fixed,
    multi catalog_serving_an_invalid_catalog_is_unhealthy_with_the_problems,
    multi kubectl_get_catsrc_shows_olms_columns,
}

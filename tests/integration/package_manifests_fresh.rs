//! PackageManifests of any namespace list the global catalogs' packages at once: in a namespace
//! created a moment before, right after a catalog's content is loaded — no pause, no namespace
//! to be seen first (docs/packagemanifests.md §5).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, DynamicObject, PostParams};
use olm_rs::api::CatalogRef;
use olm_rs::catalog::CatalogIndex;
use olm_rs::catalog_cache::CatalogCache;
use olm_rs::k8s::clock::SystemClock;
use olm_rs::package_manifest::ManifestStore;
use olm_rs::package_manifest::types::{GROUP, VERSION};
use olm_rs::package_server::{
    AllowAll, CatalogContents, FeedSlot, PackageApi, discovery, keep_current, router,
};
use olm_rs::sandbox::ApiServer;
use olm_rs::sandbox::aggregated::AggregatedApi;
use olm_rs::sandbox_run::{Sandbox, SandboxOptions, SubscriptionRequest};
use serde_json::{Value, json};

const GLOBAL: &str = "olm";
const BASE: &str = "/apis/packages.operators.coreos.com/v1";

/// The demo catalog as a registry serves it (CSV metadata kept: a PackageManifest needs it).
fn demo_index() -> Arc<CatalogIndex> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/catalog");
    Arc::new(
        olm_rs::catalog::validated::load_for_serving(&dir)
            .unwrap()
            .index,
    )
}

async fn create_namespace(client: &Client, name: &str) {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
}

async fn get_json(client: &Client, path: &str) -> Value {
    let req = http::Request::get(path).body(Vec::new()).unwrap();
    client.request::<Value>(req).await.unwrap()
}

/// The catalogs (label `catalog`) of the packages listed in `namespace`.
async fn listed_catalogs(client: &Client, namespace: &str) -> Vec<String> {
    let list = get_json(
        client,
        &format!("{BASE}/namespaces/{namespace}/packagemanifests"),
    )
    .await;
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            assert_eq!(
                m["metadata"]["namespace"], namespace,
                "shown in the namespace"
            );
            m["metadata"]["labels"]["catalog"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}

/// The package API over a catalog cache the test fills, on the embedded API server.
#[tokio::test]
async fn a_namespace_created_a_moment_ago_lists_a_catalog_the_moment_its_content_loads() {
    let server = ApiServer::new();
    let client = server.client();
    create_namespace(&client, GLOBAL).await;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    for crd in olm_rs::api::crd::all().unwrap() {
        crds.create(&PostParams::default(), &crd).await.unwrap();
    }
    let sources: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        GLOBAL,
        &kube::core::ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk("operators.coreos.com", "v1alpha1", "CatalogSource"),
            "catalogsources",
        ),
    );
    for name in ["first", "second"] {
        let source = json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
            "metadata": {"name": name, "namespace": GLOBAL},
            "spec": {"sourceType": "grpc", "address": "127.0.0.1:1"}
        });
        sources
            .create(
                &PostParams::default(),
                &serde_json::from_value(source).unwrap(),
            )
            .await
            .unwrap();
    }

    let cache = Arc::new(CatalogCache::new());
    let store = Arc::new(ManifestStore::new(GLOBAL));
    let feed = FeedSlot::default();
    server.register_aggregated(AggregatedApi {
        group: GROUP.to_owned(),
        version: VERSION.to_owned(),
        resource_list: discovery::resource_list(),
        router: router(PackageApi {
            store: Arc::clone(&store),
            feed: feed.clone(),
            authorizer: Arc::new(AllowAll),
            clock: Arc::new(SystemClock),
        }),
    });
    let contents: Arc<dyn CatalogContents> = cache.clone();
    let task = tokio::spawn(keep_current(
        olm_rs::k8s::shared::SharedWatches::new(client.clone()).catalog_sources(),
        contents,
        Arc::clone(&store),
        feed,
    ));

    // The first catalog's content, listed once the feed watches both CatalogSources.
    let index = demo_index();
    let now = jiff::Timestamp::now();
    for name in ["first", "second"] {
        cache.register(&CatalogRef::new(GLOBAL, name), None, 0, now);
    }
    cache.set_index(&CatalogRef::new(GLOBAL, "first"), Arc::clone(&index), now);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let listed = listed_catalogs(&client, GLOBAL).await;
        if listed == ["first"] {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the first catalog is never listed: {listed:?} (store {})",
            store.len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // A namespace nobody has seen, and the second catalog's content loaded just now: the very
    // next list shows it, without waiting for the feed's pause.
    for round in 0..5 {
        let ns = format!("brand-new-{round}");
        create_namespace(&client, &ns).await;
        let key = CatalogRef::new(GLOBAL, "second");
        cache.set_index(&key, Arc::new(CatalogIndex::clone(&index)), now);
        assert_eq!(
            listed_catalogs(&client, &ns).await,
            ["first", "second"],
            "round {round}: the second catalog's packages right after its content loaded"
        );
        let got = get_json(
            &client,
            &format!("{BASE}/namespaces/{ns}/packagemanifests/greeter-operator"),
        )
        .await;
        assert_eq!(got["metadata"]["namespace"], ns.as_str());
        // Gone again: the next list no longer shows it, at once too.
        cache.set_health(
            &key,
            olm_rs::catalog_cache::CatalogHealth::unhealthy(
                olm_rs::catalog_cache::HealthReason::Invalid,
                "test: content dropped",
                now,
            ),
            true,
        );
        assert_eq!(
            listed_catalogs(&client, &ns).await,
            ["first"],
            "round {round}"
        );
    }
    task.abort();
}

/// The sandbox as a user runs it: the moment the global catalog is READY, a namespace created
/// then lists its packages.
#[tokio::test]
async fn the_sandbox_lists_the_global_catalog_in_a_new_namespace_as_soon_as_it_is_ready() {
    let sandbox = Sandbox::start(SandboxOptions {
        api_addr: "127.0.0.1:0".parse().unwrap(),
        catalog: PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/catalog"),
        subscription: SubscriptionRequest::default(),
        bundle_images: Default::default(),
    })
    .await
    .expect("sandbox starts");
    let client = sandbox.client();
    let path = "/apis/operators.coreos.com/v1alpha1/namespaces/olm/catalogsources/sandbox-catalog";
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let source = get_json(&client, path).await;
        if source["status"]["connectionState"]["lastObservedState"] == "READY" {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the sandbox catalog never became READY: {}",
            source["status"]
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    create_namespace(&client, "just-created").await;
    assert_eq!(
        listed_catalogs(&client, "just-created").await,
        ["sandbox-catalog"]
    );
    sandbox.shutdown().await.unwrap();
}

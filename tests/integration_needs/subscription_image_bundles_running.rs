//! Image-only bundles with every reconciler of `olm-rs run` running (not driven step by step):
//! a grpc catalog whose bundles exist only in a real local registry → a Subscription installs
//! v1.0.0 to `Succeeded` (its phases observed in order through a watch) → the catalog gains
//! v1.1.0 → the Subscription upgrades, v1.1.0 reaches `Succeeded` and v1.0.0 is removed.

use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube_runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};

use olm_rs::api::{
    CatalogSource, ClusterServiceVersion, OperatorGroup, Subscription, SubscriptionState,
};
use olm_rs::catalog::CatalogIndex;
use olm_rs::k8s::clock::SystemClock;
use olm_rs::reconcile::bundle_images::BundleImageOptions;
use olm_rs::reconcile::catalog_source::CatalogSourceOptions;
use olm_rs::reconcile::{Context, ControllerOptions};
use olm_rs::sandbox::ApiServer;

use crate::catalog_source_common::{LocalRegistry, eventually, serve_index};
use crate::image_registry::Registry;
use crate::subscription_image_bundles::{image_catalog, widget_layer};

const NS: &str = "operators";
const CATALOG_NS: &str = "olm";

async fn create<K>(api: &Api<K>, value: Value) -> K
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let object: K = serde_json::from_value(value).expect("test object");
    api.create(&PostParams::default(), &object)
        .await
        .expect("create test object")
}

/// The catalog of widget up to `last`, served over OLM's registry API from this process.
async fn serve_widget(registry: &Registry, last: &str) -> LocalRegistry {
    serve_index(Arc::new(CatalogIndex::new(image_catalog(registry, last)))).await
}

/// Every `(csv, phase)` the CSVs of [`NS`] pass through, in the order the watch saw them.
fn record_phases(client: kube::Client) -> Arc<std::sync::Mutex<Vec<(String, String)>>> {
    let seen = Arc::new(std::sync::Mutex::new(Vec::<(String, String)>::new()));
    let out = Arc::clone(&seen);
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client, NS);
    tokio::spawn(async move {
        let mut events = watcher(csvs, watcher::Config::default())
            .applied_objects()
            .boxed();
        while let Ok(Some(csv)) = events.try_next().await {
            let name = csv.metadata.name.clone().unwrap_or_default();
            let Some(phase) = phase_text(&csv) else {
                continue;
            };
            let mut seen = out.lock().unwrap();
            if seen.last() != Some(&(name.clone(), phase.clone())) {
                seen.push((name, phase));
            }
        }
    });
    seen
}

fn phases_of(seen: &[(String, String)], csv: &str) -> Vec<String> {
    let mut phases: Vec<String> = Vec::new();
    for (name, phase) in seen {
        if name == csv && phases.last() != Some(phase) {
            phases.push(phase.clone());
        }
    }
    phases
}

/// The phase as `kubectl get csv` prints it.
fn phase_text(csv: &ClusterServiceVersion) -> Option<String> {
    let status = serde_json::to_value(csv.status.as_ref()?).ok()?;
    Some(status.get("phase")?.as_str()?.to_owned())
}

async fn phase(csvs: &Api<ClusterServiceVersion>, name: &str) -> Option<String> {
    phase_text(&csvs.get_opt(name).await.ok()??)
}

async fn image_bundles_install_and_upgrade_to_succeeded_with_every_reconciler_running() {
    let registry = Registry::start(false);
    for version in ["1.0.0", "1.1.0"] {
        registry
            .push(
                "widget-bundle",
                &format!("v{version}"),
                widget_layer(version),
            )
            .await;
    }

    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let server = ApiServer::new();
    let client = server.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in olm_rs::api::crd::all().expect("OLM CRDs build") {
        crds.create(&PostParams::default(), &crd)
            .await
            .expect("create OLM CRD");
    }
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for ns in [CATALOG_NS, NS] {
        create(&namespaces, json!({"metadata": {"name": ns}})).await;
    }
    create(
        &Api::<OperatorGroup>::namespaced(client.clone(), NS),
        json!({"metadata": {"name": "og", "namespace": NS}, "spec": {"targetNamespaces": [NS]}}),
    )
    .await;

    let dir = tempfile::tempdir().unwrap();
    let options = ControllerOptions {
        global_catalog_namespace: CATALOG_NS.to_owned(),
        catalog_sources: CatalogSourceOptions::quick(),
        bundle_images: BundleImageOptions {
            registries_config: Some(registry.registries_conf(dir.path())),
            cache_dir: Some(dir.path().join("cache")),
            ..BundleImageOptions::default()
        },
        ..ControllerOptions::default()
    };
    let ctx = Arc::new(Context::new(client.clone(), Arc::new(SystemClock), options));
    let controllers = tokio::spawn(olm_rs::controller::run_reconcilers(ctx));
    let seen = record_phases(client.clone());

    let first = serve_widget(&registry, "1.0.0").await;
    let catalogs: Api<CatalogSource> = Api::namespaced(client.clone(), CATALOG_NS);
    create(
        &catalogs,
        json!({"metadata": {"name": "community", "namespace": CATALOG_NS},
               "spec": {"sourceType": "grpc", "address": first.address}}),
    )
    .await;
    let subscriptions: Api<Subscription> = Api::namespaced(client.clone(), NS);
    create(
        &subscriptions,
        json!({"metadata": {"name": "widget", "namespace": NS},
               "spec": {"source": "community", "sourceNamespace": CATALOG_NS, "name": "widget",
                        "channel": "stable", "installPlanApproval": "Automatic"}}),
    )
    .await;

    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), NS);
    eventually("widget-operator.v1.0.0 Succeeded", || async {
        (phase(&csvs, "widget-operator.v1.0.0").await.as_deref() == Some("Succeeded")).then_some(())
    })
    .await;
    let sub = eventually("the Subscription at the latest known", || async {
        let sub = subscriptions.get("widget").await.ok()?;
        (sub.status.as_ref()?.state == Some(SubscriptionState::AtLatestKnown)).then_some(sub)
    })
    .await;
    assert_eq!(
        sub.status.unwrap().installed_csv.as_deref(),
        Some("widget-operator.v1.0.0")
    );
    // The objects came from the image: its ConfigMap exists, and the CSV is the image's.
    let config_maps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), NS);
    assert!(
        config_maps
            .get_opt("widget-defaults")
            .await
            .unwrap()
            .is_some()
    );

    // The catalog moves to a new server that also offers v1.1.0.
    let second = serve_widget(&registry, "1.1.0").await;
    catalogs
        .patch(
            "community",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"address": second.address}})),
        )
        .await
        .unwrap();
    drop(first);
    eventually("widget-operator.v1.1.0 Succeeded", || async {
        (phase(&csvs, "widget-operator.v1.1.0").await.as_deref() == Some("Succeeded")).then_some(())
    })
    .await;
    eventually("widget-operator.v1.0.0 removed", || async {
        csvs.get_opt("widget-operator.v1.0.0")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    let sub = eventually("the Subscription upgraded", || async {
        let sub = subscriptions.get("widget").await.ok()?;
        let status = sub.status.as_ref()?;
        (status.state == Some(SubscriptionState::AtLatestKnown)
            && status.installed_csv.as_deref() == Some("widget-operator.v1.1.0"))
        .then_some(sub)
    })
    .await;
    assert!(
        sub.status
            .unwrap()
            .conditions
            .iter()
            .flatten()
            .all(|c| c.type_.as_str() != "BundleUnpackFailed"),
        "no unpack failure"
    );
    let upgraded = csvs.get("widget-operator.v1.1.0").await.unwrap();
    assert_eq!(
        upgraded.spec.replaces.as_deref(),
        Some("widget-operator.v1.0.0")
    );

    // Both CSVs went through OLM's phases in order, as `kubectl get csv -w` shows them.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let seen = seen.lock().unwrap().clone();
    for csv in ["widget-operator.v1.0.0", "widget-operator.v1.1.0"] {
        let phases = phases_of(&seen, csv);
        let order = ["Pending", "InstallReady", "Installing", "Succeeded"];
        let mut at = 0;
        for phase in &phases {
            if at < order.len() && phase == order[at] {
                at += 1;
            }
        }
        assert_eq!(at, order.len(), "{csv} went through {phases:?}");
    }
    let plans = Api::<olm_rs::api::InstallPlan>::namespaced(client.clone(), NS)
        .list(&ListParams::default())
        .await
        .unwrap();
    assert_eq!(plans.items.len(), 2, "one plan per version");
    controllers.abort();
}

crate::trials! {
    multi image_bundles_install_and_upgrade_to_succeeded_with_every_reconciler_running,
}

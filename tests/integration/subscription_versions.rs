//! `olm-rs.io/version` and `olm-rs.io/allow-downgrade` on the embedded API server
//! (docs/upgrades.md): a range holds below the head and names what it leaves out, widening
//! upgrades, narrowing holds, a requested downgrade replaces the installed CSV with the newest
//! version in range below it and leaves custom resources alone, and a downgrade that would need
//! a CRD version the cluster no longer serves is refused with nothing changed.

use crate::subscription_support as support;

use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};
use support::*;

use olm_rs::api::{Subscription, SubscriptionState};
use olm_rs::catalog::model::DeclarativeConfig;

const CSV: (&str, &str, &str) = (
    "operators.coreos.com/v1alpha1",
    "ClusterServiceVersion",
    "clusterserviceversions",
);
const VERSION: &str = "olm-rs.io/version";
const DOWNGRADE: &str = "olm-rs.io/allow-downgrade";

async fn annotate(env: &Env, annotations: Value) {
    Api::<Subscription>::namespaced(env.client(), NS)
        .patch(
            "widget",
            &PatchParams::default(),
            &Patch::Merge(&json!({"metadata": {"annotations": annotations}})),
        )
        .await
        .expect("annotate");
}

/// The Subscription to `widget` (channel `stable`), annotated from the start.
async fn subscribe_annotated(env: &Env, annotations: Value) {
    let sub: Subscription = serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": "widget", "namespace": NS, "annotations": annotations},
        "spec": {"source": "community", "sourceNamespace": "olm", "name": "widget", "channel": "stable"}
    }))
    .unwrap();
    Api::<Subscription>::namespaced(env.client(), NS)
        .create(&Default::default(), &sub)
        .await
        .expect("subscription");
}

async fn csv_names(env: &Env) -> Vec<String> {
    env.names(CSV.0, CSV.1, CSV.2, true).await
}

/// The `VersionHeld` condition's reason and message.
async fn held(env: &Env) -> Option<(String, String)> {
    let sub = env.subscription("widget").await;
    condition(&sub, "VersionHeld").map(|c| {
        (
            c.reason.clone().unwrap_or_default(),
            c.message.clone().unwrap_or_default(),
        )
    })
}

async fn plan_csvs(env: &Env) -> Vec<Vec<String>> {
    env.plans()
        .await
        .into_iter()
        .map(|p| p.spec.cluster_service_version_names)
        .collect()
}

/// The controllers (Subscription, InstallPlan, CSV) running against the embedded API server.
struct Running(Vec<tokio::task::JoinHandle<()>>);

impl Running {
    fn start(env: &Env) -> Running {
        use olm_rs::reconcile::{cluster_service_version, install_plan, subscription};
        let catalogs: Arc<dyn subscription::CatalogSnapshots> = Arc::new(env.catalogs.clone());
        let ctx = env.ctx.clone();
        Running(vec![
            tokio::spawn(async move {
                let _ = subscription::run(ctx.clone(), catalogs, futures::stream::pending()).await;
            }),
            {
                let ctx = env.ctx.clone();
                tokio::spawn(async move {
                    let _ = install_plan::run(ctx).await;
                })
            },
            {
                let ctx = env.ctx.clone();
                tokio::spawn(async move {
                    let _ = cluster_service_version::run(ctx).await;
                })
            },
        ])
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

/// The CSVs of the namespace with their phases, once they are `wanted` (60 s at most).
async fn settle(env: &Env, wanted: &[(&str, &str)]) -> Vec<(String, String)> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let mut now = Vec::new();
        for name in csv_names(env).await {
            let phase = env
                .get(CSV.0, CSV.1, CSV.2, &name, true)
                .await
                .and_then(|v| {
                    v.pointer("/status/phase")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                })
                .unwrap_or_default();
            now.push((name, phase));
        }
        let matches = now.len() == wanted.len()
            && now
                .iter()
                .zip(wanted)
                .all(|((n, p), (wn, wp))| n == wn && p == wp);
        if matches || tokio::time::Instant::now() >= deadline {
            return now;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// The `VersionHeld` condition once `check` holds of it (10 s at most).
async fn held_when(
    env: &Env,
    check: impl Fn(&Option<(String, String)>) -> bool,
) -> Option<(String, String)> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let now = held(env).await;
        if check(&now) || tokio::time::Instant::now() >= deadline {
            return now;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

#[tokio::test]
async fn a_range_holds_widens_narrows_and_downgrades_on_request() {
    let mut env = Env::new().await;
    env.add_catalog("community", widget_catalog());
    let _running = Running::start(&env);
    subscribe_annotated(&env, json!({VERSION: ">=1.0.0 <1.2.0"})).await;

    // The head (1.2.0) is outside the range: the newest in range is installed and held.
    let v110 = [("widget-operator.v1.1.0", "Succeeded")];
    assert_eq!(
        settle(&env, &v110).await,
        [("widget-operator.v1.1.0".to_owned(), "Succeeded".to_owned())]
    );
    let (reason, message) = held_when(&env, Option::is_some).await.expect("VersionHeld");
    assert_eq!(reason, "NewerVersionOutsideRange");
    assert!(
        message
            .contains("widget-operator.v1.2.0 (version 1.2.0) is available but outside the range"),
        "{message}"
    );
    let sub = env.subscription("widget").await;
    assert_eq!(
        sub.status.as_ref().unwrap().state(),
        SubscriptionState::AtLatestKnown
    );
    assert_eq!(plan_csvs(&env).await, [vec!["widget-operator.v1.1.0"]]);

    // A custom resource, which no downgrade may touch.
    let widgets = Api::<kube::api::DynamicObject>::namespaced_with(
        env.client(),
        NS,
        &kube::core::ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk("example.com", "v1", "Widget"),
            "widgets",
        ),
    );
    let widget: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w", "namespace": NS}, "spec": {"size": 3}
    }))
    .unwrap();
    let created = widgets
        .create(&Default::default(), &widget)
        .await
        .expect("a Widget");

    // Widened: the upgrade follows, and the condition goes.
    annotate(&env, json!({VERSION: ">=1.0.0 <2.0.0"})).await;
    let v120 = [("widget-operator.v1.2.0", "Succeeded")];
    assert_eq!(
        settle(&env, &v120).await,
        [("widget-operator.v1.2.0".to_owned(), "Succeeded".to_owned())]
    );
    assert_eq!(held_when(&env, Option::is_none).await, None);

    // Narrowed below the installed version: it holds, never downgrades by itself.
    annotate(&env, json!({VERSION: "<1.2.0"})).await;
    let (reason, message) = held_when(&env, Option::is_some).await.expect("VersionHeld");
    assert_eq!(reason, "InstalledVersionOutsideRange");
    assert!(
        message.contains("olm-rs never downgrades by itself"),
        "{message}"
    );
    assert_eq!(env.plans().await.len(), 2, "no plan");
    assert_eq!(csv_names(&env).await, ["widget-operator.v1.2.0"]);

    // Asked for: the newest version in range below replaces the installed CSV.
    annotate(&env, json!({DOWNGRADE: "true"})).await;
    assert_eq!(
        settle(&env, &v110).await,
        [("widget-operator.v1.1.0".to_owned(), "Succeeded".to_owned())]
    );
    assert_eq!(
        plan_csvs(&env).await.last().unwrap(),
        &vec!["widget-operator.v1.1.0".to_owned()]
    );
    let csv = env
        .get(CSV.0, CSV.1, CSV.2, "widget-operator.v1.1.0", true)
        .await
        .expect("v1.1.0 installed again");
    assert_eq!(csv["spec"]["replaces"], "widget-operator.v1.2.0");
    // Back in range, held below 1.2.0 again.
    let (reason, _) = held_when(&env, |h| {
        h.as_ref()
            .is_some_and(|(r, _)| r == "NewerVersionOutsideRange")
    })
    .await
    .expect("VersionHeld");
    assert_eq!(reason, "NewerVersionOutsideRange");
    let status = env.subscription("widget").await.status.unwrap();
    assert_eq!(
        status.installed_csv.as_deref(),
        Some("widget-operator.v1.1.0")
    );
    let after = widgets.get("w").await.expect("the Widget is still there");
    assert_eq!(after.data["spec"], created.data["spec"]);
    assert_eq!(
        after.metadata.resource_version,
        created.metadata.resource_version
    );
}

/// `widget` 1.0.0 owns Widgets at `v1alpha1` only; 1.1.0 at `v1` only (its CRD no longer
/// serves v1alpha1).
fn retired_version_catalog() -> DeclarativeConfig {
    let mut config = widget_catalog();
    config.channels.retain(|c| c.name == "stable");
    config.channels[0].entries.truncate(2);
    let mut old = widget_bundle("1.0.0", widget_crd(&[("v1alpha1", true)], "integer"));
    let mut csv = widget_csv("1.0.0");
    csv["spec"]["customresourcedefinitions"]["owned"][0]["version"] = json!("v1alpha1");
    old.objects[0] = serde_json::value::to_raw_value(&csv).unwrap();
    let new = widget_bundle("1.1.0", widget_crd(&[("v1", true)], "integer"));
    config.bundles = vec![old, new];
    config
}

#[tokio::test]
async fn a_downgrade_to_a_retired_crd_version_is_refused_with_nothing_changed() {
    let mut env = Env::new().await;
    env.add_catalog("community", retired_version_catalog());
    subscribe_annotated(&env, json!({VERSION: "1.1.0"})).await;
    env.converge().await;
    assert_eq!(csv_names(&env).await, ["widget-operator.v1.1.0"]);

    annotate(&env, json!({VERSION: "1.0.0", DOWNGRADE: "true"})).await;
    let plans_before = env.plans().await.len();
    env.converge().await;
    let (reason, message) = held(&env).await.expect("refused");
    assert_eq!(reason, "DowngradeRefused");
    assert_eq!(
        message,
        "downgrade to widget-operator.v1.0.0 refused: it owns CRD widgets.example.com at version v1alpha1, which the cluster's CRD no longer serves (served: v1); nothing was changed"
    );
    assert_eq!(env.plans().await.len(), plans_before, "no plan");
    assert_eq!(csv_names(&env).await, ["widget-operator.v1.1.0"]);
}

#[tokio::test]
async fn a_malformed_range_is_reported_and_nothing_is_installed() {
    let mut env = Env::new().await;
    env.add_catalog("community", widget_catalog());
    subscribe_annotated(&env, json!({VERSION: ">= 1.0.0 || "})).await;
    env.converge().await;
    assert!(env.plans().await.is_empty());
    let sub = env.subscription("widget").await;
    let failed = condition(&sub, "ResolutionFailed").expect("ResolutionFailed");
    assert_eq!(
        failed.message.as_deref(),
        Some(
            "Subscription widget: annotation olm-rs.io/version \">= 1.0.0 || \" is not a version range: Last element in range is '||'; nothing is installed or upgraded until it is fixed"
        )
    );
}

#[tokio::test]
async fn a_pin_outlives_catalog_updates() {
    let mut env = Env::new().await;
    let mut first = widget_catalog();
    first.channels.retain(|c| c.name == "stable");
    first.channels[0].entries.truncate(1);
    first.bundles.truncate(1);
    env.add_catalog("community", first);
    subscribe_annotated(&env, json!({VERSION: "1.0.0"})).await;
    env.converge().await;
    assert_eq!(csv_names(&env).await, ["widget-operator.v1.0.0"]);
    assert_eq!(held(&env).await, None, "nothing newer yet");

    // The catalog grows twice; the pin holds, and says what it leaves out.
    for (entries, newest) in [(2, "widget-operator.v1.1.0"), (3, "widget-operator.v1.1.0")] {
        let mut grown = widget_catalog();
        grown.channels.retain(|c| c.name == "stable");
        grown.channels[0].entries.truncate(entries);
        env.add_catalog("community", grown);
        env.converge().await;
        assert_eq!(csv_names(&env).await, ["widget-operator.v1.0.0"]);
        assert_eq!(env.plans().await.len(), 1, "no plan beyond the first");
        let (reason, message) = held(&env).await.expect("VersionHeld");
        assert_eq!(reason, "NewerVersionOutsideRange");
        assert!(message.contains(newest), "{message}");
    }
}

/// A refused downgrade is decided again when the CRD it names changes, not only at the
/// periodic resync (5 minutes): here the cluster's CRD serves `v1alpha1` again, and the
/// refusal now names what still stands in the way — `v1`, which the CRD stores and the older
/// bundle's CRD lacks (docs/upgrades.md §2).
#[tokio::test]
async fn a_crd_change_rechecks_a_refused_downgrade() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

    let mut env = Env::new().await;
    env.add_catalog("community", retired_version_catalog());
    let running = Running::start(&env);
    subscribe_annotated(&env, json!({VERSION: "1.1.0"})).await;
    let v110 = [("widget-operator.v1.1.0", "Succeeded")];
    assert_eq!(
        settle(&env, &v110).await,
        [("widget-operator.v1.1.0".to_owned(), "Succeeded".to_owned())]
    );
    // Only the Subscription controller runs on, once the install is through (its plan Complete,
    // the Subscription at its CSV): the CSV controller's own syncs would queue the namespace
    // now and then, and hide whether the CRD's change did.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let complete = env.plans().await.iter().all(|p| {
            p.status
                .as_ref()
                .is_some_and(|s| s.phase == olm_rs::api::InstallPlanPhase::Complete)
        });
        let status = env.subscription("widget").await.status;
        let at_csv = status.is_some_and(|s| {
            s.state() == SubscriptionState::AtLatestKnown
                && s.installed_csv.as_deref() == Some("widget-operator.v1.1.0")
        });
        if complete && at_csv {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "install not through"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    for task in &running.0[1..] {
        task.abort();
    }
    annotate(&env, json!({VERSION: "1.0.0", DOWNGRADE: "true"})).await;
    let (reason, message) = held_when(&env, |h| {
        h.as_ref().is_some_and(|(r, _)| r == "DowngradeRefused")
    })
    .await
    .expect("refused");
    assert_eq!(reason, "DowngradeRefused");
    assert!(message.contains("no longer serves"), "{message}");
    // Past the syncs the refusal's own writes bring (one follows about 5 s later), nothing
    // else is going on: only the CRD's change can bring a sync before the periodic resync.
    tokio::time::sleep(Duration::from_secs(6)).await;

    let crd = widget_crd(&[("v1alpha1", false), ("v1", true)], "integer");
    Api::<CustomResourceDefinition>::all(env.client())
        .patch(
            "widgets.example.com",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"versions": crd["spec"]["versions"]}})),
        )
        .await
        .expect("v1alpha1 served again");
    let started = tokio::time::Instant::now();
    let (reason, message) = held_when(&env, |h| {
        h.as_ref()
            .is_some_and(|(_, m)| m.contains("status.storedVersions"))
            || started.elapsed() > Duration::from_secs(2)
    })
    .await
    .expect("still refused");
    eprintln!(
        "VersionHeld read {:?} after the CRD changed",
        started.elapsed()
    );
    assert_eq!(reason, "DowngradeRefused");
    assert_eq!(
        message,
        "downgrade to widget-operator.v1.0.0 refused: its CRD widgets.example.com has no version v1, which is still in the cluster CRD's status.storedVersions, so objects stored at v1 would be lost; nothing was changed",
        "decided again within 2 s of the CRD's change"
    );
    assert_eq!(csv_names(&env).await, ["widget-operator.v1.1.0"]);
}

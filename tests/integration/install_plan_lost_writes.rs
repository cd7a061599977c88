//! InstallPlans whose writes are lost in flight (docs/reliability.md §3): an API server that
//! restarts fails one write and loses the answer to another, and plans run again. A re-run is
//! idempotent only if it keeps the effect of every other plan: here the installed-alongside
//! annotation that the next CSV's requirement check waits for (docs/csv-phases.md §6.2).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::FutureExt;
use http::{Method, Request};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use kube::client::Body;
use serde_json::{Value, json};

use olm_rs::api::{InstallPlan, InstallPlanPhase, InstallPlanStatus, StepStatus};
use olm_rs::olm_hash::installed_alongside_annotation_key;
use olm_rs::reconcile::{Context, ControllerOptions};

use crate::subscription_support as support;
use support::*;

const CRD: (&str, &str, &str) = (
    "apiextensions.k8s.io/v1",
    "CustomResourceDefinition",
    "customresourcedefinitions",
);

/// `client`, except that the first request with `method` whose path ends with `suffix` fails
/// as a dropped connection does, never reaching the server.
fn failing_once(client: &Client, method: Method, suffix: &'static str) -> Client {
    let inner = client.clone();
    let fired = Arc::new(AtomicBool::new(false));
    let service = tower::service_fn(move |request: Request<Body>| {
        let (inner, fired, method) = (inner.clone(), fired.clone(), method.clone());
        async move {
            if request.method() == method
                && request.uri().path().ends_with(suffix)
                && !fired.swap(true, Ordering::SeqCst)
            {
                return Err(kube::Error::Service(
                    format!("connection reset: {method} {suffix} dropped by the test").into(),
                ));
            }
            inner.send(request).await
        }
        .boxed()
    });
    Client::new(service, client.default_namespace().to_owned())
}

fn alongside(crd: &Value) -> Vec<String> {
    let mut out: Vec<String> = crd["metadata"]["annotations"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.starts_with("operatorframework.io/installed-alongside-"))
        .filter_map(|(_, v)| v.as_str().map(str::to_owned))
        .collect();
    out.sort();
    out
}

/// The widget package at 1.0.0 and 1.1.0 (one CRD), subscribed from 1.0.0: the first plan run
/// to Complete, the upgrade's plan made. Returns the env, the first plan's name and its status
/// as it was before it ran (what the store shows when its Complete is lost), and the upgrade's
/// plan's name.
async fn first_installed_upgrade_planned() -> (Env, String, InstallPlanStatus, String) {
    let mut env = Env::new().await;
    let mut catalog = widget_catalog();
    catalog.channels[0].entries.truncate(2);
    let crd = widget_crd(&[("v1", true)], "integer");
    catalog.bundles = vec![
        widget_bundle("1.0.0", crd.clone()),
        widget_bundle("1.1.0", crd),
    ];
    env.add_catalog("community", catalog);
    env.subscribe_widget(json!({"startingCSV": "widget-operator.v1.0.0"}))
        .await;
    let first = env.sync_subscriptions().await.created_plans.remove(0);
    let unrun = env.plan(&first).await.status.expect("a planned status");
    assert_eq!(
        env.run_plan(&first).await.status.unwrap().phase,
        InstallPlanPhase::Complete
    );
    let upgrade = env.sync_subscriptions().await.created_plans.remove(0);
    (env, first, unrun, upgrade)
}

/// Plan `name`'s Complete turns out lost: its status is `unrun` again.
async fn lose_complete(env: &Env, name: &str, unrun: InstallPlanStatus) {
    let plans: Api<InstallPlan> = Api::namespaced(env.client(), NS);
    plans
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": unrun})),
        )
        .await
        .expect("the plan back to before it ran");
}

#[tokio::test]
async fn a_plan_run_again_after_its_lost_complete_keeps_the_next_csvs_crd_annotation() {
    let (mut env, first, unrun, upgrade) = first_installed_upgrade_planned().await;

    // The upgrade's first pass applies the CRD (with 1.1.0's annotation), then the API server
    // goes away before the new CSV is created.
    let healthy = env.ctx.clone();
    env.ctx = Arc::new(Context::new(
        failing_once(
            &healthy.client,
            Method::POST,
            "/namespaces/operators/clusterserviceversions",
        ),
        Arc::new(env.clock.clone()),
        ControllerOptions::default(),
    ));
    let status = env.run_plan_once(&upgrade).await.status.unwrap();
    env.ctx = healthy;
    assert_eq!(status.phase, InstallPlanPhase::Installing, "{status:?}");
    let steps = status.plan.unwrap();
    let crd_step = steps
        .iter()
        .find(|s| s.resource.kind == "CustomResourceDefinition")
        .unwrap();
    assert_eq!(crd_step.status, StepStatus::Present, "the CRD was updated");
    let crd = env
        .get(CRD.0, CRD.1, CRD.2, "widgets.example.com", false)
        .await
        .unwrap();
    assert!(
        alongside(&crd).contains(&format!("{NS}/widget-operator.v1.1.0")),
        "{:?}",
        alongside(&crd)
    );

    // Meanwhile the first plan's Complete turns out lost: it runs again from the start and
    // updates the CRD once more, while widget-operator.v1.1.0 does not exist yet.
    lose_complete(&env, &first, unrun).await;
    assert_eq!(
        env.run_plan(&first).await.status.unwrap().phase,
        InstallPlanPhase::Complete
    );
    let crd = env
        .get(CRD.0, CRD.1, CRD.2, "widgets.example.com", false)
        .await
        .unwrap();
    assert_eq!(
        alongside(&crd),
        [
            format!("{NS}/widget-operator.v1.0.0"),
            format!("{NS}/widget-operator.v1.1.0")
        ],
        "the re-run keeps the annotation of the CSV the upgrade is about to create"
    );

    // The upgrade completes, and the CRD carries what widget-operator.v1.1.0 waits for.
    assert_eq!(
        env.run_plan(&upgrade).await.status.unwrap().phase,
        InstallPlanPhase::Complete
    );
    let crd = env
        .get(CRD.0, CRD.1, CRD.2, "widgets.example.com", false)
        .await
        .unwrap();
    let key = installed_alongside_annotation_key(NS, "widget-operator.v1.1.0");
    assert_eq!(
        crd["metadata"]["annotations"][key.as_str()],
        format!("{NS}/widget-operator.v1.1.0")
    );
}

#[tokio::test]
async fn a_plan_completes_only_once_its_crd_carries_its_csvs_annotation() {
    let mut env = Env::new().await;
    let mut catalog = widget_catalog();
    catalog.channels[0].entries.truncate(1);
    catalog.bundles = vec![widget_bundle(
        "1.0.0",
        widget_crd(&[("v1", true)], "integer"),
    )];
    env.add_catalog("community", catalog);
    env.subscribe_widget(json!({"startingCSV": "widget-operator.v1.0.0"}))
        .await;
    let plan = env.sync_subscriptions().await.created_plans.remove(0);
    // The CRD is created and Established, then the CSV's creation fails once: the plan has
    // its CRD step done and is not complete.
    let healthy = env.ctx.clone();
    env.ctx = Arc::new(Context::new(
        failing_once(
            &healthy.client,
            Method::POST,
            "/namespaces/operators/clusterserviceversions",
        ),
        Arc::new(env.clock.clone()),
        ControllerOptions::default(),
    ));
    let crd_created = |plan: &InstallPlan| {
        plan.status
            .as_ref()
            .and_then(|s| s.plan.as_ref())
            .is_some_and(|steps| {
                steps.iter().any(|s| {
                    s.resource.kind == "CustomResourceDefinition" && s.status == StepStatus::Created
                })
            })
    };
    let mut stored = env.run_plan_once(&plan).await;
    for _ in 0..100 {
        if crd_created(&stored) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        stored = env.run_plan_once(&plan).await;
    }
    env.ctx = healthy;
    assert!(crd_created(&stored), "{:?}", stored.status);
    assert_eq!(stored.status.unwrap().phase, InstallPlanPhase::Installing);
    // Someone (an older olm-rs, a person) takes the annotation off the CRD before the CSV
    // exists.
    let key = installed_alongside_annotation_key(NS, "widget-operator.v1.0.0");
    let crds: Api<CustomResourceDefinition> = Api::all(env.client());
    crds.patch(
        "widgets.example.com",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {key.as_str(): null}}})),
    )
    .await
    .expect("annotation removed");
    assert_eq!(
        env.run_plan(&plan).await.status.unwrap().phase,
        InstallPlanPhase::Complete
    );
    let crd = env
        .get(CRD.0, CRD.1, CRD.2, "widgets.example.com", false)
        .await
        .unwrap();
    assert_eq!(
        alongside(&crd),
        [format!("{NS}/widget-operator.v1.0.0")],
        "the completing pass put it back"
    );
}

#[tokio::test]
async fn a_plan_run_again_after_the_next_replaced_its_csv_writes_nothing() {
    let (env, first, unrun, upgrade) = first_installed_upgrade_planned().await;
    assert_eq!(
        env.run_plan(&upgrade).await.status.unwrap().phase,
        InstallPlanPhase::Complete
    );
    // widget-operator.v1.1.0 replaced widget-operator.v1.0.0, which is deleted.
    let csvs: Api<olm_rs::api::ClusterServiceVersion> = Api::namespaced(env.client(), NS);
    csvs.delete("widget-operator.v1.0.0", &Default::default())
        .await
        .expect("the replaced CSV deleted");
    env.stores_caught_up().await;

    // The first plan's Complete turns out lost: it is Installing again, from the start.
    lose_complete(&env, &first, unrun).await;
    let status = env.run_plan(&first).await.status.unwrap();
    assert_eq!(status.phase, InstallPlanPhase::Complete);
    assert_eq!(
        status.message.as_deref(),
        Some(
            format!(
                "superseded by InstallPlan {upgrade} of Subscription widget: its remaining steps are not written"
            )
            .as_str()
        )
    );
    assert!(
        csvs.get_opt("widget-operator.v1.0.0")
            .await
            .unwrap()
            .is_none(),
        "the replaced CSV is not created again"
    );
}

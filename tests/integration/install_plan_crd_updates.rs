//! CRD updates by InstallPlans (docs/install-plans.md §7.4), checked whole before
//! anything is written: a dropped stored version and existing resources that fail the new
//! schema are refused with OLM's words; a compatible update applies and keeps the
//! installed-alongside record of every CSV that still exists.

use crate::subscription_support as support;

use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};
use support::*;

use olm_rs::api::{InstallPlanPhase, StepStatus, SubscriptionState};

const CRD: (&str, &str, &str) = (
    "apiextensions.k8s.io/v1",
    "CustomResourceDefinition",
    "customresourcedefinitions",
);
const CSV: (&str, &str, &str) = (
    "operators.coreos.com/v1alpha1",
    "ClusterServiceVersion",
    "clusterserviceversions",
);

/// Installs widget 1.0.0 whose CRD is `crd_v1`, then offers 1.1.0 with `crd_v2`; returns the
/// upgrade plan's name after one execution pass.
async fn upgrade_with(env: &mut Env, crd_v1: Value, crd_v2: Value) -> String {
    let mut catalog = widget_catalog();
    catalog.channels[0].entries.truncate(2);
    catalog.bundles = vec![
        widget_bundle("1.0.0", crd_v1),
        widget_bundle("1.1.0", crd_v2),
    ];
    env.add_catalog("community", catalog);
    env.subscribe_widget(json!({"startingCSV": "widget-operator.v1.0.0"}))
        .await;
    let first = env.sync_subscriptions().await.created_plans.remove(0);
    assert_eq!(
        env.run_plan(&first).await.status.unwrap().phase,
        InstallPlanPhase::Complete
    );
    let report = env.sync_subscriptions().await;
    assert_eq!(
        report.created_plans.len(),
        1,
        "the upgrade plan: {report:?}"
    );
    report.created_plans[0].clone()
}

#[tokio::test]
async fn dropping_a_stored_version_fails_the_plan_and_leaves_the_cluster_untouched() {
    let mut env = Env::new().await;
    let name = upgrade_with(
        &mut env,
        widget_crd(&[("v1alpha1", true)], "integer"),
        widget_crd(&[("v1", true)], "integer"),
    )
    .await;
    let before = env
        .get(CRD.0, CRD.1, CRD.2, "widgets.example.com", false)
        .await
        .unwrap();
    assert_eq!(
        before["status"]["storedVersions"],
        json!(["v1alpha1"]),
        "the API server records the stored version"
    );
    let plan = env.run_plan_once(&name).await;
    let status = plan.status.unwrap();
    assert_eq!(
        status.phase,
        InstallPlanPhase::Installing,
        "retried within the window"
    );
    let expected = "risk of data loss updating \"widgets.example.com\": new CRD removes version v1alpha1 that is listed as a stored version on the existing CRD";
    assert_eq!(
        status.message.as_deref(),
        Some(format!("retrying execution due to error: {expected}").as_str())
    );

    env.advance(61);
    let plan = env.run_plan_once(&name).await;
    let status = plan.status.unwrap();
    assert_eq!(status.phase, InstallPlanPhase::Failed);
    let installed = &status.conditions.unwrap()[0];
    assert_eq!(
        installed.reason.as_ref().map(|r| r.as_str()),
        Some("InstallComponentFailed")
    );
    assert_eq!(installed.message.as_deref(), Some(expected));
    assert!(
        status
            .plan
            .unwrap()
            .iter()
            .all(|s| s.status == StepStatus::Unknown),
        "nothing was applied"
    );
    assert!(
        env.get(CSV.0, CSV.1, CSV.2, "widget-operator.v1.1.0", true)
            .await
            .is_none(),
        "no new CSV"
    );
    let after = env
        .get(CRD.0, CRD.1, CRD.2, "widgets.example.com", false)
        .await
        .unwrap();
    assert_eq!(after["spec"], before["spec"], "the CRD is untouched");

    env.sync_subscriptions().await;
    let sub = env.subscription("widget").await;
    let failed = condition(&sub, "InstallPlanFailed").unwrap();
    assert_eq!(failed.reason.as_deref(), Some("InstallComponentFailed"));
    assert_eq!(failed.message.as_deref(), Some(expected));
    assert_eq!(
        sub.status.as_ref().unwrap().state(),
        SubscriptionState::UpgradePending,
        "as OLM: waits on the failed plan"
    );
}

#[tokio::test]
async fn existing_resources_that_fail_the_new_schema_refuse_the_update() {
    let mut env = Env::new().await;
    let name = upgrade_with(
        &mut env,
        widget_crd(&[("v1", true)], "string"),
        widget_crd(&[("v1", true)], "integer"),
    )
    .await;
    let gvk = kube::core::GroupVersionKind::gvk("example.com", "v1", "Widget");
    let widgets: Api<DynamicObject> = Api::namespaced_with(
        env.client(),
        NS,
        &kube::core::ApiResource::from_gvk_with_plural(&gvk, "widgets"),
    );
    let widget: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "big-one", "namespace": NS}, "spec": {"size": "big"}
    }))
    .unwrap();
    widgets
        .create(&PostParams::default(), &widget)
        .await
        .expect("widget");
    let status = env.run_plan_once(&name).await.status.unwrap();
    assert_eq!(
        status.phase,
        InstallPlanPhase::Installing,
        "retried within the window"
    );
    env.advance(61);
    let status = env.run_plan_once(&name).await.status.unwrap();
    assert_eq!(status.phase, InstallPlanPhase::Failed);
    let message = status.message.unwrap();
    assert!(
        message.starts_with(
            "error validating existing CRs against new CRD's schema for \"widgets.example.com\": error validating example.com/v1, Kind=Widget \"operators/big-one\": updated validation is too restrictive: "
        ),
        "{message}"
    );
    assert!(message.contains(".spec.size"), "names the field: {message}");
    let crd = env
        .get(CRD.0, CRD.1, CRD.2, "widgets.example.com", false)
        .await
        .unwrap();
    assert_eq!(
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
            ["size"]["type"],
        "string"
    );
}

#[tokio::test]
async fn a_compatible_crd_update_applies_and_keeps_both_csvs_alongside() {
    let mut env = Env::new().await;
    let name = upgrade_with(
        &mut env,
        widget_crd(&[("v1", true)], "integer"),
        widget_crd(&[("v1", true), ("v2", false)], "integer"),
    )
    .await;
    let plan = env.run_plan(&name).await;
    let status = plan.status.unwrap();
    assert_eq!(status.phase, InstallPlanPhase::Complete);
    let crd_step = status
        .plan
        .unwrap()
        .into_iter()
        .find(|s| s.resource.kind == "CustomResourceDefinition")
        .unwrap();
    assert_eq!(
        crd_step.status,
        StepStatus::Present,
        "an update, not a creation"
    );
    let crd = env
        .get(CRD.0, CRD.1, CRD.2, "widgets.example.com", false)
        .await
        .unwrap();
    assert_eq!(crd["spec"]["versions"].as_array().unwrap().len(), 2);
    let annotations = crd["metadata"]["annotations"].as_object().unwrap();
    let alongside: Vec<&str> = annotations
        .iter()
        .filter(|(k, _)| k.starts_with("operatorframework.io/installed-alongside-"))
        .filter_map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(
        alongside.len(),
        2,
        "the old CSV still exists: {alongside:?}"
    );
}

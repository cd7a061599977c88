//! Fresh installs through the embedded API: Automatic and Manual approval, no update at the head,
//! a deleted pending plan, and InstallPlan shape.

use crate::subscription_support as support;

use serde_json::json;
use support::*;

use olm_rs::api::{Approval, InstallPlanPhase, StepStatus, SubscriptionState};

#[tokio::test]
async fn automatic_fresh_install_creates_the_bundle_and_reaches_at_latest_known() {
    let mut env = Env::new().await;
    env.add_catalog("community", widget_catalog());
    env.subscribe_widget(json!({})).await;

    let report = env.sync_subscriptions().await;
    assert_eq!(report.created_plans.len(), 1, "{report:?}");
    let name = &report.created_plans[0];
    assert!(name.starts_with("install-") && name.len() == 13, "{name}");
    let plan = env.plan(name).await;
    assert_eq!(plan.spec.approval, Approval::Automatic);
    assert!(plan.spec.approved);
    assert_eq!(
        plan.spec.cluster_service_version_names,
        ["widget-operator.v1.2.0"],
        "the head of the channel"
    );
    let owners = plan.metadata.owner_references.clone().unwrap();
    assert_eq!(
        (
            owners.len(),
            owners[0].kind.as_str(),
            owners[0].name.as_str()
        ),
        (1, "Subscription", "widget")
    );
    let status = plan.status.clone().unwrap();
    assert_eq!(status.phase, InstallPlanPhase::Installing);
    assert_eq!(status.catalog_sources, ["community"]);
    let kinds: Vec<&str> = status
        .plan
        .as_ref()
        .unwrap()
        .iter()
        .map(|s| s.resource.kind.as_str())
        .collect();
    assert_eq!(
        kinds,
        [
            "ClusterServiceVersion",
            "CustomResourceDefinition",
            "ConfigMap",
            "ServiceAccount",
            "Role",
            "RoleBinding",
            "ClusterRole",
            "ClusterRoleBinding"
        ]
    );
    let sub = env.subscription("widget").await;
    let st = sub.status.as_ref().unwrap();
    assert_eq!(st.state(), SubscriptionState::UpgradePending);
    assert_eq!(st.current_csv.as_deref(), Some("widget-operator.v1.2.0"));
    assert_eq!(
        st.install_plan_ref.as_ref().unwrap().name.as_deref(),
        Some(name.as_str())
    );
    assert_eq!(
        st.install_plan.as_ref().unwrap().uuid,
        plan.metadata.uid.clone().unwrap()
    );
    assert_eq!(st.install_plan_generation, Some(1));
    assert_eq!(
        condition(&sub, "InstallPlanPending")
            .unwrap()
            .reason
            .as_deref(),
        Some("Installing")
    );

    let plan = env.run_plan(name).await;
    let status = plan.status.unwrap();
    assert_eq!(status.phase, InstallPlanPhase::Complete);
    assert!(status.start_time.is_some());
    assert!(
        status
            .plan
            .unwrap()
            .iter()
            .all(|s| s.status == StepStatus::Created),
        "every object is new"
    );

    env.sync_subscriptions().await;
    let sub = env.subscription("widget").await;
    let st = sub.status.as_ref().unwrap();
    assert_eq!(st.state(), SubscriptionState::AtLatestKnown);
    assert_eq!(st.installed_csv.as_deref(), Some("widget-operator.v1.2.0"));
    assert!(condition(&sub, "InstallPlanPending").is_none());
    assert!(condition(&sub, "ResolutionFailed").is_none());
    let health = condition(&sub, "CatalogSourcesUnhealthy").unwrap();
    assert_eq!(health.status.as_str(), "False");
    assert_eq!(st.catalog_health.as_ref().unwrap().len(), 1);

    // At the head: nothing more to do, however often it is synced.
    let report = env.sync_subscriptions().await;
    assert!(report.created_plans.is_empty());
    let report = env.sync_subscriptions().await;
    assert!(
        report.updated.is_empty(),
        "an unchanged namespace is not rewritten: {report:?}"
    );
    env.restart();
    assert!(env.sync_subscriptions().await.created_plans.is_empty());
}

#[tokio::test]
async fn manual_approval_waits_and_never_holds_up_another_subscription() {
    let mut env = Env::new().await;
    env.add_catalog("community", merged(widget_catalog(), gadget_catalog()));
    env.subscribe_widget(json!({"installPlanApproval": "Manual"}))
        .await;
    env.subscribe("gadget", "gadget", "community", json!({}))
        .await;

    let report = env.sync_subscriptions().await;
    assert_eq!(
        report.created_plans.len(),
        2,
        "one plan per Subscription: {report:?}"
    );
    let plans = env.plans().await;
    let manual = plans
        .iter()
        .find(|p| p.spec.approval == Approval::Manual)
        .expect("a manual plan");
    let automatic = plans
        .iter()
        .find(|p| p.spec.approval == Approval::Automatic)
        .expect("an automatic plan");
    assert_eq!(
        manual.spec.cluster_service_version_names,
        ["widget-operator.v1.2.0"],
        "only its own operator"
    );
    assert!(!manual.spec.approved);
    assert_eq!(
        automatic.spec.cluster_service_version_names,
        ["gadget.v1.0.0"]
    );
    let manual_name = manual.metadata.name.clone().unwrap();
    assert_eq!(
        manual.status.as_ref().unwrap().phase,
        InstallPlanPhase::RequiresApproval
    );

    // The automatic one installs; the manual one waits.
    env.converge().await;
    assert!(
        env.get(
            "operators.coreos.com/v1alpha1",
            "ClusterServiceVersion",
            "clusterserviceversions",
            "gadget.v1.0.0",
            true
        )
        .await
        .is_some()
    );
    assert!(
        env.get(
            "operators.coreos.com/v1alpha1",
            "ClusterServiceVersion",
            "clusterserviceversions",
            "widget-operator.v1.2.0",
            true
        )
        .await
        .is_none()
    );
    assert_eq!(
        env.sync_plan(&manual_name).await,
        olm_rs::reconcile::install_plan::Synced::Idle
    );
    let widget = env.subscription("widget").await;
    let pending = condition(&widget, "InstallPlanPending").unwrap();
    assert_eq!(pending.reason.as_deref(), Some("RequiresApproval"));
    assert_eq!(
        widget.status.as_ref().unwrap().state(),
        SubscriptionState::UpgradePending
    );
    let gadget = env.subscription("gadget").await;
    assert_eq!(
        gadget.status.as_ref().unwrap().state(),
        SubscriptionState::AtLatestKnown
    );

    env.approve(&manual_name).await;
    let plan = env.run_plan(&manual_name).await;
    assert_eq!(plan.status.unwrap().phase, InstallPlanPhase::Complete);
    env.converge().await;
    let widget = env.subscription("widget").await;
    assert_eq!(
        widget.status.as_ref().unwrap().state(),
        SubscriptionState::AtLatestKnown
    );
    assert_eq!(env.plans().await.len(), 2, "no further plan");
}

#[tokio::test]
async fn a_deleted_plan_awaiting_approval_is_replaced() {
    let mut env = Env::new().await;
    env.add_catalog("community", widget_catalog());
    env.subscribe_widget(json!({"installPlanApproval": "Manual"}))
        .await;
    let first = env.sync_subscriptions().await.created_plans.remove(0);
    // Waiting for approval: further syncs make no new plan.
    assert!(env.sync_subscriptions().await.created_plans.is_empty());
    kube::Api::<olm_rs::api::InstallPlan>::namespaced(env.client(), NS)
        .delete(&first, &Default::default())
        .await
        .unwrap();
    let report = env.sync_subscriptions().await;
    assert_eq!(
        report.created_plans.len(),
        1,
        "noticed and replaced: {report:?}"
    );
    let second = &report.created_plans[0];
    assert_ne!(second, &first);
    let sub = env.subscription("widget").await;
    assert_eq!(
        sub.status
            .as_ref()
            .unwrap()
            .install_plan_ref
            .as_ref()
            .unwrap()
            .name
            .as_deref(),
        Some(second.as_str())
    );
    assert_eq!(env.plans().await.len(), 1);
}

#[tokio::test]
async fn a_plan_created_before_a_crash_is_adopted_not_duplicated() {
    let mut env = Env::new().await;
    env.add_catalog("community", widget_catalog());
    env.subscribe_widget(json!({})).await;
    let first = env.sync_subscriptions().await.created_plans.remove(0);
    // Simulate a crash after the plan was created but before the Subscription recorded it,
    // and before the plan's status was written.
    let subs = kube::Api::<olm_rs::api::Subscription>::namespaced(env.client(), NS);
    let mut sub = env.subscription("widget").await;
    sub.status = None;
    subs.replace_status("widget", &Default::default(), &sub)
        .await
        .expect("status cleared");
    let plans = kube::Api::<olm_rs::api::InstallPlan>::namespaced(env.client(), NS);
    let mut plan = env.plan(&first).await;
    plan.status = Some(Default::default());
    plan.status.as_mut().unwrap().plan = None;
    plans
        .replace_status(&first, &Default::default(), &plan)
        .await
        .expect("status cleared");

    env.restart();
    let report = env.sync_subscriptions().await;
    assert!(report.created_plans.is_empty(), "{report:?}");
    assert_eq!(report.adopted_plans, std::slice::from_ref(&first));
    assert_eq!(env.plans().await.len(), 1);
    let sub = env.subscription("widget").await;
    assert_eq!(
        sub.status
            .as_ref()
            .unwrap()
            .install_plan_ref
            .as_ref()
            .unwrap()
            .name
            .as_deref(),
        Some(first.as_str())
    );
}

#[tokio::test]
async fn without_a_channel_every_channel_is_followed_default_first() {
    let mut env = Env::new().await;
    env.add_catalog("community", widget_catalog());
    env.subscribe("widget", "widget", "community", json!({}))
        .await;
    let created = env.converge().await;
    // Fresh install from the default channel's head, then (any channel allowed) on to the
    // `fast` head whose skipRange covers it: two plans.
    let csvs: Vec<Vec<String>> = {
        let mut out = Vec::new();
        for name in &created {
            out.push(env.plan(name).await.spec.cluster_service_version_names);
        }
        out
    };
    assert_eq!(
        csvs,
        [
            vec!["widget-operator.v1.2.0".to_owned()],
            vec!["widget-operator.v2.0.0".to_owned()]
        ]
    );
    let sub = env.subscription("widget").await;
    assert_eq!(
        sub.status.as_ref().unwrap().installed_csv.as_deref(),
        Some("widget-operator.v2.0.0")
    );
}

/// A CSV in the namespace with the package's properties: a copy (label `olm.copiedFrom`, put
/// there for an operator installed in another namespace) when `copied_from` is set.
async fn put_widget_csv(env: &Env, copied_from: Option<&str>) {
    use olm_rs::api::ClusterServiceVersion;
    use olm_rs::api::keys::{COPIED_FROM_LABEL, PROPERTIES_ANNOTATION};
    let mut csv = widget_csv("1.2.0");
    csv["metadata"]["namespace"] = json!(NS);
    csv["metadata"]["annotations"] = json!({
        PROPERTIES_ANNOTATION:
            r#"{"properties":[{"type":"olm.package","value":{"packageName":"widget","version":"1.2.0"}}]}"#
    });
    if let Some(from) = copied_from {
        csv["metadata"]["labels"] = json!({ COPIED_FROM_LABEL: from });
    }
    let csv: ClusterServiceVersion = serde_json::from_value(csv).expect("a CSV");
    kube::Api::<ClusterServiceVersion>::namespaced(env.client(), NS)
        .create(&kube::api::PostParams::default(), &csv)
        .await
        .expect("CSV created");
}

/// docs/resolution.md §3: copied CSVs are not installed operators. A copy of the package's CSV in
/// the Subscription's namespace leaves the Subscription to install its own; the same CSV
/// without the label is taken as installed.
#[tokio::test]
async fn a_copied_csv_is_not_taken_for_the_installed_operator() {
    let mut env = Env::new().await;
    env.add_catalog("community", widget_catalog());
    put_widget_csv(&env, Some("elsewhere")).await;
    env.subscribe_widget(json!({})).await;
    let report = env.sync_subscriptions().await;
    assert_eq!(report.created_plans.len(), 1, "{report:?}");
    let plan = env.plan(&report.created_plans[0]).await;
    assert_eq!(
        plan.spec.cluster_service_version_names,
        ["widget-operator.v1.2.0"]
    );

    let mut control = Env::new().await;
    control.add_catalog("community", widget_catalog());
    put_widget_csv(&control, None).await;
    control.subscribe_widget(json!({})).await;
    let report = control.sync_subscriptions().await;
    assert!(report.created_plans.is_empty(), "{report:?}");
}

/// A namespace whose last Subscription went says so, so the controller stops following it
/// (the set of followed namespaces shrinks).
#[tokio::test]
async fn a_namespace_whose_last_subscription_went_is_reported_empty() {
    let mut env = Env::new().await;
    env.add_catalog("community", widget_catalog());
    env.subscribe_widget(json!({})).await;
    assert!(!env.sync_subscriptions().await.no_subscriptions);
    kube::Api::<olm_rs::api::Subscription>::namespaced(env.client(), NS)
        .delete("widget", &Default::default())
        .await
        .unwrap();
    assert!(env.sync_subscriptions().await.no_subscriptions);
}

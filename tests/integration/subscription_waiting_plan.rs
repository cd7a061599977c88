//! A plan awaiting approval and what happens around it: a spec change (channel, startingCSV,
//! approval mode) supersedes it at once, and a deleted one is reported (`InstallPlanMissing`)
//! until a plan is referenced again.

use crate::subscription_support as support;

use serde_json::{Value, json};
use support::*;

use olm_rs::api::{InstallPlan, InstallPlanPhase, Subscription, SubscriptionState};

async fn patch_spec(env: &Env, spec: Value) {
    kube::Api::<Subscription>::namespaced(env.client(), NS)
        .patch(
            "widget",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&json!({ "spec": spec })),
        )
        .await
        .expect("subscription spec patched");
}

fn plan_ref(sub: &Subscription) -> Option<String> {
    sub.status.as_ref()?.install_plan_ref.as_ref()?.name.clone()
}

fn phase(plan: &InstallPlan) -> InstallPlanPhase {
    plan.status.as_ref().unwrap().phase.clone()
}

/// Manual from 1.0.0 in `stable`: 1.0.0 approved and installed, the plan for 1.1.0 waiting.
async fn installed_v1_with_v1_1_waiting(env: &mut Env) -> String {
    env.add_catalog("community", widget_catalog());
    env.subscribe_widget(json!({
        "installPlanApproval": "Manual",
        "startingCSV": "widget-operator.v1.0.0"
    }))
    .await;
    let first = env.sync_subscriptions().await.created_plans.remove(0);
    env.approve(&first).await;
    env.run_plan(&first).await;
    let report = env.sync_subscriptions().await;
    assert_eq!(report.created_plans.len(), 1, "{report:?}");
    let waiting = report.created_plans[0].clone();
    let plan = env.plan(&waiting).await;
    assert_eq!(
        plan.spec.cluster_service_version_names,
        ["widget-operator.v1.1.0"]
    );
    assert_eq!(phase(&plan), InstallPlanPhase::RequiresApproval);
    waiting
}

#[tokio::test]
async fn a_channel_switch_supersedes_the_plan_awaiting_approval() {
    let mut env = Env::new().await;
    let waiting = installed_v1_with_v1_1_waiting(&mut env).await;
    // `fast` has 2.0.0, whose skipRange covers the installed 1.0.0.
    patch_spec(&env, json!({"channel": "fast"})).await;
    let report = env.sync_subscriptions().await;
    assert_eq!(report.created_plans.len(), 1, "{report:?}");
    let new = report.created_plans[0].clone();
    let plan = env.plan(&new).await;
    assert_eq!(
        plan.spec.cluster_service_version_names,
        ["widget-operator.v2.0.0"]
    );
    assert_eq!(phase(&plan), InstallPlanPhase::RequiresApproval);
    let sub = env.subscription("widget").await;
    let st = sub.status.as_ref().unwrap();
    assert_eq!(st.current_csv.as_deref(), Some("widget-operator.v2.0.0"));
    assert_eq!(st.installed_csv.as_deref(), Some("widget-operator.v1.0.0"));
    assert_eq!(st.state(), SubscriptionState::UpgradePending);
    assert_eq!(plan_ref(&sub).as_deref(), Some(new.as_str()));
    assert_eq!(st.install_plan.as_ref().unwrap().name, new);
    let pending = condition(&sub, "InstallPlanPending").unwrap();
    assert_eq!(pending.reason.as_deref(), Some("RequiresApproval"));
    // The superseded plan is gone: nobody can approve an answer that no longer holds.
    let names: Vec<String> = env
        .plans()
        .await
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    assert!(!names.contains(&waiting), "{names:?}");
    // Stable from now on.
    assert!(env.sync_subscriptions().await.created_plans.is_empty());

    // Approved, 2.0.0 replaces 1.0.0 in one hop.
    env.approve(&new).await;
    assert_eq!(phase(&env.run_plan(&new).await), InstallPlanPhase::Complete);
    env.sync_subscriptions().await;
    let sub = env.subscription("widget").await;
    let st = sub.status.as_ref().unwrap();
    assert_eq!(st.state(), SubscriptionState::AtLatestKnown);
    assert_eq!(st.installed_csv.as_deref(), Some("widget-operator.v2.0.0"));
}

#[tokio::test]
async fn switching_to_automatic_replaces_the_waiting_plan_with_one_that_runs() {
    let mut env = Env::new().await;
    let waiting = installed_v1_with_v1_1_waiting(&mut env).await;
    patch_spec(&env, json!({"installPlanApproval": "Automatic"})).await;
    let report = env.sync_subscriptions().await;
    assert_eq!(report.created_plans.len(), 1, "{report:?}");
    assert!(report.deleted_plans.contains(&waiting), "{report:?}");
    let new = env.plan(&report.created_plans[0]).await;
    assert_eq!(
        new.spec.cluster_service_version_names,
        ["widget-operator.v1.1.0"]
    );
    assert!(new.spec.approved);
    assert_eq!(phase(&new), InstallPlanPhase::Installing);
    let sub = env.subscription("widget").await;
    assert_eq!(plan_ref(&sub), new.metadata.name);
}

#[tokio::test]
async fn a_new_starting_csv_replaces_the_first_plan_awaiting_approval() {
    let mut env = Env::new().await;
    env.add_catalog("community", widget_catalog());
    env.subscribe_widget(json!({
        "installPlanApproval": "Manual",
        "startingCSV": "widget-operator.v1.0.0"
    }))
    .await;
    let first = env.sync_subscriptions().await.created_plans.remove(0);
    patch_spec(&env, json!({"startingCSV": "widget-operator.v1.1.0"})).await;
    let report = env.sync_subscriptions().await;
    assert_eq!(report.created_plans.len(), 1, "{report:?}");
    let new = env.plan(&report.created_plans[0]).await;
    assert_eq!(
        new.spec.cluster_service_version_names,
        ["widget-operator.v1.1.0"]
    );
    let sub = env.subscription("widget").await;
    let st = sub.status.as_ref().unwrap();
    assert_eq!(st.current_csv.as_deref(), Some("widget-operator.v1.1.0"));
    assert_eq!(plan_ref(&sub), new.metadata.name);
    assert_eq!(env.plans().await.len(), 1, "{first} was deleted");
}

#[tokio::test]
async fn a_spec_change_with_the_same_answer_keeps_the_waiting_plan() {
    let mut env = Env::new().await;
    let waiting = installed_v1_with_v1_1_waiting(&mut env).await;
    // startingCSV only matters for a first install.
    patch_spec(&env, json!({"startingCSV": "widget-operator.v1.2.0"})).await;
    let report = env.sync_subscriptions().await;
    assert!(report.created_plans.is_empty(), "{report:?}");
    assert!(report.deleted_plans.is_empty(), "{report:?}");
    let sub = env.subscription("widget").await;
    assert_eq!(plan_ref(&sub).as_deref(), Some(waiting.as_str()));
}

#[tokio::test]
async fn a_deleted_waiting_plan_is_reported_missing_until_a_new_one_is_made() {
    let mut env = Env::new().await;
    let waiting = installed_v1_with_v1_1_waiting(&mut env).await;
    // The catalog goes away, then the plan is deleted: no new plan can be made yet.
    let catalogs = std::mem::take(&mut env.catalogs);
    kube::Api::<InstallPlan>::namespaced(env.client(), NS)
        .delete(&waiting, &Default::default())
        .await
        .unwrap();
    let report = env.sync_subscriptions().await;
    assert!(report.created_plans.is_empty(), "{report:?}");
    let sub = env.subscription("widget").await;
    assert_eq!(plan_ref(&sub), None);
    let missing = condition(&sub, "InstallPlanMissing").expect("the deletion is reported");
    assert_eq!(
        (missing.status.as_str(), missing.reason.as_deref()),
        ("True", Some("ReferencedInstallPlanNotFound"))
    );
    assert!(
        missing.message.as_deref().unwrap().contains(&waiting),
        "{missing:?}"
    );
    assert!(condition(&sub, "ResolutionFailed").is_some());
    // Still reported on the next pass.
    env.sync_subscriptions().await;
    let sub = env.subscription("widget").await;
    assert!(condition(&sub, "InstallPlanMissing").is_some());

    // The catalog is back: a new plan, and the condition goes.
    env.catalogs = catalogs;
    let report = env.sync_subscriptions().await;
    assert_eq!(report.created_plans.len(), 1, "{report:?}");
    let sub = env.subscription("widget").await;
    assert_eq!(
        plan_ref(&sub).as_deref(),
        Some(report.created_plans[0].as_str())
    );
    assert!(condition(&sub, "InstallPlanMissing").is_none());
    assert_eq!(
        sub.status.as_ref().unwrap().current_csv.as_deref(),
        Some("widget-operator.v1.1.0")
    );
}

#[tokio::test]
async fn a_completed_plan_deleted_later_is_reported_until_found_again() {
    let mut env = Env::new().await;
    env.add_catalog("community", widget_catalog());
    env.subscribe_widget(json!({"startingCSV": "widget-operator.v1.2.0"}))
        .await;
    let created = env.converge().await;
    assert_eq!(created.len(), 1, "{created:?}");
    let api = kube::Api::<InstallPlan>::namespaced(env.client(), NS);
    let mut kept = env.plan(&created[0]).await;
    api.delete(&created[0], &Default::default()).await.unwrap();
    env.sync_subscriptions().await;
    let sub = env.subscription("widget").await;
    let missing = condition(&sub, "InstallPlanMissing").expect("reported");
    assert_eq!(
        missing.reason.as_deref(),
        Some("ReferencedInstallPlanNotFound")
    );
    assert_eq!(
        sub.status.as_ref().unwrap().state(),
        SubscriptionState::AtLatestKnown
    );
    assert!(env.plans().await.is_empty(), "installed: no new plan");

    // The same plan restored (e.g. from a backup): found again, the condition goes.
    kept.metadata.resource_version = None;
    kept.metadata.uid = None;
    kept.metadata.creation_timestamp = None;
    api.create(&Default::default(), &kept).await.unwrap();
    env.sync_subscriptions().await;
    let sub = env.subscription("widget").await;
    assert!(condition(&sub, "InstallPlanMissing").is_none());
}

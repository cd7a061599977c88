//! The InstallPlan controller running as in `olm-rs run`: it reads the namespace's
//! OperatorGroups from its store, and a change of one syncs the namespace's plans at once
//! instead of at the next resync.

use crate::subscription_support as support;

use std::time::Duration;

use kube::api::{Api, DeleteParams};
use serde_json::json;
use support::*;

use olm_rs::api::{InstallPlan, InstallPlanConditionReason, InstallPlanPhase, OperatorGroup};
use olm_rs::reconcile::install_plan;

fn check_failed(plan: &InstallPlan) -> bool {
    plan.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.reason == Some(InstallPlanConditionReason::InstallCheckFailed))
}

/// Polls `plan` every 20 ms until `done` holds, or fails after `within`.
async fn wait_for(
    env: &Env,
    name: &str,
    within: Duration,
    what: &str,
    done: impl Fn(&InstallPlan) -> bool,
) -> InstallPlan {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let plan = env.plan(name).await;
        if done(&plan) {
            return plan;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what} within {within:?}: {:?}",
            plan.status.as_ref().map(|s| (&s.phase, &s.conditions))
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_plan_waiting_for_its_operator_group_goes_on_as_soon_as_one_manages_the_namespace() {
    let mut env = Env::new().await;
    env.add_catalog("community", widget_catalog());
    env.subscribe_widget(json!({})).await;
    let created = env.sync_subscriptions().await.created_plans;
    let [name] = created.as_slice() else {
        panic!("one plan: {created:?}");
    };
    // The OperatorGroup goes before the controller ever sees the plan.
    Api::<OperatorGroup>::namespaced(env.client(), NS)
        .delete("og", &DeleteParams::default())
        .await
        .expect("operator group deleted");
    let controller = tokio::spawn(install_plan::run(env.ctx.clone()));

    let waiting = wait_for(
        &env,
        name,
        Duration::from_secs(10),
        "InstallCheckFailed",
        check_failed,
    )
    .await;
    assert_eq!(
        waiting.status.as_ref().map(|s| s.phase.clone()),
        Some(InstallPlanPhase::Installing)
    );
    // The plan would be looked at again after INSTALLING_RESYNC; the new OperatorGroup's
    // status brings it back at once.
    assert!(install_plan::INSTALLING_RESYNC >= Duration::from_secs(5));
    env.operator_group("replacement").await;
    wait_for(
        &env,
        name,
        Duration::from_secs(3),
        "the check passes on the OperatorGroup's event",
        |p| !check_failed(p),
    )
    .await;
    wait_for(&env, name, Duration::from_secs(30), "Complete", |p| {
        p.status.as_ref().map(|s| s.phase.clone()) == Some(InstallPlanPhase::Complete)
    })
    .await;
    controller.abort();
}

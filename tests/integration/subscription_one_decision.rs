//! The Subscription side decides once per sync (docs/subscription-plans.md, "One sync"): a
//! fresh Subscription's plan is created, given its first status and referenced by one decision,
//! and a sync cut short after the create leaves a plan the next sync adopts, never a second.

use crate::subscription_co_upgrade;
use crate::subscription_support as support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;
use support::*;
use tower::ServiceExt;

use olm_rs::api::{InstallPlan, SubscriptionState};
use olm_rs::reconcile::Context;
use olm_rs::reconcile::subscription::sync_namespace;

/// How many times `subscription_sync_total` counted the Subscription `name`: once per decision.
fn decisions(env: &Env, name: &str) -> f64 {
    let needle = format!("name=\"{name}\"");
    env.ctx
        .metrics
        .encode()
        .lines()
        .filter(|l| l.starts_with("subscription_sync_total{") && l.contains(&needle))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test]
async fn a_fresh_subscription_gets_its_plan_created_and_referenced_by_one_decision() {
    let mut env = Env::new().await;
    env.add_catalog("community", widget_catalog());
    env.subscribe_widget(json!({})).await;

    let report = env.sync_subscriptions().await;
    assert_eq!(report.created_plans.len(), 1, "{report:?}");
    assert!(!report.retry_soon, "{report:?}");
    assert_eq!(
        decisions(&env, "widget"),
        1.0,
        "one decision carried the create and the attachment"
    );
    let plan = env.plan(&report.created_plans[0]).await;
    assert!(
        plan.status.as_ref().and_then(|s| s.plan.as_ref()).is_some(),
        "the plan's first status (its steps) is written"
    );
    let status = env.subscription("widget").await.status.unwrap();
    let reference = status.install_plan_ref.clone().expect("installPlanRef");
    assert_eq!(reference.name, plan.metadata.name);
    assert!(plan.metadata.uid.is_some());
    assert_eq!(
        reference.uid, plan.metadata.uid,
        "the uid the create answered"
    );
    assert_eq!(
        reference.resource_version, plan.metadata.resource_version,
        "the plan as its first status left it"
    );
    assert_eq!(
        Some(status.install_plan.clone().expect("installplan").uuid),
        plan.metadata.uid
    );
    assert_eq!(status.state(), SubscriptionState::UpgradePending);
    assert_eq!(
        status.current_csv.as_deref(),
        Some("widget-operator.v1.2.0")
    );
}

#[tokio::test]
async fn every_member_of_a_co_upgrade_references_its_plan_after_the_sync_that_creates_it() {
    let mut env = Env::new().await;
    env.add_catalog("community", subscription_co_upgrade::catalog());
    subscription_co_upgrade::subscribe_app(&env).await;
    let first = env.sync_subscriptions().await.created_plans;
    env.run_plan(&first[0]).await;
    let mut co_upgrade = None;
    for _ in 0..5 {
        let mut created = env.sync_subscriptions().await.created_plans;
        // Each member reports the one plan.
        created.dedup();
        assert!(created.len() <= 1, "{created:?}");
        if let Some(name) = created.pop() {
            co_upgrade = Some(name);
            break;
        }
    }
    let name = co_upgrade.expect("the co-upgrade's plan");
    let plan = env.plan(&name).await;
    assert_eq!(
        plan.spec.cluster_service_version_names,
        ["app.v2.0.0", "base.v2.0.0"]
    );
    // Within that same sync, the member that did not create the plan references it too.
    for sub in ["app", "base-stable-community-olm"] {
        let status = env.subscription(sub).await.status.unwrap();
        let reference = status.install_plan_ref.expect(sub);
        assert_eq!(reference.name, plan.metadata.name, "{sub}");
        assert_eq!(reference.uid, plan.metadata.uid, "{sub}");
    }
}

/// A Context whose client refuses the `nth` status write (from 1) to a path containing
/// `resource`, as a dropped connection: the sync stops there, as a crash would.
fn refusing(env: &Env, resource: &'static str, nth: usize) -> Context {
    let router = env.server.service();
    let seen = Arc::new(AtomicUsize::new(0));
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let router = router.clone();
        let seen = seen.clone();
        async move {
            let path = request.uri().path();
            if request.method() == http::Method::PUT
                && path.contains(resource)
                && path.ends_with("/status")
                && seen.fetch_add(1, Ordering::SeqCst) + 1 == nth
            {
                return Err::<http::Response<axum::body::Body>, tower::BoxError>(
                    "connection reset by peer (test)".into(),
                );
            }
            router.oneshot(request).await.map_err(Into::into)
        }
    });
    Context::new(
        kube::Client::new(service, "default"),
        Arc::new(env.clock.clone()),
        Default::default(),
    )
}

#[tokio::test]
async fn a_sync_cut_short_after_the_create_is_completed_by_the_next_through_adoption() {
    // The plan's first status refused; then, afresh, the Subscription's reference refused
    // (its second status write: the first is the fence before the create).
    for (resource, nth) in [("/installplans/", 1), ("/subscriptions/", 2)] {
        let mut env = Env::new().await;
        env.add_catalog("community", widget_catalog());
        env.subscribe_widget(json!({})).await;
        env.stores_caught_up().await;
        let cut = refusing(&env, resource, nth);
        sync_namespace(&cut, &env.stores, &env.catalogs, NS)
            .await
            .expect_err("the refused write fails the sync");
        let plans = kube::Api::<InstallPlan>::namespaced(env.client(), NS)
            .list(&Default::default())
            .await
            .unwrap()
            .items;
        assert_eq!(plans.len(), 1, "{resource}: the plan was created");
        let name = plans[0].metadata.name.clone().unwrap();
        let before = env.subscription("widget").await.status.unwrap();
        assert!(
            before.install_plan_ref.is_none(),
            "{resource}: not referenced"
        );

        let report = env.sync_subscriptions().await;
        assert!(report.created_plans.is_empty(), "{resource}: {report:?}");
        assert_eq!(
            report.adopted_plans,
            std::slice::from_ref(&name),
            "{resource}"
        );
        let plan = env.plan(&name).await;
        assert!(
            plan.status.as_ref().and_then(|s| s.plan.as_ref()).is_some(),
            "{resource}: the plan has its steps"
        );
        let status = env.subscription("widget").await.status.unwrap();
        let reference = status.install_plan_ref.expect("installPlanRef");
        assert_eq!(reference.name.as_deref(), Some(name.as_str()), "{resource}");
        assert_eq!(reference.uid, plan.metadata.uid, "{resource}");
        let plans = kube::Api::<InstallPlan>::namespaced(env.client(), NS)
            .list(&Default::default())
            .await
            .unwrap()
            .items;
        assert_eq!(plans.len(), 1, "{resource}: never a second plan");
    }
}

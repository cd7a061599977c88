//! The Subscription and InstallPlan controllers running as in `olm-rs run` (watches, work queue,
//! requeues) against the embedded API: a Subscription reaches its head with no manual stepping.

use crate::subscription_support as support;

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use support::*;

use olm_rs::api::SubscriptionState;
use olm_rs::reconcile::{install_plan, subscription};

#[tokio::test]
async fn controllers_take_a_subscription_from_starting_csv_to_the_head() {
    let mut env = Env::new().await;
    env.add_catalog("community", widget_catalog());
    let catalogs: Arc<dyn subscription::CatalogSnapshots> = Arc::new(env.catalogs.clone());
    // Time must move for real here: the controllers requeue on the tokio clock, and plans are
    // judged by the context clock only for their retry window.
    let ctx = env.ctx.clone();
    let subs = tokio::spawn(subscription::run(
        ctx.clone(),
        catalogs,
        futures::stream::pending(),
    ));
    let plans = tokio::spawn(install_plan::run(ctx));
    env.subscribe_widget(json!({"startingCSV": "widget-operator.v1.0.0"}))
        .await;

    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let sub = env.subscription("widget").await;
        let st = sub.status.as_ref();
        if st.is_some_and(|s| {
            s.state() == SubscriptionState::AtLatestKnown
                && s.installed_csv.as_deref() == Some("widget-operator.v1.2.0")
        }) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "did not reach the head: {:?}",
            sub.status
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The last plan's CSV can exist (and the Subscription say so) a moment before the plan
    // records Complete: wait for that too.
    let complete = |p: &olm_rs::api::InstallPlan| {
        p.status
            .as_ref()
            .is_some_and(|s| s.phase == olm_rs::api::InstallPlanPhase::Complete)
    };
    let plans_made = loop {
        let plans = env.plans().await;
        if plans.iter().all(complete) || tokio::time::Instant::now() >= deadline {
            break plans;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        plans_made.len(),
        3,
        "one plan per hop, never two for the same resolution"
    );
    assert!(
        plans_made.iter().all(complete),
        "every plan completes: {:?}",
        plans_made.iter().map(|p| &p.status).collect::<Vec<_>>()
    );
    // Observability (issue 9): the syncs are counted under the Subscription's current labels,
    // resolutions and reconciles are timed.
    let text = env.ctx.metrics.encode();
    let series = |prefix: &str, parts: &[&str]| {
        text.lines()
            .filter(|l| l.starts_with(prefix))
            .find(|l| parts.iter().all(|p| l.contains(p)))
            .map(str::to_owned)
    };
    let synced = series(
        "subscription_sync_total{",
        &[
            "name=\"widget\"",
            "installed=\"widget-operator.v1.2.0\"",
            "package=\"widget\"",
        ],
    )
    .unwrap_or_else(|| panic!("no subscription_sync_total for the head:\n{text}"));
    let count: f64 = synced.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(count >= 1.0, "{synced}");
    assert!(
        series(
            "subscription_sync_total{",
            &["installed=\"widget-operator.v1.0.0\""]
        )
        .is_none(),
        "the series of the old installed CSV is replaced"
    );
    assert!(
        series(
            "olm_resolution_duration_seconds_count{",
            &["outcome=\"succeeded\""]
        )
        .is_some(),
        "{text}"
    );
    // The object counts follow the watches: one Subscription, one plan per hop.
    assert!(
        text.lines().any(|l| l == "subscription_count 1"),
        "subscription_count:\n{text}"
    );
    assert!(
        text.lines().any(|l| l == "install_plan_count 3"),
        "install_plan_count:\n{text}"
    );
    for kind in ["Subscription", "InstallPlan"] {
        assert!(
            series(
                "olm_rs_reconcile_duration_seconds_count{",
                &[&format!("kind=\"{kind}\"")]
            )
            .is_some(),
            "no reconcile latency for {kind}"
        );
    }
    // Events of the main transitions: plans announced on the Subscription, each completed
    // plan on itself (events are written after the status, so wait for them).
    let events: kube::Api<k8s_openapi::api::events::v1::Event> =
        kube::Api::namespaced(env.client(), NS);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let list = events.list(&Default::default()).await.unwrap().items;
        let count = |kind: &str, reason: &str| {
            list.iter()
                .filter(|e| {
                    e.reason.as_deref() == Some(reason)
                        && e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some(kind)
                })
                .count()
        };
        let created = count("Subscription", "InstallPlanCreated");
        let completed = count("InstallPlan", "InstallSucceeded");
        // The recorder folds repeats of one reason on one object into a single event series.
        if created >= 1 && completed == 3 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "events: {created} InstallPlanCreated, {completed} InstallSucceeded"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    subs.abort();
    plans.abort();
}

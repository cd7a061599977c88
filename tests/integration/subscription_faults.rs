//! Faults between the controllers and the API server (issue 36, OLM #1565 #2755): a share of
//! requests is answered 429, 500 or 504 (as the API server words them, `etcdserver: request
//! timed out` among them) or not at all (the connection dropped). Every Subscription still
//! converges, no InstallPlan ends `Failed`, and nothing is created twice.
//!
//! The controllers' clock stands still here, so this test does not judge the retry window:
//! `plan::phase` tests that a transient failure never ends a plan, however late.
//!
//! The faults come from a `tower` service wrapped around the embedded API server's, so they sit
//! exactly where a proxy between the two would. Watches are left alone: a broken watch is the
//! watcher's business (it relists), not the reconcilers'.

use crate::subscription_co_upgrade;
use crate::subscription_support as support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::json;
use support::*;
use tower::ServiceExt;

use olm_rs::api::{InstallPlanPhase, SubscriptionState};
use olm_rs::reconcile::{Context, ControllerOptions, install_plan, subscription};

/// Every `period`-th request (not a watch) fails, in turn with 429, 500 (etcd's time-out),
/// 504, and a dropped connection.
/// A well-mixed 64-bit value of `n` (splitmix64), so the faults fall where no pattern of the
/// controllers' requests can follow them.
fn splitmix(n: u64) -> u64 {
    let mut z = n.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn faulty_client(
    server: &olm_rs::sandbox::ApiServer,
    period: u64,
    faults: Arc<AtomicU64>,
) -> kube::Client {
    let router = server.service();
    let seen = Arc::new(AtomicU64::new(0));
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let router = router.clone();
        let n = seen.fetch_add(1, Ordering::Relaxed);
        let faults = faults.clone();
        async move {
            let watch = request
                .uri()
                .query()
                .is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"));
            // A share of 1 in `period`, spread at random: a strictly periodic fault would meet
            // a pass of exactly `period` requests at the same step every time, a lockstep
            // real faults never keep.
            if !watch && splitmix(n).is_multiple_of(period) {
                let kind = faults.fetch_add(1, Ordering::Relaxed) % 4;
                let (code, reason, message) = match kind {
                    0 => (
                        429,
                        "TooManyRequests",
                        "the server has received too many requests",
                    ),
                    1 => (500, "InternalError", "etcdserver: request timed out"),
                    2 => (
                        504,
                        "Timeout",
                        "the server was unable to return a response in time",
                    ),
                    _ => {
                        return Err::<http::Response<axum::body::Body>, tower::BoxError>(
                            "connection reset by peer".into(),
                        );
                    }
                };
                let body = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                  "code": code, "reason": reason, "message": message});
                return Ok(http::Response::builder()
                    .status(code)
                    .header("content-type", "application/json")
                    .body(axum::body::Body::from(body.to_string()))
                    .unwrap());
            }
            router.oneshot(request).await.map_err(Into::into)
        }
    });
    kube::Client::new(service, "default")
}

#[tokio::test]
async fn every_subscription_converges_through_a_faulty_api_server() {
    let mut env = Env::new().await;
    env.add_catalog(
        "community",
        merged(widget_catalog(), subscription_co_upgrade::catalog()),
    );
    let faults = Arc::new(AtomicU64::new(0));
    let ctx = Arc::new(Context::new(
        faulty_client(&env.server, 7, faults.clone()),
        Arc::new(env.clock.clone()),
        ControllerOptions::default(),
    ));
    let catalogs: Arc<dyn subscription::CatalogSnapshots> = Arc::new(env.catalogs.clone());
    let subs = tokio::spawn(subscription::run(
        ctx.clone(),
        catalogs,
        futures::stream::pending(),
    ));
    let plans = tokio::spawn(install_plan::run(ctx.clone()));
    let csvs = tokio::spawn(olm_rs::reconcile::cluster_service_version::run(ctx));
    env.subscribe_widget(json!({"startingCSV": "widget-operator.v1.0.0"}))
        .await;
    env.subscribe(
        "app",
        "app",
        "community",
        json!({"channel": "stable", "startingCSV": "app.v1.0.0"}),
    )
    .await;

    let at = |name: &str, csv: &str| {
        let env = &env;
        let (name, csv) = (name.to_owned(), csv.to_owned());
        async move {
            env.subscription(&name).await.status.is_some_and(|s| {
                s.state() == SubscriptionState::AtLatestKnown
                    && s.installed_csv.as_deref() == Some(csv.as_str())
            })
        }
    };
    let mut failed_plans = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    let converged = loop {
        let all = env.plans().await;
        failed_plans.extend(
            all.iter()
                .filter(|p| {
                    p.status
                        .as_ref()
                        .is_some_and(|s| s.phase == InstallPlanPhase::Failed)
                })
                .filter_map(|p| p.metadata.name.clone()),
        );
        let complete = all.iter().all(|p| {
            p.status
                .as_ref()
                .is_some_and(|s| s.phase == InstallPlanPhase::Complete)
        });
        let base = kube::Api::<olm_rs::api::Subscription>::namespaced(env.client(), NS)
            .get_opt("base-stable-community-olm")
            .await
            .ok()
            .flatten()
            .and_then(|s| s.status)
            .and_then(|s| s.installed_csv);
        let csvs = env
            .names(
                "operators.coreos.com/v1alpha1",
                "ClusterServiceVersion",
                "clusterserviceversions",
                true,
            )
            .await;
        if complete
            && csvs == ["app.v2.0.0", "base.v2.0.0", "widget-operator.v1.2.0"]
            && at("widget", "widget-operator.v1.2.0").await
            && at("app", "app.v2.0.0").await
            && base.as_deref() == Some("base.v2.0.0")
        {
            break true;
        }
        if tokio::time::Instant::now() >= deadline {
            break false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        // The controllers' clock runs with the test's: a plan waiting out a transient failure
        // runs its next pass when its back-off is over by that clock.
        env.clock.advance(jiff::SignedDuration::from_millis(50));
    };
    let contents: Vec<Vec<String>> = env
        .plans()
        .await
        .into_iter()
        .map(|p| p.spec.cluster_service_version_names)
        .collect();
    let injected = faults.load(Ordering::Relaxed);
    let phases: Vec<String> = env
        .plans()
        .await
        .into_iter()
        .map(|p| {
            let status = p.status.unwrap_or_default();
            format!("{:?} {}", status.phase, status.message.unwrap_or_default())
        })
        .collect();
    assert!(
        converged,
        "not converged after {injected} faults: plans {contents:?} ({phases:?}), CSVs {:?}",
        env.names(
            "operators.coreos.com/v1alpha1",
            "ClusterServiceVersion",
            "clusterserviceversions",
            true
        )
        .await
    );
    assert!(failed_plans.is_empty(), "plans failed: {failed_plans:?}");
    assert!(injected > 0, "no fault was injected");
    // Nothing twice: exactly one CSV per operator is left (the loop waits for it), and every CSV
    // the plans list exists once at most. A CSV listed by two plans (the second finds it present) is counted, not
    // refused: the stores can lag so far behind under faults that a dependency is planned
    // again (see docs/subscription-plans.md, "Co-upgrades").
    let mut planned: Vec<&String> = contents.iter().flatten().collect();
    planned.sort();
    let listed = planned.len();
    planned.dedup();
    eprintln!(
        "CSVs listed by more than one plan: {}",
        listed - planned.len()
    );
    let subscriptions = env
        .names(
            "operators.coreos.com/v1alpha1",
            "Subscription",
            "subscriptions",
            true,
        )
        .await;
    assert_eq!(
        subscriptions,
        ["app", "base-stable-community-olm", "widget"]
    );
    eprintln!("faults injected: {injected}");
    subs.abort();
    plans.abort();
    csvs.abort();
}

/// OLM #3162: `ResolutionFailed` outlives its cause. Here it goes with the first sync that sees
/// the catalog back, and the Subscription installs.
#[tokio::test]
async fn resolution_failed_clears_as_soon_as_the_catalog_is_back() {
    let mut env = Env::new().await;
    env.subscribe_widget(json!({})).await;
    assert!(env.converge().await.is_empty());
    let sub = env.subscription("widget").await;
    let failed = condition(&sub, "ResolutionFailed").expect("no catalog: resolution fails");
    assert_eq!(failed.status, olm_rs::api::ConditionStatus::True);

    env.add_catalog("community", widget_catalog());
    env.sync_subscriptions().await;
    let sub = env.subscription("widget").await;
    assert!(
        condition(&sub, "ResolutionFailed").is_none(),
        "cleared by the first sync: {:?}",
        sub.status
    );
    assert_eq!(
        sub.status.unwrap().current_csv.as_deref(),
        Some("widget-operator.v1.2.0")
    );
}

//! A co-upgrade through the embedded API (issue 36): `app` v1.0.0 needs `base` `>=1.0.0 <2.0.0`,
//! `app` v2.0.0 needs `base >=2.0.0`; `base` goes 1.0.0 → 1.1.0 → 2.0.0 in one channel. A
//! Subscription to `app` starting at v1.0.0 installs `app.v1.0.0` with `base.v1.1.0`, then
//! upgrades both in one plan, `base.v2.0.0` replacing `base.v1.1.0` as any upgrade does — as
//! OLM v0.31 does on a real cluster. Never a third plan, never an `OwnerConflict`, however the
//! stores lag.

use crate::subscription_support as support;

use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, ListParams};
use serde_json::{Value, json};
use support::*;

use crate::subscription_stale_store::stores_showing;
use olm_rs::api::{
    ClusterServiceVersion, InstallPlan, InstallPlanPhase, Subscription, SubscriptionState,
};
use olm_rs::catalog::model::{Bundle, Channel, DeclarativeConfig, Package, Property};
use olm_rs::reconcile::subscription::{SubscriptionStores, sync_namespace};
use olm_rs::reconcile::{install_plan, subscription};

const CSV: (&str, &str, &str) = (
    "operators.coreos.com/v1alpha1",
    "ClusterServiceVersion",
    "clusterserviceversions",
);

/// The `gears.example.com` CRD `base` owns.
fn gears_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gears.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"kind": "Gear", "plural": "gears", "singular": "gear", "listKind": "GearList"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    })
}

/// A bundle of `package` at `version`: one Deployment, owning or requiring Gears, and needing
/// the packages of `needs` (`(package, range)`).
fn bundle(package: &str, version: &str, owns: bool, needs: &[(&str, &str)]) -> Bundle {
    let name = format!("{package}.v{version}");
    let gear = json!([{"name": "gears.example.com", "version": "v1", "kind": "Gear"}]);
    let crds = if owns {
        json!({"owned": gear})
    } else {
        json!({"required": gear})
    };
    let csv = json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": name},
        "spec": {
            "displayName": package, "version": version, "customresourcedefinitions": crds,
            "installModes": [{"type": "OwnNamespace", "supported": true}, {"type": "SingleNamespace", "supported": true},
                             {"type": "MultiNamespace", "supported": false}, {"type": "AllNamespaces", "supported": true}],
            "install": {"strategy": "deployment", "spec": {"deployments": [{"name": package, "spec": {
                "selector": {"matchLabels": {"app": package}},
                "template": {"metadata": {"labels": {"app": package}},
                             "spec": {"containers": [{"name": "manager", "image": "example.com/op:latest"}]}}}}]}}
        }
    });
    let mut objects = vec![serde_json::value::to_raw_value(&csv).unwrap()];
    let mut properties = vec![
        Property::from_value(
            "olm.package",
            &json!({"packageName": package, "version": version}),
        )
        .unwrap(),
    ];
    let gvk = json!({"group": "example.com", "kind": "Gear", "version": "v1"});
    if owns {
        objects.push(serde_json::value::to_raw_value(&gears_crd()).unwrap());
        properties.push(Property::from_value("olm.gvk", &gvk).unwrap());
    }
    for (needed, range) in needs {
        properties.push(
            Property::from_value(
                "olm.package.required",
                &json!({"packageName": needed, "versionRange": range}),
            )
            .unwrap(),
        );
    }
    Bundle {
        package: package.into(),
        name,
        properties,
        objects,
        ..Bundle::default()
    }
}

/// One package with one channel `stable` whose entries each replace the one before.
fn package(name: &str, bundles: Vec<Bundle>) -> DeclarativeConfig {
    let mut entries = Vec::new();
    let mut previous: Option<String> = None;
    for b in &bundles {
        entries.push(entry(&b.name, previous.as_deref(), None));
        previous = Some(b.name.clone());
    }
    DeclarativeConfig {
        packages: vec![Package {
            name: name.into(),
            default_channel: Some("stable".into()),
            ..Package::default()
        }],
        channels: vec![Channel {
            package: name.into(),
            name: "stable".into(),
            entries,
            ..Channel::default()
        }],
        bundles,
        ..DeclarativeConfig::default()
    }
}

/// The catalog (also the fault-injection test's, subscription_faults.rs).
pub fn catalog() -> DeclarativeConfig {
    let app = package(
        "app",
        vec![
            bundle("app", "1.0.0", false, &[("base", ">=1.0.0 <2.0.0")]),
            bundle("app", "2.0.0", false, &[("base", ">=2.0.0")]),
        ],
    );
    let base = package(
        "base",
        vec![
            bundle("base", "1.0.0", true, &[]),
            bundle("base", "1.1.0", true, &[]),
            bundle("base", "2.0.0", true, &[]),
        ],
    );
    merged(app, base)
}

/// The Subscription to `app` in channel `stable`, starting at v1.0.0, from catalog `community`.
pub async fn subscribe_app(env: &Env) -> Subscription {
    env.subscribe(
        "app",
        "app",
        "community",
        json!({"channel": "stable", "startingCSV": "app.v1.0.0"}),
    )
    .await
}

async fn csvs(env: &Env) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for name in env.names(CSV.0, CSV.1, CSV.2, true).await {
        let phase = env
            .get(CSV.0, CSV.1, CSV.2, &name, true)
            .await
            .and_then(|v| {
                v.pointer("/status/phase")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            })
            .unwrap_or_default();
        out.push((name, phase));
    }
    out
}

async fn plan_contents(env: &Env) -> Vec<Vec<String>> {
    env.plans()
        .await
        .into_iter()
        .map(|p| p.spec.cluster_service_version_names)
        .collect()
}

#[tokio::test]
async fn a_co_upgrade_is_one_plan_that_replaces_the_dependency() {
    let mut env = Env::new().await;
    env.add_catalog("community", catalog());
    subscribe_app(&env).await;
    env.converge().await;
    assert_eq!(
        plan_contents(&env).await,
        [
            vec!["app.v1.0.0", "base.v1.1.0"],
            vec!["app.v2.0.0", "base.v2.0.0"]
        ]
    );
    let base = env
        .get(CSV.0, CSV.1, CSV.2, "base.v2.0.0", true)
        .await
        .expect("base.v2.0.0 installed");
    assert_eq!(base["spec"]["replaces"], "base.v1.1.0");
    let app = env
        .get(CSV.0, CSV.1, CSV.2, "app.v2.0.0", true)
        .await
        .expect("app.v2.0.0 installed");
    assert_eq!(app["spec"]["replaces"], "app.v1.0.0");
    // Both Subscriptions point at the one plan and at their new CSV.
    let second = env.plans().await[1].metadata.name.clone();
    for (sub, csv) in [
        ("app", "app.v2.0.0"),
        ("base-stable-community-olm", "base.v2.0.0"),
    ] {
        let status = env.subscription(sub).await.status.unwrap();
        assert_eq!(status.installed_csv.as_deref(), Some(csv), "{sub}");
        assert_eq!(status.state(), SubscriptionState::AtLatestKnown, "{sub}");
        assert_eq!(
            status.install_plan_ref.and_then(|r| r.name),
            second,
            "{sub} references the co-upgrade plan"
        );
    }
}

#[tokio::test]
async fn the_controllers_co_upgrade_app_and_base_with_nothing_failed() {
    let mut env = Env::new().await;
    env.add_catalog("community", catalog());
    let catalogs: Arc<dyn subscription::CatalogSnapshots> = Arc::new(env.catalogs.clone());
    let ctx = env.ctx.clone();
    let subs = tokio::spawn(subscription::run(
        ctx.clone(),
        catalogs,
        futures::stream::pending(),
    ));
    let plans = tokio::spawn(install_plan::run(ctx.clone()));
    let csv_controller = tokio::spawn(olm_rs::reconcile::cluster_service_version::run(ctx));
    subscribe_app(&env).await;

    // Every phase any CSV shows on the way is recorded: a Failed one, even for a moment, fails.
    let mut seen_failed = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    // The controllers' clock runs with the test's: a plan that waits out a transient failure
    // (a CRD update refused because the CRD changed since it was read, say) runs its next pass
    // when its back-off is over by that clock (docs/install-plans.md §6.2).
    let mut ticked = std::time::Instant::now();
    let settled = loop {
        let elapsed = std::time::Instant::now();
        env.clock
            .advance(jiff::SignedDuration::try_from(elapsed - ticked).unwrap_or_default());
        ticked = elapsed;
        let now = csvs(&env).await;
        seen_failed.extend(now.iter().filter(|(_, phase)| phase == "Failed").cloned());
        let plans = env.plans().await;
        let all_complete = plans.iter().all(|p| {
            p.status
                .as_ref()
                .is_some_and(|s| s.phase == InstallPlanPhase::Complete)
        });
        let wanted = [
            ("app.v2.0.0".to_owned(), "Succeeded".to_owned()),
            ("base.v2.0.0".to_owned(), "Succeeded".to_owned()),
        ];
        if now == wanted && all_complete {
            break true;
        }
        if tokio::time::Instant::now() >= deadline {
            break false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let contents = plan_contents(&env).await;
    assert!(
        settled,
        "not settled: CSVs {:?}, plans {contents:?}",
        csvs(&env).await
    );
    assert!(seen_failed.is_empty(), "CSVs failed: {seen_failed:?}");
    // Exactly the two plans: base's Subscription never plans its half of the co-upgrade alone,
    // whatever the stores showed of app's first plan (docs/subscription-plans.md, "Co-upgrades").
    assert_eq!(
        contents,
        [
            vec!["app.v1.0.0", "base.v1.1.0"],
            vec!["app.v2.0.0", "base.v2.0.0"]
        ]
    );
    let base = env
        .get(CSV.0, CSV.1, CSV.2, "base.v2.0.0", true)
        .await
        .unwrap();
    assert_eq!(base["spec"]["replaces"], "base.v1.1.0");
    subs.abort();
    plans.abort();
    csv_controller.abort();
}

/// The stores as the API server has the namespace now, except that the plan store has not seen
/// plan `installing`'s last status write: it still shows it `Installing`.
async fn stores_lagging_behind(env: &Env, installing: &str) -> SubscriptionStores {
    let client = env.client();
    let lp = ListParams::default();
    let mut plans = Api::<InstallPlan>::namespaced(client.clone(), NS)
        .list(&lp)
        .await
        .unwrap()
        .items;
    for plan in &mut plans {
        if plan.metadata.name.as_deref() == Some(installing)
            && let Some(status) = plan.status.as_mut()
        {
            status.phase = InstallPlanPhase::Installing;
        }
    }
    let csvs = Api::<ClusterServiceVersion>::namespaced(client.clone(), NS)
        .list(&lp)
        .await
        .unwrap()
        .items;
    stores_showing(env, plans, csvs).await
}

/// The race the controllers meet now and then, made to happen: app's first plan has written
/// both CSVs and base's Subscription, but the plan store has not yet seen the plan `Complete`.
/// base's Subscription adopts base.v1.1.0 and then, tied to app whose plan still installs,
/// waits; it used to plan base.v2.0.0 alone, and the co-upgrade's plan installed it again.
#[tokio::test]
async fn a_dependency_never_plans_its_half_of_a_co_upgrade_while_the_first_plan_shows_installing() {
    let mut env = Env::new().await;
    env.add_catalog("community", catalog());
    subscribe_app(&env).await;
    let first = env.sync_subscriptions().await.created_plans;
    assert_eq!(first.len(), 1, "{first:?}");
    env.run_plan(&first[0]).await;
    for _ in 0..3 {
        let lagging = stores_lagging_behind(&env, &first[0]).await;
        let report = sync_namespace(&env.ctx, &lagging, &env.catalogs, NS)
            .await
            .expect("sync");
        assert!(report.created_plans.is_empty(), "{report:?}");
    }
    let base = env.subscription("base-stable-community-olm").await;
    assert_eq!(
        base.status.and_then(|s| s.installed_csv).as_deref(),
        Some("base.v1.1.0"),
        "base's Subscription adopted its CSV meanwhile"
    );
    assert_eq!(plan_contents(&env).await.len(), 1);
    // Once the store shows the plan Complete, one plan upgrades both.
    env.converge().await;
    assert_eq!(
        plan_contents(&env).await,
        [
            vec!["app.v1.0.0", "base.v1.1.0"],
            vec!["app.v2.0.0", "base.v2.0.0"]
        ]
    );
}

/// The other race: app created the co-upgrade's plan and waits on it, but base's attachment to
/// it was refused (base's status had changed in between, a 409), so base, deciding again, sees
/// no plan of its own. It attaches the co-upgrade's plan; it used to create a plan of
/// base.v2.0.0 alone.
#[tokio::test]
async fn a_dependency_whose_attachment_was_refused_attaches_the_co_upgrade_plan() {
    let mut env = Env::new().await;
    env.add_catalog("community", catalog());
    subscribe_app(&env).await;
    let first = env.sync_subscriptions().await.created_plans;
    env.run_plan(&first[0]).await;
    let mut created = Vec::new();
    for _ in 0..3 {
        created.extend(env.sync_subscriptions().await.created_plans);
    }
    // Each member of the co-upgrade reports the one plan.
    created.dedup();
    assert_eq!(created.len(), 1, "the co-upgrade's plan: {created:?}");
    let co_upgrade = created[0].clone();
    // base's status as it was before the attachment.
    let name = "base-stable-community-olm";
    let subs: Api<Subscription> = Api::namespaced(env.client(), NS);
    let mut base = env.subscription(name).await;
    let status = base.status.as_mut().expect("base's status");
    assert_eq!(
        status
            .install_plan_ref
            .as_ref()
            .and_then(|r| r.name.clone()),
        Some(co_upgrade.clone())
    );
    status.install_plan_ref = None;
    status.install_plan = None;
    status.current_csv = Some("base.v1.1.0".into());
    status.state = Some(SubscriptionState::AtLatestKnown);
    status.conditions = None;
    subs.replace_status(name, &Default::default(), &base)
        .await
        .expect("attachment undone");

    let report = env.sync_subscriptions().await;
    assert!(report.created_plans.is_empty(), "{report:?}");
    assert_eq!(
        report.adopted_plans,
        std::slice::from_ref(&co_upgrade),
        "{report:?}"
    );
    let status = env.subscription(name).await.status.unwrap();
    assert_eq!(
        status.install_plan_ref.and_then(|r| r.name),
        Some(co_upgrade)
    );
    env.converge().await;
    assert_eq!(
        plan_contents(&env).await,
        [
            vec!["app.v1.0.0", "base.v1.1.0"],
            vec!["app.v2.0.0", "base.v2.0.0"]
        ]
    );
}

//! The Subscription sync decides from stores, which may lag behind the API server (each kind is
//! watched on its own). A store that has not yet seen a plan the controller created never leads
//! to a second plan for the same resolution, nor to a Subscription letting go of its plan.

use crate::subscription_support as support;

use kube::api::{Api, ListParams};
use kube_runtime::watcher::Event;
use serde_json::json;
use support::*;

use olm_rs::api::{InstallPlan, OperatorGroup, Subscription};
use olm_rs::k8s::indexed_store::{IndexedStore, indexed_store};
use olm_rs::k8s::store::{NamespacedStore, namespaced_store};
use olm_rs::reconcile::subscription::{SubscriptionStores, sync_namespace};

/// A store holding exactly `objects`, as a watch that listed them and heard nothing since.
pub fn frozen<K: kube::Resource + Clone>(objects: Vec<K>) -> NamespacedStore<K> {
    let (store, mut writer) = namespaced_store();
    writer.apply_owned(Event::Init);
    for o in objects {
        writer.apply_owned(Event::InitApply(o));
    }
    writer.apply_owned(Event::InitDone);
    store
}

/// An indexed store (kube's, as a `Controller` reads it) holding exactly `objects`.
pub fn frozen_indexed<K>(objects: Vec<K>) -> IndexedStore<K>
where
    K: kube::Resource<DynamicType = ()> + Clone,
{
    let (store, mut writer) = indexed_store();
    writer.apply_owned(Event::Init);
    for o in objects {
        writer.apply_owned(Event::InitApply(o));
    }
    writer.apply_owned(Event::InitDone);
    store
}

/// Stores that show the Subscriptions, OperatorGroups and Namespace as the server has them now,
/// and no InstallPlan and no CSV at all.
async fn stores_without_plans(env: &Env) -> SubscriptionStores {
    stores_showing(env, Vec::new(), Vec::new()).await
}

/// Stores that show the Subscriptions, OperatorGroups and Namespace as the server has them now,
/// and exactly `plans` and `csvs`: what a store lagging behind the server holds.
pub async fn stores_showing(
    env: &Env,
    plans: Vec<InstallPlan>,
    csvs: Vec<olm_rs::api::ClusterServiceVersion>,
) -> SubscriptionStores {
    let client = env.client();
    let lp = ListParams::default();
    let subs = Api::<Subscription>::namespaced(client.clone(), NS)
        .list(&lp)
        .await
        .unwrap()
        .items;
    let groups: Vec<OperatorGroup> = Api::<OperatorGroup>::namespaced(client.clone(), NS)
        .list(&lp)
        .await
        .unwrap()
        .items;
    let namespaces = Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
        .list_metadata(&lp)
        .await
        .unwrap()
        .items;
    SubscriptionStores {
        subscriptions: frozen(subs),
        plans: frozen_indexed(plans),
        csvs: frozen_indexed(csvs),
        operator_groups: frozen(groups),
        namespaces: frozen(namespaces),
        crds: frozen(Vec::new()),
    }
}

#[tokio::test]
async fn a_plan_the_store_has_not_seen_yet_is_never_made_twice() {
    let mut env = Env::new().await;
    env.add_catalog("community", widget_catalog());
    env.subscribe_widget(json!({})).await;
    let report = env.sync_subscriptions().await;
    assert_eq!(report.created_plans.len(), 1, "{report:?}");
    let first = report.created_plans[0].clone();

    // The Subscription store saw the reference, the plan store not the plan: the plan is read
    // from the server, and the Subscription keeps it.
    let stale = stores_without_plans(&env).await;
    let report = sync_namespace(&env.ctx, &stale, &env.catalogs, NS)
        .await
        .expect("sync");
    assert!(report.created_plans.is_empty(), "{report:?}");
    let sub = env.subscription("widget").await;
    assert!(condition(&sub, "InstallPlanMissing").is_none());
    assert_eq!(
        sub.status
            .unwrap()
            .install_plan_ref
            .unwrap()
            .name
            .as_deref(),
        Some(first.as_str())
    );

    // Now the reference is lost too (a crash between the create and the attachment), and the
    // plan store still lags: the decision wants the same plan again, whose name is taken.
    let subs: Api<Subscription> = Api::namespaced(env.client(), NS);
    let mut sub = env.subscription("widget").await;
    sub.status = None;
    subs.replace_status("widget", &Default::default(), &sub)
        .await
        .expect("status cleared");
    let stale = stores_without_plans(&env).await;
    let report = sync_namespace(&env.ctx, &stale, &env.catalogs, NS)
        .await
        .expect("sync");
    assert!(report.created_plans.is_empty(), "{report:?}");
    assert!(
        report.retry_soon,
        "the refused create asks for another look"
    );
    assert_eq!(env.plans().await.len(), 1, "no second plan");

    // Once the store has the plan, it is adopted.
    let report = env.sync_subscriptions().await;
    assert_eq!(report.adopted_plans, std::slice::from_ref(&first));
    assert!(report.created_plans.is_empty(), "{report:?}");
    assert_eq!(env.plans().await.len(), 1);
    let sub = env.subscription("widget").await;
    assert_eq!(
        sub.status
            .unwrap()
            .install_plan_ref
            .unwrap()
            .name
            .as_deref(),
        Some(first.as_str())
    );
}

#[tokio::test]
async fn a_subscription_store_behind_the_server_writes_nothing() {
    let mut env = Env::new().await;
    env.add_catalog("community", widget_catalog());
    env.subscribe_widget(json!({})).await;
    // Stores listed before the first sync: the Subscription as it was created.
    let before = stores_without_plans(&env).await;
    env.sync_subscriptions().await;
    let report = sync_namespace(&env.ctx, &before, &env.catalogs, NS)
        .await
        .expect("sync");
    assert!(report.created_plans.is_empty(), "{report:?}");
    assert!(report.updated.is_empty(), "{report:?}");
    assert!(report.retry_soon, "{report:?}");
    assert_eq!(env.plans().await.len(), 1);
}

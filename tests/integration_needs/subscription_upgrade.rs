//! Upgrades through the embedded API: startingCSV then one hop per InstallPlan to the head,
//! a channel switch through a skipRange, and the real etcd bundles of the community catalog.

use crate::common;
use crate::subscription_support as support;

use std::sync::Arc;

use serde_json::json;
use support::*;

use olm_rs::api::CatalogRef;
use olm_rs::api::SubscriptionState;
use olm_rs::reconcile::subscription::load_index;

const CSV: (&str, &str, &str) = (
    "operators.coreos.com/v1alpha1",
    "ClusterServiceVersion",
    "clusterserviceversions",
);

async fn csv(env: &Env, name: &str) -> Option<serde_json::Value> {
    env.get(CSV.0, CSV.1, CSV.2, name, true).await
}

async fn starting_csv_then_one_plan_per_hop_to_the_head() {
    let mut env = Env::new().await;
    env.add_catalog("community", widget_catalog());
    env.subscribe_widget(json!({"startingCSV": "widget-operator.v1.0.0"}))
        .await;
    let created = env.converge().await;
    assert_eq!(
        created.len(),
        3,
        "1.0.0, then 1.1.0, then 1.2.0: {created:?}"
    );
    let mut installed = Vec::new();
    for name in &created {
        installed.extend(env.plan(name).await.spec.cluster_service_version_names);
    }
    assert_eq!(
        installed,
        [
            "widget-operator.v1.0.0",
            "widget-operator.v1.1.0",
            "widget-operator.v1.2.0"
        ]
    );
    let generations: Vec<Option<i64>> = env
        .plans()
        .await
        .iter()
        .map(|p| p.spec.generation)
        .collect();
    assert_eq!(generations, [Some(1), Some(2), Some(3)]);

    // Each CSV replaces the one that was installed, and the first replaces nothing.
    let v1 = csv(&env, "widget-operator.v1.0.0").await.unwrap();
    assert!(v1["spec"].get("replaces").is_none());
    let v2 = csv(&env, "widget-operator.v1.1.0").await.unwrap();
    assert_eq!(v2["spec"]["replaces"], "widget-operator.v1.0.0");
    let v3 = csv(&env, "widget-operator.v1.2.0").await.unwrap();
    assert_eq!(v3["spec"]["replaces"], "widget-operator.v1.1.0");

    let sub = env.subscription("widget").await;
    let st = sub.status.as_ref().unwrap();
    assert_eq!(st.state(), SubscriptionState::AtLatestKnown);
    assert_eq!(st.installed_csv.as_deref(), Some("widget-operator.v1.2.0"));
    assert_eq!(
        st.install_plan_ref.as_ref().unwrap().name.as_deref(),
        Some(created[2].as_str())
    );
}

async fn a_channel_switch_follows_a_skip_range_in_one_hop() {
    let mut env = Env::new().await;
    env.add_catalog("community", widget_catalog());
    env.subscribe_widget(json!({"startingCSV": "widget-operator.v1.0.0"}))
        .await;
    // Install only the starting CSV.
    let first = env.sync_subscriptions().await.created_plans.remove(0);
    env.run_plan(&first).await;
    env.sync_subscriptions().await; // AtLatestKnown 1.0.0, and the next hop planned in stable
    let pending: Vec<String> = env
        .plans()
        .await
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .filter(|n| *n != first)
        .collect();
    assert_eq!(pending.len(), 1);
    kube::Api::<olm_rs::api::InstallPlan>::namespaced(env.client(), NS)
        .delete(&pending[0], &Default::default())
        .await
        .unwrap();
    // Switch to `fast`: 2.0.0's skipRange covers 1.0.0.
    kube::Api::<olm_rs::api::Subscription>::namespaced(env.client(), NS)
        .patch(
            "widget",
            &Default::default(),
            &kube::api::Patch::Merge(&json!({"spec": {"channel": "fast"}})),
        )
        .await
        .unwrap();
    let created = env.converge().await;
    assert_eq!(created.len(), 1, "{created:?}");
    let plan = env.plan(&created[0]).await;
    assert_eq!(
        plan.spec.cluster_service_version_names,
        ["widget-operator.v2.0.0"]
    );
    assert_eq!(
        csv(&env, "widget-operator.v2.0.0").await.unwrap()["spec"]["replaces"],
        "widget-operator.v1.0.0"
    );
    let sub = env.subscription("widget").await;
    assert_eq!(
        sub.status.as_ref().unwrap().installed_csv.as_deref(),
        Some("widget-operator.v2.0.0")
    );
}

async fn a_channel_without_a_path_from_the_installed_version_is_explained() {
    let mut env = Env::new().await;
    let mut catalog = widget_catalog();
    // `fast` now only covers versions up to 1.1.x.
    catalog.channels[1].entries[0].skip_range = Some(">=1.0.0 <1.2.0".into());
    env.add_catalog("community", catalog);
    env.subscribe_widget(json!({})).await;
    env.converge().await;
    kube::Api::<olm_rs::api::Subscription>::namespaced(env.client(), NS)
        .patch(
            "widget",
            &Default::default(),
            &kube::api::Patch::Merge(&json!({"spec": {"channel": "fast"}})),
        )
        .await
        .unwrap();
    let created = env.converge().await;
    assert!(created.is_empty());
    let sub = env.subscription("widget").await;
    let failed = condition(&sub, "ResolutionFailed").expect("explained");
    assert_eq!(failed.reason.as_deref(), Some("ConstraintsNotSatisfiable"));
    assert_eq!(
        failed.message.as_deref(),
        Some(
            "the installed operator widget-operator.v1.2.0 cannot move to channel \"fast\" of package \"widget\" in catalog olm/community: no entry of channel \"fast\" replaces or skips widget-operator.v1.2.0 or has a skipRange containing 1.2.0; widget-operator.v1.2.0 is not an entry of this channel"
        )
    );
    assert_eq!(
        sub.status.as_ref().unwrap().state(),
        SubscriptionState::AtLatestKnown,
        "the installed operator stays"
    );
}

async fn real_etcd_bundles_upgrade_hop_by_hop() {
    let mut env = Env::new().await;
    let dir = common::shared_dir().join("data/catalogs/community-operators-prod/operators/etcd");
    let index = load_index(&dir).expect("etcd bundle directories load");
    env.catalogs = std::mem::take(&mut env.catalogs)
        .with_index(CatalogRef::new("olm", "community"), Arc::clone(&index));
    env.subscribe(
        "etcd",
        "etcd",
        "community",
        json!({"channel": "singlenamespace-alpha", "startingCSV": "etcdoperator.v0.9.0"}),
    )
    .await;
    let created = env.converge().await;
    let mut installed = Vec::new();
    for name in &created {
        installed.extend(env.plan(name).await.spec.cluster_service_version_names);
    }
    assert_eq!(
        installed,
        [
            "etcdoperator.v0.9.0",
            "etcdoperator.v0.9.2",
            "etcdoperator.v0.9.4"
        ]
    );
    let crds = env
        .names(
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
            false,
        )
        .await;
    for crd in [
        "etcdbackups.etcd.database.coreos.com",
        "etcdclusters.etcd.database.coreos.com",
        "etcdrestores.etcd.database.coreos.com",
    ] {
        assert!(crds.contains(&crd.to_owned()), "{crd} in {crds:?}");
    }
    let sub = env.subscription("etcd").await;
    assert_eq!(
        sub.status.as_ref().unwrap().installed_csv.as_deref(),
        Some("etcdoperator.v0.9.4")
    );
}

crate::trials! {
    current starting_csv_then_one_plan_per_hop_to_the_head,
    current a_channel_switch_follows_a_skip_range_in_one_hop,
    current a_channel_without_a_path_from_the_installed_version_is_explained,
    current real_etcd_bundles_upgrade_hop_by_hop,
}

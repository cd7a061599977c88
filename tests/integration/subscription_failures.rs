//! What users see when nothing can be installed: an unreachable catalog, zero or two
//! OperatorGroups, a bundle known only by image — each local to the Subscriptions it concerns.

use crate::subscription_support as support;

use serde_json::json;
use support::*;

use olm_rs::api::CatalogRef;
use olm_rs::api::SubscriptionState;

#[tokio::test]
async fn an_unreachable_catalog_fails_its_subscriptions_only() {
    let mut env = Env::new().await;
    env.add_catalog("community", gadget_catalog());
    env.catalogs = std::mem::take(&mut env.catalogs).with_unavailable(
        CatalogRef::new("olm", "broken"),
        "connection refused by registry broken.olm.svc:50051",
    );
    env.subscribe("widget", "widget", "broken", json!({})).await;
    env.subscribe("gadget", "gadget", "community", json!({}))
        .await;
    let report = env.sync_subscriptions().await;
    assert!(
        report.retry_soon,
        "an error prevented resolution: look again soon"
    );
    assert_eq!(
        report.created_plans.len(),
        1,
        "the healthy catalog's Subscription is not blocked"
    );

    let widget = env.subscription("widget").await;
    let failed = condition(&widget, "ResolutionFailed").unwrap();
    assert_eq!(failed.reason.as_deref(), Some("ErrorPreventedResolution"));
    assert_eq!(
        failed.message.as_deref(),
        Some(
            "error using catalogsource olm/broken: connection refused by registry broken.olm.svc:50051; so package \"widget\" cannot be resolved until the catalog can be read"
        )
    );
    let unhealthy = condition(&widget, "CatalogSourcesUnhealthy").unwrap();
    assert_eq!(unhealthy.status.as_str(), "True");
    assert_eq!(
        unhealthy.message.as_deref(),
        Some("targeted catalogsource olm/broken unhealthy")
    );

    // As OLM does, the failure is also a Warning event on the Namespace (docs/resolution.md §9),
    // besides the one on the Subscription; like every event about a cluster-scoped object, it
    // is kept in `default`.
    let events: kube::Api<k8s_openapi::api::events::v1::Event> =
        kube::Api::namespaced(env.client(), "default");
    let on_namespace: Vec<_> = events
        .list(&Default::default())
        .await
        .expect("list events")
        .items
        .into_iter()
        .filter(|e| {
            e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("Namespace")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(NS)
                && e.reason.as_deref() == Some("ResolutionFailed")
        })
        .collect();
    assert_eq!(on_namespace.len(), 1, "{on_namespace:?}");
    assert_eq!(on_namespace[0].type_.as_deref(), Some("Warning"));
    assert_eq!(on_namespace[0].note, failed.message);

    let gadget = env.subscription("gadget").await;
    assert!(condition(&gadget, "ResolutionFailed").is_none());
    let unhealthy = condition(&gadget, "CatalogSourcesUnhealthy").unwrap();
    assert_eq!(
        unhealthy.status.as_str(),
        "True",
        "a visible catalog is unhealthy"
    );
    assert_eq!(
        unhealthy.message.as_deref(),
        Some("catalogsource olm/broken unhealthy; targeted catalogsource olm/community is healthy")
    );
    let health = gadget
        .status
        .as_ref()
        .unwrap()
        .catalog_health
        .as_ref()
        .unwrap();
    let listed: Vec<(String, bool)> = health
        .iter()
        .map(|h| (h.catalog_source_ref.name.clone().unwrap(), h.healthy))
        .collect();
    assert_eq!(
        listed,
        [("broken".to_owned(), false), ("community".to_owned(), true)]
    );

    // The catalog comes back: the Subscription resolves and installs.
    env.catalogs = std::mem::take(&mut env.catalogs).with_index(
        CatalogRef::new("olm", "broken"),
        std::sync::Arc::new(olm_rs::catalog::CatalogIndex::new(widget_catalog())),
    );
    env.converge().await;
    let widget = env.subscription("widget").await;
    assert!(condition(&widget, "ResolutionFailed").is_none());
    assert_eq!(
        widget.status.as_ref().unwrap().state(),
        SubscriptionState::AtLatestKnown
    );
}

#[tokio::test]
async fn two_operator_groups_are_reported_on_every_subscription() {
    let mut env = Env::new().await;
    env.add_catalog("community", merged(widget_catalog(), gadget_catalog()));
    env.operator_group("second").await;
    env.subscribe("widget", "widget", "community", json!({}))
        .await;
    env.subscribe("gadget", "gadget", "community", json!({}))
        .await;
    let report = env.sync_subscriptions().await;
    assert!(report.created_plans.is_empty());
    for name in ["widget", "gadget"] {
        let sub = env.subscription(name).await;
        let failed =
            condition(&sub, "ResolutionFailed").unwrap_or_else(|| panic!("{name} reports it"));
        assert_eq!(failed.reason.as_deref(), Some("ErrorPreventedResolution"));
        assert_eq!(
            failed.message.as_deref(),
            Some(
                "expected 1 OperatorGroup in the namespace, found 2: namespace operators has 2 OperatorGroups (og, second); exactly one is allowed per namespace, delete the others"
            )
        );
    }
    kube::Api::<olm_rs::api::OperatorGroup>::namespaced(env.client(), NS)
        .delete("second", &Default::default())
        .await
        .unwrap();
    let report = env.sync_subscriptions().await;
    assert_eq!(report.created_plans.len(), 2, "{report:?}");
    assert!(condition(&env.subscription("widget").await, "ResolutionFailed").is_none());
}

#[tokio::test]
async fn no_operator_group_is_reported_and_plans_refuse_to_run() {
    let mut env = Env::new().await;
    env.add_catalog("community", widget_catalog());
    env.subscribe_widget(json!({})).await;
    let created = env.sync_subscriptions().await.created_plans;
    kube::Api::<olm_rs::api::OperatorGroup>::namespaced(env.client(), NS)
        .delete("og", &Default::default())
        .await
        .unwrap();
    // The plan made while the group existed does not run without it.
    env.sync_plan(&created[0]).await;
    let plan = env.plan(&created[0]).await;
    let status = plan.status.unwrap();
    assert_eq!(status.phase, olm_rs::api::InstallPlanPhase::Installing);
    let check = &status.conditions.unwrap()[0];
    assert_eq!(
        check.reason.as_ref().map(|r| r.as_str()),
        Some("InstallCheckFailed")
    );
    assert_eq!(
        check.message.as_deref(),
        Some("no operator group found that is managing this namespace")
    );
    env.sync_subscriptions().await;
    let sub = env.subscription("widget").await;
    let failed = condition(&sub, "ResolutionFailed").unwrap();
    assert!(
        failed
            .message
            .as_deref()
            .unwrap()
            .starts_with("expected 1 OperatorGroup in the namespace, found 0: namespace operators has no OperatorGroup"),
        "{failed:?}"
    );
    let pending = condition(&sub, "InstallPlanPending").unwrap();
    assert_eq!(
        pending.message.as_deref(),
        Some("no operator group found that is managing this namespace")
    );
}

#[tokio::test]
async fn a_bundle_known_only_by_image_gets_a_plan_that_pulls_it_first() {
    let mut env = Env::new().await;
    let mut catalog = widget_catalog();
    for bundle in &mut catalog.bundles {
        bundle.objects.clear();
    }
    env.add_catalog("community", catalog);
    env.subscribe_widget(json!({})).await;
    let report = env.sync_subscriptions().await;
    assert_eq!(report.created_plans.len(), 1, "{report:?}");
    let plan = env.plan(&report.created_plans[0]).await;
    assert_eq!(
        plan.spec.cluster_service_version_names,
        ["widget-operator.v1.2.0"]
    );
    let status = plan.status.unwrap();
    assert!(
        status.plan.unwrap_or_default().is_empty(),
        "no step before the pull"
    );
    let lookup = &status.bundle_lookups.unwrap()[0];
    assert_eq!(lookup.path, "example.com/widget-bundle:v1.2.0");
    assert_eq!(lookup.identifier, "widget-operator.v1.2.0");
    let pending = &lookup.conditions.as_ref().unwrap()[0];
    assert_eq!(pending.type_.as_str(), "BundleLookupPending");
    let sub = env.subscription("widget").await;
    let c = condition(&sub, "BundleUnpacking").unwrap();
    assert_eq!(c.reason.as_deref(), Some("UnpackingInProgress"));
    assert_eq!(
        c.message.as_deref(),
        Some("bundle image example.com/widget-bundle:v1.2.0 not yet pulled.")
    );
    assert!(condition(&sub, "BundleUnpackFailed").is_none());
    assert!(condition(&sub, "ResolutionFailed").is_none());
}

#[tokio::test]
async fn deprecations_from_the_catalog_become_conditions() {
    use olm_rs::catalog::model::{DeprecationEntry, DeprecationReference, Deprecations};
    let mut env = Env::new().await;
    let mut catalog = widget_catalog();
    let entry = |schema: &str, name: &str, message: &str| DeprecationEntry {
        reference: DeprecationReference {
            schema: schema.into(),
            name: name.into(),
        },
        message: message.into(),
    };
    catalog.deprecations.push(Deprecations {
        package: "widget".into(),
        entries: vec![
            entry("olm.channel", "stable", "use fast"),
            entry("olm.bundle", "widget-operator.v1.2.0", "has a known bug"),
        ],
        ..Deprecations::default()
    });
    env.add_catalog("community", catalog);
    env.subscribe_widget(json!({})).await;
    env.converge().await;
    let sub = env.subscription("widget").await;
    assert_eq!(
        condition(&sub, "ChannelDeprecated")
            .unwrap()
            .message
            .as_deref(),
        Some("olm.channel/stable: use fast")
    );
    assert_eq!(
        condition(&sub, "BundleDeprecated")
            .unwrap()
            .message
            .as_deref(),
        Some("olm.bundle/widget-operator.v1.2.0: has a known bug")
    );
    assert_eq!(
        condition(&sub, "Deprecated").unwrap().message.as_deref(),
        Some("olm.channel/stable: use fast; olm.bundle/widget-operator.v1.2.0: has a known bug")
    );
    assert!(condition(&sub, "PackageDeprecated").is_none());
    assert_eq!(
        sub.status.as_ref().unwrap().state(),
        SubscriptionState::AtLatestKnown,
        "deprecation does not stop installs"
    );
}

//! Dependencies through the embedded API (issue 17): a Subscription whose bundle needs another
//! operator's API installs both with one plan and a dependency Subscription; two Subscriptions
//! that truly conflict fail alone, naming each other; a dependency that appears in a catalog
//! later unblocks the waiting Subscription without a restart.

use crate::subscription_support as support;

use std::time::Duration;

use serde_json::{Value, json};
use support::*;

use olm_rs::api::SubscriptionState;
use olm_rs::catalog::model::{Bundle, Channel, DeclarativeConfig, Package, Property};

/// A package with one bundle `<pkg>.v1.0.0` whose CSV runs one deployment, provides `provides`
/// and requires `requires` (kinds of `example.com/v1`).
fn operator(pkg: &str, provides: Option<&str>, requires: Option<&str>) -> DeclarativeConfig {
    let name = format!("{pkg}.v1.0.0");
    let gvk = |kind: &str| json!({"group": "example.com", "kind": kind, "version": "v1"});
    let mut crds = json!({});
    let mut properties = vec![
        Property::from_value(
            "olm.package",
            &json!({"packageName": pkg, "version": "1.0.0"}),
        )
        .unwrap(),
    ];
    if let Some(kind) = provides {
        crds["owned"] = json!([{"name": format!("{}s.example.com", kind.to_lowercase()), "version": "v1", "kind": kind}]);
        properties.push(Property::from_value("olm.gvk", &gvk(kind)).unwrap());
    }
    if let Some(kind) = requires {
        crds["required"] = json!([{"name": format!("{}s.example.com", kind.to_lowercase()), "version": "v1", "kind": kind}]);
        properties.push(Property::from_value("olm.gvk.required", &gvk(kind)).unwrap());
    }
    let csv = json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": name},
        "spec": {
            "displayName": pkg, "version": "1.0.0", "customresourcedefinitions": crds,
            "installModes": [{"type": "OwnNamespace", "supported": true}, {"type": "SingleNamespace", "supported": true},
                             {"type": "MultiNamespace", "supported": false}, {"type": "AllNamespaces", "supported": true}],
            "install": {"strategy": "deployment", "spec": {"deployments": [{"name": pkg, "spec": {
                "selector": {"matchLabels": {"app": pkg}},
                "template": {"metadata": {"labels": {"app": pkg}},
                             "spec": {"containers": [{"name": "manager", "image": "example.com/op:latest"}]}}}}]}}
        }
    });
    let mut objects = vec![serde_json::value::to_raw_value(&csv).unwrap()];
    if let Some(kind) = provides {
        let lower = kind.to_lowercase();
        let crd = json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{lower}s.example.com")},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"kind": kind, "plural": format!("{lower}s"), "singular": lower, "listKind": format!("{kind}List")},
                     "versions": [{"name": "v1", "served": true, "storage": true,
                                   "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
        });
        objects.push(serde_json::value::to_raw_value(&crd).unwrap());
    }
    DeclarativeConfig {
        packages: vec![Package {
            name: pkg.into(),
            default_channel: Some("stable".into()),
            ..Package::default()
        }],
        channels: vec![Channel {
            package: pkg.into(),
            name: "stable".into(),
            entries: vec![entry(&name, None, None)],
            ..Channel::default()
        }],
        bundles: vec![Bundle {
            package: pkg.into(),
            name: name.clone(),
            properties,
            objects,
            ..Bundle::default()
        }],
        ..DeclarativeConfig::default()
    }
}

fn merged(parts: Vec<DeclarativeConfig>) -> DeclarativeConfig {
    let mut out = DeclarativeConfig::default();
    for part in parts {
        out.merge(part);
    }
    out
}

async fn csv_phase(env: &Env, name: &str) -> Option<String> {
    env.get(
        "operators.coreos.com/v1alpha1",
        "ClusterServiceVersion",
        "clusterserviceversions",
        name,
        true,
    )
    .await
    .and_then(|v: Value| {
        v.pointer("/status/phase")
            .and_then(Value::as_str)
            .map(str::to_owned)
    })
}

async fn wait_succeeded(env: &Env, names: &[&str]) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let mut phases = Vec::new();
        for name in names {
            phases.push(csv_phase(env, name).await);
        }
        if phases.iter().all(|p| p.as_deref() == Some("Succeeded")) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "CSVs {names:?} did not succeed: {phases:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn failed_message(sub: &olm_rs::api::Subscription) -> Option<String> {
    condition(sub, "ResolutionFailed")
        .filter(|c| c.status == olm_rs::api::ConditionStatus::True)
        .and_then(|c| c.message.clone())
}

#[tokio::test]
async fn a_dependency_subscription_is_created_and_both_csvs_succeed() {
    let mut env = Env::new().await;
    env.add_catalog(
        "community",
        merged(vec![
            operator("gadget", None, Some("Widget")),
            operator("widget", Some("Widget"), None),
        ]),
    );
    let csvs = tokio::spawn(olm_rs::reconcile::cluster_service_version::run(
        env.ctx.clone(),
    ));
    env.subscribe(
        "gadget",
        "gadget",
        "community",
        json!({"channel": "stable"}),
    )
    .await;
    let plans = env.converge().await;
    assert_eq!(
        plans.len(),
        1,
        "one plan holds the operator and its dependency"
    );
    let plan = env.plan(&plans[0]).await;
    assert_eq!(
        plan.spec.cluster_service_version_names,
        ["gadget.v1.0.0", "widget.v1.0.0"]
    );
    let kinds: Vec<String> = plan
        .status
        .as_ref()
        .unwrap()
        .plan
        .as_ref()
        .unwrap()
        .iter()
        .map(|s| format!("{}/{}", s.resource.kind, s.resource.name))
        .collect();
    assert_eq!(
        &kinds[..3],
        [
            "ClusterServiceVersion/gadget.v1.0.0",
            "ClusterServiceVersion/widget.v1.0.0",
            "CustomResourceDefinition/widgets.example.com",
        ]
    );
    assert!(
        kinds.contains(&"Subscription/widget-stable-community-olm".to_owned()),
        "{kinds:?}"
    );

    // The dependency Subscription exists, as OLM makes it, and owns the dependency's CSV.
    env.converge().await;
    let dep = env.subscription("widget-stable-community-olm").await;
    assert_eq!(
        (
            dep.spec.source.as_str(),
            dep.spec.name.as_str(),
            dep.spec.channel.as_deref(),
            dep.spec.starting_csv.as_deref()
        ),
        ("community", "widget", Some("stable"), Some("widget.v1.0.0"))
    );
    let annotations = dep.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(annotations.get("olm.generated-by"), Some(&plans[0]));
    assert_eq!(
        dep.metadata
            .labels
            .clone()
            .unwrap_or_default()
            .get("olm.managed")
            .map(String::as_str),
        Some("true")
    );
    let status = dep
        .status
        .clone()
        .expect("the dependency Subscription is synced");
    assert_eq!(status.installed_csv.as_deref(), Some("widget.v1.0.0"));
    assert_eq!(status.state(), SubscriptionState::AtLatestKnown);
    let gadget = env.subscription("gadget").await;
    assert_eq!(
        gadget.status.unwrap().installed_csv.as_deref(),
        Some("gadget.v1.0.0")
    );
    assert_eq!(
        env.plans().await.len(),
        1,
        "the dependency Subscription makes no plan of its own"
    );

    wait_succeeded(&env, &["gadget.v1.0.0", "widget.v1.0.0"]).await;
    csvs.abort();
}

#[tokio::test]
async fn a_conflict_between_two_subscriptions_leaves_a_third_installing() {
    let mut env = Env::new().await;
    env.add_catalog(
        "community",
        merged(vec![
            operator("widget", Some("Widget"), None),
            operator("rival", Some("Widget"), None),
            operator("solo", Some("Solo"), None),
        ]),
    );
    for name in ["widget", "rival", "solo"] {
        env.subscribe(name, name, "community", json!({"channel": "stable"}))
            .await;
    }
    let plans = env.converge().await;
    assert_eq!(plans.len(), 1, "only solo gets a plan");
    assert_eq!(
        env.plan(&plans[0]).await.spec.cluster_service_version_names,
        ["solo.v1.0.0"]
    );
    let solo = env.subscription("solo").await;
    assert_eq!(failed_message(&solo), None);
    assert_eq!(
        solo.status.unwrap().installed_csv.as_deref(),
        Some("solo.v1.0.0")
    );
    let rival = failed_message(&env.subscription("rival").await).expect("rival fails");
    let widget = failed_message(&env.subscription("widget").await).expect("widget fails");
    assert!(rival.contains("Subscription rival would install rival.v1.0.0, which Subscription widget cannot be installed next to"), "{rival}");
    assert!(widget.contains("would be a second provider of Widget (example.com/v1) next to bundle rival.v1.0.0 chosen for Subscription rival"), "{widget}");
    assert!(
        widget.starts_with("constraints not satisfiable: "),
        "{widget}"
    );
    let reason = condition(&env.subscription("widget").await, "ResolutionFailed")
        .and_then(|c| c.reason.clone());
    assert_eq!(reason.as_deref(), Some("ConstraintsNotSatisfiable"));
}

#[tokio::test]
async fn a_dependency_that_appears_later_unblocks_the_subscription_without_a_restart() {
    let mut env = Env::new().await;
    env.add_catalog("apps", operator("gadget", None, Some("Widget")));
    env.subscribe("gadget", "gadget", "apps", json!({"channel": "stable"}))
        .await;
    assert!(env.converge().await.is_empty());
    let message = failed_message(&env.subscription("gadget").await).expect("waits for Widget");
    assert!(message.contains("bundle gadget.v1.0.0 requires an operator providing an API with group: example.com, version: v1, kind: Widget"), "{message}");
    assert!(message.contains("needs an operator providing Widget (example.com/v1), and no catalog this namespace can see has one (add a catalog that provides it)"), "{message}");

    // A catalog with the API is added; the same controller context picks it up.
    env.add_catalog("community", operator("widget", Some("Widget"), None));
    let plans = env.converge().await;
    assert_eq!(plans.len(), 1, "{plans:?}");
    let gadget = env.subscription("gadget").await;
    assert_eq!(failed_message(&gadget), None);
    assert_eq!(
        gadget.status.unwrap().installed_csv.as_deref(),
        Some("gadget.v1.0.0")
    );
    let dep = env.subscription("widget-stable-community-olm").await;
    assert_eq!(dep.spec.source, "community");
}

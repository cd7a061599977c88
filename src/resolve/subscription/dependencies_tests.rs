use jiff::Timestamp;
use serde_json::{Value, json};

use crate::api::keys::GENERATED_BY_ANNOTATION;
use crate::api::{Approval, Subscription, SubscriptionSpec};
use crate::catalog::CatalogIndex;
use crate::catalog::model::{Bundle, Channel, ChannelEntry, DeclarativeConfig, Package, Property};
use crate::resolve::input::NamespaceInput;
use crate::resolve::subscription::{NamespaceState, RollbackInput, decide_namespace};

fn bundle(pkg: &str, version: &str, props: Vec<Property>) -> Bundle {
    let name = format!("{pkg}.v{version}");
    let csv = json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": name}, "spec": {"install": {"strategy": "deployment", "spec": {"deployments": []}}}});
    let mut properties = vec![
        Property::from_value(
            "olm.package",
            &json!({"packageName": pkg, "version": version}),
        )
        .unwrap(),
    ];
    properties.extend(props);
    Bundle {
        package: pkg.into(),
        name: name.clone(),
        properties,
        objects: vec![serde_json::value::to_raw_value(&csv).unwrap()],
        ..Bundle::default()
    }
}

fn index() -> CatalogIndex {
    let gvk = json!({"group": "example.com", "kind": "Db", "version": "v1"});
    let mut config = DeclarativeConfig::default();
    for pkg in ["app", "db"] {
        config.packages.push(Package {
            name: pkg.into(),
            default_channel: Some("stable".into()),
            ..Package::default()
        });
        config.channels.push(Channel {
            package: pkg.into(),
            name: "stable".into(),
            entries: vec![ChannelEntry {
                name: format!("{pkg}.v1.0.0"),
                ..ChannelEntry::default()
            }],
            ..Channel::default()
        });
    }
    config.bundles = vec![
        bundle(
            "app",
            "1.0.0",
            vec![Property::from_value("olm.gvk.required", &gvk).unwrap()],
        ),
        bundle(
            "db",
            "1.0.0",
            vec![Property::from_value("olm.gvk", &gvk).unwrap()],
        ),
    ];
    CatalogIndex::new(config)
}

fn sub(name: &str, package: &str) -> Subscription {
    let mut s = Subscription::new(
        name,
        SubscriptionSpec {
            source: "cat".into(),
            source_namespace: "olm".into(),
            name: package.into(),
            channel: Some("stable".into()),
            starting_csv: None,
            install_plan_approval: Some(Approval::Manual),
            config: None,
        },
    );
    s.metadata.namespace = Some("ns".into());
    s.metadata.uid = Some(format!("uid-{name}"));
    s
}

fn sync(subs: &[Subscription]) -> Vec<super::super::SubscriptionUpdate> {
    let (catalogs, groups) = super::super::tests::one_catalog_and_group(index());
    decide_namespace(&NamespaceState {
        input: NamespaceInput {
            namespace: "ns",
            subscriptions: subs,
            installed: &[],
            catalogs: &catalogs,
            operator_groups: &groups,
            global_catalog_namespace: "olm",
        },
        plans: &[],
        crds: &[],
        rollback: &RollbackInput::default(),
        now: Timestamp::from_second(1_000).unwrap(),
    })
}

#[test]
fn one_plan_installs_the_bundle_its_dependency_and_a_subscription_for_it() {
    let updates = sync(&[sub("app", "app")]);
    let request = updates[0].plan.as_ref().expect("a plan");
    let steps: Vec<(String, String)> = request
        .draft
        .steps
        .iter()
        .map(|s| (s.object.kind.clone(), s.object.name.clone()))
        .collect();
    assert_eq!(
        steps,
        [
            ("ClusterServiceVersion".to_owned(), "app.v1.0.0".to_owned()),
            ("ClusterServiceVersion".to_owned(), "db.v1.0.0".to_owned()),
            ("Subscription".to_owned(), "db-stable-cat-olm".to_owned()),
        ]
    );
    // Manual approval of this plan approves exactly this: the plan serves one Subscription.
    assert_eq!(request.draft.subscriptions.len(), 1);
    assert_eq!(request.draft.approval, Approval::Manual);
    let status = request.draft.initial_status_named("install-abcde");
    let step = &status.plan.as_ref().unwrap()[2];
    let manifest: Value = serde_json::from_str(step.resource.manifest.as_deref().unwrap()).unwrap();
    assert_eq!(
        manifest["spec"],
        json!({"source": "cat", "sourceNamespace": "olm", "name": "db", "channel": "stable",
               "startingCSV": "db.v1.0.0", "installPlanApproval": "Automatic"})
    );
    assert_eq!(
        manifest["metadata"]["annotations"][GENERATED_BY_ANNOTATION],
        "install-abcde"
    );
    assert_eq!(manifest["metadata"]["labels"]["olm.managed"], "true");
}

#[test]
fn a_dependency_another_subscription_installs_is_left_to_it() {
    let updates = sync(&[sub("app", "app"), sub("db", "db")]);
    let app: Vec<&str> = updates[0]
        .plan
        .as_ref()
        .expect("a plan")
        .draft
        .steps
        .iter()
        .map(|s| s.object.name.as_str())
        .collect();
    assert_eq!(app, ["app.v1.0.0"]);
    assert!(updates[1].plan.is_some());
}

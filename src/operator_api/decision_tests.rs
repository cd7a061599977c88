use super::*;
use crate::api::Subscription;
use crate::operator_api::component::{csv_conditions, status_conditions};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ServiceAccount;
use serde_json::{Value, json};

const KEY: &str = "operators.coreos.com/etcd.demo";

fn labels(labelled: bool) -> Value {
    if labelled {
        json!({ KEY: "" })
    } else {
        json!({})
    }
}

fn sub(labelled: bool, plan: &str) -> Subscription {
    serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": "etcd", "namespace": "demo", "labels": labels(labelled)},
        "spec": {"name": "etcd", "source": "cat", "sourceNamespace": "olm"},
        "status": {"installedCSV": "etcd.v1", "currentCSV": "etcd.v1",
                   "installPlanRef": {"namespace": "demo", "name": plan},
                   "lastUpdated": "2026-11-29T04:00:00Z"}
    }))
    .unwrap()
}

fn csv(name: &str, labelled: bool) -> ClusterServiceVersion {
    serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": name, "namespace": "demo", "uid": format!("uid-{name}"),
                     "labels": labels(labelled)},
        "spec": {"displayName": "etcd", "install": {"strategy": "deployment"},
                 "customresourcedefinitions": {"owned": [
                     {"name": "etcdclusters.etcd.database.coreos.com", "version": "v1beta2",
                      "kind": "EtcdCluster"}]}},
        "status": {"phase": "Succeeded", "reason": "InstallSucceeded",
                   "message": "install strategy completed with no errors",
                   "lastUpdateTime": "2026-11-29T04:00:00Z",
                   "lastTransitionTime": "2026-11-29T04:00:00Z"}
    }))
    .unwrap()
}

fn plan(name: &str, labelled: bool) -> Component {
    let ip: InstallPlan = serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
        "metadata": {"name": name, "namespace": "demo", "labels": labels(labelled)},
        "spec": {"clusterServiceVersionNames": ["etcd.v1"], "approval": "Automatic", "approved": true}
    }))
    .unwrap();
    Component::of(&ip, Vec::new())
}

fn owned<K: Resource<DynamicType = ()> + serde::de::DeserializeOwned + serde::Serialize>(
    kind: &str,
    name: &str,
    csv: &str,
    labelled: bool,
) -> Component {
    let obj: K = serde_json::from_value(json!({
        "apiVersion": K::api_version(&()), "kind": kind,
        "metadata": {"name": name, "namespace": "demo", "labels": labels(labelled),
            "ownerReferences": [{"apiVersion": "operators.coreos.com/v1alpha1",
                "kind": "ClusterServiceVersion", "name": csv, "uid": format!("uid-{csv}")}]},
        "status": {"conditions": [{"type": "Available", "status": "True"}]}
    }))
    .unwrap();
    let json = serde_json::to_value(&obj).unwrap();
    Component::of(&obj, status_conditions(&json))
}

fn crd(name: &str, labelled: bool) -> Component {
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels(labelled)},
        "spec": {"group": "g", "names": {"kind": "K", "plural": "ks"}, "scope": "Namespaced",
                 "versions": []}
    }))
    .unwrap();
    Component::of(&crd, Vec::new())
}

fn operator(status: Option<OperatorStatus>) -> Operator {
    let mut op = Operator::new("etcd.demo", OperatorSpec {});
    op.metadata.resource_version = Some("7".into());
    op.status = status;
    op
}

/// Runs the decision the way the shell does: the Interest from the Subscriptions and CSVs,
/// then only the objects it wants.
fn run(
    name: &str,
    op: Option<&Operator>,
    subs: &[Subscription],
    csvs: &[ClusterServiceVersion],
    others: Vec<Component>,
) -> Effects {
    let views: Vec<SubscriptionView> = subs.iter().map(SubscriptionView::of).collect();
    let interest = Interest::new(name, &views, csvs).unwrap();
    let mut components: Vec<Component> = views.iter().map(|v| v.component.clone()).collect();
    for c in csvs {
        if interest.wants(c) {
            components.push(Component::of(c, csv_conditions(c)));
        }
    }
    components.extend(others);
    decide(&Observed {
        name,
        operator: op,
        subscriptions: &views,
        interest: &interest,
        components: &components,
    })
}

/// (verb, object, label value) of each write.
fn summary(effects: &Effects) -> Vec<(String, String, Value)> {
    effects
        .writes
        .iter()
        .map(|w| {
            let value = match w {
                Write::MergePatch { patch, .. } => {
                    patch.to_json().unwrap()["metadata"]["labels"][KEY].clone()
                }
                _ => Value::Null,
            };
            (w.verb().to_owned(), w.key().to_string(), value)
        })
        .collect()
}

fn w(verb: &str, obj: &str, value: Value) -> (String, String, Value) {
    (verb.to_owned(), obj.to_owned(), value)
}

#[test]
fn a_fresh_install_is_labelled_whole_and_the_operator_made_once_it_has_components() {
    let others = vec![
        plan("ip-1", false),
        owned::<Deployment>("Deployment", "etcd-operator", "etcd.v1", false),
        owned::<ServiceAccount>("ServiceAccount", "etcd-operator", "etcd.v1", false),
        crd("etcdclusters.etcd.database.coreos.com", false),
        crd("unrelated.example.com", false),
    ];
    let first = run(
        "etcd.demo",
        None,
        &[sub(false, "ip-1")],
        &[csv("etcd.v1", false)],
        others,
    );
    assert_eq!(
        summary(&first),
        vec![
            w("patch", "Subscription demo/etcd", json!("")),
            w("patch", "ClusterServiceVersion demo/etcd.v1", json!("")),
            w("patch", "InstallPlan demo/ip-1", json!("")),
            w("patch", "Deployment demo/etcd-operator", json!("")),
            w("patch", "ServiceAccount demo/etcd-operator", json!("")),
            w(
                "patch",
                "CustomResourceDefinition etcdclusters.etcd.database.coreos.com",
                json!("")
            ),
        ],
        "no Operator before anything carries the label"
    );
    // The patch names the label only: a Deployment's pod template is never part of it.
    let Write::MergePatch {
        patch,
        resource_version,
        ..
    } = &first.writes[3]
    else {
        panic!("a merge patch");
    };
    assert_eq!(
        patch.to_json().unwrap(),
        json!({"metadata": {"labels": {KEY: ""}}})
    );
    assert_eq!(resource_version, &None);

    let labelled = vec![
        plan("ip-1", true),
        owned::<Deployment>("Deployment", "etcd-operator", "etcd.v1", true),
        crd("etcdclusters.etcd.database.coreos.com", true),
    ];
    let second = run(
        "etcd.demo",
        None,
        &[sub(true, "ip-1")],
        &[csv("etcd.v1", true)],
        labelled,
    );
    assert_eq!(
        summary(&second),
        vec![w("create", "Operator etcd.demo", Value::Null)]
    );
}

#[test]
fn the_status_lists_every_labelled_object_in_olms_order_and_is_written_only_when_it_differs() {
    let others = || {
        vec![
            plan("ip-1", true),
            owned::<Deployment>("Deployment", "etcd-operator", "etcd.v1", true),
            crd("etcdclusters.etcd.database.coreos.com", true),
        ]
    };
    let stale = operator(None);
    let effects = run(
        "etcd.demo",
        Some(&stale),
        &[sub(true, "ip-1")],
        &[csv("etcd.v1", true)],
        others(),
    );
    assert_eq!(
        summary(&effects),
        vec![w("status", "Operator etcd.demo", Value::Null)]
    );
    let Write::Status {
        status,
        resource_version,
        ..
    } = &effects.writes[0]
    else {
        panic!("a status write");
    };
    assert_eq!(resource_version, "7");
    let status = status.to_json().unwrap();
    assert_eq!(
        status["components"]["labelSelector"],
        json!({"matchExpressions": [{"key": KEY, "operator": "Exists"}]})
    );
    let refs: Vec<(String, String)> = status["components"]["refs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["kind"].as_str().unwrap().to_owned(),
                r["name"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let pair = |k: &str, n: &str| (k.to_owned(), n.to_owned());
    assert_eq!(
        refs,
        vec![
            pair("ClusterServiceVersion", "etcd.v1"),
            pair(
                "CustomResourceDefinition",
                "etcdclusters.etcd.database.coreos.com"
            ),
            pair("Deployment", "etcd-operator"),
            pair("InstallPlan", "ip-1"),
            pair("Subscription", "etcd"),
        ]
    );
    // A CSV's condition is its phase; a Deployment's are its status conditions.
    let csv_ref = &status["components"]["refs"][0];
    assert_eq!(csv_ref["apiVersion"], "operators.coreos.com/v1alpha1");
    assert_eq!(
        csv_ref["conditions"],
        json!([{"type": "Succeeded", "status": "True", "reason": "InstallSucceeded",
                "message": "install strategy completed with no errors",
                "lastUpdateTime": "2026-11-29T04:00:00Z",
                "lastTransitionTime": "2026-11-29T04:00:00Z"}])
    );
    assert_eq!(
        status["components"]["refs"][2]["conditions"],
        json!([{"type": "Available", "status": "True"}])
    );

    let current: OperatorStatus = serde_json::from_value(status).unwrap();
    let settled = operator(Some(current));
    let again = run(
        "etcd.demo",
        Some(&settled),
        &[sub(true, "ip-1")],
        &[csv("etcd.v1", true)],
        others(),
    );
    assert!(again.writes.is_empty(), "{:?}", summary(&again));
}

#[test]
fn a_new_install_plan_takes_the_label_from_the_older_ones() {
    let effects = run(
        "etcd.demo",
        None,
        &[sub(true, "ip-2")],
        &[csv("etcd.v1", true)],
        vec![plan("ip-1", true), plan("ip-2", false)],
    );
    assert_eq!(
        summary(&effects)[..2],
        [
            w("patch", "InstallPlan demo/ip-2", json!("")),
            w("patch", "InstallPlan demo/ip-1", Value::Null),
        ]
    );
}

#[test]
fn objects_of_other_csvs_are_never_touched() {
    let effects = run(
        "etcd.demo",
        None,
        &[sub(true, "ip-1")],
        &[csv("etcd.v1", true), csv("other.v1", false)],
        vec![
            plan("ip-1", true),
            owned::<Deployment>("Deployment", "other", "other.v1", false),
            owned::<Deployment>("Deployment", "etcd-operator", "etcd.v1", true),
        ],
    );
    assert!(
        summary(&effects)
            .iter()
            .all(|(_, obj, _)| !obj.contains("other")),
        "{:?}",
        summary(&effects)
    );
}

#[test]
fn an_operator_without_components_is_neither_made_nor_deleted() {
    assert!(run("etcd.demo", None, &[], &[], Vec::new()).is_empty());
    let kept = operator(Some(status_of(KEY, &[])));
    assert!(run("etcd.demo", Some(&kept), &[], &[], Vec::new()).is_empty());
}

#[test]
fn an_operator_made_by_hand_is_filled_in_with_what_carries_its_label() {
    let mut op = Operator::new("mine", OperatorSpec {});
    op.metadata.resource_version = Some("1".into());
    let sa: ServiceAccount = serde_json::from_value(json!({
        "metadata": {"name": "helper", "namespace": "tools",
                     "labels": {"operators.coreos.com/mine": ""}}
    }))
    .unwrap();
    let effects = run(
        "mine",
        Some(&op),
        &[],
        &[],
        vec![Component::of(&sa, Vec::new())],
    );
    assert_eq!(effects.writes.len(), 1, "{:?}", summary(&effects));
    let Write::Status { status, .. } = &effects.writes[0] else {
        panic!("a status write");
    };
    assert_eq!(
        status.to_json().unwrap()["components"]["refs"],
        json!([{"kind": "ServiceAccount", "namespace": "tools", "name": "helper", "apiVersion": "v1"}])
    );
}

#[test]
fn the_interest_picks_what_the_decision_reads() {
    let views = vec![SubscriptionView::of(&sub(false, "ip-1"))];
    let csvs = [csv("etcd.v1", false), csv("other.v1", false)];
    let interest = Interest::new("etcd.demo", &views, &csvs).unwrap();
    assert_eq!(interest.csvs.len(), 1, "the installed CSV only");
    assert!(interest.wants(&csvs[0]));
    assert!(!interest.wants(&csvs[1]));
    let dep = |csv: &str| -> Deployment {
        serde_json::from_value(json!({"metadata": {"name": "d", "namespace": "demo",
            "ownerReferences": [{"apiVersion": "operators.coreos.com/v1alpha1",
                "kind": "ClusterServiceVersion", "name": csv, "uid": format!("uid-{csv}")}]}}))
        .unwrap()
    };
    assert!(interest.wants(&dep("etcd.v1")));
    assert!(!interest.wants(&dep("other.v1")));
}

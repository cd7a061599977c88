//! The Operator API with every reconciler of `olm-rs run` running, on the embedded API server
//! (docs/operator-api.md): an install is labelled whole and gets its Operator
//! `<package>.<namespace>`, whose status lists what carries the label; labelling never touches
//! a Deployment's pod template; an Operator made by hand is filled in; a deleted Operator comes
//! back while components remain and stays gone once they are gone.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};

use olm_rs::api::{
    CatalogSource, ClusterServiceVersion, InstallPlan, Operator, OperatorGroup, Subscription,
};
use olm_rs::catalog::CatalogIndex;
use olm_rs::k8s::clock::SystemClock;
use olm_rs::reconcile::catalog_source::CatalogSourceOptions;
use olm_rs::reconcile::{Context, ControllerOptions};
use olm_rs::sandbox::ApiServer;

use crate::catalog_source_common::{eventually, serve_index};
use crate::subscription_support::widget_catalog;

const NS: &str = "operators";
const CATALOG_NS: &str = "olm";
const OPERATOR: &str = "widget.operators";
const LABEL: &str = "operators.coreos.com/widget.operators";
const CSV: &str = "widget-operator.v1.2.0";

async fn create<K>(api: &Api<K>, value: Value) -> K
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let object: K = serde_json::from_value(value).expect("test object");
    api.create(&PostParams::default(), &object)
        .await
        .expect("create test object")
}

fn labelled<K: kube::Resource>(obj: &K) -> bool {
    obj.meta()
        .labels
        .as_ref()
        .is_some_and(|l| l.get(LABEL).map(String::as_str) == Some(""))
}

/// `(kind, name)` of each ref of an Operator's status.
fn refs(op: &Operator) -> BTreeSet<(String, String)> {
    op.status
        .as_ref()
        .and_then(|s| s.components.as_ref())
        .and_then(|c| c.refs.as_ref())
        .into_iter()
        .flatten()
        .map(|r| {
            (
                r.kind.clone().unwrap_or_default(),
                r.name.clone().unwrap_or_default(),
            )
        })
        .collect()
}

fn pair(kind: &str, name: &str) -> (String, String) {
    (kind.to_owned(), name.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_install_gets_its_operator_and_loses_it_only_when_nothing_is_left() {
    let server = ApiServer::new();
    let client = server.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in olm_rs::api::crd::all().expect("OLM CRDs build") {
        crds.create(&PostParams::default(), &crd).await.unwrap();
    }
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for ns in [CATALOG_NS, NS] {
        create(&namespaces, json!({"metadata": {"name": ns}})).await;
    }
    create(
        &Api::<OperatorGroup>::namespaced(client.clone(), NS),
        json!({"metadata": {"name": "og", "namespace": NS}, "spec": {"targetNamespaces": [NS]}}),
    )
    .await;
    let options = ControllerOptions {
        global_catalog_namespace: CATALOG_NS.to_owned(),
        catalog_sources: CatalogSourceOptions::quick(),
        ..ControllerOptions::default()
    };
    let ctx = Arc::new(Context::new(client.clone(), Arc::new(SystemClock), options));
    let controllers = tokio::spawn(olm_rs::controller::run_reconcilers(ctx));

    // Bundles without an image: the registry hands their objects over inline (no pull).
    let mut fbc = widget_catalog();
    for bundle in &mut fbc.bundles {
        bundle.image.clear();
    }
    let catalog = serve_index(Arc::new(CatalogIndex::new(fbc))).await;
    create(
        &Api::<CatalogSource>::namespaced(client.clone(), CATALOG_NS),
        json!({"metadata": {"name": "community", "namespace": CATALOG_NS},
               "spec": {"sourceType": "grpc", "address": catalog.address}}),
    )
    .await;
    let subscriptions: Api<Subscription> = Api::namespaced(client.clone(), NS);
    create(
        &subscriptions,
        json!({"metadata": {"name": "widget", "namespace": NS},
               "spec": {"source": "community", "sourceNamespace": CATALOG_NS, "name": "widget",
                        "channel": "stable", "installPlanApproval": "Automatic"}}),
    )
    .await;

    // The install, labelled whole: Subscription, plan, CSV, what the CSV owns, its CRD.
    let operators: Api<Operator> = Api::all(client.clone());
    let want: BTreeSet<(String, String)> = [
        pair("Subscription", "widget"),
        pair("ClusterServiceVersion", CSV),
        pair("CustomResourceDefinition", "widgets.example.com"),
        pair("Deployment", "widget-operator"),
        pair("ServiceAccount", "widget-operator"),
        pair("OperatorCondition", CSV),
    ]
    .into_iter()
    .collect();
    let op = eventually(
        "the Operator lists the install, its CSV Succeeded",
        || async {
            let op = operators.get_opt(OPERATOR).await.ok()??;
            let have = refs(&op);
            let plan = have.iter().any(|(k, _)| k == "InstallPlan");
            let rbac = ["Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"]
                .iter()
                .all(|k| have.iter().any(|(kind, _)| kind == k));
            // Kept current: the CSV's ref follows its phase to Succeeded.
            let succeeded = op
                .status
                .as_ref()
                .and_then(|s| s.components.as_ref())
                .and_then(|c| c.refs.as_ref())
                .into_iter()
                .flatten()
                .filter(|r| r.kind.as_deref() == Some("ClusterServiceVersion"))
                .flat_map(|r| r.conditions.iter().flatten())
                .any(|c| c.type_ == "Succeeded" && c.status == "True");
            let done = want.is_subset(&have) && plan && rbac && succeeded;
            if !done {
                eprintln!("refs so far: {have:?}");
            }
            done.then_some(op)
        },
    )
    .await;
    let components = op.status.as_ref().unwrap().components.as_ref().unwrap();
    assert_eq!(
        serde_json::to_value(&components.label_selector).unwrap(),
        json!({"matchExpressions": [{"key": LABEL, "operator": "Exists"}]})
    );
    let csv_ref = components
        .refs
        .as_ref()
        .unwrap()
        .iter()
        .find(|r| r.kind.as_deref() == Some("ClusterServiceVersion"))
        .unwrap();
    assert_eq!(
        csv_ref.api_version.as_deref(),
        Some("operators.coreos.com/v1alpha1")
    );
    let csv_condition = &csv_ref.conditions.as_ref().unwrap()[0];
    assert_eq!(csv_condition.reason.as_deref(), Some("InstallSucceeded"));

    // Labels only: the Deployment's pod template is as the CSV made it.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NS);
    let deployment = deployments.get("widget-operator").await.unwrap();
    assert!(labelled(&deployment));
    let template_labels = deployment
        .spec
        .as_ref()
        .and_then(|s| s.template.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    assert!(!template_labels.contains_key(LABEL), "{template_labels:?}");
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), NS);
    assert!(labelled(&csvs.get(CSV).await.unwrap()));
    let plans: Api<InstallPlan> = Api::namespaced(client.clone(), NS);
    let labelled_plans = plans
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter(|p| labelled(*p))
        .count();
    assert_eq!(labelled_plans, 1, "the latest plan only");

    // An Operator made by hand is kept and filled in with what carries its label.
    create(
        &operators,
        json!({"apiVersion": "operators.coreos.com/v1", "kind": "Operator",
               "metadata": {"name": "mine"}}),
    )
    .await;
    create(
        &Api::<ServiceAccount>::namespaced(client.clone(), NS),
        json!({"metadata": {"name": "helper", "namespace": NS,
                            "labels": {"operators.coreos.com/mine": ""}}}),
    )
    .await;
    eventually(
        "the hand-made Operator lists its ServiceAccount",
        || async {
            let op = operators.get_opt("mine").await.ok()??;
            (refs(&op) == BTreeSet::from([pair("ServiceAccount", "helper")])).then_some(())
        },
    )
    .await;

    // Deleted while its components remain, the Operator comes back.
    operators
        .delete(OPERATOR, &DeleteParams::default())
        .await
        .unwrap();
    eventually("the Operator made again", || async {
        let op = operators.get_opt(OPERATOR).await.ok()??;
        refs(&op)
            .contains(&pair("Subscription", "widget"))
            .then_some(())
    })
    .await;

    // Uninstalled (as kubectl-operator does: the Subscription, the CSV, then the CRD), the
    // Operator's refs empty out; deleted then, it stays deleted.
    subscriptions
        .delete("widget", &DeleteParams::default())
        .await
        .unwrap();
    csvs.delete(CSV, &DeleteParams::default()).await.unwrap();
    crds.delete("widgets.example.com", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the Operator lists nothing", || async {
        let op = operators.get_opt(OPERATOR).await.ok()??;
        let left = refs(&op);
        left.is_empty().then_some(()).or_else(|| {
            eprintln!("left: {left:?}");
            None
        })
    })
    .await;
    operators
        .delete(OPERATOR, &DeleteParams::default())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        operators.get_opt(OPERATOR).await.unwrap().is_none(),
        "an Operator without components is not made again"
    );
    controllers.abort();
}

/// `v`, without `description` anywhere (the wording is ours; the structure must be OLM's).
fn without_descriptions(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.remove("description");
            map.values_mut().for_each(without_descriptions);
        }
        Value::Array(items) => items.iter_mut().for_each(without_descriptions),
        _ => {}
    }
}

/// `x-kubernetes-list-type` removed from the two lists of a LabelSelector: olm-rs renders
/// k8s-openapi's LabelSelector without them, in this CRD as in the OperatorGroup's (they only
/// matter to server-side apply, and the Operator's status is written whole).
fn without_selector_list_types(v: &mut Value) {
    let selector = "/properties/components/properties/labelSelector/properties/matchExpressions";
    if let Some(list) = v.pointer_mut(selector).and_then(Value::as_object_mut) {
        list.remove("x-kubernetes-list-type");
    }
    let values = format!("{selector}/items/properties/values");
    if let Some(list) = v.pointer_mut(&values).and_then(Value::as_object_mut) {
        list.remove("x-kubernetes-list-type");
    }
}

/// The Operator CRD's status schema is OLM's own (../shared/olm/crds), field for field: the
/// tools that read it see the same shapes.
#[test]
fn the_operator_crd_has_olms_status_schema() {
    let path = crate::common::shared_dir().join("olm/crds/0000_50_olm_00-operators.crd.yaml");
    let Ok(text) = std::fs::read_to_string(&path) else {
        println!("skipped: {} is absent (no ../shared)", path.display());
        return;
    };
    let olm: Value = serde_yaml_ng::from_str(&text).unwrap();
    let ours = serde_json::to_value(olm_rs::api::crd::operator().unwrap()).unwrap();
    let version = |crd: &Value| crd["spec"]["versions"][0].clone();
    let (olm_v, ours_v) = (version(&olm), version(&ours));
    assert_eq!(
        (&ours_v["name"], &ours_v["served"], &ours_v["storage"]),
        (&olm_v["name"], &olm_v["served"], &olm_v["storage"])
    );
    assert_eq!(ours_v["subresources"], olm_v["subresources"]);
    assert_eq!(ours["spec"]["scope"], olm["spec"]["scope"]);
    assert_eq!(ours["spec"]["names"], olm["spec"]["names"]);
    assert_eq!(
        ours_v.get("additionalPrinterColumns"),
        olm_v.get("additionalPrinterColumns")
    );
    let mut ours_status = ours_v["schema"]["openAPIV3Schema"]["properties"]["status"].clone();
    let mut olm_status = olm_v["schema"]["openAPIV3Schema"]["properties"]["status"].clone();
    for s in [&mut ours_status, &mut olm_status] {
        without_descriptions(s);
        without_selector_list_types(s);
    }
    assert_eq!(ours_status, olm_status);
}

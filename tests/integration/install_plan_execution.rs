//! InstallPlan execution through the embedded API: OLM's names, labels and owners on what a plan
//! creates; unsupported kinds and unserved APIs refused before anything is written; restarts
//! between steps that converge without duplicates; GC. CRD updates: `install_plan_crd_updates`.

use crate::subscription_support as support;

use std::collections::BTreeMap;

use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use support::*;

use olm_rs::api::{InstallPlan, InstallPlanPhase, StepStatus};
use olm_rs::catalog::model::Property;

const CRD: (&str, &str, &str) = (
    "apiextensions.k8s.io/v1",
    "CustomResourceDefinition",
    "customresourcedefinitions",
);
const CSV: (&str, &str, &str) = (
    "operators.coreos.com/v1alpha1",
    "ClusterServiceVersion",
    "clusterserviceversions",
);

fn labels(object: &Value) -> BTreeMap<String, String> {
    serde_json::from_value(object["metadata"]["labels"].clone()).unwrap_or_default()
}

#[tokio::test]
async fn objects_get_olms_names_labels_and_owners() {
    let mut env = Env::new().await;
    env.add_catalog("community", widget_catalog());
    env.subscribe_widget(json!({})).await;
    env.converge().await;
    let csv_name = "widget-operator.v1.2.0";
    let csv = env
        .get(CSV.0, CSV.1, CSV.2, csv_name, true)
        .await
        .expect("CSV created");
    let csv_uid = csv["metadata"]["uid"].as_str().unwrap().to_owned();
    let properties: Value = serde_json::from_str(
        csv["metadata"]["annotations"]["operatorframework.io/properties"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(properties["properties"][0]["type"], "olm.package");
    assert_eq!(labels(&csv)["olm.managed"], "true");

    // RBAC names as OLM computes them (docs/install-plans.md §8).
    let permissions = &widget_csv("1.2.0")["spec"]["install"]["spec"];
    let role = olm_rs::olm_hash::role_name(csv_name, &permissions["permissions"][0]).unwrap();
    let cluster_role =
        olm_rs::olm_hash::cluster_role_name(csv_name, NS, &permissions["clusterPermissions"][0])
            .unwrap();
    assert_eq!(
        env.names("rbac.authorization.k8s.io/v1", "Role", "roles", true)
            .await,
        std::slice::from_ref(&role)
    );
    assert_eq!(
        env.names(
            "rbac.authorization.k8s.io/v1",
            "RoleBinding",
            "rolebindings",
            true
        )
        .await,
        std::slice::from_ref(&role)
    );
    assert!(
        env.names(
            "rbac.authorization.k8s.io/v1",
            "ClusterRole",
            "clusterroles",
            false
        )
        .await
        .contains(&cluster_role)
    );
    let r = env
        .get("rbac.authorization.k8s.io/v1", "Role", "roles", &role, true)
        .await
        .unwrap();
    let l = labels(&r);
    assert_eq!(
        (
            l["olm.owner"].as_str(),
            l["olm.owner.namespace"].as_str(),
            l["olm.owner.kind"].as_str()
        ),
        (csv_name, NS, "ClusterServiceVersion")
    );
    assert_eq!(
        l["olm.permissions.hash"],
        olm_rs::olm_hash::rules_hash(&r["rules"]).unwrap()
    );
    assert_eq!(l["olm.managed"], "true");
    assert_eq!(r["metadata"]["ownerReferences"][0]["uid"], csv_uid.as_str());
    let cr = env
        .get(
            "rbac.authorization.k8s.io/v1",
            "ClusterRole",
            "clusterroles",
            &cluster_role,
            false,
        )
        .await
        .unwrap();
    assert!(
        cr["metadata"].get("ownerReferences").is_none(),
        "no owner reference across scopes"
    );
    assert_eq!(labels(&cr)["olm.owner"], csv_name);
    let crb = env
        .get(
            "rbac.authorization.k8s.io/v1",
            "ClusterRoleBinding",
            "clusterrolebindings",
            &cluster_role,
            false,
        )
        .await
        .unwrap();
    assert_eq!(
        crb["subjects"][0],
        json!({"kind": "ServiceAccount", "name": "widget-operator", "namespace": NS})
    );
    let sa = env
        .get(
            "v1",
            "ServiceAccount",
            "serviceaccounts",
            "widget-operator",
            true,
        )
        .await
        .unwrap();
    assert_eq!(sa["metadata"]["ownerReferences"][0]["name"], csv_name);
    let cm = env
        .get("v1", "ConfigMap", "configmaps", "widget-defaults", true)
        .await
        .unwrap();
    assert_eq!(
        cm["metadata"]["ownerReferences"][0]["kind"],
        "ClusterServiceVersion"
    );
    let crd = env
        .get(CRD.0, CRD.1, CRD.2, "widgets.example.com", false)
        .await
        .unwrap();
    let key = olm_rs::olm_hash::installed_alongside_annotation_key(NS, csv_name);
    assert_eq!(
        crd["metadata"]["annotations"][key.as_str()],
        format!("{NS}/{csv_name}")
    );
}

#[tokio::test]
async fn an_unsupported_kind_fails_the_plan_naming_it_before_anything_is_written() {
    let mut env = Env::new().await;
    let name = plan_with_extra_object(&mut env, json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "stray"}, "spec": {}})).await;
    let status = env.run_plan_once(&name).await.status.unwrap();
    assert_eq!(
        status.phase,
        InstallPlanPhase::Failed,
        "a plan's content cannot heal: no retry window"
    );
    let message = status.message.unwrap();
    assert!(message.starts_with("the InstallPlan contains invalid data: step 3 (Deployment stray of widget-operator.v1.2.0)"), "{message}");
    let step = status
        .plan
        .unwrap()
        .into_iter()
        .find(|s| s.resource.kind == "Deployment")
        .unwrap();
    assert_eq!(step.status, StepStatus::UnsupportedResource);
    assert!(
        env.get(CSV.0, CSV.1, CSV.2, "widget-operator.v1.2.0", true)
            .await
            .is_none()
    );
}

#[tokio::test]
async fn an_api_the_cluster_does_not_serve_is_named_in_olms_words() {
    let mut env = Env::new().await;
    let name = plan_with_extra_object(&mut env, json!({"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor", "metadata": {"name": "widget-metrics"}, "spec": {}})).await;
    let status = env.run_plan_once(&name).await.status.unwrap();
    assert_eq!(
        status.phase,
        InstallPlanPhase::Installing,
        "retried within the window"
    );
    env.advance(61);
    let status = env.run_plan_once(&name).await.status.unwrap();
    assert_eq!(status.phase, InstallPlanPhase::Failed);
    assert_eq!(
        status.message.as_deref(),
        Some(
            "api-server resource not found installing ServiceMonitor widget-metrics: GroupVersionKind monitoring.coreos.com/v1, Kind=ServiceMonitor not found on the cluster. This API may have been deprecated and removed, see https://kubernetes.io/docs/reference/using-api/deprecation-guide/ for more information."
        )
    );
    assert!(
        env.get(CSV.0, CSV.1, CSV.2, "widget-operator.v1.2.0", true)
            .await
            .is_none(),
        "checked whole first"
    );
}

#[tokio::test]
async fn a_restart_between_steps_converges_without_duplicates() {
    let mut env = Env::new().await;
    env.add_catalog("community", widget_catalog());
    env.subscribe_widget(json!({})).await;
    let name = env.sync_subscriptions().await.created_plans.remove(0);
    // First pass: the CRD is created (WaitingForApi until Established) and recorded.
    let status = env.run_plan_once(&name).await.status.unwrap();
    let crd_status = status
        .plan
        .as_ref()
        .unwrap()
        .iter()
        .find(|s| s.resource.kind == "CustomResourceDefinition")
        .unwrap()
        .status
        .clone();
    assert!(
        matches!(crd_status, StepStatus::WaitingForApi | StepStatus::Created),
        "{crd_status:?}"
    );
    // A new process picks the plan up where the first left it.
    env.restart();
    let done = env.run_plan(&name).await;
    // Then lose every step status, as if the process had died before writing what a pass did.
    assert_eq!(
        done.status.as_ref().unwrap().phase,
        InstallPlanPhase::Complete
    );
    let mut lost = done.clone();
    let status = lost.status.as_mut().unwrap();
    status.phase = InstallPlanPhase::Installing;
    status.conditions = None;
    for step in status.plan.as_mut().unwrap() {
        step.status = StepStatus::Unknown;
    }
    Api::<InstallPlan>::namespaced(env.client(), NS)
        .replace_status(&name, &PostParams::default(), &lost)
        .await
        .expect("status rewound");
    env.restart();
    let plan = env.run_plan(&name).await;
    let steps = plan.status.as_ref().unwrap().plan.clone().unwrap();
    assert_eq!(plan.status.unwrap().phase, InstallPlanPhase::Complete);
    let by_kind = |kind: &str| {
        steps
            .iter()
            .find(|s| s.resource.kind == kind)
            .unwrap()
            .status
            .clone()
    };
    for kind in [
        "ClusterServiceVersion",
        "CustomResourceDefinition",
        "ConfigMap",
        "ServiceAccount",
        "Role",
        "ClusterRoleBinding",
    ] {
        assert_eq!(
            by_kind(kind),
            StepStatus::Present,
            "{kind} found, not created again"
        );
    }
    assert_eq!(
        env.names(CSV.0, CSV.1, CSV.2, true).await,
        ["widget-operator.v1.2.0"]
    );
    assert_eq!(
        env.names("v1", "ConfigMap", "configmaps", true)
            .await
            .iter()
            .filter(|n| *n == "widget-defaults")
            .count(),
        1
    );
    assert_eq!(
        env.names("rbac.authorization.k8s.io/v1", "Role", "roles", true)
            .await
            .len(),
        1
    );
    let cm = env
        .get("v1", "ConfigMap", "configmaps", "widget-defaults", true)
        .await
        .unwrap();
    assert_eq!(
        cm["metadata"]["ownerReferences"].as_array().unwrap().len(),
        1,
        "one owner, not two"
    );
    // And the Subscription side does not make a second plan after the restart.
    env.restart();
    env.converge().await;
    assert_eq!(env.plans().await.len(), 1);
}

#[tokio::test]
async fn old_plans_are_garbage_collected_but_referenced_ones_are_kept() {
    let mut env = Env::new().await;
    env.add_catalog("community", widget_catalog());
    env.subscribe_widget(json!({})).await;
    env.converge().await;
    let referenced = env
        .subscription("widget")
        .await
        .status
        .unwrap()
        .install_plan_ref
        .unwrap()
        .name
        .unwrap();
    let plans: Api<InstallPlan> = Api::namespaced(env.client(), NS);
    for i in 0..7 {
        let plan: InstallPlan = serde_json::from_value(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
            "metadata": {"name": format!("install-old{i}"), "namespace": NS},
            "spec": {"approval": "Automatic", "approved": true, "clusterServiceVersionNames": ["x"], "generation": 100 + i}
        }))
        .unwrap();
        plans.create(&PostParams::default(), &plan).await.unwrap();
    }
    let report = env.sync_subscriptions().await;
    assert_eq!(
        report.deleted_plans,
        ["install-old0", "install-old1", "install-old2"],
        "{report:?}"
    );
    let left: Vec<String> = env
        .plans()
        .await
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    assert_eq!(left.len(), 5);
    assert!(
        left.contains(&referenced),
        "the Subscription's plan is kept"
    );
}

#[tokio::test]
async fn bundle_properties_reach_the_csv() {
    let mut env = Env::new().await;
    let mut catalog = widget_catalog();
    for bundle in &mut catalog.bundles {
        bundle.properties.push(
            Property::from_value("olm.csv.metadata", &json!({"displayName": "left out"})).unwrap(),
        );
        bundle
            .properties
            .push(Property::from_value("olm.label", &json!({"label": "kept"})).unwrap());
    }
    env.add_catalog("community", catalog);
    env.subscribe_widget(json!({})).await;
    env.converge().await;
    let csv = env
        .get(CSV.0, CSV.1, CSV.2, "widget-operator.v1.2.0", true)
        .await
        .unwrap();
    let properties: Value = serde_json::from_str(
        csv["metadata"]["annotations"]["operatorframework.io/properties"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    let types: Vec<&str> = properties["properties"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        ["olm.package", "olm.gvk", "olm.label"],
        "olm.csv.metadata stays out, as the registry does"
    );
}

#[tokio::test]
async fn api_server_warnings_become_an_applied_with_warnings_event_on_the_step() {
    let mut env = Env::new().await;
    // A cluster whose ServiceMonitor API version is deprecated: the API server answers every
    // request for it with `Warning: 299 - "... is deprecated"`.
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(env.client());
    crds.create(
        &PostParams::default(),
        &serde_json::from_value(json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "servicemonitors.monitoring.coreos.com"},
            "spec": {
                "group": "monitoring.coreos.com",
                "scope": "Namespaced",
                "names": {"kind": "ServiceMonitor", "plural": "servicemonitors", "singular": "servicemonitor", "listKind": "ServiceMonitorList"},
                "versions": [{
                    "name": "v1", "served": true, "storage": true, "deprecated": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
                }]
            }
        }))
        .unwrap(),
    )
    .await
    .expect("create the ServiceMonitor CRD");
    let name = plan_with_extra_object(&mut env, json!({"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor", "metadata": {"name": "widget-metrics"}, "spec": {}})).await;
    let plan = env.run_plan(&name).await;
    let status = plan.status.unwrap();
    assert_eq!(
        status.phase,
        InstallPlanPhase::Complete,
        "warnings do not fail a plan"
    );
    let index = status
        .plan
        .unwrap()
        .iter()
        .position(|s| s.resource.kind == "ServiceMonitor")
        .unwrap();

    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(env.client(), NS);
    let warned: Vec<_> = events
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("AppliedWithWarnings"))
        .collect();
    assert_eq!(warned.len(), 1, "one event for the one step: {warned:?}");
    let regarding = warned[0].regarding.as_ref().unwrap();
    assert_eq!(regarding.kind.as_deref(), Some("InstallPlan"));
    assert_eq!(regarding.name.as_deref(), Some(name.as_str()));
    assert_eq!(
        regarding.field_path.as_deref(),
        Some(format!("status.plan[{index}]").as_str())
    );
    assert_eq!(
        warned[0].note.as_deref(),
        Some(
            "1 warning(s) generated during installation of operator \"widget-operator.v1.2.0\" (ServiceMonitor \"widget-metrics\"): monitoring.coreos.com/v1 ServiceMonitor is deprecated"
        )
    );
    let metrics = env.ctx.metrics.encode();
    assert!(
        metrics.lines().any(|l| l == "installplan_warnings_total 1"),
        "{metrics}"
    );
}

/// Subscribes to the widget catalog whose bundles also carry `object`, and returns the plan made.
async fn plan_with_extra_object(env: &mut Env, object: Value) -> String {
    let mut catalog = widget_catalog();
    for bundle in &mut catalog.bundles {
        bundle
            .objects
            .push(serde_json::value::to_raw_value(&object).unwrap());
    }
    env.add_catalog("community", catalog);
    env.subscribe_widget(json!({})).await;
    env.sync_subscriptions().await.created_plans.remove(0)
}

/// A plan OLM resolved before the move to olm-rs: its RBAC steps carry no `apiVersion`/`kind`
/// (docs/migrating-from-olm.md §3), and the operator's ServiceAccount already exists, owned by
/// the CSV being replaced. Approved under olm-rs, the plan completes and the ServiceAccount gets
/// the new CSV as a second owner, which the new CSV's requirement check needs.
#[tokio::test]
async fn a_plan_olm_wrote_with_untyped_rbac_steps_completes_on_an_existing_service_account() {
    let mut env = Env::new().await;
    env.add_catalog("community", widget_catalog());
    env.subscribe_widget(json!({"installPlanApproval": "Manual"}))
        .await;
    let name = env.sync_subscriptions().await.created_plans.remove(0);
    let mut plan = env.run_plan(&name).await;
    assert_eq!(
        plan.status.as_ref().unwrap().phase,
        InstallPlanPhase::RequiresApproval
    );
    let rbac_kinds = [
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "ClusterRole",
        "ClusterRoleBinding",
    ];
    let mut untyped = 0;
    for step in plan.status.as_mut().unwrap().plan.as_mut().unwrap() {
        if !rbac_kinds.contains(&step.resource.kind.as_str()) {
            continue;
        }
        let mut manifest: Value =
            serde_json::from_str(step.resource.manifest.as_deref().unwrap()).unwrap();
        let map = manifest.as_object_mut().unwrap();
        map.remove("apiVersion");
        map.remove("kind");
        step.resource.manifest = Some(manifest.to_string());
        untyped += 1;
    }
    assert!(untyped >= 3, "the widget plan has RBAC steps: {untyped}");
    let plans = Api::<InstallPlan>::namespaced(env.client(), NS);
    plans
        .replace_status(&name, &PostParams::default(), &plan)
        .await
        .expect("plan status rewritten as OLM writes it");
    // The older CSV exists (an owner that does not would let the garbage collector take the
    // ServiceAccount away).
    let mut older = widget_csv("1.1.0");
    older["metadata"]["namespace"] = json!(NS);
    let older: olm_rs::api::ClusterServiceVersion = serde_json::from_value(older).unwrap();
    let older = Api::<olm_rs::api::ClusterServiceVersion>::namespaced(env.client(), NS)
        .create(&PostParams::default(), &older)
        .await
        .expect("older CSV");
    let older_owner = json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "name": "widget-operator.v1.1.0",
        "uid": older.metadata.uid.unwrap(),
        "controller": false,
        "blockOwnerDeletion": false,
    });
    let sa: k8s_openapi::api::core::v1::ServiceAccount = serde_json::from_value(json!({
        "metadata": {"name": "widget-operator", "namespace": NS,
                     "labels": {"olm.managed": "true"},
                     "ownerReferences": [older_owner.clone()]}
    }))
    .unwrap();
    let sa_uid = Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(env.client(), NS)
        .create(&PostParams::default(), &sa)
        .await
        .expect("ServiceAccount of the older CSV")
        .metadata
        .uid
        .unwrap();

    env.approve(&name).await;
    let done = env.run_plan(&name).await;
    let status = done.status.unwrap();
    assert_eq!(status.phase, InstallPlanPhase::Complete, "{status:?}");
    let sa = env
        .get(
            "v1",
            "ServiceAccount",
            "serviceaccounts",
            "widget-operator",
            true,
        )
        .await
        .unwrap();
    let owners: Vec<&str> = sa["metadata"]["ownerReferences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        owners,
        ["widget-operator.v1.1.0", "widget-operator.v1.2.0"],
        "the older owner is kept and the new CSV added"
    );
    assert_eq!(
        sa["metadata"]["uid"],
        sa_uid.as_str(),
        "updated, not recreated"
    );
}

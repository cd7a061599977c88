//! CustomResourceDefinitions: served at once, Established, several versions stored once,
//! pruning and defaulting, the status subresource, discovery, and cleanup on CRD deletion.

use crate::apiserver_common;

use apiserver_common::{code, eventually, status, widget_crd};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, PostParams,
};
use kube::discovery::{Discovery, Scope};
use olm_rs::sandbox::ApiServer;
use serde_json::json;

fn widgets(client: kube::Client, version: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("example.com", version, "Widget");
    Api::namespaced_with(
        client,
        "default",
        &ApiResource::from_gvk_with_plural(&gvk, "widgets"),
    )
}

fn widget(version: &str, name: &str, spec: serde_json::Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": format!("example.com/{version}"), "kind": "Widget",
        "metadata": {"name": name}, "spec": spec,
    }))
    .unwrap()
}

async fn install_crd(server: &ApiServer) -> Api<CustomResourceDefinition> {
    let crds: Api<CustomResourceDefinition> = Api::all(server.client());
    crds.create(
        &PostParams::default(),
        &serde_json::from_value(widget_crd()).unwrap(),
    )
    .await
    .unwrap();
    crds
}

#[tokio::test]
async fn a_new_crd_is_established_and_records_its_stored_version() {
    let server = ApiServer::new();
    let crds = install_crd(&server).await;
    let crd = eventually("Established", || async {
        let crd = crds.get("widgets.example.com").await.ok()?;
        let conds = crd.status.as_ref()?.conditions.clone()?;
        conds
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
            .then_some(crd)
    })
    .await;
    let status = crd.status.unwrap();
    assert!(
        status
            .conditions
            .unwrap()
            .iter()
            .any(|c| c.type_ == "NamesAccepted" && c.status == "True")
    );
    assert_eq!(status.stored_versions, Some(vec!["v1".to_string()]));
    let accepted = status.accepted_names.unwrap();
    assert_eq!(
        (accepted.kind.as_str(), accepted.list_kind.as_deref()),
        ("Widget", Some("WidgetList"))
    );
}

#[tokio::test]
async fn custom_resources_are_served_in_every_served_version_and_stored_once() {
    let server = ApiServer::new();
    install_crd(&server).await;
    let v1 = widgets(server.client(), "v1");
    let beta = widgets(server.client(), "v1beta1");
    let created = v1
        .create(
            &PostParams::default(),
            &widget("v1", "w", json!({"size": 3})),
        )
        .await
        .unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    let via_beta = beta.get("w").await.unwrap();
    assert_eq!(via_beta.types.unwrap().api_version, "example.com/v1beta1");
    assert_eq!(via_beta.metadata.uid, created.metadata.uid);
    let listed = beta.list(&ListParams::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1);
    assert_eq!(
        listed.items[0].types.as_ref().unwrap().api_version,
        "example.com/v1beta1"
    );
    // A version that is not served is not there.
    let alpha = widgets(server.client(), "v1alpha1");
    assert_eq!(code(alpha.get("w").await), 404);
}

#[tokio::test]
async fn unknown_fields_are_pruned_and_defaults_applied() {
    let server = ApiServer::new();
    install_crd(&server).await;
    let v1 = widgets(server.client(), "v1");
    let w = v1
        .create(
            &PostParams::default(),
            &widget(
                "v1",
                "w",
                json!({"color": "red", "bogus": true, "extra": {"free": {"form": 1}}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(
        w.data["spec"],
        json!({"color": "red", "extra": {"free": {"form": 1}}, "size": 1})
    );
    let mut with_top = widget("v1", "w2", json!({}));
    with_top.data["unknownTopLevel"] = json!("x");
    let w2 = v1.create(&PostParams::default(), &with_top).await.unwrap();
    assert!(w2.data.get("unknownTopLevel").is_none());
}

#[tokio::test]
async fn custom_resource_status_subresource_and_generation() {
    let server = ApiServer::new();
    install_crd(&server).await;
    let v1 = widgets(server.client(), "v1");
    let mut w = widget("v1", "w", json!({"size": 2}));
    w.data["status"] = json!({"phase": "Ignored"});
    let w = v1.create(&PostParams::default(), &w).await.unwrap();
    assert!(w.data.get("status").is_none());

    let mut s = w.clone();
    s.data["status"] = json!({"phase": "Ready"});
    s.data["spec"]["size"] = json!(9);
    let s = v1
        .replace_status("w", &PostParams::default(), &s)
        .await
        .unwrap();
    assert_eq!(s.data["status"]["phase"], "Ready");
    assert_eq!(s.data["spec"]["size"], 2);
    assert_eq!(s.metadata.generation, Some(1));

    let mut m = s.clone();
    m.data["spec"]["size"] = json!(5);
    let m = v1.replace("w", &PostParams::default(), &m).await.unwrap();
    assert_eq!(m.metadata.generation, Some(2));
    assert_eq!(m.data["status"]["phase"], "Ready");
}

#[tokio::test]
async fn discovery_sees_builtins_and_new_crds_at_once() {
    let server = ApiServer::new();
    let client = server.client();
    install_crd(&server).await;
    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    let (ar, caps) = discovery
        .groups()
        .flat_map(|g| g.recommended_resources())
        .find(|(ar, _)| ar.kind == "Widget")
        .expect("Widget discovered");
    assert_eq!(
        (ar.group.as_str(), ar.version.as_str(), ar.plural.as_str()),
        ("example.com", "v1", "widgets")
    );
    assert_eq!(caps.scope, Scope::Namespaced);
    assert!(
        caps.subresources
            .iter()
            .any(|(s, _)| s.plural == "widgets/status" || s.plural == "status")
    );
    let (deploy, _) = discovery
        .groups()
        .flat_map(|g| g.recommended_resources())
        .find(|(ar, _)| ar.kind == "Deployment")
        .unwrap();
    assert_eq!(deploy.api_version, "apps/v1");

    let aggregated = Discovery::new(client.clone())
        .run_aggregated()
        .await
        .unwrap();
    assert!(aggregated.groups().any(|g| g.name() == "example.com"));
    assert!(aggregated.groups().any(|g| g.name() == ""));

    let version = client.apiserver_version().await.unwrap();
    assert_eq!(
        (version.git_version.as_str(), version.minor.as_str()),
        ("v1.33.0", "33")
    );
}

#[tokio::test]
async fn cluster_scoped_crds_serve_cluster_scoped_objects() {
    let server = ApiServer::new();
    let crds: Api<CustomResourceDefinition> = Api::all(server.client());
    let mut crd = widget_crd();
    crd["metadata"]["name"] = json!("gadgets.example.com");
    crd["spec"]["scope"] = json!("Cluster");
    crd["spec"]["names"] = json!({"kind": "Gadget", "plural": "gadgets"});
    crds.create(
        &PostParams::default(),
        &serde_json::from_value(crd).unwrap(),
    )
    .await
    .unwrap();
    let gvk = GroupVersionKind::gvk("example.com", "v1", "Gadget");
    let gadgets: Api<DynamicObject> = Api::all_with(
        server.client(),
        &ApiResource::from_gvk_with_plural(&gvk, "gadgets"),
    );
    let g: DynamicObject = serde_json::from_value(
        json!({"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"}}),
    )
    .unwrap();
    let g = gadgets.create(&PostParams::default(), &g).await.unwrap();
    assert_eq!(g.metadata.namespace, None);
}

#[tokio::test]
async fn invalid_crds_are_rejected_with_the_field() {
    let server = ApiServer::new();
    let crds: Api<CustomResourceDefinition> = Api::all(server.client());
    let mut crd = widget_crd();
    crd["metadata"]["name"] = json!("wrong.example.com");
    let err = status(
        crds.create(
            &PostParams::default(),
            &serde_json::from_value(crd).unwrap(),
        )
        .await,
    );
    assert_eq!(err.code, 422);
    assert!(err.message.contains("metadata.name"), "{}", err.message);
}

#[tokio::test]
async fn deleting_a_crd_deletes_its_objects_then_stops_serving() {
    let server = ApiServer::new();
    let crds = install_crd(&server).await;
    let v1 = widgets(server.client(), "v1");
    v1.create(&PostParams::default(), &widget("v1", "a", json!({})))
        .await
        .unwrap();
    let mut held = widget("v1", "held", json!({}));
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    v1.create(&PostParams::default(), &held).await.unwrap();

    crds.delete("widgets.example.com", &DeleteParams::default())
        .await
        .unwrap();
    eventually("plain widget deleted", || async {
        (code(v1.get("a").await) == 404).then_some(())
    })
    .await;
    // The CRD waits for the finalizer of the remaining object; new objects are refused meanwhile.
    let crd = crds.get("widgets.example.com").await.unwrap();
    assert!(crd.metadata.deletion_timestamp.is_some());
    let err = status(
        v1.create(&PostParams::default(), &widget("v1", "late", json!({})))
            .await,
    );
    assert_eq!(err.code, 405);

    let mut h = v1.get("held").await.unwrap();
    assert!(h.metadata.deletion_timestamp.is_some());
    h.metadata.finalizers = None;
    v1.replace("held", &PostParams::default(), &h)
        .await
        .unwrap();
    eventually("CRD gone", || async {
        (code(crds.get("widgets.example.com").await) == 404).then_some(())
    })
    .await;
    assert_eq!(code(v1.list(&ListParams::default()).await), 404);
}

//! PATCH through `kube::Api::patch`: JSON merge, JSON patch, strategic merge (built-ins only)
//! and server-side apply with field managers, conflicts and force.

use crate::apiserver_common;

use apiserver_common::{code, status, widget_crd};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use olm_rs::sandbox::{ApiServer, ApiServerOptions};
use serde_json::json;

fn quiet() -> ApiServer {
    ApiServer::with_options(ApiServerOptions {
        simulate_workloads: false,
        ..Default::default()
    })
}

async fn configmap(server: &ApiServer) -> Api<ConfigMap> {
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let c: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}}))
            .unwrap();
    cms.create(&PostParams::default(), &c).await.unwrap();
    cms
}

#[tokio::test]
async fn merge_patch_sets_and_removes_fields() {
    let server = quiet();
    let cms = configmap(&server).await;
    let p = Patch::Merge(json!({"data": {"a": "10", "b": null, "c": "3"}}));
    let c = cms.patch("c", &PatchParams::default(), &p).await.unwrap();
    let data = c.data.unwrap();
    assert_eq!(
        (data.get("a"), data.get("b"), data.get("c")),
        (Some(&"10".into()), None, Some(&"3".into()))
    );
}

#[tokio::test]
async fn json_patch_applies_operations_and_fails_its_tests() {
    let server = quiet();
    let cms = configmap(&server).await;
    let ops: json_patch::Patch = serde_json::from_value(json!([
        {"op": "replace", "path": "/data/a", "value": "x"},
        {"op": "add", "path": "/metadata/labels", "value": {"l": "v"}}
    ]))
    .unwrap();
    let c = cms
        .patch("c", &PatchParams::default(), &Patch::<()>::Json(ops))
        .await
        .unwrap();
    assert_eq!(c.data.unwrap()["a"], "x");
    assert_eq!(c.metadata.labels.unwrap()["l"], "v");
    let failing: json_patch::Patch =
        serde_json::from_value(json!([{"op": "test", "path": "/data/a", "value": "nope"}]))
            .unwrap();
    assert_eq!(
        code(
            cms.patch("c", &PatchParams::default(), &Patch::<()>::Json(failing))
                .await
        ),
        422
    );
}

#[tokio::test]
async fn a_patch_carrying_a_stale_resource_version_conflicts() {
    let server = quiet();
    let cms = configmap(&server).await;
    let p = Patch::Merge(json!({"metadata": {"resourceVersion": "1"}, "data": {"a": "2"}}));
    assert_eq!(code(cms.patch("c", &PatchParams::default(), &p).await), 409);
}

fn deployment() -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
                {"name": "app", "image": "app:1"},
                {"name": "sidecar", "image": "side:1"}
            ]}}
        }
    }))
    .unwrap()
}

#[tokio::test]
async fn strategic_merge_patch_merges_containers_by_name() {
    let server = quiet();
    let deps: Api<Deployment> = Api::default_namespaced(server.client());
    deps.create(&PostParams::default(), &deployment())
        .await
        .unwrap();
    let p = Patch::Strategic(
        json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "app:2"}]}}}}),
    );
    let d = deps
        .patch("web", &PatchParams::default(), &p)
        .await
        .unwrap();
    let containers = d.spec.unwrap().template.spec.unwrap().containers;
    let images: Vec<_> = containers
        .iter()
        .map(|c| (c.name.as_str(), c.image.as_deref().unwrap()))
        .collect();
    assert_eq!(images, [("app", "app:2"), ("sidecar", "side:1")]);
    assert_eq!(deps.get("web").await.unwrap().metadata.generation, Some(2));
}

#[tokio::test]
async fn strategic_merge_patch_on_a_custom_resource_is_415() {
    let server = quiet();
    let client = server.client();
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(widget_crd()).unwrap(),
        )
        .await
        .unwrap();
    let gvk = GroupVersionKind::gvk("example.com", "v1", "Widget");
    let widgets: Api<DynamicObject> = Api::namespaced_with(
        client,
        "default",
        &ApiResource::from_gvk_with_plural(&gvk, "widgets"),
    );
    let w: DynamicObject = serde_json::from_value(
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}),
    )
    .unwrap();
    widgets.create(&PostParams::default(), &w).await.unwrap();
    let err = status(
        widgets
            .patch(
                "w",
                &PatchParams::default(),
                &Patch::Strategic(json!({"spec": {"size": 2}})),
            )
            .await,
    );
    assert_eq!(
        (err.code, err.reason.as_str()),
        (415, "UnsupportedMediaType")
    );
    // Merge patch works on custom resources.
    let w = widgets
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 2}})),
        )
        .await
        .unwrap();
    assert_eq!(w.data["spec"]["size"], 2);
}

fn applied(data: serde_json::Value) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": data})
}

#[tokio::test]
async fn server_side_apply_creates_updates_and_removes_dropped_fields() {
    let server = quiet();
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let pp = PatchParams::apply("olm-rs");
    let c = cms
        .patch(
            "ssa",
            &pp,
            &Patch::Apply(applied(json!({"a": "1", "b": "2"}))),
        )
        .await
        .unwrap();
    assert_eq!(c.data.as_ref().unwrap().len(), 2);
    let managers: Vec<_> = c
        .metadata
        .managed_fields
        .unwrap()
        .into_iter()
        .map(|m| m.manager.unwrap())
        .collect();
    assert_eq!(managers, ["olm-rs"]);

    let c = cms
        .patch("ssa", &pp, &Patch::Apply(applied(json!({"a": "1"}))))
        .await
        .unwrap();
    let data = c.data.unwrap();
    assert_eq!(
        (data.get("a"), data.get("b")),
        (Some(&"1".into()), None),
        "b was dropped from the apply"
    );
}

#[tokio::test]
async fn server_side_apply_conflicts_with_another_manager_unless_forced() {
    let server = quiet();
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    cms.patch(
        "ssa",
        &PatchParams::apply("first"),
        &Patch::Apply(applied(json!({"a": "1"}))),
    )
    .await
    .unwrap();
    let err = status(
        cms.patch(
            "ssa",
            &PatchParams::apply("second"),
            &Patch::Apply(applied(json!({"a": "2"}))),
        )
        .await,
    );
    assert_eq!((err.code, err.reason.as_str()), (409, "Conflict"));
    assert!(err.message.contains("first"), "{}", err.message);
    let forced = PatchParams::apply("second").force();
    let c = cms
        .patch("ssa", &forced, &Patch::Apply(applied(json!({"a": "2"}))))
        .await
        .unwrap();
    assert_eq!(c.data.unwrap()["a"], "2");
    // Agreeing on a value is not a conflict.
    cms.patch(
        "ssa",
        &PatchParams::apply("third"),
        &Patch::Apply(applied(json!({"a": "2"}))),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn apply_without_field_manager_is_rejected() {
    let server = quiet();
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let err = status(
        cms.patch(
            "ssa",
            &PatchParams::default(),
            &Patch::Apply(applied(json!({}))),
        )
        .await,
    );
    assert_eq!(err.code, 422);
}

#[tokio::test]
async fn status_patches_touch_only_status() {
    let server = quiet();
    let deps: Api<Deployment> = Api::default_namespaced(server.client());
    deps.create(&PostParams::default(), &deployment())
        .await
        .unwrap();
    let p = Patch::Merge(json!({"spec": {"replicas": 5}, "status": {"replicas": 4}}));
    let d = deps
        .patch_status("web", &PatchParams::default(), &p)
        .await
        .unwrap();
    assert_eq!(d.status.unwrap().replicas, Some(4));
    assert_eq!(d.spec.unwrap().replicas, Some(1));
    let ssa = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "status": {"replicas": 2}});
    let d = deps
        .patch_status(
            "web",
            &PatchParams::apply("status-owner").force(),
            &Patch::Apply(ssa),
        )
        .await
        .unwrap();
    assert_eq!(d.status.unwrap().replicas, Some(2));
}

#[tokio::test]
async fn reapplying_the_same_configuration_changes_nothing() {
    let server = quiet();
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let pp = PatchParams::apply("olm-rs");
    let first = cms
        .patch("ssa", &pp, &Patch::Apply(applied(json!({"a": "1"}))))
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let again = cms
        .patch("ssa", &pp, &Patch::Apply(applied(json!({"a": "1"}))))
        .await
        .unwrap();
    assert_eq!(
        again.metadata.resource_version, first.metadata.resource_version,
        "no new version, no watch event"
    );
    // A plain update by another client takes ownership of what it changed.
    let mut edited = again.clone();
    edited
        .data
        .as_mut()
        .unwrap()
        .insert("a".into(), "edited".into());
    let edited = cms
        .replace(
            "ssa",
            &PostParams {
                field_manager: Some("editor".into()),
                ..Default::default()
            },
            &edited,
        )
        .await
        .unwrap();
    let managers: Vec<_> = edited
        .metadata
        .managed_fields
        .unwrap()
        .into_iter()
        .map(|m| (m.manager.unwrap(), m.operation.unwrap()))
        .collect();
    assert!(
        managers.contains(&("editor".to_string(), "Update".to_string())),
        "{managers:?}"
    );
    assert_eq!(
        code(
            cms.patch("ssa", &pp, &Patch::Apply(applied(json!({"a": "1"}))))
                .await
        ),
        409
    );
}

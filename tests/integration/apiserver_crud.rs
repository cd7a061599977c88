//! CRUD semantics of the embedded API server through a real `kube::Client`: server-owned
//! metadata, optimistic concurrency, generation, the status subresource, namespaces.

use crate::apiserver_common;

use apiserver_common::{code, status};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use olm_rs::sandbox::{ApiServer, ApiServerOptions};
use serde_json::json;

fn cm(name: &str, data: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"k": data}})).unwrap()
}

fn rv<K: kube::Resource>(k: &K) -> u64 {
    k.meta()
        .resource_version
        .as_deref()
        .unwrap()
        .parse()
        .unwrap()
}

fn quiet() -> ApiServer {
    ApiServer::with_options(ApiServerOptions {
        simulate_workloads: false,
        ..Default::default()
    })
}

#[tokio::test]
async fn create_assigns_server_metadata_and_get_returns_it() {
    let server = quiet();
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let created = cms
        .create(&PostParams::default(), &cm("a", "1"))
        .await
        .unwrap();
    let meta = &created.metadata;
    assert_eq!(meta.namespace.as_deref(), Some("default"));
    assert_eq!(meta.uid.as_ref().unwrap().len(), 36);
    assert!(meta.creation_timestamp.is_some());
    assert!(rv(&created) > 0);
    let got = cms.get("a").await.unwrap();
    assert_eq!(got.metadata.uid, meta.uid);
    assert_eq!(got.data.unwrap()["k"], "1");

    assert_eq!(
        code(cms.create(&PostParams::default(), &cm("a", "2")).await),
        409
    );
    assert_eq!(status(cms.get("missing").await).reason, "NotFound");
}

#[tokio::test]
async fn generate_name_gets_a_random_suffix() {
    let server = quiet();
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let mut template = cm("", "x");
    template.metadata.name = None;
    template.metadata.generate_name = Some("gen-".into());
    let a = cms.create(&PostParams::default(), &template).await.unwrap();
    let b = cms.create(&PostParams::default(), &template).await.unwrap();
    let (na, nb) = (a.metadata.name.unwrap(), b.metadata.name.unwrap());
    assert!(na.starts_with("gen-") && na.len() == 9, "{na}");
    assert_ne!(na, nb);
    template.metadata.generate_name = None;
    assert_eq!(
        code(cms.create(&PostParams::default(), &template).await),
        422
    );
}

#[tokio::test]
async fn resource_versions_increase_across_kinds_and_stale_updates_conflict() {
    let server = quiet();
    let client = server.client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let nss: Api<Namespace> = Api::all(client);
    let a = cms
        .create(&PostParams::default(), &cm("a", "1"))
        .await
        .unwrap();
    let ns = nss
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "team"}})).unwrap(),
        )
        .await
        .unwrap();
    assert!(rv(&ns) > rv(&a));

    let mut first = cms.get("a").await.unwrap();
    let mut second = first.clone();
    first.data = Some([("k".to_string(), "first".to_string())].into());
    let updated = cms
        .replace("a", &PostParams::default(), &first)
        .await
        .unwrap();
    assert!(rv(&updated) > rv(&ns));
    second.data = Some([("k".to_string(), "second".to_string())].into());
    let err = status(cms.replace("a", &PostParams::default(), &second).await);
    assert_eq!((err.code, err.reason.as_str()), (409, "Conflict"));
    assert!(
        err.message.contains("the object has been modified"),
        "{}",
        err.message
    );
    assert_eq!(cms.get("a").await.unwrap().data.unwrap()["k"], "first");
}

#[tokio::test]
async fn an_update_that_changes_nothing_keeps_the_resource_version() {
    let server = quiet();
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let a = cms
        .create(&PostParams::default(), &cm("a", "1"))
        .await
        .unwrap();
    let again = cms.replace("a", &PostParams::default(), &a).await.unwrap();
    assert_eq!(rv(&again), rv(&a));
}

fn deployment(name: &str, image: &str) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": image}]}}
        }
    }))
    .unwrap()
}

#[tokio::test]
async fn generation_moves_on_spec_changes_only() {
    let server = quiet();
    let deps: Api<Deployment> = Api::default_namespaced(server.client());
    let d = deps
        .create(&PostParams::default(), &deployment("web", "img:1"))
        .await
        .unwrap();
    assert_eq!(d.metadata.generation, Some(1));
    assert_eq!(d.spec.as_ref().unwrap().replicas, Some(1), "defaulted");

    let mut labelled = d.clone();
    labelled
        .metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("extra".into(), "yes".into());
    let labelled = deps
        .replace("web", &PostParams::default(), &labelled)
        .await
        .unwrap();
    assert_eq!(labelled.metadata.generation, Some(1), "metadata change");

    let mut with_status = labelled.clone();
    with_status.status = Some(serde_json::from_value(json!({"replicas": 5})).unwrap());
    let with_status = deps
        .replace_status("web", &PostParams::default(), &with_status)
        .await
        .unwrap();
    assert_eq!(with_status.metadata.generation, Some(1), "status change");

    let mut spec = with_status.clone();
    spec.spec
        .as_mut()
        .unwrap()
        .template
        .spec
        .as_mut()
        .unwrap()
        .containers[0]
        .image = Some("img:2".into());
    let spec = deps
        .replace("web", &PostParams::default(), &spec)
        .await
        .unwrap();
    assert_eq!(spec.metadata.generation, Some(2), "spec change");
}

#[tokio::test]
async fn status_subresource_separates_status_from_the_rest() {
    let server = quiet();
    let deps: Api<Deployment> = Api::default_namespaced(server.client());
    let mut d = deployment("web", "img:1");
    d.status = Some(serde_json::from_value(json!({"replicas": 9})).unwrap());
    let d = deps.create(&PostParams::default(), &d).await.unwrap();
    assert!(d.status.is_none(), "status is dropped on create");

    // A status write that also changes the spec: only status lands.
    let mut s = d.clone();
    s.status = Some(serde_json::from_value(json!({"replicas": 3})).unwrap());
    s.spec.as_mut().unwrap().replicas = Some(7);
    let s = deps
        .replace_status("web", &PostParams::default(), &s)
        .await
        .unwrap();
    assert_eq!(s.status.as_ref().unwrap().replicas, Some(3));
    assert_eq!(s.spec.as_ref().unwrap().replicas, Some(1));

    // A main write that also changes status: status is kept.
    let mut m = s.clone();
    m.status = Some(serde_json::from_value(json!({"replicas": 100})).unwrap());
    m.spec.as_mut().unwrap().replicas = Some(2);
    let m = deps
        .replace("web", &PostParams::default(), &m)
        .await
        .unwrap();
    assert_eq!(m.status.as_ref().unwrap().replicas, Some(3));
    assert_eq!(m.spec.as_ref().unwrap().replicas, Some(2));
}

#[tokio::test]
async fn namespaces_must_exist_and_start_with_the_usual_ones() {
    let server = quiet();
    let client = server.client();
    let names: Vec<String> = Api::<Namespace>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|n| n.metadata.name.unwrap())
        .collect();
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        assert!(names.contains(&ns.to_string()), "{ns} in {names:?}");
    }
    let ghost: Api<ConfigMap> = Api::namespaced(client.clone(), "ghost");
    let err = status(ghost.create(&PostParams::default(), &cm("a", "1")).await);
    assert_eq!(err.code, 404);
    assert!(
        err.message.contains("namespaces \"ghost\" not found"),
        "{}",
        err.message
    );

    let ns: Namespace = Api::<Namespace>::all(client).get("default").await.unwrap();
    assert_eq!(ns.status.unwrap().phase.as_deref(), Some("Active"));
    assert_eq!(
        ns.metadata.labels.unwrap()["kubernetes.io/metadata.name"],
        "default"
    );
}

#[tokio::test]
async fn dry_run_stores_nothing() {
    let server = quiet();
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let pp = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let out = cms.create(&pp, &cm("dry", "1")).await.unwrap();
    assert_eq!(out.metadata.name.as_deref(), Some("dry"));
    assert_eq!(code(cms.get("dry").await), 404);
    cms.create(&PostParams::default(), &cm("real", "1"))
        .await
        .unwrap();
    let dp = DeleteParams {
        dry_run: true,
        ..Default::default()
    };
    cms.delete("real", &dp).await.unwrap();
    assert!(cms.get("real").await.is_ok());
}

#[tokio::test]
async fn wrong_kind_or_name_in_body_is_a_bad_request() {
    let server = quiet();
    let client = server.client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let a = cms
        .create(&PostParams::default(), &cm("a", "1"))
        .await
        .unwrap();
    let mut renamed = a.clone();
    renamed.metadata.name = Some("b".into());
    assert_eq!(
        code(cms.replace("a", &PostParams::default(), &renamed).await),
        400
    );
    let other_ns: Api<ConfigMap> = Api::namespaced(client, "kube-system");
    let mut c = cm("c", "1");
    c.metadata.namespace = Some("default".into());
    assert_eq!(code(other_ns.create(&PostParams::default(), &c).await), 400);
}

#[tokio::test]
async fn events_recorded_through_events_k8s_io_are_core_events_too() {
    use k8s_openapi::api::core::v1::Event as CoreEvent;
    use k8s_openapi::api::events::v1::Event;
    let server = quiet();
    let client = server.client();
    let new_events: Api<Event> = Api::default_namespaced(client.clone());
    let ev = json!({
        "metadata": {"name": "csv.1"},
        "eventTime": "2024-01-01T00:00:00.000000Z",
        "regarding": {"kind": "ClusterServiceVersion", "name": "etcd", "namespace": "default"},
        "note": "install strategy completed", "reason": "InstallSucceeded", "type": "Normal",
        "action": "Install", "reportingController": "olm-rs", "reportingInstance": "olm-rs-0"
    });
    new_events
        .create(&PostParams::default(), &serde_json::from_value(ev).unwrap())
        .await
        .unwrap();
    let core: Api<CoreEvent> = Api::default_namespaced(client);
    let listed = core
        .list(&ListParams::default().fields("involvedObject.name=etcd"))
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 1);
    let e = &listed.items[0];
    assert_eq!(
        (e.message.as_deref(), e.involved_object.kind.as_deref()),
        (
            Some("install strategy completed"),
            Some("ClusterServiceVersion")
        )
    );
    let back = new_events
        .list(&ListParams::default().fields("regarding.name=etcd"))
        .await
        .unwrap();
    assert_eq!(
        back.items[0].note.as_deref(),
        Some("install strategy completed")
    );
}

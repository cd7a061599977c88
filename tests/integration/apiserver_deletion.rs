//! Deletion: finalizers, ownerReference garbage collection (background, foreground, orphan) and
//! namespace deletion cascading to the namespace's content.

use crate::apiserver_common;

use apiserver_common::{code, eventually, status};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, ServiceAccount};
use kube::Resource;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, PropagationPolicy};
use olm_rs::sandbox::ApiServer;
use serde_json::json;

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}})).unwrap()
}

fn owned_by(name: &str, owner: &ConfigMap, block: bool) -> Secret {
    let mut oref = owner.controller_owner_ref(&()).unwrap();
    oref.block_owner_deletion = Some(block);
    serde_json::from_value(json!({"metadata": {"name": name, "ownerReferences": [oref]}})).unwrap()
}

async fn gone<K>(api: &Api<K>, name: &str)
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    eventually(&format!("{name} deleted"), || async {
        (code(api.get(name).await) == 404).then_some(())
    })
    .await;
}

#[tokio::test]
async fn finalizers_hold_an_object_until_removed() {
    let server = ApiServer::new();
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let mut held = cm("held");
    held.metadata.finalizers = Some(vec!["example.com/cleanup".into()]);
    cms.create(&PostParams::default(), &held).await.unwrap();

    let deleted = cms.delete("held", &DeleteParams::default()).await.unwrap();
    let pending = deleted
        .left()
        .expect("the object comes back while it is held");
    assert!(pending.metadata.deletion_timestamp.is_some());
    let still = cms.get("held").await.unwrap();
    assert!(still.metadata.deletion_timestamp.is_some());

    // No new finalizers once deletion started.
    let add = Patch::Merge(
        json!({"metadata": {"finalizers": ["example.com/cleanup", "example.com/more"]}}),
    );
    assert_eq!(
        code(cms.patch("held", &PatchParams::default(), &add).await),
        422
    );

    let clear = Patch::Merge(json!({"metadata": {"finalizers": null}}));
    cms.patch("held", &PatchParams::default(), &clear)
        .await
        .unwrap();
    assert_eq!(code(cms.get("held").await), 404);
}

#[tokio::test]
async fn delete_preconditions_guard_against_races() {
    let server = ApiServer::new();
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    cms.create(&PostParams::default(), &cm("a")).await.unwrap();
    let dp = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: Some("not-the-uid".into()),
            resource_version: None,
        }),
        ..Default::default()
    };
    let err = status(cms.delete("a", &dp).await);
    assert_eq!(err.code, 409);
    assert!(
        err.message.contains("Precondition failed"),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn background_deletion_removes_dependents_after_the_owner() {
    let server = ApiServer::new();
    let client = server.client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let secrets: Api<Secret> = Api::default_namespaced(client.clone());
    let owner = cms
        .create(&PostParams::default(), &cm("owner"))
        .await
        .unwrap();
    let other = cms
        .create(&PostParams::default(), &cm("other"))
        .await
        .unwrap();
    secrets
        .create(&PostParams::default(), &owned_by("child", &owner, false))
        .await
        .unwrap();
    // A dependent with a second, surviving owner only loses the reference.
    let mut shared = owned_by("shared", &owner, false);
    let mut second = other.controller_owner_ref(&()).unwrap();
    second.controller = Some(false);
    shared
        .metadata
        .owner_references
        .as_mut()
        .unwrap()
        .push(second);
    secrets
        .create(&PostParams::default(), &shared)
        .await
        .unwrap();

    cms.delete("owner", &DeleteParams::background())
        .await
        .unwrap();
    assert_eq!(code(cms.get("owner").await), 404, "the owner goes first");
    gone(&secrets, "child").await;
    let shared = eventually("dangling reference dropped", || async {
        let s = secrets.get("shared").await.ok()?;
        (s.metadata.owner_references.as_ref()?.len() == 1).then_some(s)
    })
    .await;
    assert_eq!(shared.metadata.owner_references.unwrap()[0].name, "other");
}

#[tokio::test]
async fn foreground_deletion_waits_for_blocking_dependents() {
    let server = ApiServer::new();
    let client = server.client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let secrets: Api<Secret> = Api::default_namespaced(client.clone());
    let owner = cms
        .create(&PostParams::default(), &cm("owner"))
        .await
        .unwrap();
    let mut child = owned_by("child", &owner, true);
    child.metadata.finalizers = Some(vec!["example.com/slow".into()]);
    secrets
        .create(&PostParams::default(), &child)
        .await
        .unwrap();

    cms.delete("owner", &DeleteParams::foreground())
        .await
        .unwrap();
    let owner = cms.get("owner").await.unwrap();
    assert!(owner.metadata.deletion_timestamp.is_some());
    assert!(
        owner
            .metadata
            .finalizers
            .unwrap()
            .contains(&"foregroundDeletion".to_string())
    );
    let child = eventually("child marked for deletion", || async {
        let c = secrets.get("child").await.ok()?;
        c.metadata.deletion_timestamp.is_some().then_some(c)
    })
    .await;
    assert!(
        cms.get("owner").await.is_ok(),
        "the owner waits for its blocking dependent"
    );

    let mut c = child;
    c.metadata
        .finalizers
        .as_mut()
        .unwrap()
        .retain(|f| f != "example.com/slow");
    secrets
        .replace("child", &PostParams::default(), &c)
        .await
        .unwrap();
    gone(&secrets, "child").await;
    gone(&cms, "owner").await;
}

#[tokio::test]
async fn orphan_deletion_keeps_dependents_without_the_reference() {
    let server = ApiServer::new();
    let client = server.client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let secrets: Api<Secret> = Api::default_namespaced(client.clone());
    let owner = cms
        .create(&PostParams::default(), &cm("owner"))
        .await
        .unwrap();
    secrets
        .create(&PostParams::default(), &owned_by("child", &owner, true))
        .await
        .unwrap();
    let dp = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Orphan),
        ..Default::default()
    };
    cms.delete("owner", &dp).await.unwrap();
    gone(&cms, "owner").await;
    let child = secrets.get("child").await.unwrap();
    assert!(child.metadata.owner_references.is_none());
    assert!(child.metadata.deletion_timestamp.is_none());
}

#[tokio::test]
async fn deleting_a_namespace_deletes_its_content_then_itself() {
    let server = ApiServer::new();
    let client = server.client();
    let nss: Api<Namespace> = Api::all(client.clone());
    nss.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "team"}})).unwrap(),
    )
    .await
    .unwrap();
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), "team");
    eventually("default ServiceAccount", || async {
        sas.get("default").await.ok()
    })
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "team");
    cms.create(&PostParams::default(), &cm("plain"))
        .await
        .unwrap();
    let mut held = cm("held");
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    cms.create(&PostParams::default(), &held).await.unwrap();

    nss.delete("team", &DeleteParams::default()).await.unwrap();
    let ns = nss.get("team").await.unwrap();
    assert_eq!(ns.status.unwrap().phase.as_deref(), Some("Terminating"));
    let err = status(cms.create(&PostParams::default(), &cm("new")).await);
    assert_eq!(err.code, 403);
    assert!(err.message.contains("being terminated"), "{}", err.message);
    gone(&cms, "plain").await;
    gone(&sas, "default").await;
    // The finalizer of the held object keeps the namespace Terminating.
    assert!(nss.get("team").await.is_ok());
    assert!(
        cms.get("held")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );

    cms.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    gone(&nss, "team").await;
    let left = Api::<ConfigMap>::all(client)
        .list(&ListParams::default())
        .await
        .unwrap();
    assert!(
        left.items
            .iter()
            .all(|c| c.metadata.namespace.as_deref() != Some("team"))
    );
}

#[tokio::test]
async fn delete_collection_honours_selectors() {
    let server = ApiServer::new();
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    for (n, team) in [("a", "x"), ("b", "x"), ("c", "y")] {
        let mut c = cm(n);
        c.metadata.labels = Some([("team".to_string(), team.to_string())].into());
        cms.create(&PostParams::default(), &c).await.unwrap();
    }
    cms.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().labels("team=x"),
    )
    .await
    .unwrap();
    let left: Vec<_> = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|c| c.metadata.name.unwrap())
        .collect();
    assert_eq!(left, ["c"]);
}

#[tokio::test]
async fn the_system_namespaces_cannot_be_deleted() {
    let server = ApiServer::new();
    let nss: Api<Namespace> = Api::all(server.client());
    for ns in ["default", "kube-system", "kube-public"] {
        let err = status(nss.delete(ns, &DeleteParams::default()).await);
        assert_eq!(err.code, 403, "{ns}");
    }
}

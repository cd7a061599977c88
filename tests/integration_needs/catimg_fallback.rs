//! An image the controller cannot pull itself is served by a registry pod, whose image the
//! kubelet pulls (docs/catalog-images.md §7): the status, a condition and an event say which
//! mode serves and why; when the cause goes away, the catalog is served in-process again and
//! the pod removed. A catalog annotated `in-process` is never moved.

use crate::catalog_source_common;
use crate::registry_support::{Kind, TestRegistry};

use std::time::Duration;

use catalog_source_common::*;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams};
use olm_rs::api::CatalogSourceStatus;
use olm_rs::catalog_source::in_process::CONTENT_CONDITION;

fn content(s: &CatalogSourceStatus) -> Option<(String, String, String)> {
    s.conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == CONTENT_CONDITION)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// The images of the registry pods of catalog `name` that are not being deleted.
async fn pod_images(h: &Harness, ns: &str, name: &str) -> Vec<String> {
    let pods: Api<Pod> = Api::namespaced(h.client.clone(), ns);
    pods.list(&ListParams::default().labels(&format!("olm.catalogSource={name},olm.managed=true")))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .flat_map(|p| p.spec.into_iter().flat_map(|s| s.containers))
        .filter_map(|c| c.image)
        .collect()
}

async fn event_reasons(h: &Harness, ns: &str, name: &str) -> Vec<String> {
    let events: Api<Event> = Api::namespaced(h.client.clone(), ns);
    events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .filter_map(|e| e.reason)
        .collect()
}

async fn catimg_an_image_the_controller_cannot_reach_is_served_by_its_registry_pod_until_it_can() {
    let mut registry = TestRegistry::start(Kind::Plain);
    let files = tempfile::tempdir().unwrap();
    let (conf, _) = registry.write_client_files(files.path());
    let root = crate::common::fbc_v420();
    let file = root.join("kubevirt-wol").join("catalog.yaml");
    let fbc = vec![(
        "kubevirt-wol/catalog.yaml".to_owned(),
        std::fs::read(&file).unwrap(),
    )];
    let (image, digest) = registry
        .push_catalog("catalogs/fallback", "v1", &fbc, true)
        .await;
    // The controller cannot reach the registry; a node with a mirror could.
    registry.stop();
    let h = start(Setup {
        registries_conf: Some(conf),
        catalog_cache_dir: Some(files.path().join("cache")),
        fallback_retry: Some(Duration::from_secs(2)),
        ..Setup::default()
    })
    .await;
    let spec = serde_json::json!({"sourceType": "grpc", "image": image});
    create(&h, &catalog_source("team-a", "fallback", spec.clone())).await;
    let mut explicit = catalog_source("team-a", "explicit", spec);
    explicit.metadata.annotations = Some(
        [(
            olm_rs::catalog_source::serving::SERVING_ANNOTATION.to_owned(),
            "in-process".to_owned(),
        )]
        .into(),
    );
    create(&h, &explicit).await;

    let cs = status_where(
        &h,
        "team-a",
        "fallback",
        "served by its registry pod",
        |s| {
            content(s)
                .is_some_and(|(status, reason, _)| status == "True" && reason == "RegistryPod")
                && s.registry_service.is_some()
        },
    )
    .await;
    let (_, _, message) = content(&cs.status.unwrap()).unwrap();
    assert!(
        message.contains(&image) && message.contains("Unreachable") && message.contains("kubelet"),
        "{message}"
    );
    eventually("a registry pod runs the image", || async {
        pod_images(&h, "team-a", "fallback")
            .await
            .contains(&image)
            .then_some(())
    })
    .await;
    eventually("an event says the catalog fell back", || async {
        event_reasons(&h, "team-a", "fallback")
            .await
            .iter()
            .any(|r| r == "CatalogServedByRegistryPod")
            .then_some(())
    })
    .await;
    // Annotated in-process: reported, never moved to a pod.
    status_where(&h, "team-a", "explicit", "refused in-process", |s| {
        content(s).is_some_and(|(status, reason, _)| status == "False" && reason == "Unreachable")
    })
    .await;
    assert!(pod_images(&h, "team-a", "explicit").await.is_empty());

    // The registry comes back: served in-process at the next try, the pod removed.
    registry.restart();
    status_where(&h, "team-a", "fallback", "served in-process again", |s| {
        content(s).is_some_and(|(status, reason, message)| {
            status == "True" && reason == "Serving" && message.contains(&digest)
        })
    })
    .await;
    eventually("the fallback's registry pod removed", || async {
        pod_images(&h, "team-a", "fallback")
            .await
            .is_empty()
            .then_some(())
    })
    .await;
}

crate::trials! {
    multi catimg_an_image_the_controller_cannot_reach_is_served_by_its_registry_pod_until_it_can,
}

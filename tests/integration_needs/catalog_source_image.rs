//! `sourceType: grpc` + `image` catalogs in pod mode (`olm-rs.io/catalog-serving: pod`, or the
//! controller's default) against the embedded API server: the registry pod,
//! Service and ServiceAccount OLM creates, the connection through the Service address, digest
//! polling that replaces the pod only when the digest changed, and clean-up on deletion.
//! No kubelet runs: the registry the Service would reach is served in-process, and the address
//! override points the Service address at it. Digests are asked of a real registry
//! (`docker-registry`) the test pushes the catalog image to.

use crate::catalog_source_common;
use crate::registry_support::{Kind, TestRegistry};

use std::collections::BTreeMap;
use std::time::Duration;

use catalog_source_common::*;
use jiff::SignedDuration;
use k8s_openapi::api::core::v1::{Pod, Service, ServiceAccount};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use olm_rs::api::CatalogRef;
use olm_rs::api::CatalogSource;
use olm_rs::catalog_source::registry_objects::IMAGE_DIGEST_ANNOTATION;
use olm_rs::catalog_source::serving::{SERVING_ANNOTATION, ServingMode};
use olm_rs::k8s::clock::Clock;

const IMAGE: &str = "quay.io/example/catalog:latest";

/// A small file-based catalog; `version` makes each push a new digest.
fn tiny_catalog(version: &str) -> Vec<(String, Vec<u8>)> {
    vec![(
        "p/catalog.json".to_owned(),
        format!(r#"{{"schema":"olm.package","name":"p","description":"{version}"}}"#).into_bytes(),
    )]
}

async fn registry_pods(h: &Harness, ns: &str, name: &str) -> Vec<Pod> {
    let pods: Api<Pod> = Api::namespaced(h.client.clone(), ns);
    pods.list(&ListParams::default().labels(&format!("olm.catalogSource={name},olm.managed=true")))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect()
}

fn digest_of(p: &Pod) -> Option<String> {
    p.annotations().get(IMAGE_DIGEST_ANNOTATION).cloned()
}

/// Touches the CatalogSource so the controller syncs it now (instead of at its requeue time).
async fn nudge(h: &Harness, ns: &str, name: &str, n: u32) {
    let api: Api<CatalogSource> = Api::namespaced(h.client.clone(), ns);
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"metadata": {"labels": {"nudge": n.to_string()}}})),
    )
    .await
    .unwrap();
}

async fn mark_ready(h: &Harness, pod: &Pod) {
    let pods: Api<Pod> = Api::namespaced(h.client.clone(), &pod.namespace().unwrap());
    pods.patch_status(
        &pod.name_any(),
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})),
    )
    .await
    .unwrap();
}

async fn image_catalog_runs_a_registry_pod_and_polls_by_digest() {
    let images = TestRegistry::start(Kind::Plain);
    let files = tempfile::tempdir().unwrap();
    let (conf, _) = images.write_client_files(files.path());
    let (image, first_digest) = images
        .push_catalog("example/catalog", "latest", &tiny_catalog("1"), true)
        .await;
    let registry = serve_index(etcd_index()).await;
    let overrides = BTreeMap::from([(
        "my-catalog.olm.svc:50051".to_owned(),
        registry.address.clone(),
    )]);
    let h = start(Setup {
        address_overrides: overrides,
        manual_clock: true,
        // In-process by default; the annotation asks for the pod.
        registries_conf: Some(conf),
        ..Setup::default()
    })
    .await;
    let clock = h.clock.clone().unwrap();
    let mut cs = catalog_source(
        GLOBAL_NS,
        "my.catalog",
        serde_json::json!({
                "sourceType": "grpc",
            "image": image,
            "displayName": "My catalog",
            "publisher": "me",
            "updateStrategy": {"registryPoll": {"interval": "10m"}},
            "grpcPodConfig": {"securityContextConfig": "restricted"}
        }),
    );
    cs.metadata.annotations = Some(BTreeMap::from([(
        SERVING_ANNOTATION.to_owned(),
        "pod".to_owned(),
    )]));
    create(&h, &cs).await;

    // Objects OLM would create.
    let pods = eventually("registry pod", || async {
        let pods = registry_pods(&h, GLOBAL_NS, "my.catalog").await;
        (!pods.is_empty()).then_some(pods)
    })
    .await;
    assert_eq!(pods.len(), 1);
    let first = &pods[0];
    assert!(first.name_any().starts_with("my.catalog-"));
    assert_eq!(digest_of(first).as_deref(), Some(first_digest.as_str()));
    let spec = first.spec.as_ref().unwrap();
    assert_eq!(spec.containers[0].name, "registry-server");
    assert_eq!(spec.containers[0].image.as_deref(), Some(image.as_str()));
    assert_eq!(spec.service_account_name.as_deref(), Some("my.catalog"));
    assert_eq!(
        spec.security_context
            .as_ref()
            .unwrap()
            .seccomp_profile
            .as_ref()
            .unwrap()
            .type_,
        "RuntimeDefault"
    );
    let owner = &first.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.controller),
        ("CatalogSource", Some(true))
    );
    let services: Api<Service> = Api::namespaced(h.client.clone(), GLOBAL_NS);
    let svc = services.get("my-catalog").await.unwrap();
    assert_eq!(
        svc.spec.as_ref().unwrap().ports.as_ref().unwrap()[0].port,
        50051
    );
    let accounts: Api<ServiceAccount> = Api::namespaced(h.client.clone(), GLOBAL_NS);
    accounts.get("my.catalog").await.unwrap();

    // Connected through the Service address.
    let cs = status_where(&h, GLOBAL_NS, "my.catalog", "READY", |s| {
        state_of(s).as_deref() == Some("READY")
    })
    .await;
    let status = cs.status.unwrap();
    let service = status.registry_service.unwrap();
    assert_eq!(service.service_name.as_deref(), Some("my-catalog"));
    assert_eq!(service.service_namespace.as_deref(), Some(GLOBAL_NS));
    assert_eq!(service.port.as_deref(), Some("50051"));
    assert_eq!(
        status.connection_state.unwrap().address.as_deref(),
        Some("my-catalog.olm.svc:50051")
    );
    let key = CatalogRef::new(GLOBAL_NS, "my.catalog");
    eventually("content loaded", || async {
        h.ctx
            .catalogs
            .get(&key)
            .filter(|s| s.health.healthy && s.index.is_some())
    })
    .await;

    // A poll with the same digest changes nothing.
    clock.advance(SignedDuration::from_mins(11));
    nudge(&h, GLOBAL_NS, "my.catalog", 1).await;
    let polled_at = clock.now();
    status_where(&h, GLOBAL_NS, "my.catalog", "poll recorded", |s| {
        // Status times have second precision.
        s.latest_image_registry_poll
            .as_ref()
            .map(|t| t.0.as_second())
            == Some(polled_at.as_second())
    })
    .await;
    let pods = registry_pods(&h, GLOBAL_NS, "my.catalog").await;
    assert_eq!(pods.len(), 1, "same digest: no new pod");
    assert_eq!(pods[0].name_any(), first.name_any());

    // Not due yet: no poll.
    clock.advance(SignedDuration::from_mins(1));
    nudge(&h, GLOBAL_NS, "my.catalog", 2).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let last = get(&h, GLOBAL_NS, "my.catalog")
        .await
        .status
        .unwrap()
        .latest_image_registry_poll
        .unwrap();
    assert_eq!(last.0.as_second(), polled_at.as_second(), "poll not due");

    // The tag moves: a new pod starts beside the old one, which goes once the new one is Ready.
    let (_, second_digest) = images
        .push_catalog("example/catalog", "latest", &tiny_catalog("2"), true)
        .await;
    assert_ne!(first_digest, second_digest);
    clock.advance(SignedDuration::from_mins(10));
    nudge(&h, GLOBAL_NS, "my.catalog", 3).await;
    let pods = eventually("new pod for the new digest", || async {
        let pods = registry_pods(&h, GLOBAL_NS, "my.catalog").await;
        (pods.len() == 2).then_some(pods)
    })
    .await;
    let new = pods
        .iter()
        .find(|p| digest_of(p).as_deref() == Some(second_digest.as_str()))
        .unwrap();
    assert!(
        pods.iter().any(|p| p.name_any() == first.name_any()),
        "old pod keeps serving"
    );
    mark_ready(&h, new).await;
    let pods = eventually("old pod removed", || async {
        let pods = registry_pods(&h, GLOBAL_NS, "my.catalog").await;
        (pods.len() == 1).then_some(pods)
    })
    .await;
    assert_eq!(pods[0].name_any(), new.name_any());

    // A spec change rolls the pod (new hash).
    let api: Api<CatalogSource> = Api::namespaced(h.client.clone(), GLOBAL_NS);
    api.patch(
        "my.catalog",
        &PatchParams::default(),
        &Patch::Merge(
            serde_json::json!({"spec": {"grpcPodConfig": {"nodeSelector": {"disk": "ssd"}}}}),
        ),
    )
    .await
    .unwrap();
    eventually("pod with the new spec", || async {
        let pods = registry_pods(&h, GLOBAL_NS, "my.catalog").await;
        (pods.len() == 1
            && pods[0]
                .spec
                .as_ref()
                .unwrap()
                .node_selector
                .as_ref()
                .unwrap()
                .get("disk")
                .is_some())
        .then_some(())
    })
    .await;

    // Deleting the catalog removes its pod, Service and ServiceAccount (owner references) and
    // forgets its content.
    api.delete("my.catalog", &DeleteParams::default())
        .await
        .unwrap();
    eventually("everything cleaned up", || async {
        let pods = registry_pods(&h, GLOBAL_NS, "my.catalog").await;
        let svc = services.get_opt("my-catalog").await.unwrap();
        let sa = accounts.get_opt("my.catalog").await.unwrap();
        (pods.is_empty() && svc.is_none() && sa.is_none() && h.ctx.catalogs.get(&key).is_none())
            .then_some(())
    })
    .await;
}

async fn stale_or_disrupted_pods_are_replaced_and_failures_reported() {
    // Pod mode for every image catalog, from the controller's flag.
    let h = start(Setup {
        serving: ServingMode::Pod,
        ..Setup::default()
    })
    .await;
    create(
        &h,
        &catalog_source(
            "team-a",
            "cat",
            serde_json::json!({"sourceType": "grpc", "image": IMAGE}),
        ),
    )
    .await;
    let pods = eventually("registry pod", || async {
        let pods = registry_pods(&h, "team-a", "cat").await;
        (pods.len() == 1).then_some(pods)
    })
    .await;
    // No polling configured: the registry was never asked for a digest.
    assert!(digest_of(&pods[0]).is_none());

    // Evicted pod (DisruptionTarget): force-deleted and replaced.
    let api: Api<Pod> = Api::namespaced(h.client.clone(), "team-a");
    api.patch_status(
        &pods[0].name_any(),
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"status": {"conditions": [{"type": "DisruptionTarget", "status": "True"}]}})),
    )
    .await
    .unwrap();
    eventually("replacement pod", || async {
        let now = registry_pods(&h, "team-a", "cat").await;
        (now.len() == 1 && now[0].name_any() != pods[0].name_any()).then_some(())
    })
    .await;

    // A pod somebody else made with our labels but an old spec is replaced too.
    let mut stray = pods[0].clone();
    stray.metadata = kube::api::ObjectMeta {
        name: Some("cat-stray".into()),
        namespace: Some("team-a".into()),
        labels: Some(BTreeMap::from([
            ("olm.catalogSource".to_owned(), "cat".to_owned()),
            ("olm.managed".to_owned(), "true".to_owned()),
            ("olm.pod-spec-hash".to_owned(), "old".to_owned()),
        ])),
        ..Default::default()
    };
    stray.status = None;
    api.create(&PostParams::default(), &stray).await.unwrap();
    eventually("stray pod deleted", || async {
        let now = registry_pods(&h, "team-a", "cat").await;
        (!now.iter().any(|p| p.name_any() == "cat-stray")).then_some(())
    })
    .await;

    // No registry behind the Service address (nothing overrides it here): unreachable, said so.
    let status = status_where(&h, "team-a", "cat", "unreachable reported", |s| {
        s.message.is_some()
    })
    .await
    .status
    .unwrap();
    assert!(status.message.unwrap().contains("cat.team-a.svc:50051"));
}

crate::trials! {
    multi image_catalog_runs_a_registry_pod_and_polls_by_digest,
    multi stale_or_disrupted_pods_are_replaced_and_failures_reported,
}

//! Catalog images served in-process (docs/catalog-images.md) against the embedded API server
//! and a real registry (`docker-registry`): catalog images assembled here as `opm` builds them
//! (a file-based catalog under `/configs`, the `operators.operatorframework.io.index.configs.v1`
//! label), pulled by digest, unpacked into the disk cache, indexed and served from memory —
//! no registry pod, no Service. A new digest pushed mid-test is polled and swapped in; images
//! without the label, with invalid content, missing, or private without their secret are each
//! reported on their own CatalogSource while the others keep serving.

use crate::catalog_source_common;
use crate::registry_support::{self, Kind, TestRegistry};

use std::path::Path;
use std::sync::Arc;

use base64::Engine as _;
use catalog_source_common::*;
use jiff::SignedDuration;
use k8s_openapi::api::core::v1::{Pod, Secret, Service};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use olm_rs::api::CatalogRef;
use olm_rs::api::{CatalogSource, CatalogSourceStatus};
use olm_rs::catalog_source::in_process::CONTENT_CONDITION;

/// One or two small packages of the real v4.20 catalog.
fn fbc(packages: &[&str]) -> Vec<(String, Vec<u8>)> {
    let root = crate::common::fbc_v420();
    packages
        .iter()
        .map(|p| {
            let file = root.join(p).join("catalog.yaml");
            (
                format!("{p}/catalog.yaml"),
                std::fs::read(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display())),
            )
        })
        .collect()
}

const ONE: &str = "libredb-studio-operator";
const TWO: &str = "kubevirt-wol";

/// The content condition of a status: (status, reason, message).
fn content(s: &CatalogSourceStatus) -> Option<(String, String, String)> {
    s.conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == CONTENT_CONDITION)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

fn serving(s: &CatalogSourceStatus, digest: &str) -> bool {
    state_of(s).as_deref() == Some("READY")
        && content(s)
            .is_some_and(|(status, _, message)| status == "True" && message.contains(digest))
}

fn failed_with(s: &CatalogSourceStatus, reason: &str) -> bool {
    content(s).is_some_and(|(status, r, _)| status == "False" && r == reason)
}

fn packages(h: &Harness, key: &CatalogRef) -> Vec<String> {
    h.ctx
        .catalogs
        .get(key)
        .and_then(|s| s.index)
        .map(|i| i.packages().iter().map(|p| p.name().to_owned()).collect())
        .unwrap_or_default()
}

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

fn digest_dir(cache: &Path, digest: &str) -> std::path::PathBuf {
    cache.join("catalogs").join(digest.replace(':', "-"))
}

async fn warning_reasons(h: &Harness, ns: &str, name: &str) -> Vec<(String, String)> {
    let events: Api<Event> = Api::namespaced(h.client.clone(), ns);
    events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
        .collect()
}

async fn catimg_served_in_process_polled_swapped_and_kept_when_broken() {
    let registry = TestRegistry::start(Kind::Plain);
    let files = tempfile::tempdir().unwrap();
    let (conf, _) = registry.write_client_files(files.path());
    let cache = files.path().join("cache");
    let (image, first) = registry
        .push_catalog("catalogs/community", "latest", &fbc(&[ONE]), true)
        .await;
    let h = start(Setup {
        manual_clock: true,
        registries_conf: Some(conf),
        catalog_cache_dir: Some(cache.clone()),
        ..Setup::default()
    })
    .await;
    let clock = h.clock.clone().unwrap();
    create(
        &h,
        &catalog_source(
            "team-a",
            "community",
            serde_json::json!({"sourceType": "grpc", "image": image,
                "updateStrategy": {"registryPoll": {"interval": "10m"}}}),
        ),
    )
    .await;
    let key = CatalogRef::new("team-a", "community");
    let cs = status_where(&h, "team-a", "community", "served in-process", |s| {
        serving(s, &first)
    })
    .await;
    let status = cs.status.unwrap();
    assert_eq!(status.registry_service, None, "no registry Service");
    // Loading the content is not a poll (OLM records only polls).
    assert_eq!(status.latest_image_registry_poll, None);
    assert_eq!(packages(&h, &key), [ONE]);
    assert!(h.ctx.catalogs.get(&key).unwrap().health.healthy);
    assert!(
        digest_dir(&cache, &first)
            .join(ONE)
            .join("catalog.yaml")
            .is_file()
    );
    // No pod, no Service: the controller serves the catalog itself.
    let pods: Api<Pod> = Api::namespaced(h.client.clone(), "team-a");
    assert!(
        pods.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    let services: Api<Service> = Api::namespaced(h.client.clone(), "team-a");
    assert!(
        services
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    let index_before = h.ctx.catalogs.get(&key).unwrap().index.unwrap();

    // Polled before it is due: nothing asked, nothing changes.
    clock.advance(SignedDuration::from_mins(3));
    nudge(&h, "team-a", "community", 1).await;
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let again = get(&h, "team-a", "community").await.status.unwrap();
    assert_eq!(
        again.latest_image_registry_poll,
        status.latest_image_registry_poll
    );

    // A new digest is pushed mid-test: the next poll swaps it in.
    let (_, second) = registry
        .push_catalog("catalogs/community", "latest", &fbc(&[ONE, TWO]), true)
        .await;
    assert_ne!(first, second);
    clock.advance(SignedDuration::from_mins(10));
    nudge(&h, "team-a", "community", 2).await;
    status_where(&h, "team-a", "community", "new digest served", |s| {
        serving(s, &second)
    })
    .await;
    let mut now = packages(&h, &key);
    now.sort();
    assert_eq!(now, [TWO, ONE]);
    assert!(!Arc::ptr_eq(
        &index_before,
        &h.ctx.catalogs.get(&key).unwrap().index.unwrap()
    ));
    // The old digest is served by nobody once its last reader lets go: its content is
    // collected on the next sync.
    drop(index_before);
    nudge(&h, "team-a", "community", 3).await;
    eventually("old digest collected", || async {
        (!digest_dir(&cache, &first).is_dir()).then_some(())
    })
    .await;
    assert!(digest_dir(&cache, &second).is_dir());
    let said = warning_reasons(&h, "team-a", "community").await;
    // (The recorder folds repeats of one reason into one Event series.)
    assert!(
        said.iter().any(|(r, _)| r == "CatalogContentServed"),
        "{said:?}"
    );

    // Invalid content pushed under the tag: reported, the last good content keeps serving.
    let broken = vec![(
        "broken/catalog.json".to_owned(),
        br#"{"schema":"olm.channel","name":"stable","package":"no-such-package","entries":[{"name":"x.v1"}]}"#.to_vec(),
    )];
    let (_, third) = registry
        .push_catalog("catalogs/community", "latest", &broken, true)
        .await;
    clock.advance(SignedDuration::from_mins(11));
    nudge(&h, "team-a", "community", 4).await;
    let cs = status_where(&h, "team-a", "community", "invalid content reported", |s| {
        failed_with(s, "InvalidCatalog")
    })
    .await;
    let status = cs.status.unwrap();
    let (_, _, message) = content(&status).unwrap();
    assert!(
        message.contains(&third) && message.contains(&format!("still serving {image}@{second}")),
        "{message}"
    );
    assert_eq!(state_of(&status).as_deref(), Some("READY"));
    assert!(
        status
            .message
            .unwrap()
            .contains("couldn't serve catalog image")
    );
    let mut now = packages(&h, &key);
    now.sort();
    assert_eq!(now, [TWO, ONE], "last good content still served");
    assert!(
        !digest_dir(&cache, &third).exists(),
        "invalid content never installed"
    );
}

async fn catimg_one_digest_shared_and_failures_stay_local() {
    let registry = TestRegistry::start(Kind::Plain);
    let files = tempfile::tempdir().unwrap();
    let (conf, _) = registry.write_client_files(files.path());
    let (good, digest) = registry
        .push_catalog("catalogs/good", "v1", &fbc(&[ONE]), true)
        .await;
    let (legacy, _) = registry
        .push_catalog("catalogs/legacy", "v1", &fbc(&[ONE]), false)
        .await;
    let missing = format!("{}/catalogs/missing:v1", registry.host());
    let h = start(Setup {
        registries_conf: Some(conf),
        catalog_cache_dir: Some(files.path().join("cache")),
        ..Setup::default()
    })
    .await;
    for (ns, name, image) in [
        ("team-a", "one", &good),
        ("team-b", "two", &good),
        ("team-a", "legacy", &legacy),
        ("team-a", "missing", &missing),
    ] {
        create(
            &h,
            &catalog_source(
                ns,
                name,
                serde_json::json!({"sourceType": "grpc", "image": image}),
            ),
        )
        .await;
    }
    status_where(&h, "team-a", "one", "one served", |s| serving(s, &digest)).await;
    status_where(&h, "team-b", "two", "two served", |s| serving(s, &digest)).await;
    let one = h
        .ctx
        .catalogs
        .get(&CatalogRef::new("team-a", "one"))
        .unwrap();
    let two = h
        .ctx
        .catalogs
        .get(&CatalogRef::new("team-b", "two"))
        .unwrap();
    assert!(
        Arc::ptr_eq(&one.index.unwrap(), &two.index.unwrap()),
        "one digest, one index"
    );

    let cs = status_where(&h, "team-a", "legacy", "no label reported", |s| {
        failed_with(s, "NotACatalog")
    })
    .await;
    let status = cs.status.unwrap();
    let (_, _, message) = content(&status).unwrap();
    assert!(
        message.contains(&legacy)
            && message.contains("operators.operatorframework.io.index.configs.v1"),
        "{message}"
    );
    assert_eq!(state_of(&status).as_deref(), Some("TRANSIENT_FAILURE"));
    let legacy_health = h
        .ctx
        .catalogs
        .get(&CatalogRef::new("team-a", "legacy"))
        .unwrap()
        .health;
    assert!(!legacy_health.healthy);

    let cs = status_where(&h, "team-a", "missing", "unknown image reported", |s| {
        failed_with(s, "NotFound")
    })
    .await;
    let (_, _, message) = content(&cs.status.unwrap()).unwrap();
    assert!(message.contains(&missing), "{message}");
    let said = warning_reasons(&h, "team-a", "missing").await;
    assert!(
        said.iter()
            .any(|(r, note)| r == "RegistryServerError" && note.contains(&missing)),
        "{said:?}"
    );

    // The broken ones block nothing.
    let one = get(&h, "team-a", "one").await.status.unwrap();
    assert!(serving(&one, &digest));
}

async fn catimg_private_repository_needs_its_pull_secret() {
    let registry = TestRegistry::start(Kind::BasicAuth);
    let files = tempfile::tempdir().unwrap();
    let (conf, _) = registry.write_client_files(files.path());
    let (image, digest) = registry
        .push_catalog("private/catalog", "v1", &fbc(&[ONE]), true)
        .await;
    let h = start(Setup {
        registries_conf: Some(conf),
        catalog_cache_dir: Some(files.path().join("cache")),
        ..Setup::default()
    })
    .await;
    create(
        &h,
        &catalog_source(
            "team-a",
            "private",
            serde_json::json!({"sourceType": "grpc", "image": image, "secrets": ["pull"]}),
        ),
    )
    .await;
    // The secret does not exist yet: refused to the controller, the catalog falls back to its
    // registry pod (which the kubelet might pull with the node's credentials), and the status
    // says so, naming the missing secret (docs/catalog-images.md §7).
    let cs = status_where(&h, "team-a", "private", "served by its registry pod", |s| {
        content(s).is_some_and(|(status, reason, _)| status == "True" && reason == "RegistryPod")
    })
    .await;
    let (_, _, message) = content(&cs.status.unwrap()).unwrap();
    assert!(
        message.contains(&image)
            && message.contains("Unauthorized")
            && message.contains("pull secret team-a/pull was not found"),
        "{message}"
    );
    let pods: Api<Pod> = Api::namespaced(h.client.clone(), "team-a");
    let registry_pods: Vec<Pod> = pods
        .list(&ListParams::default().labels("olm.catalogSource=private"))
        .await
        .unwrap()
        .items;
    assert!(
        registry_pods
            .iter()
            .any(|p| p.spec.as_ref().is_some_and(|s| s
                .containers
                .iter()
                .any(|c| c.image.as_deref() == Some(image.as_str())))),
        "no registry pod runs {image}: {registry_pods:?}"
    );

    // The secret appears; the CatalogSource is touched (or retried within a minute): served.
    let auth = base64::engine::general_purpose::STANDARD.encode(format!(
        "{}:{}",
        registry_support::USER,
        registry_support::PASSWORD
    ));
    let config = serde_json::json!({"auths": {registry.host(): {"auth": auth}}});
    let secret: Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "pull", "namespace": "team-a"},
        "type": "kubernetes.io/dockerconfigjson",
        "data": {".dockerconfigjson": base64::engine::general_purpose::STANDARD.encode(config.to_string())},
    }))
    .unwrap();
    let secrets: Api<Secret> = Api::namespaced(h.client.clone(), "team-a");
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    // Touched, the CatalogSource is tried in-process again: served, its registry pod removed.
    nudge(&h, "team-a", "private", 1).await;
    status_where(&h, "team-a", "private", "served with the secret", |s| {
        serving(s, &digest)
    })
    .await;
    assert_eq!(packages(&h, &CatalogRef::new("team-a", "private")), [ONE]);
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let left = pods
            .list(&ListParams::default().labels("olm.catalogSource=private"))
            .await
            .unwrap()
            .items;
        if left.iter().all(|p| p.metadata.deletion_timestamp.is_some()) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the fallback's registry pod stays: {left:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

async fn catimg_content_survives_a_restart_without_the_registry() {
    let mut registry = TestRegistry::start(Kind::Plain);
    let files = tempfile::tempdir().unwrap();
    let (conf, _) = registry.write_client_files(files.path());
    let cache = files.path().join("cache");
    let (_, digest) = registry
        .push_catalog("catalogs/pinned", "v1", &fbc(&[ONE]), true)
        .await;
    let pinned = format!("{}/catalogs/pinned@{digest}", registry.host());
    let spec = serde_json::json!({"sourceType": "grpc", "image": pinned,
        "updateStrategy": {"registryPoll": {"interval": "1m"}}});
    {
        let h = start(Setup {
            registries_conf: Some(conf.clone()),
            catalog_cache_dir: Some(cache.clone()),
            ..Setup::default()
        })
        .await;
        create(&h, &catalog_source("team-a", "pinned", spec.clone())).await;
        let cs = status_where(&h, "team-a", "pinned", "served", |s| serving(s, &digest)).await;
        // A digest reference is never polled.
        assert_eq!(cs.status.unwrap().latest_image_registry_poll, None);
    }
    // The registry goes away; a new controller (and API server) starts on the same cache.
    registry.stop();
    let h = start(Setup {
        registries_conf: Some(conf),
        catalog_cache_dir: Some(cache.clone()),
        ..Setup::default()
    })
    .await;
    create(&h, &catalog_source("team-a", "pinned", spec)).await;
    status_where(&h, "team-a", "pinned", "served from the disk cache", |s| {
        serving(s, &digest)
    })
    .await;
    assert_eq!(packages(&h, &CatalogRef::new("team-a", "pinned")), [ONE]);
}

async fn catimg_pod_mode_by_annotation_and_back_to_in_process() {
    let registry = TestRegistry::start(Kind::Plain);
    let files = tempfile::tempdir().unwrap();
    let (conf, _) = registry.write_client_files(files.path());
    let (image, digest) = registry
        .push_catalog("catalogs/switch", "v1", &fbc(&[ONE]), true)
        .await;
    let h = start(Setup {
        registries_conf: Some(conf),
        catalog_cache_dir: Some(files.path().join("cache")),
        ..Setup::default()
    })
    .await;
    let mut cs = catalog_source(
        "team-a",
        "switch",
        serde_json::json!({"sourceType": "grpc", "image": image}),
    );
    cs.metadata.annotations = Some(
        [(
            olm_rs::catalog_source::serving::SERVING_ANNOTATION.to_owned(),
            "pod".to_owned(),
        )]
        .into(),
    );
    create(&h, &cs).await;
    let pods: Api<Pod> = Api::namespaced(h.client.clone(), "team-a");
    let services: Api<Service> = Api::namespaced(h.client.clone(), "team-a");
    let selector = ListParams::default().labels("olm.catalogSource=switch");
    eventually("a registry pod and its Service", || async {
        let p = pods.list(&selector).await.unwrap().items;
        let s = services.get_opt("switch").await.unwrap();
        (!p.is_empty() && s.is_some()).then_some(())
    })
    .await;

    // The annotation goes: served in-process, the pod mode's objects removed.
    let api: Api<CatalogSource> = Api::namespaced(h.client.clone(), "team-a");
    api.patch(
        "switch",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"metadata": {"annotations": {
            olm_rs::catalog_source::serving::SERVING_ANNOTATION: null}}})),
    )
    .await
    .unwrap();
    let cs = status_where(&h, "team-a", "switch", "served in-process", |s| {
        serving(s, &digest)
    })
    .await;
    assert_eq!(cs.status.unwrap().registry_service, None);
    eventually("pod mode's objects removed", || async {
        let p = pods
            .list(&selector)
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .count();
        let s = services.get_opt("switch").await.unwrap();
        (p == 0 && s.is_none()).then_some(())
    })
    .await;
}

crate::trials! {
    multi catimg_served_in_process_polled_swapped_and_kept_when_broken,
    multi catimg_one_digest_shared_and_failures_stay_local,
    multi catimg_private_repository_needs_its_pull_secret,
    multi catimg_content_survives_a_restart_without_the_registry,
    multi catimg_pod_mode_by_annotation_and_back_to_in_process,
}

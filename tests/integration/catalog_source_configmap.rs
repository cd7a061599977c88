//! `sourceType: configmap` catalogs against the embedded API server: read straight into the
//! cache (no registry pod), reloaded when the ConfigMap changes, bad content and a missing
//! ConfigMap reported on the CatalogSource, and the user's ConfigMap left alone on deletion.

use crate::catalog_source_common;

use catalog_source_common::*;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use olm_rs::api::CatalogRef;
use olm_rs::api::{CatalogSource, CatalogSourceReason};
use olm_rs::catalog_cache::HealthReason;

const CRDS: &str = r#"
- apiVersion: apiextensions.k8s.io/v1
  kind: CustomResourceDefinition
  metadata:
    name: etcdclusters.etcd.database.coreos.com
  spec:
    group: etcd.database.coreos.com
    names: {kind: EtcdCluster, plural: etcdclusters}
    scope: Namespaced
    versions:
    - name: v1beta2
      served: true
      storage: true
"#;

fn csv(version: &str, replaces: Option<&str>) -> String {
    let replaces = replaces
        .map(|r| format!("\n    replaces: {r}"))
        .unwrap_or_default();
    format!(
        r#"
- apiVersion: operators.coreos.com/v1alpha1
  kind: ClusterServiceVersion
  metadata:
    name: etcdoperator.v{version}
  spec:
    version: {version}{replaces}
    displayName: etcd
    customresourcedefinitions:
      owned:
      - name: etcdclusters.etcd.database.coreos.com
        version: v1beta2
        kind: EtcdCluster"#
    )
}

fn packages(current: &str) -> String {
    format!(
        "- packageName: etcd\n  defaultChannel: alpha\n  channels:\n  - name: alpha\n    currentCSV: {current}\n"
    )
}

fn config_map(csvs: &str, packages: &str) -> ConfigMap {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "etcd-catalog", "namespace": "team-a"},
        "data": {
            "customResourceDefinitions": CRDS,
            "clusterServiceVersions": csvs,
            "packages": packages,
        }
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configmap_catalog_is_read_into_the_cache_and_follows_changes() {
    let h = start(Setup::default()).await;
    let cms: Api<ConfigMap> = Api::namespaced(h.client.clone(), "team-a");
    let two = format!(
        "{}{}",
        csv("0.9.0", None),
        csv("0.9.2", Some("etcdoperator.v0.9.0"))
    );
    cms.create(
        &PostParams::default(),
        &config_map(&two, &packages("etcdoperator.v0.9.2")),
    )
    .await
    .unwrap();
    create(
        &h,
        &catalog_source(
            "team-a",
            "legacy",
            serde_json::json!({"sourceType": "configmap", "configMap": "etcd-catalog"}),
        ),
    )
    .await;

    let key = CatalogRef::new("team-a", "legacy");
    let snap = eventually("configmap catalog loaded", || async {
        h.ctx
            .catalogs
            .get(&key)
            .filter(|s| s.health.healthy && s.index.is_some())
    })
    .await;
    let index = snap.index.unwrap();
    let etcd = index.package("etcd").unwrap();
    assert_eq!(
        etcd.channel("alpha")
            .unwrap()
            .graph()
            .channel_head()
            .unwrap()
            .name,
        "etcdoperator.v0.9.2"
    );
    assert_eq!(etcd.bundles().len(), 2);
    let head = etcd.bundle("etcdoperator.v0.9.2").unwrap();
    assert!(head.csv_json().is_some(), "the CSV travels inline");

    let cm = cms.get("etcd-catalog").await.unwrap();
    let status = status_where(&h, "team-a", "legacy", "configMapReference", |s| {
        s.config_map_reference.is_some()
    })
    .await
    .status
    .unwrap();
    let reference = status.config_map_reference.unwrap();
    assert_eq!(reference.name, "etcd-catalog");
    assert_eq!(reference.namespace, "team-a");
    assert_eq!(reference.uid, cm.metadata.uid);
    assert_eq!(reference.resource_version, cm.metadata.resource_version);
    assert!(status.connection_state.is_none() && status.reason.is_none());
    let pods: Api<Pod> = Api::namespaced(h.client.clone(), "team-a");
    assert!(
        pods.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty(),
        "no registry pod"
    );

    // A new version in the ConfigMap shows up.
    let three = format!("{two}{}", csv("0.9.4", Some("etcdoperator.v0.9.2")));
    cms.patch(
        "etcd-catalog",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"data": {"clusterServiceVersions": three, "packages": packages("etcdoperator.v0.9.4")}})),
    )
    .await
    .unwrap();
    eventually("new head loaded", || async {
        let s = h.ctx.catalogs.get(&key)?;
        let head = s
            .index?
            .package("etcd")?
            .channel("alpha")?
            .graph()
            .channel_head()
            .ok()?
            .name
            .clone();
        (head == "etcdoperator.v0.9.4").then_some(())
    })
    .await;

    // Broken content: reported on the CatalogSource, not resolved against.
    cms.patch(
        "etcd-catalog",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"data": {"packages": packages("etcdoperator.v9.9.9")}})),
    )
    .await
    .unwrap();
    let status = status_where(&h, "team-a", "legacy", "ConfigMapError", |s| {
        s.reason.is_some()
    })
    .await
    .status
    .unwrap();
    assert_eq!(status.reason, Some(CatalogSourceReason::ConfigMapError));
    assert!(
        status
            .message
            .as_deref()
            .unwrap()
            .contains("currentCSV \"etcdoperator.v9.9.9\" is not in \"clusterServiceVersions\""),
        "{:?}",
        status.message
    );
    let snap = h.ctx.catalogs.get(&key).unwrap();
    assert_eq!(snap.health.reason, HealthReason::Invalid);
    assert!(snap.index.is_none());

    // Deleting the CatalogSource leaves the user's ConfigMap alone.
    let api: Api<CatalogSource> = Api::namespaced(h.client.clone(), "team-a");
    api.delete("legacy", &DeleteParams::default())
        .await
        .unwrap();
    eventually("forgotten", || async {
        h.ctx.catalogs.get(&key).is_none().then_some(())
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(cms.get_opt("etcd-catalog").await.unwrap().is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_configmap_is_reported() {
    let h = start(Setup::default()).await;
    create(
        &h,
        &catalog_source(
            "team-b",
            "nocm",
            serde_json::json!({"sourceType": "internal", "configMap": "nope"}),
        ),
    )
    .await;
    let status = status_where(&h, "team-b", "nocm", "ConfigMapError", |s| {
        s.reason.is_some()
    })
    .await
    .status
    .unwrap();
    assert_eq!(status.reason, Some(CatalogSourceReason::ConfigMapError));
    assert_eq!(
        status.message.as_deref(),
        Some("failed to get catalog config map nope: configmaps \"nope\" not found")
    );
    assert!(
        !h.ctx
            .catalogs
            .get(&CatalogRef::new("team-b", "nocm"))
            .unwrap()
            .health
            .healthy
    );

    // Creating it later heals the catalog (the ConfigMap watch triggers a sync).
    let cms: Api<ConfigMap> = Api::namespaced(h.client.clone(), "team-b");
    let mut cm = config_map(&csv("0.9.0", None), &packages("etcdoperator.v0.9.0"));
    cm.metadata.name = Some("nope".into());
    cm.metadata.namespace = Some("team-b".into());
    cms.create(&PostParams::default(), &cm).await.unwrap();
    status_where(&h, "team-b", "nocm", "healed", |s| {
        s.reason.is_none() && s.config_map_reference.is_some()
    })
    .await;
}

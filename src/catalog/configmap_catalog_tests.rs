use pretty_assertions::assert_eq;

use super::*;

const CRDS: &str = r#"
- apiVersion: apiextensions.k8s.io/v1beta1
  kind: CustomResourceDefinition
  metadata:
    name: etcdclusters.etcd.database.coreos.com
  spec:
    group: etcd.database.coreos.com
    version: v1beta2
    names:
      kind: EtcdCluster
      plural: etcdclusters
    scope: Namespaced
"#;

const CSVS: &str = r#"
- apiVersion: operators.coreos.com/v1alpha1
  kind: ClusterServiceVersion
  metadata:
    name: etcdoperator.v0.9.2
    annotations:
      olm.skipRange: ">=0.6.0 <0.9.2"
  spec:
    version: 0.9.2
    replaces: etcdoperator.v0.9.0
    skips: [etcdoperator.v0.9.1]
    customresourcedefinitions:
      owned:
      - name: etcdclusters.etcd.database.coreos.com
        version: v1beta2
        kind: EtcdCluster
      required:
      - name: backups.backup.example.com
        version: v1
        kind: Backup
- apiVersion: operators.coreos.com/v1alpha1
  kind: ClusterServiceVersion
  metadata:
    name: etcdoperator.v0.9.0
  spec:
    version: 0.9.0
    replaces: etcdoperator.v0.6.1
    customresourcedefinitions:
      owned:
      - name: etcdclusters.etcd.database.coreos.com
        version: v1beta2
        kind: EtcdCluster
- apiVersion: operators.coreos.com/v1alpha1
  kind: ClusterServiceVersion
  metadata:
    name: unrelated.v1.0.0
  spec:
    version: 1.0.0
"#;

const PACKAGES: &str = r#"
- packageName: etcd
  defaultChannel: alpha
  channels:
  - name: alpha
    currentCSV: etcdoperator.v0.9.2
  - name: old
    currentCSV: etcdoperator.v0.9.0
"#;

fn data(crds: &str, csvs: &str, packages: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (CRDS_KEY.to_owned(), crds.to_owned()),
        (CSVS_KEY.to_owned(), csvs.to_owned()),
        (PACKAGES_KEY.to_owned(), packages.to_owned()),
    ])
}

fn prop_values(b: &Bundle, type_: &str) -> Vec<serde_json::Value> {
    b.properties
        .iter()
        .filter(|p| p.type_ == type_)
        .map(|p| serde_json::from_str(p.json().get()).unwrap())
        .collect()
}

#[test]
fn builds_packages_channels_and_bundles_from_the_three_keys() {
    let config = declarative_config(&data(CRDS, CSVS, PACKAGES)).unwrap();
    assert_eq!(config.packages.len(), 1);
    assert_eq!(config.packages[0].name, "etcd");
    assert_eq!(config.packages[0].default_channel.as_deref(), Some("alpha"));

    let alpha = &config.channels[0];
    assert_eq!(alpha.name, "alpha");
    assert_eq!(
        alpha.entries,
        vec![
            ChannelEntry {
                name: "etcdoperator.v0.9.2".into(),
                replaces: Some("etcdoperator.v0.9.0".into()),
                skips: vec!["etcdoperator.v0.9.1".into()],
                skip_range: Some(">=0.6.0 <0.9.2".into()),
            },
            // The chain stops at v0.6.1, which the ConfigMap does not hold.
            ChannelEntry {
                name: "etcdoperator.v0.9.0".into(),
                replaces: Some("etcdoperator.v0.6.1".into()),
                skips: vec![],
                skip_range: None,
            },
        ]
    );
    assert_eq!(config.channels[1].entries.len(), 1);

    let names: Vec<&str> = config.bundles.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(
        names,
        ["etcdoperator.v0.9.2", "etcdoperator.v0.9.0"],
        "unreached CSVs left out"
    );
    let head = &config.bundles[0];
    assert_eq!(head.image, "");
    assert_eq!(
        prop_values(head, properties::PACKAGE),
        [serde_json::json!({"packageName": "etcd", "version": "0.9.2"})]
    );
    assert_eq!(
        prop_values(head, properties::GVK),
        [
            serde_json::json!({"group": "etcd.database.coreos.com", "kind": "EtcdCluster", "version": "v1beta2"})
        ]
    );
    assert_eq!(
        prop_values(head, properties::GVK_REQUIRED),
        [serde_json::json!({"group": "backup.example.com", "kind": "Backup", "version": "v1"})]
    );
    let kinds: Vec<String> = head
        .objects
        .iter()
        .map(|o| {
            serde_json::from_str::<serde_json::Value>(o.get()).unwrap()["kind"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(kinds, ["CustomResourceDefinition", "ClusterServiceVersion"]);
}

#[test]
fn every_key_is_mandatory() {
    for key in [CRDS_KEY, CSVS_KEY, PACKAGES_KEY] {
        let mut d = data(CRDS, CSVS, PACKAGES);
        d.remove(key);
        let err = declarative_config(&d).unwrap_err();
        assert_eq!(err, ConfigMapCatalogError::MissingKey { key });
        assert!(err.to_string().contains(key));
    }
}

#[test]
fn bad_content_is_reported_with_the_key_and_object() {
    let err = declarative_config(&data("{a: b}", CSVS, PACKAGES)).unwrap_err();
    assert!(
        err.to_string().contains("customResourceDefinitions")
            && err.to_string().contains("mapping"),
        "{err}"
    );

    let err = declarative_config(&data("- [", CSVS, PACKAGES)).unwrap_err();
    assert!(
        matches!(err, ConfigMapCatalogError::NotAList { key: CRDS_KEY, .. }),
        "{err}"
    );

    let err = declarative_config(&data("[]", CSVS, PACKAGES)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "CSV \"etcdoperator.v0.9.2\" owns CRD etcdclusters.etcd.database.coreos.com version v1beta2 kind EtcdCluster, which is not in \"customResourceDefinitions\""
    );

    let twice = format!("{CRDS}{}", CRDS.trim_start_matches('\n'));
    let err = declarative_config(&data(&twice, CSVS, PACKAGES)).unwrap_err();
    assert!(
        matches!(err, ConfigMapCatalogError::DuplicateCrd { .. }),
        "{err}"
    );

    let packages = "- packageName: etcd\n  channels:\n  - name: alpha\n    currentCSV: nope.v1\n";
    let err = declarative_config(&data(CRDS, CSVS, packages)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "package \"etcd\", channel \"alpha\": currentCSV \"nope.v1\" is not in \"clusterServiceVersions\""
    );
}

//! Copied CSVs against the embedded API server (docs/operator-groups.md §10): created in every target namespace
//! with reason `Copied`, kept in sync with the original, repaired when edited or deleted by hand,
//! removed with the original or when a namespace leaves the targets; copied RBAC for explicit
//! targets (docs/operator-groups.md §9.2); the OLMConfig switch.

use crate::og_support;

use std::collections::BTreeMap;

use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use og_support::{Cluster, csv, eventually, spec_targets, status};
use olm_rs::api::{OlmConfig, OlmConfigSpec, OperatorGroupSpec};

/// An all-namespaces operator in `operators`, Succeeded, with `extra` other namespaces.
async fn global_operator(cluster: &Cluster, extra: &[&str]) {
    cluster.create_namespace("operators", &[]).await;
    for ns in extra {
        cluster.create_namespace(ns, &[]).await;
    }
    cluster
        .create_group(
            "operators",
            "global-operators",
            OperatorGroupSpec::default(),
        )
        .await;
    cluster
        .create_csv(&csv("operators", "demo.v1", &["AllNamespaces"]))
        .await;
    cluster
        .set_csv_status(
            "operators",
            "demo.v1",
            status("Succeeded", "InstallSucceeded"),
        )
        .await;
}

/// Every namespace but the operator's (the embedded server also has `default`, `kube-system`,
/// ...): where an all-namespaces operator is copied.
async fn everywhere_else(cluster: &Cluster) -> Vec<String> {
    let list = cluster
        .namespaces()
        .list(&Default::default())
        .await
        .unwrap();
    let mut names: Vec<String> = list
        .items
        .iter()
        .map(|ns| ns.name_any())
        .filter(|n| n != "operators")
        .collect();
    names.sort();
    names
}

async fn wait_all_copies(
    cluster: &Cluster,
) -> BTreeMap<String, olm_rs::api::ClusterServiceVersion> {
    let want = everywhere_else(cluster).await;
    let want: Vec<&str> = want.iter().map(String::as_str).collect();
    wait_copies(cluster, &want).await
}

async fn wait_copies(
    cluster: &Cluster,
    want: &[&str],
) -> BTreeMap<String, olm_rs::api::ClusterServiceVersion> {
    let want: Vec<String> = want.iter().map(|s| s.to_string()).collect();
    eventually(&format!("copies exactly in {want:?}"), || async {
        let copies = cluster.copies_of("operators", "demo.v1").await;
        let complete = copies.values().all(|c| {
            c.status
                .as_ref()
                .and_then(|s| s.reason.as_ref())
                .map(|r| r.as_str())
                == Some("Copied")
        });
        (copies.keys().cloned().collect::<Vec<_>>() == want && complete).then_some(copies)
    })
    .await
}

#[tokio::test]
async fn all_namespaces_operator_is_copied_everywhere_else_as_a_projection() {
    let cluster = Cluster::start().await;
    global_operator(&cluster, &["team-a", "team-b"]).await;
    let copies = wait_all_copies(&cluster).await;
    assert!(copies.contains_key("team-a") && copies.contains_key("team-b"));
    assert!(!copies.contains_key("operators"));
    let original = cluster.csvs("operators").get("demo.v1").await.unwrap();
    let copy = &copies["team-a"];

    assert_eq!(copy.spec, original.spec);
    let labels = copy.labels();
    assert_eq!(labels["olm.copiedFrom"], "operators");
    assert_eq!(labels["olm.managed"], "true");
    assert!(
        !labels
            .keys()
            .any(|k| k.starts_with("operators.coreos.com/"))
    );
    let annotations = copy.annotations();
    assert!(!annotations.contains_key("olm.targetNamespaces"));
    assert_eq!(annotations["olm.operatorNamespace"], "operators");
    assert_eq!(annotations["olm.operatorGroup"], "global-operators");
    assert_eq!(annotations["alm-examples"], "[]");
    assert!(copy.metadata.owner_references.is_none());
    let status = copy.status.as_ref().unwrap();
    assert_eq!(status.phase.as_ref().unwrap().as_str(), "Succeeded");
    assert_eq!(
        status.message.as_deref(),
        Some("The operator is running in operators but is managing this namespace")
    );
}

#[tokio::test]
async fn a_new_namespace_gets_its_copy_by_watch() {
    let cluster = Cluster::start().await;
    global_operator(&cluster, &["team-a"]).await;
    wait_all_copies(&cluster).await;
    let started = std::time::Instant::now();
    cluster.create_namespace("late", &[]).await;
    let copies = wait_all_copies(&cluster).await;
    assert!(copies.contains_key("late"));
    // No resync runs in tests (1 h); the namespace watch did it, and quickly.
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn copies_follow_the_original_and_are_repaired() {
    let cluster = Cluster::start().await;
    global_operator(&cluster, &["team-a", "team-b"]).await;
    let expected = wait_all_copies(&cluster).await.len();

    // A status change of the original reaches every copy.
    cluster
        .set_csv_status(
            "operators",
            "demo.v1",
            status("Failed", "ComponentUnhealthy"),
        )
        .await;
    eventually("copies Failed", || async {
        let copies = cluster.copies_of("operators", "demo.v1").await;
        (copies.len() == expected
            && copies.values().all(|c| {
                let s = c.status.as_ref().unwrap();
                s.phase.as_ref().map(|p| p.as_str()) == Some("Failed")
                    && s.reason.as_ref().map(|r| r.as_str()) == Some("Copied")
            }))
        .then_some(())
    })
    .await;

    // A spec change too.
    let patch = serde_json::json!({"spec": {"displayName": "Demo, renamed"}});
    cluster
        .csvs("operators")
        .patch("demo.v1", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    eventually("copies renamed", || async {
        let copies = cluster.copies_of("operators", "demo.v1").await;
        copies
            .values()
            .all(|c| c.spec.display_name == "Demo, renamed")
            .then_some(())
    })
    .await;

    // A hand edit is reverted; a hand deletion is undone.
    let edit = serde_json::json!({"metadata": {"labels": {"sneaky": "yes"}}, "spec": {"displayName": "edited"}});
    cluster
        .csvs("team-a")
        .patch("demo.v1", &PatchParams::default(), &Patch::Merge(&edit))
        .await
        .unwrap();
    cluster
        .csvs("team-b")
        .delete("demo.v1", &DeleteParams::default())
        .await
        .unwrap();
    eventually("copies repaired", || async {
        let copies = cluster.copies_of("operators", "demo.v1").await;
        let a = copies.get("team-a")?;
        copies.get("team-b")?;
        (a.spec.display_name == "Demo, renamed" && !a.labels().contains_key("sneaky")).then_some(())
    })
    .await;
}

#[tokio::test]
async fn copies_go_with_the_original() {
    let cluster = Cluster::start().await;
    global_operator(&cluster, &["team-a", "team-b"]).await;
    wait_all_copies(&cluster).await;
    cluster
        .csvs("operators")
        .delete("demo.v1", &DeleteParams::default())
        .await
        .unwrap();
    wait_copies(&cluster, &[]).await;
}

#[tokio::test]
async fn own_namespace_groups_copy_nothing_and_uncopiable_csvs_are_not_copied() {
    let cluster = Cluster::start().await;
    cluster.create_namespace("ops", &[]).await;
    cluster.create_namespace("other", &[]).await;
    cluster
        .create_group("ops", "og", spec_targets(&["ops"]))
        .await;
    cluster
        .create_csv(&csv("ops", "own.v1", &["OwnNamespace"]))
        .await;
    cluster
        .set_csv_status("ops", "own.v1", status("Succeeded", "InstallSucceeded"))
        .await;
    // A second operator in an all-namespaces group that failed for a group reason.
    cluster.create_namespace("operators", &[]).await;
    cluster
        .create_group(
            "operators",
            "global-operators",
            OperatorGroupSpec::default(),
        )
        .await;
    cluster
        .create_csv(&csv("operators", "demo.v1", &["OwnNamespace"]))
        .await;
    cluster
        .set_csv_status(
            "operators",
            "demo.v1",
            status("Failed", "UnsupportedOperatorGroup"),
        )
        .await;
    eventually("member annotations", || async {
        let own = cluster.csvs("ops").get("own.v1").await.ok()?;
        let demo = cluster.csvs("operators").get("demo.v1").await.ok()?;
        (own.annotations().contains_key("olm.targetNamespaces")
            && demo.annotations().contains_key("olm.targetNamespaces"))
        .then_some(())
    })
    .await;
    // Give the copy loop time to act if it (wrongly) would.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert!(cluster.copies_of("ops", "own.v1").await.is_empty());
    assert!(cluster.copies_of("operators", "demo.v1").await.is_empty());
}

fn owned_rbac(original_uid: &str) -> (Role, RoleBinding) {
    let labels = BTreeMap::from([
        ("olm.owner".to_string(), "demo.v1".to_string()),
        ("olm.owner.namespace".to_string(), "ops".to_string()),
        (
            "olm.owner.kind".to_string(),
            "ClusterServiceVersion".to_string(),
        ),
        ("olm.managed".to_string(), "true".to_string()),
    ]);
    let owner = k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
        api_version: "operators.coreos.com/v1alpha1".into(),
        kind: "ClusterServiceVersion".into(),
        name: "demo.v1".into(),
        uid: original_uid.into(),
        ..Default::default()
    };
    let meta = ObjectMeta {
        name: Some("demo.v1-demo-sa-x1".into()),
        namespace: Some("ops".into()),
        labels: Some(labels),
        owner_references: Some(vec![owner]),
        ..Default::default()
    };
    let role = Role {
        metadata: meta.clone(),
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec!["".into()]),
            resources: Some(vec!["configmaps".into()]),
            verbs: vec!["get".into(), "list".into()],
            ..Default::default()
        }]),
    };
    let binding = RoleBinding {
        metadata: meta,
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "Role".into(),
            name: "demo.v1-demo-sa-x1".into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: "demo-sa".into(),
            namespace: Some("ops".into()),
            ..Default::default()
        }]),
    };
    (role, binding)
}

#[tokio::test]
async fn explicit_targets_get_copies_and_rbac_and_lose_them_when_dropped() {
    let cluster = Cluster::start().await;
    for ns in ["ops", "a", "b", "bystander"] {
        cluster.create_namespace(ns, &[]).await;
    }
    cluster
        .create_group("ops", "og", spec_targets(&["ops", "a", "b"]))
        .await;
    let original = cluster
        .create_csv(&csv("ops", "demo.v1", &["OwnNamespace", "MultiNamespace"]))
        .await;
    let (role, binding) = owned_rbac(&original.uid().unwrap());
    Api::<Role>::namespaced(cluster.client.clone(), "ops")
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    Api::<RoleBinding>::namespaced(cluster.client.clone(), "ops")
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    cluster
        .set_csv_status("ops", "demo.v1", status("Succeeded", "InstallSucceeded"))
        .await;

    let copies = eventually("copies in a and b", || async {
        let copies = cluster.copies_of("ops", "demo.v1").await;
        (copies.keys().map(String::as_str).collect::<Vec<_>>() == ["a", "b"]).then_some(copies)
    })
    .await;
    let copy_uid = copies["a"].uid().unwrap();
    let copied_role = eventually("Role copied into a", || async {
        Api::<Role>::namespaced(cluster.client.clone(), "a")
            .get("demo.v1-demo-sa-x1")
            .await
            .ok()
    })
    .await;
    assert_eq!(copied_role.rules, role.rules);
    assert_eq!(copied_role.labels()["olm.copiedFrom"], "ops");
    assert_eq!(copied_role.labels()["olm.owner.namespace"], "a");
    assert_eq!(
        copied_role.metadata.owner_references.as_ref().unwrap()[0].uid,
        copy_uid
    );
    let copied_binding = eventually("RoleBinding copied into b", || async {
        Api::<RoleBinding>::namespaced(cluster.client.clone(), "b")
            .get("demo.v1-demo-sa-x1")
            .await
            .ok()
    })
    .await;
    assert_eq!(copied_binding.subjects, binding.subjects);
    assert!(
        Api::<Role>::namespaced(cluster.client.clone(), "bystander")
            .get_opt("demo.v1-demo-sa-x1")
            .await
            .unwrap()
            .is_none()
    );

    // b leaves the group: its copy goes (and the copied RBAC with it, by owner reference).
    let patch = serde_json::json!({"spec": {"targetNamespaces": ["ops", "a"]}});
    cluster
        .groups("ops")
        .patch("og", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    eventually("copy in b removed", || async {
        let copies = cluster.copies_of("ops", "demo.v1").await;
        (copies.keys().map(String::as_str).collect::<Vec<_>>() == ["a"]).then_some(())
    })
    .await;
}

#[tokio::test]
async fn olm_config_switches_copies_off_and_on() {
    let mut options = og_support::test_options();
    options.protected_copied_csv_namespaces = ["keep".to_string()].into();
    let cluster = Cluster::start_with(options).await;
    global_operator(&cluster, &["team-a", "keep"]).await;
    wait_all_copies(&cluster).await;
    let configs: Api<OlmConfig> = Api::all(cluster.client.clone());
    configs
        .create(
            &PostParams::default(),
            &OlmConfig::new("cluster", OlmConfigSpec::default()),
        )
        .await
        .unwrap();
    let condition = |status: &'static str, reason: &'static str| {
        let configs = configs.clone();
        async move {
            let config = configs.get("cluster").await.ok()?;
            let c = config
                .status?
                .conditions?
                .into_iter()
                .find(|c| c.type_ == "DisabledCopiedCSVs")?;
            (c.status == status && c.reason == reason).then_some(c.message)
        }
    };
    let message = eventually("enabled condition", || {
        condition("False", "CopiedCSVsEnabled")
    })
    .await;
    assert_eq!(
        message,
        "Copied CSVs are enabled and present across the cluster"
    );

    let disable = serde_json::json!({"spec": {"features": {"disableCopiedCSVs": true}}});
    configs
        .patch("cluster", &PatchParams::default(), &Patch::Merge(&disable))
        .await
        .unwrap();
    wait_copies(&cluster, &["keep"]).await;
    let message = eventually("disabled condition", || {
        condition("True", "CopiedCSVsDisabled")
    })
    .await;
    assert_eq!(
        message,
        "Copied CSVs are disabled and no unexpected copied CSVs were found for operators installed in AllNamespace mode"
    );
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(cluster.client.clone(), "operators");
    let warnings = || async {
        events.list(&Default::default()).await.ok().map(|l| {
            l.items
                .into_iter()
                .filter(|e| e.reason.as_deref() == Some("DisabledCopiedCSVs"))
                .collect::<Vec<_>>()
        })
    };
    let found = eventually("DisabledCopiedCSVs event", || async {
        warnings().await.filter(|w| !w.is_empty())
    })
    .await;
    assert_eq!(found.len(), 1);
    assert_eq!(
        found[0].note.as_deref(),
        Some("CSV copying disabled for operators/demo.v1")
    );
    assert_eq!(found[0].type_.as_deref(), Some("Warning"));

    let enable = serde_json::json!({"spec": {"features": {"disableCopiedCSVs": false}}});
    configs
        .patch("cluster", &PatchParams::default(), &Patch::Merge(&enable))
        .await
        .unwrap();
    wait_all_copies(&cluster).await;
    eventually("enabled again", || condition("False", "CopiedCSVsEnabled")).await;
    eventually("event removed", || async {
        warnings().await.filter(|w| w.is_empty())
    })
    .await;
}

//! The OperatorGroup controller against the embedded API server: target namespaces, member
//! annotations, namespace labels, the multiple-groups condition, the service account, group
//! ClusterRoles and provided-API pruning (docs/operator-groups.md §1–§4, §6.3, §8, §9.1).

use crate::og_support;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use og_support::{Cluster, csv, eventually, spec_targets};
use olm_rs::api::{OperatorGroup, OperatorGroupSpec};

fn namespaces_of(og: &OperatorGroup) -> Option<Vec<String>> {
    let mut list = og.status.as_ref()?.namespaces.clone().unwrap_or_default();
    list.sort();
    Some(list)
}

async fn wait_targets(cluster: &Cluster, ns: &str, name: &str, want: &[&str]) -> OperatorGroup {
    let want: Vec<String> = want.iter().map(|s| s.to_string()).collect();
    eventually(&format!("{ns}/{name} targets {want:?}"), || async {
        let og = cluster.groups(ns).get(name).await.ok()?;
        (namespaces_of(&og)? == want).then_some(og)
    })
    .await
}

async fn annotation(cluster: &Cluster, ns: &str, name: &str, key: &str) -> Option<String> {
    let csv = cluster.csvs(ns).get(name).await.ok()?;
    csv.annotations().get(key).cloned()
}

#[tokio::test]
async fn all_namespaces_group_gets_empty_string_target_and_annotates_its_csvs() {
    let cluster = Cluster::start().await;
    cluster.create_namespace("operators", &[]).await;
    cluster.create_namespace("team-a", &[]).await;
    cluster
        .create_group(
            "operators",
            "global-operators",
            OperatorGroupSpec::default(),
        )
        .await;
    cluster
        .create_csv(&csv("operators", "demo.v0.3.0", &["AllNamespaces"]))
        .await;

    let og = wait_targets(&cluster, "operators", "global-operators", &[""]).await;
    assert!(og.status.unwrap().conditions.is_none());
    let annotations = eventually("member annotations", || async {
        let csv = cluster.csvs("operators").get("demo.v0.3.0").await.ok()?;
        let a = csv.annotations().clone();
        a.contains_key("olm.targetNamespaces").then_some(a)
    })
    .await;
    assert_eq!(annotations["olm.targetNamespaces"], "");
    assert_eq!(annotations["olm.operatorGroup"], "global-operators");
    assert_eq!(annotations["olm.operatorNamespace"], "operators");
    // Annotations the author set are untouched.
    assert_eq!(annotations["capabilities"], "Basic Install");

    // All-namespace groups label no namespace.
    let ns = cluster.namespaces().get("team-a").await.unwrap();
    assert!(
        !ns.labels()
            .keys()
            .any(|k| k.starts_with("olm.operatorgroup.uid/"))
    );
}

#[tokio::test]
async fn explicit_targets_label_namespaces_and_follow_changes() {
    let cluster = Cluster::start().await;
    for ns in ["ops", "a", "b", "c"] {
        cluster.create_namespace(ns, &[]).await;
    }
    let og = cluster
        .create_group("ops", "og", spec_targets(&["b", "a"]))
        .await;
    let label = format!("olm.operatorgroup.uid/{}", og.uid().unwrap());
    cluster
        .create_csv(&csv("ops", "demo.v1", &["MultiNamespace"]))
        .await;

    wait_targets(&cluster, "ops", "og", &["a", "b"]).await;
    eventually("targets annotation a,b", || async {
        (annotation(&cluster, "ops", "demo.v1", "olm.targetNamespaces").await? == "a,b")
            .then_some(())
    })
    .await;
    let labelled = |ns: &'static str| {
        let cluster = &cluster;
        let label = label.clone();
        async move {
            let ns = cluster.namespaces().get(ns).await.ok()?;
            Some(ns.labels().get(&label) == Some(&String::new()))
        }
    };
    eventually("a and b labelled", || async {
        (labelled("a").await? && labelled("b").await? && !labelled("c").await?).then_some(())
    })
    .await;

    // Retarget to c: a and b lose the label, c gains it; the CSV follows.
    let patch = serde_json::json!({"spec": {"targetNamespaces": ["c"]}});
    cluster
        .groups("ops")
        .patch("og", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    wait_targets(&cluster, "ops", "og", &["c"]).await;
    eventually("labels moved to c", || async {
        (!labelled("a").await? && !labelled("b").await? && labelled("c").await?).then_some(())
    })
    .await;
    eventually("targets annotation c", || async {
        (annotation(&cluster, "ops", "demo.v1", "olm.targetNamespaces").await? == "c").then_some(())
    })
    .await;

    // Deleting the group removes its labels.
    cluster
        .groups("ops")
        .delete("og", &DeleteParams::default())
        .await
        .unwrap();
    eventually("label removed after deletion", || async {
        (!labelled("c").await?).then_some(())
    })
    .await;
}

#[tokio::test]
async fn selector_groups_pick_up_namespaces_by_watch() {
    let cluster = Cluster::start().await;
    cluster.create_namespace("ops", &[]).await;
    cluster.create_namespace("dev-1", &[("env", "dev")]).await;
    cluster.create_namespace("prod-1", &[("env", "prod")]).await;
    let spec = OperatorGroupSpec {
        selector: Some(LabelSelector {
            match_labels: Some(BTreeMap::from([("env".to_string(), "dev".to_string())])),
            ..Default::default()
        }),
        ..Default::default()
    };
    cluster.create_group("ops", "og", spec).await;
    wait_targets(&cluster, "ops", "og", &["dev-1"]).await;

    // A new matching namespace joins without waiting for a resync (tests run with none).
    cluster.create_namespace("dev-2", &[("env", "dev")]).await;
    wait_targets(&cluster, "ops", "og", &["dev-1", "dev-2"]).await;

    // Relabelling leaves the selection.
    let patch = serde_json::json!({"metadata": {"labels": {"env": "prod"}}});
    cluster
        .namespaces()
        .patch("dev-1", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    wait_targets(&cluster, "ops", "og", &["dev-2"]).await;
}

#[tokio::test]
async fn namespace_all_in_targets_is_refused_and_status_untouched() {
    let cluster = Cluster::start().await;
    cluster.create_namespace("ops", &[]).await;
    cluster
        .create_group("ops", "og", spec_targets(&["ops"]))
        .await;
    let before = wait_targets(&cluster, "ops", "og", &["ops"]).await;
    let patch = serde_json::json!({"spec": {"targetNamespaces": ["ops", ""]}});
    cluster
        .groups("ops")
        .patch("og", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    // The warning event explains why; the old targets stay.
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(cluster.client.clone(), "ops");
    let note = eventually("InvalidTargetNamespaces event", || async {
        let list = events.list(&Default::default()).await.ok()?;
        list.items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("InvalidTargetNamespaces"))
            .and_then(|e| e.note)
    })
    .await;
    assert_eq!(note, "TargetNamespaces cannot contain NamespaceAll: [ops ]");
    let after = cluster.groups("ops").get("og").await.unwrap();
    assert_eq!(namespaces_of(&after), namespaces_of(&before));
}

#[tokio::test]
async fn two_groups_in_one_namespace_both_get_the_condition_until_one_goes() {
    let cluster = Cluster::start().await;
    cluster.create_namespace("ops", &[]).await;
    cluster
        .create_group("ops", "first", spec_targets(&["ops"]))
        .await;
    cluster
        .create_group("ops", "second", OperatorGroupSpec::default())
        .await;
    for name in ["first", "second"] {
        let cond = eventually(&format!("condition on {name}"), || async {
            let og = cluster.groups("ops").get(name).await.ok()?;
            og.status?
                .conditions?
                .into_iter()
                .find(|c| c.type_ == "MultipleOperatorGroup")
        })
        .await;
        assert_eq!(cond.status, "True");
        assert_eq!(cond.reason, "MultipleOperatorGroupsFound");
        assert_eq!(
            cond.message,
            "Multiple OperatorGroup found in the same namespace: first, second"
        );
    }
    cluster
        .groups("ops")
        .delete("second", &DeleteParams::default())
        .await
        .unwrap();
    eventually("condition cleared", || async {
        let og = cluster.groups("ops").get("first").await.ok()?;
        og.status?.conditions.is_none().then_some(())
    })
    .await;
}

#[tokio::test]
async fn service_account_is_reported_missing_then_referenced_and_labelled() {
    let cluster = Cluster::start().await;
    cluster.create_namespace("ops", &[]).await;
    let spec = OperatorGroupSpec {
        service_account_name: Some("scoped".into()),
        ..spec_targets(&["ops"])
    };
    cluster.create_group("ops", "og", spec).await;
    let cond = eventually("ServiceAccountNotFound", || async {
        let og = cluster.groups("ops").get("og").await.ok()?;
        og.status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "OperatorGroupServiceAccount")
    })
    .await;
    assert_eq!(cond.reason, "ServiceAccountNotFound");
    assert_eq!(cond.message, "ServiceAccount scoped not found");
    // Targets are computed even while the account is missing.
    wait_targets(&cluster, "ops", "og", &["ops"]).await;

    let sa = ServiceAccount {
        metadata: ObjectMeta {
            name: Some("scoped".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    let sas: Api<ServiceAccount> = Api::namespaced(cluster.client.clone(), "ops");
    let created = sas.create(&PostParams::default(), &sa).await.unwrap();
    let reference = eventually("serviceAccountRef", || async {
        let og = cluster.groups("ops").get("og").await.ok()?;
        let status = og.status?;
        status.conditions.is_none().then_some(())?;
        status.service_account_ref
    })
    .await;
    assert_eq!(reference.kind.as_deref(), Some("ServiceAccount"));
    assert_eq!(reference.api_version.as_deref(), Some("v1"));
    assert_eq!(reference.name.as_deref(), Some("scoped"));
    assert_eq!(reference.namespace.as_deref(), Some("ops"));
    assert_eq!(reference.uid, created.metadata.uid);
    let sa = sas.get("scoped").await.unwrap();
    assert_eq!(
        sa.labels().get("olm.managed").map(String::as_str),
        Some("true")
    );
}

#[tokio::test]
async fn group_cluster_roles_aggregate_member_apis_and_go_with_the_group() {
    let cluster = Cluster::start().await;
    cluster.create_namespace("demo", &[]).await;
    cluster
        .create_group("demo", "demo-og", spec_targets(&["demo"]))
        .await;
    let roles: Api<ClusterRole> = Api::all(cluster.client.clone());
    let names = [
        "olm.og.demo-og.admin-86yceVG1OUIPZEmmehd1WTzivsPEB9JIfZpQA8",
        "olm.og.demo-og.edit-iX86eZdG8qXQYdgBi3na9RrzZm37VFBCTOw5O",
        "olm.og.demo-og.view-3wJrIlYFBawzBy3isgQNbb5ExNdP1h7ZcoWrnk",
    ];
    // Roles exist even without members, with no aggregation rule.
    for name in names {
        let role = eventually(name, || async { roles.get(name).await.ok() }).await;
        assert_eq!(role.labels()["olm.owner"], "demo-og");
        assert_eq!(role.labels()["olm.owner.namespace"], "demo");
        assert_eq!(role.labels()["olm.owner.kind"], "OperatorGroup");
        assert!(role.aggregation_rule.is_none());
    }
    cluster
        .create_csv(&csv("demo", "demo-operator.v0.3.0", &["OwnNamespace"]))
        .await;
    let edit = eventually("edit role aggregates Demo", || async {
        let role = roles.get(names[1]).await.ok()?;
        role.aggregation_rule.is_some().then_some(role)
    })
    .await;
    let selectors = edit
        .aggregation_rule
        .unwrap()
        .cluster_role_selectors
        .unwrap();
    assert_eq!(
        selectors[0].match_labels.as_ref().unwrap(),
        &BTreeMap::from([(
            "olm.opgroup.permissions/aggregate-to-7f1c1bed79b097e1-edit".to_string(),
            "true".to_string()
        )])
    );

    cluster
        .groups("demo")
        .delete("demo-og", &DeleteParams::default())
        .await
        .unwrap();
    for name in names {
        eventually(&format!("{name} deleted"), || async {
            matches!(roles.get(name).await, Err(kube::Error::Api(s)) if s.code == 404).then_some(())
        })
        .await;
    }
}

#[tokio::test]
async fn provided_apis_nobody_provides_are_pruned_but_static_groups_are_left_alone() {
    let cluster = Cluster::start().await;
    cluster.create_namespace("ops", &[]).await;
    cluster.create_namespace("reserved", &[]).await;
    let with_apis = |ns: &str, name: &str, spec: OperatorGroupSpec, apis: &str| {
        let mut og = OperatorGroup::new(name, spec);
        og.metadata.namespace = Some(ns.into());
        og.metadata.annotations = Some(BTreeMap::from([(
            "olm.providedAPIs".to_string(),
            apis.to_string(),
        )]));
        og
    };
    // A static group reserving an API nobody provides (created first, so its sync has long
    // finished when the other group's pruning is seen).
    let fixed = with_apis(
        "reserved",
        "static",
        OperatorGroupSpec {
            static_provided_apis: Some(true),
            ..spec_targets(&["reserved"])
        },
        "Gone.v1.example.com",
    );
    cluster
        .groups("reserved")
        .create(&PostParams::default(), &fixed)
        .await
        .unwrap();
    wait_targets(&cluster, "reserved", "static", &["reserved"]).await;

    // The member is known to the group (it got the group's annotations) before the group
    // claims an extra API.
    cluster
        .create_group("ops", "og", spec_targets(&["ops"]))
        .await;
    cluster
        .create_csv(&csv("ops", "demo.v1", &["OwnNamespace"]))
        .await;
    cluster
        .set_csv_status(
            "ops",
            "demo.v1",
            og_support::status("Succeeded", "InstallSucceeded"),
        )
        .await;
    eventually("member annotated", || async {
        annotation(&cluster, "ops", "demo.v1", "olm.targetNamespaces").await
    })
    .await;
    let patch = serde_json::json!({"metadata": {"annotations": {
        "olm.providedAPIs": "Demo.v1alpha1.example.com,Gone.v1.example.com"
    }}});
    cluster
        .groups("ops")
        .patch("og", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    eventually("Gone pruned", || async {
        let og = cluster.groups("ops").get("og").await.ok()?;
        (og.annotations().get("olm.providedAPIs")? == "Demo.v1alpha1.example.com").then_some(())
    })
    .await;

    let og = cluster.groups("reserved").get("static").await.unwrap();
    assert_eq!(og.annotations()["olm.providedAPIs"], "Gone.v1.example.com");
}

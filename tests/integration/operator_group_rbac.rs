//! Intersecting groups and member RBAC against the embedded API server: the provided-API
//! decision on groups as the controller leaves them (docs/operator-groups.md §6.2), RBAC lifted for
//! all-namespace groups (docs/operator-groups.md §9.3) and per-API ClusterRoles of a Succeeded member (docs/operator-groups.md §9.1).

use crate::og_support;

use std::collections::BTreeMap;

use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::ResourceExt;
use kube::api::{Api, ObjectMeta, PostParams};
use og_support::{Cluster, csv, eventually, spec_targets, status};
use olm_rs::api::{OperatorGroup, OperatorGroupSpec};
use olm_rs::operator_group::provided_apis::parse_provided_apis;
use olm_rs::operator_group::{ApiReconciliation, GroupApis, reconcile_provided_apis};

async fn synced_group(cluster: &Cluster, ns: &str, name: &str) -> OperatorGroup {
    eventually(&format!("{ns}/{name} synced"), || async {
        let og = cluster.groups(ns).get(name).await.ok()?;
        og.status.as_ref()?.namespaces.as_ref()?;
        Some(og)
    })
    .await
}

#[tokio::test]
async fn intersecting_groups_are_told_apart_from_disjoint_ones() {
    let cluster = Cluster::start().await;
    for ns in ["operators", "team-a", "team-b"] {
        cluster.create_namespace(ns, &[]).await;
    }
    // A global group already provides the Demo API. It is static, so the controller keeps the
    // annotation although no member CSV exists (a dynamic group would prune it, docs/operator-groups.md §6.1).
    let mut global = OperatorGroup::new(
        "global-operators",
        OperatorGroupSpec {
            static_provided_apis: Some(true),
            ..OperatorGroupSpec::default()
        },
    );
    global.metadata.namespace = Some("operators".into());
    global.metadata.annotations = Some(BTreeMap::from([(
        "olm.providedAPIs".to_string(),
        "Demo.v1alpha1.example.com".to_string(),
    )]));
    cluster
        .groups("operators")
        .create(&PostParams::default(), &global)
        .await
        .unwrap();
    cluster
        .create_group("team-a", "a", spec_targets(&["team-a"]))
        .await;
    cluster
        .create_group("team-b", "b", spec_targets(&["team-b"]))
        .await;

    let groups: Vec<GroupApis> = [
        synced_group(&cluster, "operators", "global-operators").await,
        synced_group(&cluster, "team-a", "a").await,
        synced_group(&cluster, "team-b", "b").await,
    ]
    .iter()
    .map(GroupApis::from_group)
    .collect();
    let demo = parse_provided_apis("Demo.v1alpha1.example.com");
    let other = parse_provided_apis("Other.v1.example.com");

    // A second Demo operator in team-a collides with the global group.
    let decision = reconcile_provided_apis(&demo, &groups[1], &groups);
    assert!(
        matches!(decision, ApiReconciliation::Conflict { .. }),
        "{decision:?}"
    );
    assert_eq!(
        decision.message().unwrap(),
        "intersecting operatorgroups provide the same apis: Demo.v1alpha1.example.com also provided by operatorgroup(s) operators/global-operators"
    );
    // Another API is free to take; team-b does not see team-a's choice.
    assert_eq!(
        reconcile_provided_apis(&other, &groups[1], &groups),
        ApiReconciliation::AddApis("Other.v1.example.com".into())
    );
    // The global group's own provider continues.
    assert_eq!(
        reconcile_provided_apis(&demo, &groups[0], &groups),
        ApiReconciliation::Continue
    );
}

#[tokio::test]
async fn all_namespace_members_get_lifted_rbac_and_per_api_roles() {
    let cluster = Cluster::start().await;
    cluster.create_namespace("operators", &[]).await;
    cluster
        .create_group(
            "operators",
            "global-operators",
            OperatorGroupSpec::default(),
        )
        .await;
    // The CRD the operator owns (per-API roles are owned by it).
    let crd: CustomResourceDefinition = serde_json::from_value(serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "demos.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "demos", "singular": "demo", "kind": "Demo", "listKind": "DemoList"},
            "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .unwrap();
    let crd = Api::<CustomResourceDefinition>::all(cluster.client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .unwrap();
    let original = cluster
        .create_csv(&csv("operators", "demo.v1", &["AllNamespaces"]))
        .await;

    // The install plan's Role and RoleBinding for the operator's ServiceAccount.
    let meta = ObjectMeta {
        name: Some("demo.v1-demo-sa-x1".into()),
        namespace: Some("operators".into()),
        labels: Some(BTreeMap::from([
            ("olm.owner".to_string(), "demo.v1".to_string()),
            ("olm.owner.namespace".to_string(), "operators".to_string()),
            (
                "olm.owner.kind".to_string(),
                "ClusterServiceVersion".to_string(),
            ),
        ])),
        owner_references: Some(vec![OwnerReference {
            api_version: "operators.coreos.com/v1alpha1".into(),
            kind: "ClusterServiceVersion".into(),
            name: "demo.v1".into(),
            uid: original.uid().unwrap(),
            ..Default::default()
        }]),
        ..Default::default()
    };
    let rules = vec![PolicyRule {
        api_groups: Some(vec!["example.com".into()]),
        resources: Some(vec!["demos".into()]),
        verbs: vec!["*".into()],
        ..Default::default()
    }];
    Api::<Role>::namespaced(cluster.client.clone(), "operators")
        .create(
            &PostParams::default(),
            &Role {
                metadata: meta.clone(),
                rules: Some(rules.clone()),
            },
        )
        .await
        .unwrap();
    let subjects = vec![Subject {
        kind: "ServiceAccount".into(),
        name: "demo-sa".into(),
        namespace: Some("operators".into()),
        ..Default::default()
    }];
    let binding = RoleBinding {
        metadata: meta,
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "Role".into(),
            name: "demo.v1-demo-sa-x1".into(),
        },
        subjects: Some(subjects.clone()),
    };
    Api::<RoleBinding>::namespaced(cluster.client.clone(), "operators")
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    cluster
        .set_csv_status(
            "operators",
            "demo.v1",
            status("Succeeded", "InstallSucceeded"),
        )
        .await;

    let cluster_roles: Api<ClusterRole> = Api::all(cluster.client.clone());
    let lifted = eventually("lifted ClusterRole", || async {
        cluster_roles.get("demo.v1-demo-sa-x1").await.ok()
    })
    .await;
    let lifted_rules = lifted.rules.clone().unwrap();
    assert_eq!(lifted_rules[0], rules[0]);
    assert_eq!(
        lifted_rules[1].resources.as_deref(),
        Some(&["namespaces".to_string()][..])
    );
    assert_eq!(lifted.labels()["olm.owner"], "demo.v1");
    let lifted_binding = eventually("lifted ClusterRoleBinding", || async {
        Api::<ClusterRoleBinding>::all(cluster.client.clone())
            .get("demo.v1-demo-sa-x1")
            .await
            .ok()
    })
    .await;
    assert_eq!(lifted_binding.role_ref.kind, "ClusterRole");
    assert_eq!(lifted_binding.subjects, Some(subjects));

    let view = eventually("per-API view role", || async {
        cluster_roles
            .get("demos.example.com-v1alpha1-view")
            .await
            .ok()
    })
    .await;
    assert_eq!(
        view.labels()["rbac.authorization.k8s.io/aggregate-to-view"],
        "true"
    );
    assert_eq!(
        view.labels()["olm.opgroup.permissions/aggregate-to-7f1c1bed79b097e1-view"],
        "true"
    );
    let owner = &view.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(owner.kind, "CustomResourceDefinition");
    assert_eq!(Some(owner.uid.clone()), crd.uid());
    for suffix in ["admin", "edit", "crdview"] {
        cluster_roles
            .get(&format!("demos.example.com-v1alpha1-{suffix}"))
            .await
            .unwrap_or_else(|e| panic!("{suffix} role: {e}"));
    }
}

#[tokio::test]
async fn lifted_rbac_removed_by_hand_is_put_back_at_the_next_resync() {
    // Nothing watches lifted ClusterRoles; the resync is what repairs them, so it must not
    // trust its memory of what it wrote.
    let cluster = Cluster::start_with(olm_rs::reconcile::operator_group::OperatorGroupOptions {
        resync: std::time::Duration::from_secs(1),
        ..og_support::test_options()
    })
    .await;
    cluster.create_namespace("operators", &[]).await;
    cluster
        .create_group(
            "operators",
            "global-operators",
            OperatorGroupSpec::default(),
        )
        .await;
    let original = cluster
        .create_csv(&csv("operators", "demo.v1", &["AllNamespaces"]))
        .await;
    let role = Role {
        metadata: ObjectMeta {
            name: Some("demo.v1-demo-sa-x1".into()),
            namespace: Some("operators".into()),
            labels: Some(BTreeMap::from([
                ("olm.owner".to_string(), "demo.v1".to_string()),
                ("olm.owner.namespace".to_string(), "operators".to_string()),
                (
                    "olm.owner.kind".to_string(),
                    "ClusterServiceVersion".to_string(),
                ),
            ])),
            owner_references: Some(vec![OwnerReference {
                api_version: "operators.coreos.com/v1alpha1".into(),
                kind: "ClusterServiceVersion".into(),
                name: "demo.v1".into(),
                uid: original.uid().unwrap(),
                ..Default::default()
            }]),
            ..Default::default()
        },
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec!["example.com".into()]),
            resources: Some(vec!["demos".into()]),
            verbs: vec!["get".into()],
            ..Default::default()
        }]),
    };
    Api::<Role>::namespaced(cluster.client.clone(), "operators")
        .create(&PostParams::default(), &role)
        .await
        .unwrap();

    let cluster_roles: Api<ClusterRole> = Api::all(cluster.client.clone());
    let first = eventually("lifted ClusterRole", || async {
        cluster_roles.get("demo.v1-demo-sa-x1").await.ok()
    })
    .await;
    cluster_roles
        .delete("demo.v1-demo-sa-x1", &Default::default())
        .await
        .unwrap();
    let again = eventually("lifted ClusterRole put back", || async {
        let role = cluster_roles.get("demo.v1-demo-sa-x1").await.ok()?;
        (role.uid() != first.uid()).then_some(role)
    })
    .await;
    assert_eq!(again.rules, first.rules);
}

use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::api::StrategyDeploymentPermissions;
use crate::csv::fixtures::*;

fn condition(value: serde_json::Value) -> OperatorCondition {
    serde_json::from_value(value).expect("valid OperatorCondition")
}

/// `oc` as the API server returns it after creation.
fn created(mut oc: OperatorCondition, generation: i64) -> OperatorCondition {
    oc.metadata.uid = Some(format!("uid-oc-{}", oc.metadata.name.clone().unwrap()));
    oc.metadata.generation = Some(generation);
    oc
}

#[test]
fn the_condition_lists_the_strategys_accounts_and_deployments_and_is_owned_by_the_csv() {
    let mut c = csv("a.v1");
    let strategy = c.spec.install.spec.as_mut().unwrap();
    strategy.cluster_permissions = Some(vec![StrategyDeploymentPermissions {
        service_account_name: "cluster-sa".into(),
        rules: vec![rule()],
    }]);
    strategy
        .permissions
        .as_mut()
        .unwrap()
        .push(StrategyDeploymentPermissions {
            service_account_name: "cluster-sa".into(),
            rules: vec![rule()],
        });
    let oc = desired_condition(&c);
    let wire = serde_json::to_value(&oc).unwrap();
    assert_eq!(
        wire,
        json!({
            "apiVersion": "operators.coreos.com/v2", "kind": "OperatorCondition",
            "metadata": {"name": "a.v1", "namespace": NS, "ownerReferences": [{
                "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
                "name": "a.v1", "uid": "uid-a.v1", "controller": true, "blockOwnerDeletion": false
            }]},
            "spec": {"serviceAccounts": ["cluster-sa", "op-sa", "cluster-sa"], "deployments": ["op"]}
        })
    );

    // No account named: the pods run as `default`.
    let mut bare = csv("b.v1");
    bare.spec.install.spec.as_mut().unwrap().permissions = None;
    assert_eq!(
        desired_condition(&bare).spec.service_accounts,
        Some(vec!["default".to_owned()])
    );
}

#[test]
fn the_plan_creates_the_condition_then_its_rbac_then_nothing() {
    let c = csv("a.v1");
    let mut seen = observed(&[&c]);
    let first = plan(&c, &seen, t(0));
    assert_eq!(first.condition, Some(desired_condition(&c)));
    assert_eq!(
        (first.role.as_ref(), first.role_binding.as_ref()),
        (None, None)
    );

    // Observed (with a uid): the Role and RoleBinding named after the CSV, owned by it.
    let live = created(desired_condition(&c), 1);
    seen.operator_conditions = vec![Arc::new(live.clone())];
    let second = plan(&c, &seen, t(0));
    assert_eq!(second.condition, None);
    assert_eq!(second.status, None);
    let role = second.role.clone().expect("Role");
    assert_eq!(role.metadata.name.as_deref(), Some("a.v1"));
    let owner = &role.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
        ("OperatorCondition", "uid-oc-a.v1", Some(true))
    );
    assert_eq!(
        serde_json::to_value(role.rules.as_ref().unwrap()).unwrap(),
        json!([{"apiGroups": ["operators.coreos.com"], "resources": ["operatorconditions"],
                "resourceNames": ["a.v1"], "verbs": ["get", "update", "patch"]}])
    );
    let binding = second.role_binding.clone().expect("RoleBinding");
    assert_eq!(binding.metadata.name.as_deref(), Some("a.v1"));
    assert_eq!(binding.role_ref.name, "a.v1");
    assert_eq!(
        serde_json::to_value(binding.subjects.as_ref().unwrap()).unwrap(),
        json!([{"kind": "ServiceAccount", "name": "op-sa"}]),
        "subjects without a namespace, as OLM writes them"
    );

    seen.roles = vec![Arc::new(role)];
    seen.role_bindings = vec![Arc::new(binding)];
    assert!(plan(&c, &seen, t(0)).is_empty());

    // The strategy changes its account: the condition and the binding follow.
    let mut changed = c.clone();
    changed
        .spec
        .install
        .spec
        .as_mut()
        .unwrap()
        .permissions
        .as_mut()
        .unwrap()[0]
        .service_account_name = "new-sa".into();
    let third = plan(&changed, &seen, t(0));
    assert_eq!(
        third.condition.unwrap().spec.service_accounts,
        Some(vec!["new-sa".to_owned()])
    );
    assert_eq!(third.role, None);
    assert_eq!(
        third.role_binding.unwrap().subjects.unwrap()[0].name,
        "new-sa"
    );
}

#[test]
fn the_operators_conditions_are_copied_to_status_at_the_observed_generation() {
    let reported = |status: &str, message: &str| {
        json!({"type": "Upgradeable", "status": status, "reason": "Migration",
               "message": message, "lastTransitionTime": "2026-01-01T00:00:00Z"})
    };
    let mut oc = condition(json!({
        "apiVersion": "operators.coreos.com/v2", "kind": "OperatorCondition",
        "metadata": {"name": "a.v1", "generation": 2},
        "spec": {"conditions": [reported("False", "migrating")]}
    }));
    let status = observed_status(&oc, t(100)).expect("copied");
    let copied = &status.conditions.as_ref().unwrap()[0];
    assert_eq!(
        (
            copied.status.as_str(),
            copied.message.as_str(),
            copied.observed_generation
        ),
        ("False", "migrating", Some(2))
    );
    assert_eq!(copied.last_transition_time, Time(t(100)));

    oc.status = Some(status.clone());
    assert_eq!(observed_status(&oc, t(200)), None, "already observed");

    // The operator edits its message (a new generation): re-stamped, transition time kept.
    oc.spec.conditions = Some(vec![
        serde_json::from_value(reported("False", "almost")).unwrap(),
    ]);
    oc.metadata.generation = Some(3);
    let again = observed_status(&oc, t(300)).expect("re-stamped");
    let copied = &again.conditions.as_ref().unwrap()[0];
    assert_eq!(
        (copied.message.as_str(), copied.observed_generation),
        ("almost", Some(3))
    );
    assert_eq!(copied.last_transition_time, Time(t(100)));

    // Conditions the operator wrote straight into status (v1) are left alone.
    let v1_style = condition(json!({
        "apiVersion": "operators.coreos.com/v2", "kind": "OperatorCondition",
        "metadata": {"name": "a.v1", "generation": 1},
        "status": {"conditions": [{"type": "Upgradeable", "status": "False", "reason": "R",
            "message": "m", "observedGeneration": 1, "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    }));
    assert_eq!(observed_status(&v1_style, t(0)), None);
}

#[test]
fn upgradeability_follows_overrides_then_the_observed_condition() {
    assert_eq!(upgradeable(None), Ok(()));
    let mut oc = condition(json!({
        "apiVersion": "operators.coreos.com/v2", "kind": "OperatorCondition",
        "metadata": {"name": "a.v1", "generation": 2},
        "status": {"conditions": [{"type": "Upgradeable", "status": "False", "reason": "R",
            "message": "migrating", "observedGeneration": 2, "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    }));
    let err = upgradeable(Some(&oc)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "The operator is not upgradeable: migrating"
    );
    assert!(matches!(err, NotUpgradeable::Reported { .. }));
    let status = oc.status.as_mut().unwrap().conditions.as_mut().unwrap();
    status[0].status = "True".into();
    status[0].observed_generation = Some(1);
    assert_eq!(
        upgradeable(Some(&oc)).unwrap_err().to_string(),
        "The operatorcondition status \"Upgradeable\"=\"True\" is outdated"
    );
    oc.spec.overrides = Some(vec![
        serde_json::from_value(
            json!({"type": "Upgradeable", "status": "True", "reason": "Admin",
            "message": "go", "lastTransitionTime": "2026-01-01T00:00:00Z"}),
        )
        .unwrap(),
    ]);
    assert_eq!(upgradeable(Some(&oc)), Ok(()));
    oc.spec.overrides.as_mut().unwrap()[0].status = "False".into();
    oc.spec.overrides.as_mut().unwrap()[0].message = "wait for the backup".into();
    let err = upgradeable(Some(&oc)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "The operator is not upgradeable: wait for the backup"
    );
    assert!(matches!(err, NotUpgradeable::Overridden { .. }));
}

/// A move from OLM: the OperatorCondition, Role and RoleBinding as OLM v0.31 wrote them for a
/// CSV whose ServiceAccount has cluster and namespaced permissions (listed twice, bound twice,
/// the subjects naming no namespace — as tests/e2e_takeover saw them) are taken as they are:
/// nothing to write. So is a binding an earlier olm-rs wrote with the namespace spelled out.
#[test]
fn what_olm_wrote_for_an_account_with_both_permission_kinds_is_left_alone() {
    let mut c = csv("a.v1");
    c.spec.install.spec.as_mut().unwrap().cluster_permissions =
        Some(vec![StrategyDeploymentPermissions {
            service_account_name: "op-sa".into(),
            rules: vec![rule()],
        }]);
    let mut seen = observed(&[&c]);
    let owner = json!([{"apiVersion": "operators.coreos.com/v2", "kind": "OperatorCondition",
                        "name": "a.v1", "uid": "uid-oc", "controller": true,
                        "blockOwnerDeletion": false}]);
    seen.operator_conditions = vec![Arc::new(condition(json!({
        "apiVersion": "operators.coreos.com/v2", "kind": "OperatorCondition",
        "metadata": {"name": "a.v1", "namespace": NS, "uid": "uid-oc", "generation": 1,
                     "ownerReferences": [{"apiVersion": "operators.coreos.com/v1alpha1",
                        "kind": "ClusterServiceVersion", "name": "a.v1", "uid": "uid-a.v1",
                        "controller": true, "blockOwnerDeletion": false}]},
        "spec": {"serviceAccounts": ["op-sa", "op-sa"], "deployments": ["op"]}
    })))];
    seen.roles = vec![Arc::new(
        serde_json::from_value(json!({
            "metadata": {"name": "a.v1", "namespace": NS, "ownerReferences": owner,
                         "labels": {"olm.managed": "true"}},
            "rules": [{"verbs": ["get", "update", "patch"], "apiGroups": ["operators.coreos.com"],
                       "resources": ["operatorconditions"], "resourceNames": ["a.v1"]}]
        }))
        .unwrap(),
    )];
    seen.role_bindings = vec![Arc::new(
        serde_json::from_value(json!({
            "metadata": {"name": "a.v1", "namespace": NS, "ownerReferences": owner,
                         "labels": {"olm.managed": "true"}},
            "subjects": [{"kind": "ServiceAccount", "name": "op-sa"},
                         {"kind": "ServiceAccount", "name": "op-sa"}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "a.v1"}
        }))
        .unwrap(),
    )];
    let writes = plan(&c, &seen, t(0));
    assert_eq!(writes.condition, None);
    assert_eq!(writes.role, None);
    assert_eq!(writes.role_binding, None);

    let mut spelled_out: RoleBinding = (*seen.role_bindings[0]).clone();
    for subject in spelled_out.subjects.iter_mut().flatten() {
        subject.namespace = Some(NS.to_owned());
    }
    seen.role_bindings = vec![Arc::new(spelled_out.clone())];
    assert_eq!(plan(&c, &seen, t(0)).role_binding, None);

    // Without `olm.managed` (as an earlier olm-rs made them), OLM would not see them: labelled.
    let mut unlabelled: RoleBinding = spelled_out.clone();
    unlabelled.metadata.labels = None;
    seen.role_bindings = vec![Arc::new(unlabelled)];
    let relabelled = plan(&c, &seen, t(0))
        .role_binding
        .expect("a RoleBinding to label");
    assert_eq!(
        relabelled
            .metadata
            .labels
            .unwrap()
            .get("olm.managed")
            .map(String::as_str),
        Some("true")
    );

    // Another namespace is another account: rebound.
    for subject in spelled_out.subjects.iter_mut().flatten() {
        subject.namespace = Some("elsewhere".to_owned());
    }
    seen.role_bindings = vec![Arc::new(spelled_out)];
    assert!(plan(&c, &seen, t(0)).role_binding.is_some());
}

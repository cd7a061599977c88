use std::sync::Arc;

use super::*;
use crate::csv::fixtures::*;

#[test]
fn names_and_hashes_follow_the_install_plan() {
    let c = csv("demo-operator.v0.3.0");
    let mut c = c;
    // The worked example of docs/install-plans.md §8.
    let perm: crate::api::StrategyDeploymentPermissions = serde_json::from_value(serde_json::json!({
        "serviceAccountName": "demo-operator-controller-manager",
        "rules": [
            {"verbs": ["create","delete","get","list","patch","update","watch"], "apiGroups": ["example.com"], "resources": ["demos","demos/status","demos/finalizers"]},
            {"verbs": ["create","delete","get","list","patch","update","watch"], "apiGroups": [""], "resources": ["configmaps","pods","events"]},
            {"verbs": ["get","list","watch","create","update","patch","delete"], "apiGroups": ["coordination.k8s.io"], "resources": ["leases"]}
        ]
    })).unwrap();
    let cluster: crate::api::StrategyDeploymentPermissions = serde_json::from_value(serde_json::json!({
        "serviceAccountName": "demo-operator-controller-manager",
        "rules": [
            {"verbs": ["get","list","watch"], "apiGroups": [""], "resources": ["namespaces"]},
            {"verbs": ["create"], "apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"]}
        ]
    })).unwrap();
    let strategy = c.spec.install.spec.as_mut().unwrap();
    strategy.permissions = Some(vec![perm]);
    strategy.cluster_permissions = Some(vec![cluster]);
    let objects = install_plan_permissions(&c).unwrap();
    let role = &objects.roles[0];
    assert_eq!(
        role.metadata.name.as_deref(),
        Some("demo-operator.v0.3.0-dem-a57MOF8EYhXjYsEdrdahVK46X73ULrLOfrvWBQ")
    );
    assert_eq!(
        role.metadata.labels.as_ref().unwrap()[PERMISSIONS_HASH_LABEL],
        "4r8LBfXv6O4zkBdVXyvrnBSVmdXe3WaNbamfTJ"
    );
    assert_eq!(
        objects.role_bindings[0].metadata.labels.as_ref().unwrap()[PERMISSIONS_HASH_LABEL],
        "7XlCdfYiGHCxNL8gmazO5s0ymFow0yzL6ZYDGf"
    );
    assert_eq!(
        objects.cluster_roles[0].metadata.name.as_deref(),
        Some("demo-operator.v0.3.0-3z8UHO67B5CUqJSOeNoiQwBWEOUhSOEsRCrA1W")
    );
    assert_eq!(
        objects.cluster_role_bindings[0]
            .metadata
            .labels
            .as_ref()
            .unwrap()[PERMISSIONS_HASH_LABEL],
        "5zdDqX5E7RPjONGUImyZyszePnsx4P8ghwkgQr"
    );
    assert_eq!(
        objects.service_accounts.len(),
        1,
        "one account for both entries"
    );
}

#[test]
fn only_missing_or_changed_objects_are_repaired() {
    let c = csv("a.v1");
    let all = install_plan_permissions(&c).unwrap();
    let mut seen = observed(&[&c]);
    seen.roles = all.roles.iter().cloned().map(Arc::new).collect();
    seen.role_bindings = all.role_bindings.iter().cloned().map(Arc::new).collect();
    assert!(permissions_to_repair(&c, &seen).unwrap().is_empty());

    let mut edited = all.roles[0].clone();
    edited.rules = Some(vec![]);
    seen.roles = vec![Arc::new(edited)];
    seen.role_bindings.clear();
    seen.service_accounts.clear();
    let repair = permissions_to_repair(&c, &seen).unwrap();
    assert_eq!(
        (
            repair.service_accounts.len(),
            repair.roles.len(),
            repair.role_bindings.len()
        ),
        (1, 1, 1)
    );
    assert!(
        repair
            .describe()
            .starts_with("ServiceAccount op-sa, Role a.v1-op-sa-")
    );
}

#[test]
fn only_install_plan_csvs_in_unscoped_groups_are_repaired() {
    let c = csv("a.v1");
    let mut seen = observed(&[&c]);
    assert!(
        may_repair_permissions(&c, None, &seen).is_err(),
        "no Subscription installed it"
    );
    seen.subscriptions = vec![Arc::new(subscription_for("a.v1"))];
    assert_eq!(may_repair_permissions(&c, None, &seen), Ok(()));
    let mut scoped = og("og", NS, &[NS]);
    scoped.spec.service_account_name = Some("limited".into());
    assert!(may_repair_permissions(&c, Some(&scoped), &seen).is_err());
    let mut hand_made = c.clone();
    hand_made.metadata.labels = None;
    assert!(may_repair_permissions(&hand_made, None, &seen).is_err());
}

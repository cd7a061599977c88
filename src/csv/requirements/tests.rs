use std::sync::Arc;

use super::*;
use crate::api::keys::INSTALLED_ALONGSIDE_ANNOTATION_PREFIX;
use crate::csv::fixtures::*;
use crate::csv::observed::{Discovery, DiscoveryFailed};

fn statuses(check: &RequirementCheck) -> Vec<(String, String, String)> {
    check
        .statuses
        .iter()
        .map(|s| (s.kind.clone(), s.name.clone(), s.status.to_string()))
        .collect()
}

#[test]
fn a_complete_cluster_meets_every_requirement_in_olms_order() {
    let mut c = csv("a.v1");
    let crds = c.spec.custom_resource_definitions.as_mut().unwrap();
    crds.required = Some(vec![
        serde_json::from_value(serde_json::json!(
            {"name": "alphas.example.com", "version": "v1", "kind": "Alpha"}
        ))
        .unwrap(),
    ]);
    let mut seen = observed(&[&c]);
    seen.crds.push(Arc::new(crd("alphas.example.com", "v1")));
    let check = check_requirements(&c, &seen).unwrap();
    assert!(check.met, "{:?}", check.unmet);
    assert_eq!(
        statuses(&check),
        vec![
            (
                "CustomResourceDefinition".into(),
                "alphas.example.com".into(),
                "Present".into()
            ),
            (
                "CustomResourceDefinition".into(),
                "demos.example.com".into(),
                "Present".into()
            ),
            ("ServiceAccount".into(), "op-sa".into(), "Present".into()),
        ]
    );
    let crd_entry = &check.statuses[1];
    assert_eq!(
        crd_entry.message,
        "CRD is present and Established condition is true"
    );
    assert_eq!(crd_entry.uuid.as_deref(), Some("uid-demos.example.com"));
    let sa = &check.statuses[2];
    let dep = &sa.dependents.as_ref().unwrap()[0];
    assert_eq!(dep.status.to_string(), "Satisfied");
    assert_eq!(
        dep.message.as_deref(),
        Some(
            r#"namespaced rule:{"verbs":["get","list"],"apiGroups":[""],"resources":["configmaps"]}"#
        )
    );
}

#[test]
fn crd_problems_have_distinct_statuses() {
    let c = csv("a.v1");
    let mut seen = observed(&[&c]);
    let mut unestablished = crd("demos.example.com", "v1");
    unestablished.status = None;
    seen.crds = vec![Arc::new(unestablished)];
    let check = check_requirements(&c, &seen).unwrap();
    assert!(!check.met);
    assert_eq!(check.statuses[0].status.to_string(), "PresentNotAvailable");
    assert_eq!(
        check.statuses[0].message,
        "CRD is present but the Established condition is False (not available)"
    );

    let mut unserved = crd("demos.example.com", "v1");
    unserved.spec.versions[0].served = false;
    seen.crds = vec![Arc::new(unserved)];
    let check = check_requirements(&c, &seen).unwrap();
    assert_eq!(check.statuses[0].status.to_string(), "NotPresent");
    assert_eq!(check.statuses[0].message, "CRD version not served");
}

#[test]
fn a_crd_last_applied_for_an_ancestor_blocks_the_new_csv() {
    let old = csv("a.v1");
    let new = replacing(csv("a.v2"), "a.v1");
    let mut seen = observed(&[&old, &new]);
    let mut applied = crd("demos.example.com", "v1");
    applied.metadata.annotations = Some(labels(&[(
        &format!("{INSTALLED_ALONGSIDE_ANNOTATION_PREFIX}abc"),
        "demo/a.v1",
    )]));
    seen.crds = vec![Arc::new(applied.clone())];
    let check = check_requirements(&new, &seen).unwrap();
    assert_eq!(check.statuses[0].status.to_string(), "PresentNotSatisfied");
    assert_eq!(
        check.statuses[0].message,
        "CRD installed alongside other CSV(s): a.v1"
    );

    // Once the new CSV's install plan applied it, the CRD is fine; unrelated CSVs never block.
    applied.metadata.annotations.as_mut().unwrap().insert(
        format!("{INSTALLED_ALONGSIDE_ANNOTATION_PREFIX}def"),
        "demo/a.v2".into(),
    );
    seen.crds = vec![Arc::new(applied)];
    assert!(check_requirements(&new, &seen).unwrap().met);
    let mut other = crd("demos.example.com", "v1");
    other.metadata.annotations = Some(labels(&[(
        &format!("{INSTALLED_ALONGSIDE_ANNOTATION_PREFIX}x"),
        "elsewhere/b.v1",
    )]));
    seen.crds = vec![Arc::new(other)];
    assert!(check_requirements(&new, &seen).unwrap().met);
}

#[test]
fn required_apiservices_need_discovery_and_availability() {
    let mut c = csv("a.v1");
    c.spec.api_service_definitions = Some(serde_json::from_value(serde_json::json!({
        "required": [{"name": "metrics", "group": "metrics.k8s.io", "version": "v1beta1", "kind": "PodMetrics"}]
    })).unwrap());
    let mut seen = observed(&[&c]);
    let check = check_requirements(&c, &seen).unwrap();
    assert_eq!(check.statuses[1].name, "v1beta1.metrics.k8s.io");
    assert_eq!(check.statuses[1].status.to_string(), "NotPresent");
    assert!(check.unknown.is_empty());

    seen.discovery = Discovery {
        group_versions: [(
            "metrics.k8s.io/v1beta1".to_string(),
            Err(DiscoveryFailed::new("timeout")),
        )]
        .into(),
    };
    let check = check_requirements(&c, &seen).unwrap();
    assert!(
        check.only_unknown(),
        "a failed lookup is unknown, not absent"
    );
}

#[test]
fn service_account_owned_by_another_csv_is_not_satisfied() {
    let c = csv("a.v1");
    let mut seen = observed(&[&c]);
    let mut sa = service_account("op-sa");
    sa.metadata.owner_references = Some(vec![crate::csv::identity::owner_reference(&csv(
        "other.v1",
    ))]);
    seen.service_accounts = vec![Arc::new(sa.clone())];
    let check = check_requirements(&c, &seen).unwrap();
    assert_eq!(check.statuses[1].status.to_string(), "PresentNotSatisfied");
    assert_eq!(
        check.statuses[1].message,
        "Service account is owned by another ClusterServiceVersion"
    );
    assert!(check.service_account_gaps.is_empty(), "not ours to repair");

    // Owned by this CSV as well: fine (an upgrade adds the new owner).
    sa.metadata
        .owner_references
        .as_mut()
        .unwrap()
        .push(crate::csv::identity::owner_reference(&c));
    seen.service_accounts = vec![Arc::new(sa)];
    assert!(check_requirements(&c, &seen).unwrap().met);
}

#[test]
fn invalid_rules_are_an_invalid_strategy() {
    let mut c = csv("a.v1");
    let perms = c
        .spec
        .install
        .spec
        .as_mut()
        .unwrap()
        .permissions
        .as_mut()
        .unwrap();
    perms[0].rules[0].verbs.clear();
    let err = check_requirements(&c, &observed(&[])).unwrap_err();
    assert_eq!(
        err.to_string(),
        "rule invalid: policy rule must have at least one verb"
    );
    let perms = c
        .spec
        .install
        .spec
        .as_mut()
        .unwrap()
        .permissions
        .as_mut()
        .unwrap();
    perms[0].rules[0].verbs = vec!["get".into()];
    perms[0].rules[0].non_resource_urls = Some(vec!["/metrics".into()]);
    let err = check_requirements(&c, &observed(&[])).unwrap_err();
    assert_eq!(
        err.to_string(),
        "rule invalid: rule cannot apply to both regular resources and non-resource URLs"
    );
}

#[test]
fn cluster_permissions_are_checked_cluster_wide() {
    let mut c = csv("a.v1");
    let strategy = c.spec.install.spec.as_mut().unwrap();
    strategy.cluster_permissions = Some(vec![crate::api::StrategyDeploymentPermissions {
        service_account_name: "op-sa".into(),
        rules: vec![rule()],
    }]);
    // The namespaced Role grants the rule in `demo`, which does not count cluster-wide.
    let check = check_requirements(&c, &observed(&[&c])).unwrap();
    assert!(!check.met);
    let deps = check.statuses[1].dependents.as_ref().unwrap();
    assert_eq!(deps.len(), 2);
    assert!(
        deps[1]
            .message
            .as_deref()
            .unwrap()
            .starts_with("cluster rule:")
    );
    assert_eq!(deps[1].status.to_string(), "NotSatisfied");
    assert!(
        check.unmet[0].ends_with("cluster-wide"),
        "{:?}",
        check.unmet
    );
}

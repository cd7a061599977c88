use std::sync::Arc;

use super::*;
use crate::api::keys::{OWNER_LABEL, TARGET_NAMESPACES_ANNOTATION};
use crate::csv::fixtures::*;

#[test]
fn the_desired_deployment_carries_olms_labels_annotations_and_env() {
    let c = csv("a.v1");
    let desired = desired_deployments(&c, None).unwrap();
    let d = &desired[0];
    let labels = d.deployment.metadata.labels.as_ref().unwrap();
    assert_eq!(labels["app"], "op");
    assert_eq!(labels["olm.managed"], "true");
    assert_eq!(labels[OWNER_LABEL], "a.v1");
    assert_eq!(labels["olm.owner.kind"], "ClusterServiceVersion");
    assert_eq!(labels[DEPLOYMENT_SPEC_HASH_LABEL], d.spec_hash);
    let owner = &d.deployment.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.controller, owner.block_owner_deletion),
        (Some(false), Some(false))
    );
    let spec = d.deployment.spec.as_ref().unwrap();
    assert_eq!(spec.revision_history_limit, Some(1));
    let template = spec
        .template
        .metadata
        .as_ref()
        .unwrap()
        .annotations
        .as_ref()
        .unwrap();
    assert_eq!(template[TARGET_NAMESPACES_ANNOTATION], "demo");
    let env = spec.template.spec.as_ref().unwrap().containers[0]
        .env
        .as_ref()
        .unwrap();
    assert_eq!(env.last().unwrap().name, "OPERATOR_CONDITION_NAME");
    assert_eq!(env.last().unwrap().value.as_deref(), Some("a.v1"));
    assert!(!d.serves_certificates);
}

#[test]
fn the_hash_changes_with_targets_and_config_but_not_with_labels() {
    let c = csv("a.v1");
    let base = desired_deployments(&c, None).unwrap()[0].spec_hash.clone();

    let mut retargeted = c.clone();
    retargeted
        .metadata
        .annotations
        .as_mut()
        .unwrap()
        .insert(TARGET_NAMESPACES_ANNOTATION.into(), "".into());
    assert_ne!(
        desired_deployments(&retargeted, None).unwrap()[0].spec_hash,
        base
    );

    let config = crate::api::SubscriptionConfig {
        node_selector: Some([("zone".to_string(), "a".to_string())].into()),
        ..Default::default()
    };
    let configured = desired_deployments(&c, Some(&config)).unwrap();
    assert_ne!(configured[0].spec_hash, base);
    assert_eq!(
        configured[0]
            .deployment
            .spec
            .as_ref()
            .unwrap()
            .template
            .spec
            .as_ref()
            .unwrap()
            .node_selector,
        config.node_selector
    );

    let mut relabelled = c.clone();
    relabelled.spec.install.spec.as_mut().unwrap().deployments[0].label =
        Some(labels(&[("tier", "x")]));
    assert_eq!(
        desired_deployments(&relabelled, None).unwrap()[0].spec_hash,
        base
    );
}

#[test]
fn orphans_are_owned_deployments_missing_from_the_strategy() {
    let c = csv("a.v1");
    let seen = observed(&[&c]);
    let desired = desired_deployments(&c, None).unwrap();
    let mut renamed = c.clone();
    renamed.spec.install.spec.as_mut().unwrap().deployments[0].name = "gone".into();
    let mut live: Vec<Arc<_>> = live_deployments(&renamed, &seen, true);
    // A Deployment of another CSV is never ours to delete.
    live.extend(
        live_deployments(&csv("other.v1"), &seen, true)
            .into_iter()
            .map(|d| {
                let mut d = (*d).clone();
                d.metadata.name = Some("theirs".into());
                Arc::new(d)
            }),
    );
    assert_eq!(
        orphaned_deployments(&c, &desired, live.iter().map(|d| d.as_ref())),
        vec!["gone".to_string()]
    );
}

use std::sync::Arc;

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, RoleBinding, RoleRef};
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::ObjectMeta;

use super::*;
use crate::csv::fixtures::{csv, observed};
use crate::csv::identity::owner_labels;

fn meta(name: &str, ns: Option<&str>, labelled: Option<&ClusterServiceVersion>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: ns.map(str::to_owned),
        resource_version: Some(format!("rv-{name}")),
        labels: labelled.map(owner_labels),
        ..ObjectMeta::default()
    }
}

fn deleted(name: &str) -> ClusterServiceVersion {
    let mut c = csv(name);
    c.metadata.resource_version = Some("7".to_owned());
    c.metadata.finalizers = Some(vec![
        "keep.example.com".to_owned(),
        CSV_FINALIZER.to_owned(),
    ]);
    c
}

/// Each write as `verb Kind name`.
fn shown(effects: &Effects) -> Vec<String> {
    effects
        .writes
        .iter()
        .map(|w| {
            let verb = w.verb();
            format!("{verb} {}", w.key())
        })
        .collect()
}

#[test]
fn what_carries_the_owner_labels_is_deleted_as_seen_and_the_finalizer_waits() {
    let c = deleted("a.v1");
    let other = csv("b.v1");
    let mut seen = observed(&[&c]);
    seen.cluster_roles = vec![
        Arc::new(ClusterRole {
            metadata: meta("a-role", None, Some(&c)),
            ..ClusterRole::default()
        }),
        Arc::new(ClusterRole {
            metadata: meta("b-role", None, Some(&other)),
            ..ClusterRole::default()
        }),
        Arc::new(ClusterRole {
            metadata: meta("admin", None, None),
            ..ClusterRole::default()
        }),
    ];
    seen.cluster_role_bindings = vec![Arc::new(ClusterRoleBinding {
        metadata: meta("a-binding", None, Some(&c)),
        role_ref: RoleRef::default(),
        subjects: None,
    })];
    seen.certs.auth_reader_bindings = vec![Arc::new(RoleBinding {
        metadata: meta("a-auth-reader", Some("kube-system"), Some(&c)),
        role_ref: RoleRef::default(),
        subjects: None,
    })];
    seen.api_services = vec![Arc::new(APIService {
        metadata: meta("v1.demo.example.com", None, Some(&c)),
        ..APIService::default()
    })];

    let pass = finalize(&c, &seen);
    assert!(!pass.releases);
    assert_eq!(
        shown(&pass.effects),
        [
            "delete ClusterRoleBinding a-binding",
            "delete ClusterRole a-role",
            "delete RoleBinding kube-system/a-auth-reader",
            "delete APIService v1.demo.example.com",
        ]
    );
    let Write::Delete { options, .. } = &pass.effects.writes[1] else {
        unreachable!("the second write deletes the ClusterRole");
    };
    assert_eq!(
        options.resource_version.as_deref(),
        Some("rv-a-role"),
        "deleted only as observed"
    );
    assert_eq!(pass.effects.requeue, Some(CLEANUP_POLL));
}

#[test]
fn once_nothing_labelled_is_seen_the_finalizer_goes_from_the_csv_as_observed() {
    let c = deleted("a.v1");
    let pass = finalize(&c, &observed(&[&c]));
    assert!(pass.releases);
    assert_eq!(
        shown(&pass.effects),
        ["patch ClusterServiceVersion demo/a.v1"]
    );
    let Write::MergePatch {
        patch,
        resource_version,
        ..
    } = &pass.effects.writes[0]
    else {
        unreachable!("the one write is the finalizer's removal");
    };
    assert_eq!(resource_version.as_deref(), Some("7"));
    assert_eq!(
        patch.to_json().unwrap(),
        serde_json::json!({"metadata": {"finalizers": ["keep.example.com"]}}),
        "only olm-rs's finalizer is removed"
    );
    assert_eq!(pass.effects.requeue, None);
}

use std::collections::BTreeMap;

use super::*;
use crate::csv::fixtures::{self, csv};
use crate::csv::install_strategy::desired_deployments;

/// `verb Kind ns/name` of each write, for compact tables.
fn shown(writes: &[ActionWrite]) -> Vec<String> {
    writes
        .iter()
        .map(|w| {
            let verb = w.write.verb();
            format!("{verb} {}", w.write.key())
        })
        .collect()
}

fn stored(name: &str) -> ClusterServiceVersion {
    let mut csv = csv(name);
    csv.metadata.resource_version = Some("7".into());
    csv
}

#[test]
fn metadata_changes_are_one_patch_guarded_by_the_version_read() {
    let mut bare = stored("demo.v1");
    bare.metadata.finalizers = None;
    let cases: Vec<(&str, Vec<Action>, Option<serde_json::Value>)> = vec![
        ("no metadata action", vec![Action::DeleteCsv], None),
        (
            "finalizer and annotations together",
            vec![
                Action::AddFinalizer,
                Action::SetAnnotations(BTreeMap::from([
                    ("olm.operatorGroup".to_owned(), Some("og".to_owned())),
                    ("olm.targetNamespaces".to_owned(), None),
                ])),
            ],
            Some(json!({"metadata": {
                "finalizers": [CSV_FINALIZER],
                "annotations": {"olm.operatorGroup": "og", "olm.targetNamespaces": null},
            }})),
        ),
    ];
    for (what, actions, expected) in cases {
        match (metadata_write(&bare, &actions), expected) {
            (None, None) => {}
            (
                Some(Write::MergePatch {
                    key,
                    patch,
                    resource_version,
                }),
                Some(expected),
            ) => {
                assert_eq!(
                    key.to_string(),
                    format!("ClusterServiceVersion {}/demo.v1", fixtures::NS),
                    "{what}"
                );
                assert_eq!(patch.to_json().unwrap(), expected, "{what}");
                assert_eq!(resource_version.as_deref(), Some("7"), "{what}");
            }
            (got, expected) => panic!("{what}: got {got:?}, expected {expected:?}"),
        }
    }
}

#[test]
fn each_action_stands_for_its_writes_in_order() {
    let ns = fixtures::NS;
    let csv = stored("demo.v1");
    let deployments = desired_deployments(&csv, None).unwrap();
    let cases: Vec<(&str, Action, Vec<String>)> = vec![
        (
            "provided APIs on the group",
            Action::SetProvidedApis {
                group: "og".into(),
                annotation: "Demo.v1.example.com".into(),
            },
            vec![format!("patch OperatorGroup {ns}/og")],
        ),
        (
            "conflicting Deployments deleted",
            Action::DeleteDeployments(vec!["a".into(), "b".into()]),
            vec![
                format!("delete Deployment {ns}/a"),
                format!("delete Deployment {ns}/b"),
            ],
        ),
        (
            "drifted Deployments applied again",
            Action::ReapplyDeployments(deployments.clone()),
            deployments
                .iter()
                .map(|d| format!("apply Deployment {ns}/{}", d.name))
                .collect(),
        ),
        (
            "an install without certificates: Deployments, then orphans",
            Action::Install(DeploymentInstall {
                deployments: deployments.clone(),
                delete_orphans: vec!["old".into()],
                certs: None,
            }),
            deployments
                .iter()
                .map(|d| format!("apply Deployment {ns}/{}", d.name))
                .chain([format!("delete Deployment {ns}/old")])
                .collect(),
        ),
        (
            "stale webhook configurations",
            Action::DeleteWebhookConfigurations(vec![
                (WebhookKind::Validating, "v".into()),
                (WebhookKind::Mutating, "m".into()),
            ]),
            vec![
                "delete ValidatingWebhookConfiguration v".to_owned(),
                "delete MutatingWebhookConfiguration m".to_owned(),
            ],
        ),
        (
            "the CSV itself",
            Action::DeleteCsv,
            vec![format!("delete ClusterServiceVersion {ns}/demo.v1")],
        ),
        (
            "a requeue is no write",
            Action::RequeueCsv("demo.v0".into()),
            vec![],
        ),
        (
            "metadata actions are the metadata patch's",
            Action::AddFinalizer,
            vec![],
        ),
    ];
    for (what, action, expected) in cases {
        assert_eq!(shown(&action_writes(&csv, &action)), expected, "{what}");
    }
}

#[test]
fn failures_are_read_as_the_install_rules_say() {
    let csv = stored("demo.v1");
    let deployments = desired_deployments(&csv, None).unwrap();
    let install = action_writes(
        &csv,
        &Action::Install(DeploymentInstall {
            deployments,
            delete_orphans: vec!["old".into()],
            certs: None,
        }),
    );
    let (orphan, applies) = install.split_last().unwrap();
    assert!(applies.iter().all(|w| !w.absent_ok));
    assert!(!orphan.absent_ok);
    let group = action_writes(
        &csv,
        &Action::SetProvidedApis {
            group: "og".into(),
            annotation: String::new(),
        },
    );
    assert!(
        group[0].absent_ok,
        "a group deleted meanwhile is no failure"
    );
    let Write::Delete { options, .. } =
        &action_writes(&csv, &Action::DeleteDeployments(vec!["a".into()]))[0].write
    else {
        panic!("a delete");
    };
    assert!(options.foreground);
    assert_eq!(options.grace_period_seconds, Some(1));
}

use k8s_openapi::api::core::v1::{
    Container, EnvFromSource, NodeAffinity, PodAntiAffinity, PodTemplateSpec, ResourceRequirements,
    SecretEnvSource, Toleration, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::*;

fn env(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: Some(value.into()),
        value_from: None,
    }
}

fn spec() -> DeploymentSpec {
    DeploymentSpec {
        template: PodTemplateSpec {
            metadata: Some(Default::default()),
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "m".into(),
                    env: Some(vec![env("A", "1"), env("B", "2")]),
                    volume_mounts: Some(vec![VolumeMount {
                        name: "data".into(),
                        mount_path: "/old".into(),
                        ..Default::default()
                    }]),
                    ..Default::default()
                }],
                tolerations: Some(vec![Toleration {
                    key: Some("k".into()),
                    ..Default::default()
                }]),
                affinity: Some(Affinity {
                    node_affinity: Some(NodeAffinity::default()),
                    pod_anti_affinity: Some(PodAntiAffinity {
                        required_during_scheduling_ignored_during_execution: Some(vec![]),
                        ..Default::default()
                    }),
                    pod_affinity: None,
                }),
                ..Default::default()
            }),
        },
        ..Default::default()
    }
}

fn pod(spec: &DeploymentSpec) -> &PodSpec {
    spec.template.spec.as_ref().unwrap()
}

#[test]
fn env_replaces_in_place_and_appends_in_config_order() {
    let mut s = spec();
    let config = SubscriptionConfig {
        env: Some(vec![env("Z", "9"), env("A", "x")]),
        ..Default::default()
    };
    apply_config(&mut s, &config);
    let names: Vec<(String, String)> = pod(&s).containers[0]
        .env
        .clone()
        .unwrap()
        .into_iter()
        .map(|e| (e.name, e.value.unwrap()))
        .collect();
    assert_eq!(
        names,
        vec![
            ("A".into(), "x".into()),
            ("B".into(), "2".into()),
            ("Z".into(), "9".into())
        ]
    );
}

#[test]
fn lists_merge_by_name_or_identity() {
    let mut s = spec();
    let secret = EnvFromSource {
        secret_ref: Some(SecretEnvSource {
            name: "s".into(),
            optional: None,
        }),
        ..Default::default()
    };
    let config = SubscriptionConfig {
        env_from: Some(vec![secret.clone(), secret.clone()]),
        volumes: Some(vec![Volume {
            name: "data".into(),
            ..Default::default()
        }]),
        volume_mounts: Some(vec![VolumeMount {
            name: "data".into(),
            mount_path: "/new".into(),
            ..Default::default()
        }]),
        tolerations: Some(vec![
            Toleration {
                key: Some("k".into()),
                ..Default::default()
            },
            Toleration {
                key: Some("other".into()),
                ..Default::default()
            },
        ]),
        ..Default::default()
    };
    apply_config(&mut s, &config);
    let p = pod(&s);
    assert_eq!(p.containers[0].env_from.as_ref().unwrap().len(), 1);
    assert_eq!(p.volumes.as_ref().unwrap().len(), 1);
    assert_eq!(
        p.containers[0].volume_mounts.as_ref().unwrap()[0].mount_path,
        "/new"
    );
    assert_eq!(p.tolerations.as_ref().unwrap().len(), 2);
}

#[test]
fn resources_and_node_selector_replace() {
    let mut s = spec();
    let resources = ResourceRequirements {
        limits: Some([("cpu".to_string(), Quantity("1".into()))].into()),
        ..Default::default()
    };
    let config = SubscriptionConfig {
        resources: Some(resources.clone()),
        node_selector: Some([("zone".to_string(), "a".to_string())].into()),
        ..Default::default()
    };
    apply_config(&mut s, &config);
    assert_eq!(pod(&s).containers[0].resources, Some(resources));
    assert_eq!(pod(&s).node_selector.as_ref().unwrap()["zone"], "a");
}

#[test]
fn affinity_parts_replace_and_empties_remove() {
    // {} removes everything.
    let mut s = spec();
    apply_config(
        &mut s,
        &SubscriptionConfig {
            affinity: Some(Affinity::default()),
            ..Default::default()
        },
    );
    assert_eq!(pod(&s).affinity, None);

    // An empty nodeAffinity removes only that part.
    let mut s = spec();
    apply_config(
        &mut s,
        &SubscriptionConfig {
            affinity: Some(Affinity {
                node_affinity: Some(NodeAffinity::default()),
                ..Default::default()
            }),
            ..Default::default()
        },
    );
    let a = pod(&s).affinity.clone().unwrap();
    assert!(a.node_affinity.is_none() && a.pod_anti_affinity.is_some());

    // OLM quirk: an empty podAntiAffinity removes the whole affinity.
    let mut s = spec();
    apply_config(
        &mut s,
        &SubscriptionConfig {
            affinity: Some(Affinity {
                pod_anti_affinity: Some(PodAntiAffinity::default()),
                ..Default::default()
            }),
            ..Default::default()
        },
    );
    assert_eq!(pod(&s).affinity, None);
}

#[test]
fn annotations_only_add_missing_keys() {
    let mut s = spec();
    s.template.metadata.as_mut().unwrap().annotations =
        Some([("keep".to_string(), "template".to_string())].into());
    let config = SubscriptionConfig {
        annotations: Some(
            [
                ("keep".to_string(), "config".to_string()),
                ("new".to_string(), "config".to_string()),
            ]
            .into(),
        ),
        ..Default::default()
    };
    let on_deployment = apply_config(&mut s, &config);
    let template = s.template.metadata.unwrap().annotations.unwrap();
    assert_eq!(template["keep"], "template");
    assert_eq!(template["new"], "config");
    assert_eq!(on_deployment.len(), 2);
}

//! Builders for the unit tests of this module: a small but complete CSV in namespace `demo`,
//! its OperatorGroup, and an [`Observed`] in which everything it needs is present.

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition, DeploymentStatus};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionCondition, CustomResourceDefinitionNames,
    CustomResourceDefinitionSpec, CustomResourceDefinitionStatus, CustomResourceDefinitionVersion,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use serde_json::json;

use crate::api::keys::{
    MANAGED_LABEL, OPERATOR_GROUP_ANNOTATION, OPERATOR_GROUP_NAMESPACE_ANNOTATION,
    TARGET_NAMESPACES_ANNOTATION,
};
use crate::api::{
    CSV_FINALIZER, ClusterServiceVersion, ClusterServiceVersionStatus, CsvPhase, CsvReason,
    OperatorGroup, OperatorGroupStatus, Subscription, SubscriptionStatus,
};

use super::install_strategy::{DesiredDeployment, desired_deployments};
use super::observed::{Observed, ServerVersion};

pub const NS: &str = "demo";

pub fn t(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + seconds).expect("fixed test time is valid")
}

/// The rule the fixture CSV asks for.
pub fn rule() -> PolicyRule {
    PolicyRule {
        verbs: vec!["get".into(), "list".into()],
        api_groups: Some(vec!["".into()]),
        resources: Some(vec!["configmaps".into()]),
        ..Default::default()
    }
}

/// CSV `name` in `demo`, member of group `og` targeting `demo`, with one Deployment `op`
/// running as ServiceAccount `op-sa`, owning CRD `demos.example.com`.
pub fn csv(name: &str) -> ClusterServiceVersion {
    let value = json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": format!("uid-{name}"),
            "finalizers": [CSV_FINALIZER],
            "labels": {MANAGED_LABEL: "true"},
            "annotations": {
                OPERATOR_GROUP_ANNOTATION: "og",
                OPERATOR_GROUP_NAMESPACE_ANNOTATION: NS,
                TARGET_NAMESPACES_ANNOTATION: NS,
                "alm-examples": "[]",
            }
        },
        "spec": {
            "displayName": "Demo",
            "version": "0.1.0",
            "installModes": [
                {"type": "OwnNamespace", "supported": true},
                {"type": "SingleNamespace", "supported": true},
                {"type": "MultiNamespace", "supported": false},
                {"type": "AllNamespaces", "supported": true},
            ],
            "customresourcedefinitions": {
                "owned": [{"name": "demos.example.com", "version": "v1", "kind": "Demo"}]
            },
            "install": {
                "strategy": "deployment",
                "spec": {
                    "deployments": [{
                        "name": "op",
                        "label": {"app": "op"},
                        "spec": {
                            "replicas": 1,
                            "selector": {"matchLabels": {"app": "op"}},
                            "template": {
                                "metadata": {"labels": {"app": "op"}},
                                "spec": {
                                    "serviceAccountName": "op-sa",
                                    "containers": [{"name": "manager", "image": "example.com/op:v1"}]
                                }
                            }
                        }
                    }],
                    "permissions": [{"serviceAccountName": "op-sa", "rules": [rule()]}]
                }
            }
        }
    });
    serde_json::from_value(value).expect("fixture CSV is valid")
}

/// `csv` with a status in `phase`/`reason`, entered at `since`.
pub fn in_phase(
    mut csv: ClusterServiceVersion,
    phase: CsvPhase,
    reason: CsvReason,
    since: Timestamp,
) -> ClusterServiceVersion {
    let mut status = ClusterServiceVersionStatus::default();
    status.record_phase(phase, reason, "", &Time(since));
    csv.status = Some(status);
    csv
}

pub fn replacing(mut csv: ClusterServiceVersion, old: &str) -> ClusterServiceVersion {
    csv.spec.replaces = Some(old.to_owned());
    csv
}

pub fn og(name: &str, ns: &str, targets: &[&str]) -> OperatorGroup {
    let mut group = OperatorGroup::new(name, Default::default());
    group.metadata.namespace = Some(ns.to_owned());
    let mut status = OperatorGroupStatus::new(Time(t(0)));
    status.namespaces = Some(targets.iter().map(|s| s.to_string()).collect());
    group.status = Some(status);
    group
}

pub fn crd(name: &str, version: &str) -> CustomResourceDefinition {
    let (plural, group) = name.split_once('.').expect("fixture CRD names have a dot");
    let condition = |type_: &str| CustomResourceDefinitionCondition {
        type_: type_.to_owned(),
        status: "True".to_owned(),
        ..Default::default()
    };
    CustomResourceDefinition {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            uid: Some(format!("uid-{name}")),
            ..Default::default()
        },
        spec: CustomResourceDefinitionSpec {
            group: group.to_owned(),
            names: CustomResourceDefinitionNames {
                plural: plural.to_owned(),
                kind: "Demo".to_owned(),
                ..Default::default()
            },
            scope: "Namespaced".to_owned(),
            versions: vec![CustomResourceDefinitionVersion {
                name: version.to_owned(),
                served: true,
                storage: true,
                ..Default::default()
            }],
            ..Default::default()
        },
        status: Some(CustomResourceDefinitionStatus {
            conditions: Some(vec![condition("Established"), condition("NamesAccepted")]),
            ..Default::default()
        }),
    }
}

pub fn service_account(name: &str) -> ServiceAccount {
    ServiceAccount {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(NS.to_owned()),
            uid: Some(format!("uid-sa-{name}")),
            ..Default::default()
        },
        ..Default::default()
    }
}

pub fn role_granting(name: &str, rules: Vec<PolicyRule>) -> Role {
    Role {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(NS.to_owned()),
            ..Default::default()
        },
        rules: Some(rules),
    }
}

pub fn binding(name: &str, role: &str, sa: &str) -> RoleBinding {
    RoleBinding {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(NS.to_owned()),
            ..Default::default()
        },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".to_owned(),
            kind: "Role".to_owned(),
            name: role.to_owned(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".to_owned(),
            name: sa.to_owned(),
            namespace: Some(NS.to_owned()),
            api_group: None,
        }]),
    }
}

pub fn subscription_for(csv_name: &str) -> Subscription {
    let mut sub: Subscription = serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "Subscription",
        "metadata": {"name": "demo-sub", "namespace": NS},
        "spec": {"source": "cat", "sourceNamespace": "olm", "name": "demo"}
    }))
    .expect("fixture Subscription is valid");
    sub.status = Some(
        serde_json::from_value::<SubscriptionStatus>(json!({
            "installedCSV": csv_name,
            "currentCSV": csv_name,
            "lastUpdated": "2026-01-01T00:00:00Z"
        }))
        .expect("fixture Subscription status is valid"),
    );
    sub
}

/// A cluster in which `csvs` (namespace `demo`) have everything they need: group `og`, the CRD,
/// the ServiceAccount and a Role granting the rule.
pub fn observed(csvs: &[&ClusterServiceVersion]) -> Observed {
    Observed {
        csvs: csvs.iter().map(|c| Arc::new((*c).clone())).collect(),
        operator_groups: vec![Arc::new(og("og", NS, &[NS]))],
        all_operator_groups: vec![Arc::new(og("og", NS, &[NS]))],
        crds: vec![Arc::new(crd("demos.example.com", "v1"))],
        server_version: ServerVersion::Known("v1.33.1".to_owned()),
        service_accounts: vec![Arc::new(service_account("op-sa"))],
        roles: vec![Arc::new(role_granting("op-role", vec![rule()]))],
        role_bindings: vec![Arc::new(binding("op-rb", "op-role", "op-sa"))],
        ..Default::default()
    }
}

/// The live Deployments for `csv` as the API server would hold them after an install, rolled
/// out (`available`) or not.
pub fn live_deployments(
    csv: &ClusterServiceVersion,
    seen: &Observed,
    available: bool,
) -> Vec<Arc<Deployment>> {
    let config = seen.subscription_config(super::identity::name(csv));
    desired_deployments(csv, config)
        .expect("fixture strategy builds")
        .into_iter()
        .map(|d| Arc::new(rolled_out(d, available)))
        .collect()
}

pub fn rolled_out(desired: DesiredDeployment, available: bool) -> Deployment {
    let mut dep = desired.deployment;
    dep.metadata.generation = Some(1);
    dep.status = Some(DeploymentStatus {
        observed_generation: Some(1),
        replicas: Some(1),
        updated_replicas: Some(1),
        ready_replicas: Some(if available { 1 } else { 0 }),
        available_replicas: Some(if available { 1 } else { 0 }),
        conditions: Some(vec![DeploymentCondition {
            type_: "Available".to_owned(),
            status: if available { "True" } else { "False" }.to_owned(),
            message: Some(
                if available {
                    "Deployment has minimum availability."
                } else {
                    "Deployment does not have minimum availability."
                }
                .to_owned(),
            ),
            ..Default::default()
        }]),
        ..Default::default()
    });
    dep
}

/// Labels helper for tests.
pub fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

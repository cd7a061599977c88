//! The objects OLM makes per cert deployment (docs/certificates.md §3): Service, Secret, the Role and
//! RoleBinding that let the operator read the Secret, and the two bindings an aggregated API
//! server needs to delegate authentication. Their owner comes in as a plain [`Owner`] (a CSV's,
//! from `csv::certs::owner_of`).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::DeploymentSpec;
use k8s_openapi::api::core::v1::{Secret, Service, ServicePort, ServiceSpec};
use k8s_openapi::api::rbac::v1::{
    ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use crate::api::keys::{MANAGED_LABEL, MANAGED_LABEL_VALUE};

use super::{CertPlan, OLM_CA_HASH_ANNOTATION, SECRET_TYPE_TLS, ServiceName};

/// Who owns a cert deployment's objects: the namespace they live in, the owner reference of the
/// namespaced ones, and the labels (`olm.managed` and the owner's) of the cluster-scoped and
/// `kube-system` ones, which no owner reference can reach.
#[derive(Clone, Debug, PartialEq)]
pub struct Owner {
    pub namespace: String,
    pub reference: OwnerReference,
    pub labels: BTreeMap<String, String>,
}

/// Namespace of the `extension-apiserver-authentication-reader` Role.
pub const KUBE_SYSTEM: &str = "kube-system";
/// ClusterRole that lets an aggregated API server create TokenReviews/SubjectAccessReviews.
pub const AUTH_DELEGATOR_CLUSTER_ROLE: &str = "system:auth-delegator";
/// Role in `kube-system` that lets an aggregated API server read the client CA ConfigMap.
pub const AUTH_READER_ROLE: &str = "extension-apiserver-authentication-reader";

/// `D-service-system:auth-delegator` (docs/certificates.md §1).
pub fn auth_delegator_binding_name(service: &ServiceName) -> String {
    format!("{}-system:auth-delegator", service.service())
}

/// `D-service-auth-reader` in `kube-system` (docs/certificates.md §1).
pub fn auth_reader_binding_name(service: &ServiceName) -> String {
    format!("{}-auth-reader", service.service())
}

fn managed_only() -> BTreeMap<String, String> {
    BTreeMap::from([(MANAGED_LABEL.to_owned(), MANAGED_LABEL_VALUE.to_owned())])
}

fn owned_meta(owner: &Owner, name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some(owner.namespace.clone()),
        labels: Some(managed_only()),
        owner_references: Some(vec![owner.reference.clone()]),
        ..Default::default()
    }
}

/// One Service port; its name is the port number.
#[derive(Clone, Debug, PartialEq)]
pub struct PortSpec {
    pub port: i32,
    pub target: IntOrString,
}

impl PortSpec {
    fn key(&self) -> (String, i32, String) {
        let target = match &self.target {
            IntOrString::Int(n) => n.to_string(),
            IntOrString::String(s) => s.clone(),
        };
        (self.port.to_string(), self.port, target)
    }
}

/// docs/certificates.md §3.1: selector from the deployment's `matchLabels`, one port per distinct
/// (name, port, targetPort), named after the port number.
pub fn service(
    owner: &Owner,
    svc: &ServiceName,
    deployment: &DeploymentSpec,
    ports: &[PortSpec],
) -> Service {
    let mut seen = BTreeSet::new();
    let ports: Vec<ServicePort> = ports
        .iter()
        .filter(|p| seen.insert(p.key()))
        .map(|p| ServicePort {
            name: Some(p.port.to_string()),
            port: p.port,
            target_port: Some(p.target.clone()),
            ..Default::default()
        })
        .collect();
    Service {
        metadata: owned_meta(owner, svc.service()),
        spec: Some(ServiceSpec {
            selector: deployment.selector.match_labels.clone(),
            ports: Some(ports),
            ..Default::default()
        }),
        status: None,
    }
}

/// docs/certificates.md §3.2: `kubernetes.io/tls` with `tls.crt`, `tls.key`, `olmCAKey` and `olmcahash`.
pub fn secret(owner: &Owner, svc: &ServiceName, plan: &CertPlan) -> Secret {
    let mut meta = owned_meta(owner, &svc.secret_name());
    meta.annotations = Some(BTreeMap::from([(
        OLM_CA_HASH_ANNOTATION.to_owned(),
        plan.ca_hash.clone(),
    )]));
    Secret {
        metadata: meta,
        type_: Some(SECRET_TYPE_TLS.to_owned()),
        data: Some(plan.secret_data.to_secret_data()),
        ..Default::default()
    }
}

fn service_account_subject(owner: &Owner, sa: &str) -> Subject {
    Subject {
        kind: "ServiceAccount".to_owned(),
        name: sa.to_owned(),
        namespace: Some(owner.namespace.clone()),
        api_group: Some(String::new()),
    }
}

/// docs/certificates.md §3.3: `get` on exactly this Secret.
pub fn secret_reader_role(owner: &Owner, svc: &ServiceName) -> Role {
    Role {
        metadata: owned_meta(owner, &svc.secret_name()),
        rules: Some(vec![PolicyRule {
            verbs: vec!["get".to_owned()],
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["secrets".to_owned()]),
            resource_names: Some(vec![svc.secret_name()]),
            ..Default::default()
        }]),
    }
}

pub fn secret_reader_binding(owner: &Owner, svc: &ServiceName, sa: &str) -> RoleBinding {
    RoleBinding {
        metadata: owned_meta(owner, &svc.secret_name()),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".to_owned(),
            kind: "Role".to_owned(),
            name: svc.secret_name(),
        },
        subjects: Some(vec![service_account_subject(owner, sa)]),
    }
}

/// docs/certificates.md §3.4, with owner labels so the CSV finalizer deletes it.
pub fn auth_delegator_binding(owner: &Owner, svc: &ServiceName, sa: &str) -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: ObjectMeta {
            name: Some(auth_delegator_binding_name(svc)),
            labels: Some(owner.labels.clone()),
            ..Default::default()
        },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".to_owned(),
            kind: "ClusterRole".to_owned(),
            name: AUTH_DELEGATOR_CLUSTER_ROLE.to_owned(),
        },
        subjects: Some(vec![service_account_subject(owner, sa)]),
    }
}

/// docs/certificates.md §3.5. OLM labels it `olm.managed` only and never deletes it (docs/certificates.md §10.5);
/// olm-rs adds the owner labels so uninstall removes it with the other labelled objects.
pub fn auth_reader_binding(owner: &Owner, svc: &ServiceName, sa: &str) -> RoleBinding {
    RoleBinding {
        metadata: ObjectMeta {
            name: Some(auth_reader_binding_name(svc)),
            namespace: Some(KUBE_SYSTEM.to_owned()),
            labels: Some(owner.labels.clone()),
            ..Default::default()
        },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".to_owned(),
            kind: "Role".to_owned(),
            name: AUTH_READER_ROLE.to_owned(),
        },
        subjects: Some(vec![service_account_subject(owner, sa)]),
    }
}

//! The writes a CSV decision's [`Action`]s stand for, in the order they are made
//! (docs/controller-startup.md, "One reconciler shape"): pure functions from the decision to
//! [`Write`]s, which the CSV controller hands to the one executor (`k8s::effects::perform`).
//!
//! CSV metadata (finalizer, membership annotations) is one JSON merge patch guarded by the
//! resourceVersion the decision read, not an apply: several decisions share the `olm-rs` field
//! manager on the CSV, and an apply that omits a field the same manager applied earlier would
//! remove it.

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use serde_json::{Map, Value, json};

use crate::api::keys::PROVIDED_APIS_ANNOTATION;
use crate::api::{CSV_FINALIZER, ClusterServiceVersion, OperatorGroup};
use crate::k8s::effects::{Body, Write};
use crate::k8s::write::{DeleteOptions, ObjectKey, Ownership};

use super::certs::WebhookConfiguration;
use super::certs::check::WebhookKind;
use super::identity::namespace;
use super::permission_objects::PermissionObjects;
use super::{Action, DeploymentInstall};

/// The one metadata patch of a decision (finalizer and annotations), guarded by the CSV's
/// resourceVersion; `None` when the decision changes no metadata.
pub fn metadata_write(csv: &ClusterServiceVersion, actions: &[Action]) -> Option<Write> {
    let mut meta = Map::new();
    for action in actions {
        match action {
            Action::AddFinalizer => {
                let mut finalizers = csv.finalizers().to_vec();
                if !finalizers.iter().any(|f| f == CSV_FINALIZER) {
                    finalizers.push(CSV_FINALIZER.to_owned());
                }
                meta.insert("finalizers".into(), json!(finalizers));
            }
            Action::SetAnnotations(annotations) => {
                let map: Map<String, Value> = annotations
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone().map_or(Value::Null, Value::String)))
                    .collect();
                meta.insert("annotations".into(), Value::Object(map));
            }
            _ => {}
        }
    }
    if meta.is_empty() {
        return None;
    }
    Some(Write::MergePatch {
        key: ObjectKey::of(csv),
        patch: Body::new(json!({ "metadata": meta })),
        resource_version: csv.resource_version(),
    })
}

/// One write of an action, and how its failure is read.
#[derive(Clone, Debug, PartialEq)]
pub struct ActionWrite {
    pub write: Write,
    /// The object may be gone: a 404 is success (an OperatorGroup deleted meanwhile).
    pub absent_ok: bool,
}

impl ActionWrite {
    /// A write whose every refusal, Forbidden included, is retried with back-off
    /// (docs/csv-phases.md §3.1 InstallReady).
    fn retried(write: Write) -> Self {
        Self {
            write,
            absent_ok: false,
        }
    }
}

/// The writes of one action other than the metadata ones, in order. `RequeueCsv` is not a
/// write (the controller requeues) and yields none.
pub fn action_writes(csv: &ClusterServiceVersion, action: &Action) -> Vec<ActionWrite> {
    let ns = namespace(csv);
    match action {
        Action::AddFinalizer | Action::SetAnnotations(_) | Action::RequeueCsv(_) => Vec::new(),
        Action::SetProvidedApis { group, annotation } => vec![ActionWrite {
            write: Write::MergePatch {
                key: ObjectKey::new::<OperatorGroup>(Some(ns), group),
                patch: Body::new(json!({"metadata": {"annotations": {
                    PROVIDED_APIS_ANNOTATION: annotation,
                }}})),
                resource_version: None,
            },
            absent_ok: true,
        }],
        Action::DeleteDeployments(names) => names
            .iter()
            .map(|name| ActionWrite::retried(delete_deployment(ns, name)))
            .collect(),
        Action::Install(plan) => install_writes(ns, plan),
        Action::ReapplyDeployments(list) => list
            .iter()
            .map(|d| ActionWrite::retried(apply_deployment(ns, &d.deployment)))
            .collect(),
        Action::EnsurePermissions(objects) => permission_writes(objects)
            .into_iter()
            .map(ActionWrite::retried)
            .collect(),
        Action::DeleteWebhookConfigurations(stale) => stale
            .iter()
            .map(|(kind, name)| {
                let key = match kind {
                    WebhookKind::Validating => {
                        ObjectKey::new::<ValidatingWebhookConfiguration>(None, name)
                    }
                    WebhookKind::Mutating => {
                        ObjectKey::new::<MutatingWebhookConfiguration>(None, name)
                    }
                };
                ActionWrite::retried(Write::delete(key))
            })
            .collect(),
        Action::DeleteCsv => vec![ActionWrite::retried(Write::delete(ObjectKey::of(csv)))],
    }
}

/// OLM replaces the whole Deployment; the equivalent apply takes every field it sets.
fn apply_deployment(ns: &str, deployment: &Deployment) -> Write {
    let mut deployment = deployment.clone();
    deployment.metadata.namespace = Some(ns.to_owned());
    Write::apply(deployment, Ownership::Force)
}

/// docs/csv-phases.md §7.1 step 3: foreground, one second of grace.
fn delete_deployment(ns: &str, name: &str) -> Write {
    Write::Delete {
        key: ObjectKey::new::<Deployment>(Some(ns), name),
        options: DeleteOptions {
            grace_period_seconds: Some(1),
            foreground: true,
            ..DeleteOptions::default()
        },
    }
}

/// The ServiceAccounts and RBAC an install plan made, re-created as they were.
fn permission_writes(objects: &PermissionObjects) -> Vec<Write> {
    let mut writes = Vec::new();
    writes.extend(
        (objects.service_accounts.iter().cloned()).map(|o| Write::apply(o, Ownership::Force)),
    );
    writes.extend((objects.roles.iter().cloned()).map(|o| Write::apply(o, Ownership::Force)));
    writes
        .extend((objects.role_bindings.iter().cloned()).map(|o| Write::apply(o, Ownership::Force)));
    writes
        .extend((objects.cluster_roles.iter().cloned()).map(|o| Write::apply(o, Ownership::Force)));
    writes.extend(
        (objects.cluster_role_bindings.iter().cloned()).map(|o| Write::apply(o, Ownership::Force)),
    );
    writes
}

/// An install, in order (docs/certificates.md §6.3, §4): each cert deployment's Service,
/// Secret and RBAC; the Deployments that mount the Secrets; the CA consumers (APIServices,
/// webhook configurations, CRD conversions); the orphaned Deployments last.
pub fn install_writes(ns: &str, plan: &DeploymentInstall) -> Vec<ActionWrite> {
    let mut writes = Vec::new();
    if let Some(certs) = &plan.certs {
        for d in &certs.deployments {
            writes.extend(
                [
                    Write::apply(d.service.clone(), Ownership::Force),
                    Write::apply(d.secret.clone(), Ownership::Force),
                    Write::apply(d.role.clone(), Ownership::Force),
                    Write::apply(d.role_binding.clone(), Ownership::Force),
                    Write::apply(d.cluster_role_binding.clone(), Ownership::Force),
                    Write::apply(d.auth_reader_binding.clone(), Ownership::Force),
                ]
                .into_iter()
                .map(ActionWrite::retried),
            );
        }
    }
    for desired in &plan.deployments {
        writes.push(ActionWrite::retried(apply_deployment(
            ns,
            &desired.deployment,
        )));
    }
    if let Some(certs) = &plan.certs {
        for api in &certs.api_services {
            writes.push(ActionWrite::retried(Write::apply(
                api.clone(),
                Ownership::Force,
            )));
        }
        for config in &certs.webhooks {
            writes.push(ActionWrite::retried(webhook_write(config)));
        }
        for conversion in &certs.conversions {
            // A merge patch of `spec.conversion` only: the CRD itself is applied by the
            // InstallPlan with the same field manager, and an apply of just this field would
            // drop the rest of that manager's fields.
            writes.push(ActionWrite::retried(Write::MergePatch {
                key: ObjectKey::new::<CustomResourceDefinition>(None, &conversion.crd),
                patch: Body::new(json!({"spec": {"conversion": conversion.conversion}})),
                resource_version: None,
            }));
        }
    }
    for orphan in &plan.delete_orphans {
        writes.push(ActionWrite::retried(delete_deployment(ns, orphan)));
    }
    writes
}

/// An existing configuration (named) is applied; a new one is created from `generateName`.
fn webhook_write(config: &WebhookConfiguration) -> Write {
    match config {
        WebhookConfiguration::Validating(obj) if obj.metadata.name.is_some() => {
            Write::apply(obj.clone(), Ownership::Force)
        }
        WebhookConfiguration::Validating(obj) => Write::create(obj.clone()),
        WebhookConfiguration::Mutating(obj) if obj.metadata.name.is_some() => {
            Write::apply(obj.clone(), Ownership::Force)
        }
        WebhookConfiguration::Mutating(obj) => Write::create(obj.clone()),
    }
}

#[cfg(test)]
#[path = "writes_tests.rs"]
mod tests;

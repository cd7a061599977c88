//! Carries out a [`CsvSyncOutcome`]: metadata first, then the actions, then the status, then events.
//!
//! CSV metadata (finalizer, membership annotations) is written with JSON merge patches, not
//! server-side apply: several code paths share the `olm-rs` field manager on the CSV, and an
//! apply that omits a field the same manager applied earlier would remove it.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ObjectReference, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::Api;
use kube::{Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use crate::api::event::ObjectEvent;
use crate::api::{CSV_FINALIZER, ClusterServiceVersion, OperatorGroup};
use crate::csv::identity::namespace;
use crate::csv::permission_objects::PermissionObjects;
use crate::csv::{Action, CsvSyncOutcome, DeploymentInstall, InstallFailure};
use crate::k8s::effects::{Write, perform};
use crate::k8s::errors::ApiFailure;
use crate::k8s::events::EventPublisher;
use crate::k8s::write::{self, ApiError, DeleteOptions, ObjectKey, Operation, Ownership};

use super::ReconcileError;

/// The writes of one sync. Returns the install outcome when the sync installed.
pub struct Executor<'a> {
    pub client: &'a Client,
    pub events: &'a EventPublisher,
    /// CSVs to requeue (upgrade hand-offs).
    pub requeue: &'a tokio::sync::mpsc::UnboundedSender<ClusterServiceVersion>,
}

impl Executor<'_> {
    /// Runs the metadata changes and actions of `sync`; returns the install outcome if an
    /// install ran, and the CSV as last written (its resourceVersion guards the status write).
    pub async fn run(
        &self,
        csv: &ClusterServiceVersion,
        sync: &CsvSyncOutcome,
    ) -> Result<(ClusterServiceVersion, Option<Result<(), InstallFailure>>), ReconcileError> {
        let current = self.metadata(csv, &sync.actions).await?;
        let mut installed = None;
        for action in &sync.actions {
            match action {
                Action::AddFinalizer | Action::SetAnnotations(_) => {}
                Action::SetProvidedApis { group, annotation } => {
                    self.set_provided_apis(namespace(csv), group, annotation)
                        .await?;
                }
                Action::DeleteDeployments(names) => {
                    for deployment in names {
                        self.delete_deployment(namespace(csv), deployment).await?;
                    }
                }
                Action::Install(plan) => installed = Some(self.install(namespace(csv), plan).await),
                Action::ReapplyDeployments(list) => {
                    for desired in list {
                        self.apply_deployment(namespace(csv), &desired.deployment)
                            .await?;
                    }
                }
                Action::EnsurePermissions(objects) => self.ensure_permissions(objects).await?,
                Action::DeleteWebhookConfigurations(stale) => {
                    super::certs::delete_webhooks(self.client, stale).await?;
                }
                Action::RequeueCsv(other) => {
                    let mut stub = ClusterServiceVersion::new(other, csv.spec.clone());
                    stub.metadata.namespace = Some(namespace(csv).to_owned());
                    // The receiver lives as long as the controller; a send error means it is
                    // shutting down, when a lost requeue does not matter.
                    let _ = self.requeue.send(stub);
                }
                Action::DeleteCsv => {
                    let key = ObjectKey::of(csv);
                    write::delete(self.client, &key, &DeleteOptions::default()).await?;
                }
            }
        }
        Ok((current, installed))
    }

    /// Finalizer and annotations in one merge patch, guarded by the resourceVersion read.
    async fn metadata(
        &self,
        csv: &ClusterServiceVersion,
        actions: &[Action],
    ) -> Result<ClusterServiceVersion, ReconcileError> {
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
            return Ok(csv.clone());
        }
        let patch = json!({ "metadata": meta });
        let written = write::merge_patch(
            self.client,
            &ObjectKey::of(csv),
            &patch,
            csv.resource_version().as_deref(),
        )
        .await?;
        serde_json::to_value(written)
            .and_then(serde_json::from_value)
            .map_err(|e| {
                ApiError::new(
                    Operation::Patch,
                    ObjectKey::of(csv),
                    kube::Error::SerdeError(e),
                )
                .into()
            })
    }

    async fn set_provided_apis(
        &self,
        ns: &str,
        group: &str,
        annotation: &str,
    ) -> Result<(), ReconcileError> {
        let patch = json!({"metadata": {"annotations": {crate::api::keys::PROVIDED_APIS_ANNOTATION: annotation}}});
        let key = ObjectKey::new::<OperatorGroup>(Some(ns), group);
        match write::merge_patch(self.client, &key, &patch, None).await {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    async fn delete_deployment(&self, ns: &str, deployment: &str) -> Result<(), ReconcileError> {
        // docs/csv-phases.md §7.1 step 3: foreground, one second of grace.
        let options = DeleteOptions {
            grace_period_seconds: Some(1),
            foreground: true,
            ..DeleteOptions::default()
        };
        let key = ObjectKey::new::<Deployment>(Some(ns), deployment);
        write::delete(self.client, &key, &options).await?;
        Ok(())
    }

    /// OLM replaces the whole Deployment; the equivalent apply takes every field it sets.
    async fn apply_deployment(
        &self,
        ns: &str,
        deployment: &Deployment,
    ) -> Result<Deployment, ApiError> {
        let api: Api<Deployment> = Api::namespaced(self.client.clone(), ns);
        write::apply(&api, deployment, Ownership::Force).await
    }

    async fn install(&self, ns: &str, plan: &DeploymentInstall) -> Result<(), InstallFailure> {
        if let Some(certs) = &plan.certs {
            super::certs::write_cert_objects(self.client, certs).await?;
        }
        for desired in &plan.deployments {
            if let Err(err) = self.apply_deployment(ns, &desired.deployment).await {
                let text = err.to_string();
                return Err(if err.failure() == ApiFailure::Forbidden {
                    InstallFailure::Forbidden(text)
                } else {
                    InstallFailure::Other(text)
                });
            }
        }
        if let Some(certs) = &plan.certs {
            super::certs::inject_ca(self.client, certs).await?;
        }
        for orphan in &plan.delete_orphans {
            self.delete_deployment(ns, orphan)
                .await
                .map_err(|e| InstallFailure::Other(e.to_string()))?;
        }
        Ok(())
    }

    async fn ensure_permissions(&self, objects: &PermissionObjects) -> Result<(), ReconcileError> {
        for sa in &objects.service_accounts {
            self.apply_namespaced::<ServiceAccount>(sa).await?;
        }
        for role in &objects.roles {
            self.apply_namespaced::<Role>(role).await?;
        }
        for binding in &objects.role_bindings {
            self.apply_namespaced::<RoleBinding>(binding).await?;
        }
        for role in &objects.cluster_roles {
            self.apply_cluster::<ClusterRole>(role).await?;
        }
        for binding in &objects.cluster_role_bindings {
            self.apply_cluster::<ClusterRoleBinding>(binding).await?;
        }
        Ok(())
    }

    async fn apply_namespaced<K>(&self, obj: &K) -> Result<(), ReconcileError>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + Serialize
            + DeserializeOwned
            + std::fmt::Debug,
    {
        let ns = obj.namespace().unwrap_or_default();
        let api: Api<K> = Api::namespaced(self.client.clone(), &ns);
        write::apply(&api, obj, Ownership::Force).await?;
        Ok(())
    }

    async fn apply_cluster<K>(&self, obj: &K) -> Result<(), ReconcileError>
    where
        K: Resource<Scope = k8s_openapi::ClusterResourceScope, DynamicType = ()>
            + Clone
            + Serialize
            + DeserializeOwned
            + std::fmt::Debug,
    {
        let api: Api<K> = Api::all(self.client.clone());
        write::apply(&api, obj, Ownership::Force).await?;
        Ok(())
    }

    /// Writes the whole status through the status subresource; the resourceVersion makes a
    /// decision taken on a stale cache fail with a conflict instead of overwriting newer status.
    pub async fn write_status(
        &self,
        csv: &ClusterServiceVersion,
        status: &crate::api::ClusterServiceVersionStatus,
    ) -> Result<(), ReconcileError> {
        let Some(write) = Write::status(csv, status.clone()) else {
            // Never read from a server (no resourceVersion): nothing to guard the write with.
            return Ok(());
        };
        perform(self.client, &write).await?;
        Ok(())
    }

    pub async fn publish(&self, csv: &ClusterServiceVersion, events: &[ObjectEvent]) {
        let regarding = object_reference(csv);
        for event in events {
            self.events.emit(&regarding, event).await;
        }
    }
}

pub fn object_reference(csv: &ClusterServiceVersion) -> ObjectReference {
    ObjectReference {
        api_version: Some(ClusterServiceVersion::api_version(&()).into_owned()),
        kind: Some(ClusterServiceVersion::kind(&()).into_owned()),
        name: csv.metadata.name.clone(),
        namespace: csv.metadata.namespace.clone(),
        uid: csv.metadata.uid.clone(),
        resource_version: csv.metadata.resource_version.clone(),
        ..Default::default()
    }
}

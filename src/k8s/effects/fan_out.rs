//! The executor's fan-out: one object written into many namespaces (the copies of a CSV,
//! docs/operator-groups.md §10). A decision hands over a [`FanOut`] value, as it hands over
//! [`Effects`](super::Effects); this is the same executor with a batch capability, not a second
//! writer.
//!
//! One namespace costs one request per changed part and nothing else: the create body is
//! encoded once and shared by every namespace, status writes carry only metadata and status,
//! and answers are decoded as metadata only. Objects are replaced (PUT), not applied: each one
//! must be exactly the prototype, including the removal of labels or annotations someone else
//! added, which a server-side apply would keep.

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, PartialObjectMeta, Preconditions};
use kube::core::{ApiResource, DynamicObject, Request};
use kube::{Client, Resource};
use serde::Serialize;

use super::Body;
use crate::k8s::errors::is_namespace_terminating;
use crate::k8s::post_params;
use crate::k8s::write::{self, ApiError, ObjectKey, Operation};

/// One namespace's part of a fan-out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FanOutWrite {
    /// Create the object in `namespace`, then write its status (a create ignores status).
    Create { namespace: String },
    /// Bring the object in `namespace`, seen at `resource_version`, up to date: metadata and
    /// spec when `content`, the status subresource when `status`.
    Update {
        namespace: String,
        resource_version: String,
        content: bool,
        status: bool,
    },
    /// Delete `namespace/name` if it still has `uid` (one re-created meanwhile is another
    /// object, judged on its own).
    Delete {
        namespace: String,
        name: String,
        uid: String,
    },
}

/// One object, written into many namespaces.
#[derive(Clone, Debug, PartialEq)]
pub struct FanOut {
    /// The kind written.
    pub resource: ApiResource,
    /// The object's name in every namespace.
    pub name: String,
    /// The whole object without a namespace (status included, which a create ignores);
    /// `None` when the plan only deletes.
    pub prototype: Option<Body>,
    /// The status subresource's content, written after a create and on status updates.
    pub status: Option<Body>,
    /// Deletes first, then writes.
    pub writes: Vec<FanOutWrite>,
}

/// How one namespace's write ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FanOutOutcome {
    /// Written; the object's uid.
    Written { uid: String },
    /// Removed (or already gone).
    Deleted,
    /// Someone else changed or created it meanwhile: decide again.
    Raced,
    /// The namespace is gone or being deleted: nothing to do there.
    NamespaceGone,
}

/// What a fan-out did.
#[derive(Debug, Default)]
pub struct FanOutReport {
    /// How many writes were attempted.
    pub total: usize,
    /// Some write raced: the caller decides again shortly.
    pub raced: bool,
    /// The writes that failed, in no particular order.
    pub failures: Vec<ApiError>,
}

#[derive(Serialize)]
struct StatusBody<'a> {
    #[serde(rename = "apiVersion")]
    api_version: &'a str,
    kind: &'a str,
    metadata: ObjectMeta,
    status: &'a serde_json::Value,
}

/// What a failure means when it is no failure: "decide again" or "namespace gone".
fn benign(err: &ApiError) -> Option<FanOutOutcome> {
    if err.is_conflict() {
        Some(FanOutOutcome::Raced)
    } else if is_namespace_terminating(&err.source) {
        // A terminating namespace refuses new content.
        Some(FanOutOutcome::NamespaceGone)
    } else {
        None
    }
}

fn encode_error(
    operation: Operation,
    key: &ObjectKey,
) -> impl FnOnce(serde_json::Error) -> ApiError {
    let key = key.clone();
    move |e| ApiError::new(operation, key, kube::Error::SerdeError(e))
}

/// The fan-out with its bodies encoded once.
struct Encoded<'a> {
    client: &'a Client,
    plan: &'a FanOut,
    prototype: Option<serde_json::Value>,
    create_body: Vec<u8>,
    status: Option<serde_json::Value>,
}

impl Encoded<'_> {
    fn key(&self, namespace: &str, name: &str) -> ObjectKey {
        ObjectKey {
            resource: self.plan.resource.clone(),
            namespace: Some(namespace.to_owned()),
            name: name.to_owned(),
        }
    }

    fn url(&self, namespace: &str) -> String {
        DynamicObject::url_path(&self.plan.resource, Some(namespace))
    }

    async fn send(
        &self,
        operation: Operation,
        key: &ObjectKey,
        request: Result<http::Request<Vec<u8>>, kube::core::request::Error>,
    ) -> Result<PartialObjectMeta<DynamicObject>, ApiError> {
        write::send(self.client, operation, key, request).await
    }

    async fn one(&self, write: &FanOutWrite) -> Result<FanOutOutcome, ApiError> {
        match write {
            FanOutWrite::Create { namespace } => self.create(namespace).await,
            FanOutWrite::Update {
                namespace,
                resource_version,
                content,
                status,
            } => {
                self.update(namespace, resource_version, *content, *status)
                    .await
            }
            FanOutWrite::Delete {
                namespace,
                name,
                uid,
            } => self.delete(namespace, name, uid).await,
        }
    }

    async fn create(&self, namespace: &str) -> Result<FanOutOutcome, ApiError> {
        if self.prototype.is_none() {
            return Ok(FanOutOutcome::Raced);
        }
        let key = self.key(namespace, &self.plan.name);
        let request =
            Request::new(self.url(namespace)).create(&post_params(), self.create_body.clone());
        let created = match self.send(Operation::Create, &key, request).await {
            Ok(created) => created,
            Err(err) if err.is_not_found() => return Ok(FanOutOutcome::NamespaceGone),
            Err(err) => return benign(&err).ok_or(err),
        };
        let uid = created.metadata.uid.clone().unwrap_or_default();
        match self
            .write_status(namespace, created.metadata.resource_version)
            .await?
        {
            FanOutOutcome::Written { .. } => Ok(FanOutOutcome::Written { uid }),
            other => Ok(other),
        }
    }

    async fn update(
        &self,
        namespace: &str,
        resource_version: &str,
        content: bool,
        status: bool,
    ) -> Result<FanOutOutcome, ApiError> {
        let key = self.key(namespace, &self.plan.name);
        let mut version = Some(resource_version.to_owned());
        let mut uid = String::new();
        if content {
            let Some(prototype) = &self.prototype else {
                return Ok(FanOutOutcome::Raced);
            };
            let mut object = prototype.clone();
            if let Some(metadata) = object.get_mut("metadata").and_then(|m| m.as_object_mut()) {
                metadata.insert("namespace".into(), namespace.into());
                metadata.insert("resourceVersion".into(), resource_version.into());
            }
            let body =
                serde_json::to_vec(&object).map_err(encode_error(Operation::Replace, &key))?;
            let request =
                Request::new(self.url(namespace)).replace(&self.plan.name, &post_params(), body);
            match self.send(Operation::Replace, &key, request).await {
                Ok(updated) => {
                    version = updated.metadata.resource_version;
                    uid = updated.metadata.uid.unwrap_or_default();
                }
                Err(err) if err.is_not_found() => return Ok(FanOutOutcome::Raced),
                Err(err) => return benign(&err).ok_or(err),
            }
        }
        if status {
            return self.write_status(namespace, version).await;
        }
        Ok(FanOutOutcome::Written { uid })
    }

    async fn write_status(
        &self,
        namespace: &str,
        resource_version: Option<String>,
    ) -> Result<FanOutOutcome, ApiError> {
        let Some(status) = self.status.as_ref() else {
            return Ok(FanOutOutcome::Written { uid: String::new() });
        };
        let key = self.key(namespace, &self.plan.name);
        let body = StatusBody {
            api_version: &self.plan.resource.api_version,
            kind: &self.plan.resource.kind,
            metadata: ObjectMeta {
                name: Some(self.plan.name.clone()),
                namespace: Some(namespace.to_owned()),
                resource_version,
                ..Default::default()
            },
            status,
        };
        let body = serde_json::to_vec(&body).map_err(encode_error(Operation::WriteStatus, &key))?;
        let request = Request::new(self.url(namespace)).replace_subresource(
            "status",
            &self.plan.name,
            &post_params(),
            body,
        );
        match self.send(Operation::WriteStatus, &key, request).await {
            Ok(written) => Ok(FanOutOutcome::Written {
                uid: written.metadata.uid.unwrap_or_default(),
            }),
            Err(err) if err.is_not_found() => Ok(FanOutOutcome::Raced),
            Err(err) => benign(&err).ok_or(err),
        }
    }

    async fn delete(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
    ) -> Result<FanOutOutcome, ApiError> {
        let params = DeleteParams {
            preconditions: (!uid.is_empty()).then(|| Preconditions {
                uid: Some(uid.to_owned()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        let key = self.key(namespace, name);
        let request = Request::new(self.url(namespace)).delete(name, &params);
        match write::send::<serde_json::Value>(self.client, Operation::Delete, &key, request).await
        {
            Ok(_) => Ok(FanOutOutcome::Deleted),
            Err(err) if err.is_not_found() => Ok(FanOutOutcome::Deleted),
            Err(err) => benign(&err).ok_or(err),
        }
    }
}

/// Carries out `plan`, at most `concurrency` writes at a time. Every write is tried: one
/// namespace's failure does not keep the others from their object.
pub async fn execute_fan_out(
    client: &Client,
    plan: &FanOut,
    concurrency: usize,
) -> Result<FanOutReport, ApiError> {
    let encode = |body: &Option<Body>, operation| {
        body.as_ref()
            .map(Body::to_json)
            .transpose()
            .map_err(encode_error(
                operation,
                &ObjectKey {
                    resource: plan.resource.clone(),
                    namespace: None,
                    name: plan.name.clone(),
                },
            ))
    };
    let prototype = encode(&plan.prototype, Operation::Create)?;
    let status = encode(&plan.status, Operation::WriteStatus)?;
    let create_body = match &prototype {
        Some(p) => serde_json::to_vec(p).map_err(encode_error(
            Operation::Create,
            &ObjectKey {
                resource: plan.resource.clone(),
                namespace: None,
                name: plan.name.clone(),
            },
        ))?,
        None => Vec::new(),
    };
    let encoded = Encoded {
        client,
        plan,
        prototype,
        create_body,
        status,
    };
    // The futures are made up front: each borrows its own write (a closure handing out
    // borrows of its argument is not general enough for the buffered stream).
    let runs: Vec<_> = plan.writes.iter().map(|write| encoded.one(write)).collect();
    let results: Vec<Result<FanOutOutcome, ApiError>> = futures::stream::iter(runs)
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await;
    let mut report = FanOutReport {
        total: plan.writes.len(),
        ..FanOutReport::default()
    };
    for result in results {
        match result {
            Ok(FanOutOutcome::Raced) => report.raced = true,
            Ok(_) => {}
            Err(err) => report.failures.push(err),
        }
    }
    Ok(report)
}

//! Writing copies. One copy costs one request per changed part and nothing else: the create body
//! is serialised once per original and shared by every namespace, status writes carry only
//! metadata and status, and responses are decoded as metadata only.
//!
//! Copies are replaced (PUT), not applied: a copy must be exactly the projection of its original
//! (docs/operator-groups.md §10), including the removal of labels or annotations someone else added, which a
//! server-side apply would keep.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, PartialObjectMeta, Preconditions};
use kube::core::Request;
use kube::{Client, Resource};
use serde::Serialize;

use crate::api::{ClusterServiceVersion, ClusterServiceVersionStatus};
use crate::k8s::errors::is_namespace_terminating;
use crate::k8s::post_params;
use crate::k8s::write::{self, ApiError, ObjectKey, Operation};

/// How a write ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Written; the copy's uid.
    Written { uid: String },
    /// Removed (or already gone).
    Deleted,
    /// Someone else changed or created it meanwhile; plan again.
    Raced,
    /// The namespace is gone or being deleted; nothing to do there.
    NamespaceGone,
}

/// Writes the copies of one original.
pub struct CopyWriter {
    client: Client,
    prototype: ClusterServiceVersion,
    create_body: Vec<u8>,
    name: String,
}

#[derive(Serialize)]
struct StatusBody<'a> {
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    kind: &'static str,
    metadata: ObjectMeta,
    status: &'a ClusterServiceVersionStatus,
}

fn url(namespace: &str) -> String {
    ClusterServiceVersion::url_path(&(), Some(namespace))
}

fn copy_key(namespace: &str, name: &str) -> ObjectKey {
    ObjectKey::new::<ClusterServiceVersion>(Some(namespace), name)
}

fn encode_error(
    operation: Operation,
    key: ObjectKey,
) -> impl FnOnce(serde_json::Error) -> ApiError {
    move |e| ApiError::new(operation, key, kube::Error::SerdeError(e))
}

/// What a failure means when it is no failure: "plan again" or "namespace gone".
fn benign(err: &ApiError) -> Option<Outcome> {
    if err.is_conflict() {
        Some(Outcome::Raced)
    } else if is_namespace_terminating(&err.source) {
        // A terminating namespace refuses new content.
        Some(Outcome::NamespaceGone)
    } else {
        None
    }
}

impl CopyWriter {
    /// A writer for `prototype` (a [`copy_prototype`](crate::operator_group::copied_csv::copy_prototype)).
    pub fn new(
        client: Client,
        prototype: ClusterServiceVersion,
    ) -> Result<Self, serde_json::Error> {
        let create_body = serde_json::to_vec(&prototype)?;
        let name = prototype.metadata.name.clone().unwrap_or_default();
        Ok(Self {
            client,
            prototype,
            create_body,
            name,
        })
    }

    async fn send(
        &self,
        operation: Operation,
        key: &ObjectKey,
        request: Result<http::Request<Vec<u8>>, kube::core::request::Error>,
    ) -> Result<PartialObjectMeta<ClusterServiceVersion>, ApiError> {
        write::send(&self.client, operation, key, request).await
    }

    /// Creates the copy in `namespace`, then writes its status (a create ignores status).
    pub async fn create(&self, namespace: &str) -> Result<Outcome, ApiError> {
        let key = copy_key(namespace, &self.name);
        let request = Request::new(url(namespace)).create(&post_params(), self.create_body.clone());
        let created = match self.send(Operation::Create, &key, request).await {
            Ok(created) => created,
            Err(err) if err.is_not_found() => return Ok(Outcome::NamespaceGone),
            Err(err) => return benign(&err).ok_or(err),
        };
        let uid = created.metadata.uid.clone().unwrap_or_default();
        match self
            .write_status(namespace, created.metadata.resource_version.clone())
            .await?
        {
            Outcome::Written { .. } => Ok(Outcome::Written { uid }),
            other => Ok(other),
        }
    }

    /// Brings the copy in `namespace` (seen at `resource_version`) up to date: metadata and spec
    /// when `content`, the status subresource when `status`.
    pub async fn update(
        &self,
        namespace: &str,
        resource_version: &str,
        content: bool,
        status: bool,
    ) -> Result<Outcome, ApiError> {
        let key = copy_key(namespace, &self.name);
        let mut version = Some(resource_version.to_owned());
        let mut uid = String::new();
        if content {
            let mut copy = self.prototype.clone();
            copy.metadata.namespace = Some(namespace.to_owned());
            copy.metadata.resource_version = version.clone();
            let body =
                serde_json::to_vec(&copy).map_err(encode_error(Operation::Replace, key.clone()))?;
            let request = Request::new(url(namespace)).replace(&self.name, &post_params(), body);
            match self.send(Operation::Replace, &key, request).await {
                Ok(updated) => {
                    version = updated.metadata.resource_version;
                    uid = updated.metadata.uid.unwrap_or_default();
                }
                Err(err) if err.is_not_found() => return Ok(Outcome::Raced),
                Err(err) => return benign(&err).ok_or(err),
            }
        }
        if status {
            return self.write_status(namespace, version).await;
        }
        Ok(Outcome::Written { uid })
    }

    async fn write_status(
        &self,
        namespace: &str,
        resource_version: Option<String>,
    ) -> Result<Outcome, ApiError> {
        let Some(status) = self.prototype.status.as_ref() else {
            return Ok(Outcome::Written { uid: String::new() });
        };
        let key = copy_key(namespace, &self.name);
        let body = StatusBody {
            api_version: "operators.coreos.com/v1alpha1",
            kind: "ClusterServiceVersion",
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(namespace.to_owned()),
                resource_version,
                ..Default::default()
            },
            status,
        };
        let body =
            serde_json::to_vec(&body).map_err(encode_error(Operation::WriteStatus, key.clone()))?;
        let request = Request::new(url(namespace)).replace_subresource(
            "status",
            &self.name,
            &post_params(),
            body,
        );
        match self.send(Operation::WriteStatus, &key, request).await {
            Ok(written) => Ok(Outcome::Written {
                uid: written.metadata.uid.unwrap_or_default(),
            }),
            Err(err) if err.is_not_found() => Ok(Outcome::Raced),
            Err(err) => benign(&err).ok_or(err),
        }
    }
}

/// Deletes the copy `namespace/name` if it still has `uid` (a copy re-created meanwhile is
/// another object, judged on its own).
pub async fn delete_copy(
    client: &Client,
    namespace: &str,
    name: &str,
    uid: &str,
) -> Result<Outcome, ApiError> {
    let params = DeleteParams {
        preconditions: (!uid.is_empty()).then(|| Preconditions {
            uid: Some(uid.to_owned()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    let key = copy_key(namespace, name);
    let request = Request::new(url(namespace)).delete(name, &params);
    match write::send::<serde_json::Value>(client, Operation::Delete, &key, request).await {
        Ok(_) => Ok(Outcome::Deleted),
        Err(err) if err.is_not_found() => Ok(Outcome::Deleted),
        Err(err) => benign(&err).ok_or(err),
    }
}

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
use crate::k8s::errors::{is_conflict, is_not_found};

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

/// A failed write, naming the copy.
#[derive(Debug, thiserror::Error)]
#[error("copied CSV {namespace}/{name}: cannot {action}: {source}")]
pub struct WriteError {
    pub namespace: String,
    pub name: String,
    pub action: &'static str,
    #[source]
    pub source: kube::Error,
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

/// Sorts an API error into "plan again" / "namespace gone" / a real failure.
fn classify(err: kube::Error) -> Result<Outcome, kube::Error> {
    if is_conflict(&err) {
        Ok(Outcome::Raced)
    } else if crate::k8s::errors::is_namespace_terminating(&err) {
        // A terminating namespace refuses new content.
        Ok(Outcome::NamespaceGone)
    } else {
        Err(err)
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

    fn error(
        &self,
        namespace: &str,
        action: &'static str,
    ) -> impl FnOnce(kube::Error) -> WriteError {
        let namespace = namespace.to_owned();
        let name = self.name.clone();
        move |source| WriteError {
            namespace,
            name,
            action,
            source,
        }
    }

    async fn send(
        &self,
        request: http::Request<Vec<u8>>,
    ) -> Result<PartialObjectMeta<ClusterServiceVersion>, kube::Error> {
        self.client.request(request).await
    }

    /// Creates the copy in `namespace`, then writes its status (a create ignores status).
    pub async fn create(&self, namespace: &str) -> Result<Outcome, WriteError> {
        let request = Request::new(url(namespace))
            .create(&crate::k8s::post_params(), self.create_body.clone())
            .map_err(|e| {
                self.error(namespace, "build the create request")(kube::Error::BuildRequest(e))
            })?;
        let created = match self.send(request).await {
            Ok(created) => created,
            Err(err) if is_not_found(&err) => {
                return Ok(Outcome::NamespaceGone);
            }
            Err(err) => return classify(err).map_err(self.error(namespace, "create")),
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
    ) -> Result<Outcome, WriteError> {
        let mut version = Some(resource_version.to_owned());
        let mut uid = String::new();
        if content {
            let mut copy = self.prototype.clone();
            copy.metadata.namespace = Some(namespace.to_owned());
            copy.metadata.resource_version = version.clone();
            let body = serde_json::to_vec(&copy)
                .map_err(|e| self.error(namespace, "encode")(kube::Error::SerdeError(e)))?;
            let request = Request::new(url(namespace))
                .replace(&self.name, &crate::k8s::post_params(), body)
                .map_err(|e| {
                    self.error(namespace, "build the update request")(kube::Error::BuildRequest(e))
                })?;
            match self.send(request).await {
                Ok(updated) => {
                    version = updated.metadata.resource_version;
                    uid = updated.metadata.uid.unwrap_or_default();
                }
                Err(err) if is_not_found(&err) => return Ok(Outcome::Raced),
                Err(err) => return classify(err).map_err(self.error(namespace, "update")),
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
    ) -> Result<Outcome, WriteError> {
        let Some(status) = self.prototype.status.as_ref() else {
            return Ok(Outcome::Written { uid: String::new() });
        };
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
        let body = serde_json::to_vec(&body)
            .map_err(|e| self.error(namespace, "encode the status")(kube::Error::SerdeError(e)))?;
        let request = Request::new(url(namespace))
            .replace_subresource("status", &self.name, &crate::k8s::post_params(), body)
            .map_err(|e| {
                self.error(namespace, "build the status request")(kube::Error::BuildRequest(e))
            })?;
        match self.send(request).await {
            Ok(written) => Ok(Outcome::Written {
                uid: written.metadata.uid.unwrap_or_default(),
            }),
            Err(err) if is_not_found(&err) => Ok(Outcome::Raced),
            Err(err) => classify(err).map_err(self.error(namespace, "write the status of")),
        }
    }
}

/// Deletes the copy `namespace/name` if it still has `uid`.
pub async fn delete_copy(
    client: &Client,
    namespace: &str,
    name: &str,
    uid: &str,
) -> Result<Outcome, WriteError> {
    let params = DeleteParams {
        preconditions: (!uid.is_empty()).then(|| Preconditions {
            uid: Some(uid.to_owned()),
            resource_version: None,
        }),
        ..Default::default()
    };
    let error = |source| WriteError {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        action: "delete",
        source,
    };
    let request = Request::new(url(namespace))
        .delete(name, &params)
        .map_err(|e| error(kube::Error::BuildRequest(e)))?;
    match client.request::<serde_json::Value>(request).await {
        Ok(_) => Ok(Outcome::Deleted),
        Err(err) if is_not_found(&err) => Ok(Outcome::Deleted),
        Err(err) => classify(err).map_err(error),
    }
}

//! The one write path (docs/controller-startup.md, "One write path"): every create, apply,
//! patch, status write and delete of a reconciler goes through these functions. Each carries the
//! `olm-rs` field manager, and each failure is an [`ApiError`] naming the operation, the kind,
//! the namespace and the name, with the cause kept matchable ([`ApiError::failure`]).
//!
//! `tests/integration/write_path.rs` fails when code under `src/reconcile` writes around them.

use std::fmt;

use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::core::{ApiResource, DynamicObject};
use kube::{Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::MANAGER;
use super::errors::{AbsentOk, ApiFailure};

/// The API operation that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Get,
    List,
    Create,
    /// A whole-object replace (PUT).
    Replace,
    Apply,
    Patch,
    WriteStatus,
    Delete,
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Operation::Get => "get",
            Operation::List => "list",
            Operation::Create => "create",
            Operation::Replace => "replace",
            Operation::Apply => "apply",
            Operation::Patch => "patch",
            Operation::WriteStatus => "write the status of",
            Operation::Delete => "delete",
        })
    }
}

/// Which object an API call concerns: its kind (with group and version for dynamic calls),
/// namespace and name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectKey {
    pub resource: ApiResource,
    /// `None` for a cluster-scoped object.
    pub namespace: Option<String>,
    pub name: String,
}

impl ObjectKey {
    /// The key of a typed object.
    pub fn of<K: Resource<DynamicType = ()>>(obj: &K) -> Self {
        Self::new::<K>(obj.meta().namespace.as_deref(), &obj.name_any())
    }

    /// The key of the `K` named `name` (in `namespace` when namespaced).
    pub fn new<K: Resource<DynamicType = ()>>(namespace: Option<&str>, name: &str) -> Self {
        Self {
            resource: ApiResource::erase::<K>(&()),
            namespace: namespace.map(str::to_owned),
            name: name.to_owned(),
        }
    }

    /// The dynamic API this key's object is reached through.
    pub fn api(&self, client: &Client) -> Api<DynamicObject> {
        match &self.namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &self.resource),
            None => Api::all_with(client.clone(), &self.resource),
        }
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {ns}/{}", self.resource.kind, self.name),
            None => write!(f, "{} {}", self.resource.kind, self.name),
        }
    }
}

/// A refused or failed API call: which operation on which object, and the server's answer.
#[derive(Debug, thiserror::Error)]
#[error("{operation} {object}: {source}")]
pub struct ApiError {
    pub operation: Operation,
    /// Boxed: errors travel in `Result`s everywhere, and the key is most of their size.
    pub object: Box<ObjectKey>,
    #[source]
    pub source: kube::Error,
}

impl ApiError {
    pub fn new(operation: Operation, object: ObjectKey, source: kube::Error) -> Self {
        Self {
            operation,
            object: Box::new(object),
            source,
        }
    }

    /// The kind of failure: 403, 404, 409, 5xx, unreachable, …
    pub fn failure(&self) -> ApiFailure {
        ApiFailure::of(&self.source)
    }

    /// The `error` label of `olm_rs_reconcile_errors_total`.
    pub fn metric_label(&self) -> &'static str {
        self.failure().metric_label()
    }

    /// 409: computed from an older copy (or the name is taken); sync again on fresh data.
    pub fn is_conflict(&self) -> bool {
        self.failure() == ApiFailure::Conflict
    }

    /// 404.
    pub fn is_not_found(&self) -> bool {
        self.failure() == ApiFailure::NotFound
    }
}

impl<T> AbsentOk<T> for Result<T, ApiError> {
    type Error = ApiError;
    fn absent_ok(self) -> Result<Option<T>, ApiError> {
        match self {
            Ok(value) => Ok(Some(value)),
            Err(err) if err.is_not_found() => Ok(None),
            Err(err) => Err(err),
        }
    }
}

/// How an apply treats fields another manager set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ownership {
    /// Report a 409 when another manager owns a field we set (objects users may edit).
    Shared,
    /// Take every field we set (objects olm-rs owns whole: drift is put back).
    Force,
}

fn params(ownership: Ownership) -> PatchParams {
    let params = PatchParams::apply(MANAGER);
    match ownership {
        Ownership::Shared => params,
        Ownership::Force => params.force(),
    }
}

/// Creates `obj` through `api`.
pub async fn create<K>(api: &Api<K>, obj: &K) -> Result<K, ApiError>
where
    K: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + fmt::Debug,
{
    api.create(&super::post_params(), obj)
        .await
        .map_err(|e| ApiError::new(Operation::Create, key_in(api, obj), e))
}

/// Server-side applies `obj` (which carries apiVersion, kind and name) through `api`.
pub async fn apply<K>(api: &Api<K>, obj: &K, ownership: Ownership) -> Result<K, ApiError>
where
    K: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + fmt::Debug,
{
    let key = key_in(api, obj);
    api.patch(&key.name, &params(ownership), &Patch::Apply(obj))
        .await
        .map_err(|e| ApiError::new(Operation::Apply, key, e))
}

/// The key of `obj` as `api` reaches it (an object without a namespace written through a
/// namespaced API lands in the API's namespace).
fn key_in<K: Resource<DynamicType = ()>>(api: &Api<K>, obj: &K) -> ObjectKey {
    let namespace = obj.meta().namespace.as_deref().or(api.namespace());
    ObjectKey::new::<K>(namespace, &obj.name_any())
}

/// Server-side applies a dynamic object (install plan steps, bundle objects).
pub async fn apply_dynamic(
    client: &Client,
    key: &ObjectKey,
    obj: &serde_json::Value,
    ownership: Ownership,
) -> Result<DynamicObject, ApiError> {
    key.api(client)
        .patch(&key.name, &params(ownership), &Patch::Apply(obj))
        .await
        .map_err(|e| ApiError::new(Operation::Apply, key.clone(), e))
}

/// A JSON merge patch of `key`; with `resource_version`, only if the object is still the one
/// the patch was computed from (else 409).
pub async fn merge_patch(
    client: &Client,
    key: &ObjectKey,
    patch: &serde_json::Value,
    resource_version: Option<&str>,
) -> Result<DynamicObject, ApiError> {
    let mut patch = patch.clone();
    if let (Some(rv), Some(body)) = (resource_version, patch.as_object_mut()) {
        let metadata = body
            .entry("metadata")
            .or_insert_with(|| serde_json::json!({}));
        if let Some(metadata) = metadata.as_object_mut() {
            metadata.insert("resourceVersion".to_owned(), rv.into());
        }
    }
    key.api(client)
        .patch(&key.name, &super::patch_params(), &Patch::Merge(&patch))
        .await
        .map_err(|e| ApiError::new(Operation::Patch, key.clone(), e))
}

/// Replaces the status of `key` with `status`, only if the object is still at
/// `resource_version` (else 409): the status was computed from that version.
pub async fn write_status(
    client: &Client,
    key: &ObjectKey,
    resource_version: &str,
    status: &serde_json::Value,
) -> Result<DynamicObject, ApiError> {
    let mut metadata = serde_json::json!({
        "name": key.name,
        "resourceVersion": resource_version,
    });
    if let Some(ns) = &key.namespace {
        metadata["namespace"] = ns.clone().into();
    }
    let body = serde_json::json!({
        "apiVersion": key.resource.api_version,
        "kind": key.resource.kind,
        "metadata": metadata,
        "status": status,
    });
    let obj: DynamicObject = serde_json::from_value(body).map_err(|e| {
        ApiError::new(
            Operation::WriteStatus,
            key.clone(),
            kube::Error::SerdeError(e),
        )
    })?;
    key.api(client)
        .replace_status(&key.name, &super::post_params(), &obj)
        .await
        .map_err(|e| ApiError::new(Operation::WriteStatus, key.clone(), e))
}

/// Sends a request built by hand for `key`, with the error reporting of every other write: for
/// writes that share one encoded body among many objects or decode only part of the answer
/// (the copies of a CSV). The request must carry the field manager ([`super::post_params`],
/// [`super::patch_params`]).
pub async fn send<T: DeserializeOwned>(
    client: &Client,
    operation: Operation,
    key: &ObjectKey,
    request: Result<http::Request<Vec<u8>>, kube::core::request::Error>,
) -> Result<T, ApiError> {
    let request =
        request.map_err(|e| ApiError::new(operation, key.clone(), kube::Error::BuildRequest(e)))?;
    client
        .request(request)
        .await
        .map_err(|e| ApiError::new(operation, key.clone(), e))
}

/// How a delete treats what it finds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeleteOptions {
    /// Delete only the object at this resourceVersion (else 409): it was judged at that version.
    pub resource_version: Option<String>,
    /// Delete dependents first (`Foreground`) or leave them to the garbage collector.
    pub foreground: bool,
    /// Grace period for the object's pods (`None`: the object's default).
    pub grace_period_seconds: Option<u32>,
}

/// Deletes `key`; an object already gone is fine (`Ok(false)`).
pub async fn delete(
    client: &Client,
    key: &ObjectKey,
    options: &DeleteOptions,
) -> Result<bool, ApiError> {
    let params = DeleteParams {
        preconditions: options.resource_version.as_ref().map(|rv| Preconditions {
            resource_version: Some(rv.clone()),
            uid: None,
        }),
        propagation_policy: options
            .foreground
            .then_some(kube::api::PropagationPolicy::Foreground),
        grace_period_seconds: options.grace_period_seconds,
        ..DeleteParams::default()
    };
    match key.api(client).delete(&key.name, &params).await {
        Ok(_) => Ok(true),
        Err(err) if ApiFailure::of(&err) == ApiFailure::NotFound => Ok(false),
        Err(err) => Err(ApiError::new(Operation::Delete, key.clone(), err)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Subscription;

    fn failed(code: u16) -> ApiError {
        ApiError::new(
            Operation::Create,
            ObjectKey::new::<Subscription>(Some("demo"), "etcd"),
            kube::Error::Api(
                kube::core::Status::failure("test", "Test")
                    .with_code(code)
                    .boxed(),
            ),
        )
    }

    #[test]
    fn absent_is_an_answer_for_api_errors_too() {
        let gone: Result<u8, ApiError> = Err(failed(404));
        assert_eq!(gone.absent_ok().unwrap(), None);
        let refused: Result<u8, ApiError> = Err(failed(403));
        assert_eq!(
            refused.absent_ok().unwrap_err().failure(),
            ApiFailure::Forbidden
        );
    }

    #[test]
    fn errors_name_the_operation_kind_namespace_and_name_and_keep_the_cause() {
        let err = ApiError::new(
            Operation::WriteStatus,
            ObjectKey::new::<Subscription>(Some("demo"), "etcd"),
            kube::Error::Api(
                kube::core::Status::failure("the object has been modified", "Conflict")
                    .with_code(409)
                    .boxed(),
            ),
        );
        assert!(err.is_conflict());
        assert_eq!(err.metric_label(), "conflict");
        let text = err.to_string();
        assert!(
            text.starts_with("write the status of Subscription demo/etcd: "),
            "{text}"
        );
        let cluster = ObjectKey::new::<k8s_openapi::api::rbac::v1::ClusterRole>(None, "view");
        assert_eq!(cluster.to_string(), "ClusterRole view");
    }
}

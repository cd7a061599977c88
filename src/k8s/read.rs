//! The reads a reconciler makes live, past the reflector stores: a just-before-write check, an
//! object no store holds. Each failure is an [`ApiError`] naming the operation, the kind, the
//! namespace and the name, like every write's ([`super::write`]).

use std::fmt;

use kube::api::Api;
use kube::core::DynamicObject;
use kube::{Client, Resource};
use serde::de::DeserializeOwned;

use super::write::{ApiError, ObjectKey, Operation};

/// Reads one object through `api`; `Ok(None)` when it does not exist.
pub async fn get<K>(api: &Api<K>, name: &str) -> Result<Option<K>, ApiError>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + fmt::Debug,
{
    api.get_opt(name).await.map_err(|e| {
        ApiError::new(
            Operation::Get,
            ObjectKey::new::<K>(api.namespace(), name),
            e,
        )
    })
}

/// Lists `K` through `api` (only where no store holds them: a live read just before a write).
pub async fn list<K>(api: &Api<K>, params: &kube::api::ListParams) -> Result<Vec<K>, ApiError>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + fmt::Debug,
{
    api.list(params)
        .await
        .map(|l| l.items)
        .map_err(|e| ApiError::new(Operation::List, ObjectKey::new::<K>(api.namespace(), ""), e))
}

/// Reads the object at `key` through the dynamic API; `Ok(None)` when it does not exist.
pub async fn get_dynamic(
    client: &Client,
    key: &ObjectKey,
) -> Result<Option<DynamicObject>, ApiError> {
    key.api(client)
        .get_opt(&key.name)
        .await
        .map_err(|e| ApiError::new(Operation::Get, key.clone(), e))
}

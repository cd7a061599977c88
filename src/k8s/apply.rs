//! Server-side apply with olm-rs's field manager.
//!
//! Spec and metadata are applied without `force`: if a user or another controller owns a field we
//! also set, the API server answers 409 and the reconciler reports the conflict instead of silently
//! taking the field. Status is ours alone, so status applies are forced.

use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::MANAGER;

/// Server-side applies `obj` (which must carry apiVersion, kind and name) with olm-rs's manager.
pub async fn apply<K>(api: &Api<K>, obj: &K) -> Result<K, kube::Error>
where
    K: Resource + Clone + Serialize + DeserializeOwned + std::fmt::Debug,
{
    let name = obj.name_any();
    api.patch(&name, &PatchParams::apply(MANAGER), &Patch::Apply(obj))
        .await
}

/// Server-side applies `obj` and takes every field it sets (`force`): for objects olm-rs owns
/// whole, such as a CSV's RBAC and certificate objects, where drift is put back, not reported.
pub async fn apply_owned<K>(api: &Api<K>, obj: &K) -> Result<K, kube::Error>
where
    K: Resource + Clone + Serialize + DeserializeOwned + std::fmt::Debug,
{
    let name = obj.name_any();
    api.patch(
        &name,
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(obj),
    )
    .await
}

/// Server-side applies `status` to the status subresource of `name`, forcing ownership (status
/// is written by olm-rs only). `status` is the value of the `status` field, not a whole object.
pub async fn apply_status<K>(
    api: &Api<K>,
    name: &str,
    status: &impl Serialize,
) -> Result<K, kube::Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    let body = status_patch_body::<K>(status)?;
    api.patch_status(
        name,
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(body),
    )
    .await
}

/// The apply body for a status write: apiVersion and kind are mandatory in an apply.
pub fn status_patch_body<K>(status: &impl Serialize) -> Result<serde_json::Value, kube::Error>
where
    K: Resource<DynamicType = ()>,
{
    let status = serde_json::to_value(status).map_err(kube::Error::SerdeError)?;
    Ok(serde_json::json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": status,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::Deployment;

    #[test]
    fn status_body_names_the_kind_and_carries_only_status() {
        let body =
            status_patch_body::<Deployment>(&serde_json::json!({"readyReplicas": 1})).unwrap();
        assert_eq!(
            body,
            serde_json::json!({
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "status": {"readyReplicas": 1},
            })
        );
    }
}

//! Where a step's object lives on the API server: its resource and scope. Kinds olm-rs knows
//! are mapped directly; the extra kinds of §7.3 (PrometheusRule, ConsoleYAMLSample, …) are
//! looked up by discovery, since their APIs come from CRDs that may or may not be installed.

use kube::Client;
use kube::core::{ApiResource, GroupVersionKind};

use crate::k8s::discovery::ServedApis;
use crate::plan::kinds::{Scope, StepKind};
use crate::plan::object::StepObject;

pub use crate::plan::pass::StepApi;

/// Why the resource of a step could not be found.
#[derive(Debug, thiserror::Error)]
pub enum ApiLookupError {
    /// OLM's wording (§7.3).
    #[error(
        "api-server resource not found installing {kind} {name}: GroupVersionKind {group}/{version}, Kind={kind} not found on the cluster. This API may have been deprecated and removed, see https://kubernetes.io/docs/reference/using-api/deprecation-guide/ for more information."
    )]
    NotFound {
        group: String,
        version: String,
        kind: String,
        name: String,
    },
    #[error("discovering the API of {kind} {name}: {source}")]
    Discovery {
        kind: String,
        name: String,
        #[source]
        source: kube::Error,
    },
}

/// The resource of `object` (a step of kind `kind`); kinds olm-rs does not know are looked up
/// by discovery, kept in the process's cache of what is served (`k8s::discovery`).
pub async fn step_api(
    client: &Client,
    served: &ServedApis,
    kind: StepKind,
    object: &StepObject,
) -> Result<StepApi, ApiLookupError> {
    let manifest_kind = StepKind::manifest_kind(&object.kind);
    let gvk = GroupVersionKind::gvk(&object.group, &object.version, manifest_kind);
    let plural = match kind {
        StepKind::CustomResourceDefinition => Some("customresourcedefinitions"),
        StepKind::ClusterServiceVersion => Some("clusterserviceversions"),
        StepKind::Subscription => Some("subscriptions"),
        StepKind::ServiceAccount => Some("serviceaccounts"),
        StepKind::Role => Some("roles"),
        StepKind::RoleBinding => Some("rolebindings"),
        StepKind::ClusterRole => Some("clusterroles"),
        StepKind::ClusterRoleBinding => Some("clusterrolebindings"),
        StepKind::Service => Some("services"),
        StepKind::ConfigMap => Some("configmaps"),
        StepKind::BundleSecret => Some("secrets"),
        StepKind::Discovered(_) => None,
    };
    if let Some(plural) = plural {
        return Ok(StepApi {
            resource: ApiResource::from_gvk_with_plural(&gvk, plural),
            scope: kind.scope(),
        });
    }
    match served.resource_of(client, &gvk).await {
        Ok(Some(found)) => Ok(StepApi {
            resource: found.resource,
            scope: if found.namespaced {
                Scope::Namespaced
            } else {
                Scope::Cluster
            },
        }),
        Ok(None) => Err(not_found(object, manifest_kind)),
        Err(source) => Err(ApiLookupError::Discovery {
            kind: manifest_kind.to_owned(),
            name: object.name.clone(),
            source,
        }),
    }
}

fn not_found(object: &StepObject, kind: &str) -> ApiLookupError {
    ApiLookupError::NotFound {
        group: object.group.clone(),
        version: object.version.clone(),
        kind: kind.to_owned(),
        name: object.name.clone(),
    }
}

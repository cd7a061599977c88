//! Where a step's object lives on the API server: its resource and scope. Kinds olm-rs knows
//! are mapped directly; the extra kinds of §7.3 (PrometheusRule, ConsoleYAMLSample, …) are
//! looked up by discovery, since their APIs come from CRDs that may or may not be installed.

use std::collections::HashMap;
use std::sync::Mutex;

use kube::Client;
use kube::core::{ApiResource, GroupVersionKind};
use kube::discovery::Scope as DiscoveryScope;

use crate::k8s::errors::is_not_found;
use crate::plan::kinds::{Scope, StepKind};
use crate::plan::object::StepObject;

/// A step's resource.
#[derive(Debug, Clone)]
pub struct StepApi {
    pub resource: ApiResource,
    pub scope: Scope,
}

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

/// The resources discovery found for step kinds olm-rs does not know, kept until a CRD or an
/// APIService changes (only then does what the server serves change): a plan's pass would
/// otherwise ask discovery again for every such step, on every pass. Only answers that found
/// the kind are kept; a kind not served yet may come with the next CRD.
#[derive(Default)]
pub struct DiscoveredKinds {
    /// Answers by group/version/kind, with the invalidation count they were asked under.
    answers: Mutex<(u64, HashMap<String, StepApi>)>,
}

impl DiscoveredKinds {
    fn lock(&self) -> std::sync::MutexGuard<'_, (u64, HashMap<String, StepApi>)> {
        // Every update is one insert or clear: a poisoned lock still holds whole answers.
        self.answers.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Forgets every answer (a CRD or an APIService changed).
    pub fn invalidate(&self) {
        let mut answers = self.lock();
        answers.0 = answers.0.wrapping_add(1);
        answers.1.clear();
    }

    /// The kept answer for `key`, or the invalidation count to ask under.
    fn cached(&self, key: &str) -> Result<StepApi, u64> {
        let answers = self.lock();
        answers.1.get(key).cloned().ok_or(answers.0)
    }

    /// Keeps an answer asked under `asked_at`, unless a CRD or APIService changed since.
    fn keep(&self, asked_at: u64, key: String, api: StepApi) {
        let mut answers = self.lock();
        if answers.0 == asked_at {
            answers.1.insert(key, api);
        }
    }
}

/// The resource of `object` (a step of kind `kind`); kinds olm-rs does not know are looked up
/// by discovery once, then kept in `discovered`.
pub async fn step_api(
    client: &Client,
    discovered: &DiscoveredKinds,
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
    let key = format!("{}/{}/{}", gvk.group, gvk.version, gvk.kind);
    let asked_at = match discovered.cached(&key) {
        Ok(api) => return Ok(api),
        Err(asked_at) => asked_at,
    };
    match kube::discovery::pinned_kind(client, &gvk).await {
        Ok((resource, caps)) => {
            let api = StepApi {
                resource,
                scope: match caps.scope {
                    DiscoveryScope::Cluster => Scope::Cluster,
                    DiscoveryScope::Namespaced => Scope::Namespaced,
                },
            };
            discovered.keep(asked_at, key, api.clone());
            Ok(api)
        }
        Err(kube::Error::Discovery(_)) => Err(not_found(object, manifest_kind)),
        Err(err) if is_not_found(&err) => Err(not_found(object, manifest_kind)),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn api(plural: &str) -> StepApi {
        let gvk = GroupVersionKind::gvk("monitoring.coreos.com", "v1", "PrometheusRule");
        StepApi {
            resource: ApiResource::from_gvk_with_plural(&gvk, plural),
            scope: Scope::Namespaced,
        }
    }

    #[test]
    fn an_answer_is_kept_until_a_crd_or_apiservice_changes() {
        let kinds = DiscoveredKinds::default();
        let key = "monitoring.coreos.com/v1/PrometheusRule";
        let asked_at = kinds.cached(key).unwrap_err();
        kinds.keep(asked_at, key.into(), api("prometheusrules"));
        assert_eq!(
            kinds.cached(key).unwrap().resource.plural,
            "prometheusrules"
        );
        kinds.invalidate();
        assert!(kinds.cached(key).is_err());
    }

    #[test]
    fn an_answer_asked_before_a_change_is_not_kept() {
        let kinds = DiscoveredKinds::default();
        let key = "monitoring.coreos.com/v1/PrometheusRule";
        let asked_at = kinds.cached(key).unwrap_err();
        kinds.invalidate();
        kinds.keep(asked_at, key.into(), api("prometheusrules"));
        assert!(
            kinds.cached(key).is_err(),
            "the answer may predate the change"
        );
    }
}

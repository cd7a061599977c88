//! What the API server serves, asked once and kept: the resources of each group-version
//! (discovery) and the server's version. Both controllers that ask share the one cache in the
//! `Context`: the CSV controller (are a CSV's native APIs served? docs/csv-phases.md §4) and the
//! InstallPlan controller (the resource of a step kind olm-rs does not know,
//! docs/install-plans.md §7.3).
//!
//! What is served changes only when a CRD or an APIService does, so every controller that reads
//! the cache clears it on those events; an answer asked before such a change is not kept (it may
//! predate it). The server version changes only with a control-plane upgrade: it is read again
//! after [`SERVER_VERSION_TTL`]. Failures are never kept: the next sync asks again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use kube::Client;
use kube::core::{ApiResource, GroupVersion, GroupVersionKind};

use super::errors::is_not_found;

/// How long a read server version is trusted.
pub const SERVER_VERSION_TTL: Duration = Duration::from_secs(600);

/// One resource a group-version serves (subresources left out).
#[derive(Debug, Clone, PartialEq)]
pub struct ServedResource {
    pub resource: ApiResource,
    pub namespaced: bool,
}

/// The resources of one group-version; empty when the server does not serve it (404).
pub type Served = Arc<[ServedResource]>;

#[derive(Default)]
struct Answers {
    /// Bumped by every [`ServedApis::invalidate`]: an answer asked under an older count is
    /// dropped.
    generation: u64,
    by_group_version: HashMap<String, Served>,
}

/// The cache.
#[derive(Default)]
pub struct ServedApis {
    answers: Mutex<Answers>,
    server_version: Mutex<Option<(Instant, String)>>,
}

impl ServedApis {
    fn answers(&self) -> MutexGuard<'_, Answers> {
        // Every update is one insert or clear: a poisoned lock still holds whole answers.
        self.answers.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Forgets every group-version (a CRD or an APIService changed what the server serves).
    pub fn invalidate(&self) {
        let mut answers = self.answers();
        answers.generation = answers.generation.wrapping_add(1);
        answers.by_group_version.clear();
    }

    /// The kept answer for `key`, or the generation to ask under.
    fn cached(&self, key: &str) -> Result<Served, u64> {
        let answers = self.answers();
        answers
            .by_group_version
            .get(key)
            .cloned()
            .ok_or(answers.generation)
    }

    /// Keeps an answer asked under `asked_at`, unless the cache was cleared since.
    fn keep(&self, asked_at: u64, key: String, served: Served) {
        let mut answers = self.answers();
        if answers.generation == asked_at {
            answers.by_group_version.insert(key, served);
        }
    }

    /// The resources `group`/`version` serves, from the cache or asked; a group-version the
    /// server does not serve (404) serves nothing.
    pub async fn resources(
        &self,
        client: &Client,
        group: &str,
        version: &str,
    ) -> Result<Served, kube::Error> {
        // `group/version`, or `version` for the core group: discovery's own spelling.
        let key = GroupVersion::gv(group, version).api_version();
        let asked_at = match self.cached(&key) {
            Ok(served) => return Ok(served),
            Err(asked_at) => asked_at,
        };
        let answer = if group.is_empty() {
            client.list_core_api_resources(version).await
        } else {
            client.list_api_group_resources(&key).await
        };
        let served: Served = match answer {
            Ok(list) => served_resources(group, version, list.resources),
            Err(err) if is_not_found(&err) => Arc::from([]),
            Err(err) => return Err(err),
        };
        self.keep(asked_at, key, served.clone());
        Ok(served)
    }

    /// The resource of `gvk`, if the server serves that kind.
    pub async fn resource_of(
        &self,
        client: &Client,
        gvk: &GroupVersionKind,
    ) -> Result<Option<ServedResource>, kube::Error> {
        let served = self.resources(client, &gvk.group, &gvk.version).await?;
        Ok(served.iter().find(|r| r.resource.kind == gvk.kind).cloned())
    }

    /// The server's `gitVersion`, read again after [`SERVER_VERSION_TTL`].
    pub async fn server_version(&self, client: &Client) -> Result<String, kube::Error> {
        let kept = self
            .server_version
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let Some((read, version)) = kept
            && read.elapsed() < SERVER_VERSION_TTL
        {
            return Ok(version);
        }
        let info = client.apiserver_version().await?;
        *self
            .server_version
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some((Instant::now(), info.git_version.clone()));
        Ok(info.git_version)
    }
}

/// The top-level resources of a discovery answer (`deployments`, not `deployments/status`).
fn served_resources(
    group: &str,
    version: &str,
    resources: Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResource>,
) -> Served {
    resources
        .into_iter()
        .filter(|r| !r.name.contains('/'))
        .map(|r| ServedResource {
            resource: ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk(group, version, &r.kind),
                &r.name,
            ),
            namespaced: r.namespaced,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResource;

    fn served(kind: &str) -> Served {
        served_resources(
            "monitoring.coreos.com",
            "v1",
            vec![
                APIResource {
                    name: "prometheusrules".into(),
                    kind: kind.into(),
                    namespaced: true,
                    ..APIResource::default()
                },
                APIResource {
                    name: "prometheusrules/status".into(),
                    kind: kind.into(),
                    namespaced: true,
                    ..APIResource::default()
                },
            ],
        )
    }

    #[test]
    fn subresources_are_left_out() {
        let served = served("PrometheusRule");
        assert_eq!(served.len(), 1);
        assert_eq!(served[0].resource.plural, "prometheusrules");
        assert_eq!(served[0].resource.api_version, "monitoring.coreos.com/v1");
        assert!(served[0].namespaced);
    }

    #[test]
    fn an_answer_is_kept_until_cleared_and_one_asked_before_a_clear_is_dropped() {
        let cache = ServedApis::default();
        let key = "monitoring.coreos.com/v1";
        let asked_at = cache.cached(key).unwrap_err();
        cache.keep(asked_at, key.into(), served("PrometheusRule"));
        assert_eq!(cache.cached(key).unwrap().len(), 1);
        cache.invalidate();
        assert!(cache.cached(key).is_err(), "a CRD event forgets everything");

        let asked_at = cache.cached(key).unwrap_err();
        cache.invalidate();
        cache.keep(asked_at, key.into(), served("PrometheusRule"));
        assert!(
            cache.cached(key).is_err(),
            "the answer may predate the change"
        );
    }
}

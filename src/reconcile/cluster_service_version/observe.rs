//! Builds the [`Observed`] snapshot for one CSV from the stores, plus the few live lookups the
//! stores cannot answer (discovery, server version).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use kube::Client;

use crate::api::ClusterServiceVersion;
use crate::csv::identity::namespace;
use crate::csv::{Discovery, DiscoveryFailed, Observed, ServerVersion};
use crate::k8s::errors::is_not_found;

use super::stores::Stores;

/// Discovery answers and the server version, kept between syncs: every CSV sync asks them, and
/// they change only when a CRD or an APIService does (the controller clears the group-versions
/// on those events) or when the control plane is upgraded (the version is read again after
/// [`SERVER_VERSION_TTL`]). Failures are not kept: the next sync asks again.
#[derive(Default)]
pub struct DiscoveryCache {
    /// Answers, with the invalidation count they were asked under.
    group_versions: Mutex<(u64, BTreeMap<String, BTreeSet<String>>)>,
    server_version: Mutex<Option<(std::time::Instant, String)>>,
}

/// How long a read server version is trusted.
pub const SERVER_VERSION_TTL: std::time::Duration = std::time::Duration::from_secs(600);

impl DiscoveryCache {
    /// Forgets every group-version (a CRD or an APIService changed what the server serves).
    pub fn invalidate(&self) {
        let mut answers = self
            .group_versions
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        answers.0 = answers.0.wrapping_add(1);
        answers.1.clear();
    }

    /// The kept answer for `key`, or the invalidation count to ask under.
    fn cached(&self, key: &str) -> Result<BTreeSet<String>, u64> {
        let answers = self
            .group_versions
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        answers.1.get(key).cloned().ok_or(answers.0)
    }

    /// Keeps an answer asked under `asked_at`, unless a CRD or APIService changed since (the
    /// answer may predate the change).
    fn keep(&self, asked_at: u64, key: String, kinds: BTreeSet<String>) {
        let mut answers = self
            .group_versions
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if answers.0 == asked_at {
            answers.1.insert(key, kinds);
        }
    }
}

pub async fn observe(
    client: &Client,
    stores: &Stores,
    cache: &DiscoveryCache,
    csv: &ClusterServiceVersion,
) -> Observed {
    let ns = namespace(csv);
    Observed {
        csvs: stores.csvs.in_namespace(ns),
        operator_groups: stores.operator_groups.in_namespace(ns),
        all_operator_groups: stores.operator_groups.all(),
        crds: stores.crds.all(),
        api_services: stores.api_services.all(),
        discovery: discovery(client, cache, csv).await,
        server_version: server_version(client, cache, csv).await,
        service_accounts: stores.service_accounts.in_namespace(ns),
        roles: stores.roles.in_namespace(ns),
        role_bindings: stores.role_bindings.in_namespace(ns),
        cluster_roles: stores.cluster_roles.all(),
        cluster_role_bindings: stores.cluster_role_bindings.all(),
        deployments: stores.deployments.in_namespace(ns),
        subscriptions: stores.subscriptions.in_namespace(ns),
        operator_conditions: stores.operator_conditions.in_namespace(ns),
        certs: super::certs::observe_certs(stores, ns),
    }
}

/// Discovery for the group-versions the CSV's native APIs and required APIServices name.
/// A group-version the server does not serve (404) is recorded as serving nothing; other
/// failures are recorded as unknown.
async fn discovery(
    client: &Client,
    cache: &DiscoveryCache,
    csv: &ClusterServiceVersion,
) -> Discovery {
    let mut wanted: BTreeSet<(String, String)> = csv
        .spec
        .native_apis
        .iter()
        .flatten()
        .map(|g| (g.group.clone(), g.version.clone()))
        .collect();
    let required = csv
        .spec
        .api_service_definitions
        .as_ref()
        .and_then(|d| d.required.as_ref());
    wanted.extend(
        required
            .into_iter()
            .flatten()
            .map(|d| (d.group.clone(), d.version.clone())),
    );
    let mut group_versions = BTreeMap::new();
    for (group, version) in wanted {
        let key = Discovery::key(&group, &version);
        let asked_at = match cache.cached(&key) {
            Ok(kinds) => {
                group_versions.insert(key, Ok(kinds));
                continue;
            }
            Err(asked_at) => asked_at,
        };
        let answer = if group.is_empty() {
            client.list_core_api_resources(&version).await
        } else {
            client.list_api_group_resources(&key).await
        };
        let result = match answer {
            Ok(list) => Ok(list.resources.into_iter().map(|r| r.kind).collect()),
            Err(err) if is_not_found(&err) => Ok(BTreeSet::new()),
            Err(err) => Err(DiscoveryFailed::new(err.to_string())),
        };
        if let Ok(kinds) = &result {
            cache.keep(asked_at, key.clone(), kinds.clone());
        }
        group_versions.insert(key, result);
    }
    Discovery { group_versions }
}

async fn server_version(
    client: &Client,
    cache: &DiscoveryCache,
    csv: &ClusterServiceVersion,
) -> ServerVersion {
    if csv
        .spec
        .min_kube_version
        .as_deref()
        .is_none_or(str::is_empty)
    {
        return ServerVersion::default();
    }
    let mut kept = cache
        .server_version
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    if let Some((read, version)) = kept.take()
        && read.elapsed() < SERVER_VERSION_TTL
    {
        return ServerVersion::Known(version);
    }
    match client.apiserver_version().await {
        Ok(info) => {
            *cache
                .server_version
                .lock()
                .unwrap_or_else(|p| p.into_inner()) =
                Some((std::time::Instant::now(), info.git_version.clone()));
            ServerVersion::Known(info.git_version)
        }
        Err(err) => ServerVersion::Unavailable(err.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_asked_before_a_crd_change_is_not_kept() {
        let cache = DiscoveryCache::default();
        let key = "example.com/v1".to_owned();
        let asked_at = cache.cached(&key).unwrap_err();
        cache.invalidate();
        cache.keep(asked_at, key.clone(), BTreeSet::new());
        assert!(cache.cached(&key).is_err(), "stale answer dropped");
        let asked_at = cache.cached(&key).unwrap_err();
        cache.keep(asked_at, key.clone(), ["Demo".to_owned()].into());
        assert_eq!(
            cache.cached(&key).unwrap(),
            BTreeSet::from(["Demo".to_owned()])
        );
        cache.invalidate();
        assert!(
            cache.cached(&key).is_err(),
            "a CRD event forgets everything"
        );
    }
}

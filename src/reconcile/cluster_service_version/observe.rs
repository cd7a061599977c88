//! Builds the [`Observed`] snapshot for one CSV from the stores, plus the few live lookups the
//! stores cannot answer (discovery, server version).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use kube::Client;

use crate::api::ClusterServiceVersion;
use crate::csv::identity::{name, namespace};
use crate::csv::{Discovery, Observed, ServerVersion};
use crate::k8s::errors::is_not_found;

use super::stores::Stores;

fn in_namespace<K: kube::Resource>(items: Vec<Arc<K>>, ns: &str) -> Vec<Arc<K>> {
    items
        .into_iter()
        .filter(|o| o.meta().namespace.as_deref() == Some(ns))
        .collect()
}

pub async fn observe(client: &Client, stores: &Stores, csv: &ClusterServiceVersion) -> Observed {
    let ns = namespace(csv);
    let csvs = in_namespace(stores.csvs.state(), ns);
    Observed {
        csvs,
        operator_groups: in_namespace(stores.operator_groups.state(), ns),
        all_operator_groups: stores.operator_groups.state(),
        crds: stores.crds.state(),
        api_services: stores.api_services.state(),
        discovery: discovery(client, csv).await,
        server_version: server_version(client, csv).await,
        service_accounts: in_namespace(stores.service_accounts.state(), ns),
        roles: in_namespace(stores.roles.state(), ns),
        role_bindings: in_namespace(stores.role_bindings.state(), ns),
        cluster_roles: stores.cluster_roles.state(),
        cluster_role_bindings: stores.cluster_role_bindings.state(),
        deployments: in_namespace(stores.deployments.state(), ns),
        subscriptions: in_namespace(stores.subscriptions.state(), ns),
        operator_conditions: in_namespace(stores.operator_conditions.state(), ns),
        certs: super::certs::observe_certs(stores, ns),
    }
}

/// Discovery for the group-versions the CSV's native APIs and required APIServices name.
/// A group-version the server does not serve (404) is recorded as serving nothing; other
/// failures are recorded as unknown.
async fn discovery(client: &Client, csv: &ClusterServiceVersion) -> Discovery {
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
        let answer = if group.is_empty() {
            client.list_core_api_resources(&version).await
        } else {
            client.list_api_group_resources(&key).await
        };
        let result = match answer {
            Ok(list) => Ok(list.resources.into_iter().map(|r| r.kind).collect()),
            Err(err) if is_not_found(&err) => Ok(BTreeSet::new()),
            Err(err) => Err(err.to_string()),
        };
        group_versions.insert(key, result);
    }
    Discovery { group_versions }
}

async fn server_version(client: &Client, csv: &ClusterServiceVersion) -> ServerVersion {
    if csv
        .spec
        .min_kube_version
        .as_deref()
        .is_none_or(str::is_empty)
    {
        return ServerVersion::default();
    }
    match client.apiserver_version().await {
        Ok(info) => ServerVersion::Known(info.git_version),
        Err(err) => ServerVersion::Unavailable(err.to_string()),
    }
}

/// Name used in logs.
pub fn key(csv: &ClusterServiceVersion) -> String {
    format!("{}/{}", namespace(csv), name(csv))
}

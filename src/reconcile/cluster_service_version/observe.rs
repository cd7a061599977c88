//! Builds the [`Observed`] snapshot for one CSV from the stores, plus the few live lookups the
//! stores cannot answer (discovery, server version).

use std::collections::{BTreeMap, BTreeSet};

use kube::Client;

use crate::api::ClusterServiceVersion;
use crate::csv::identity::namespace;
use crate::csv::{Discovery, DiscoveryFailed, Observed, ServerVersion};
use crate::k8s::discovery::ServedApis;

use super::created::CreatedWebhooks;
use super::stores::Stores;

pub async fn observe(
    client: &Client,
    stores: &Stores,
    cache: &ServedApis,
    created: &CreatedWebhooks,
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
        certs: super::certs::observe_certs(stores, created, ns),
    }
}

/// Discovery for the group-versions the CSV's native APIs and required APIServices name.
/// A group-version the server does not serve (404) is recorded as serving nothing; other
/// failures are recorded as unknown.
async fn discovery(client: &Client, cache: &ServedApis, csv: &ClusterServiceVersion) -> Discovery {
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
        let result = match cache.resources(client, &group, &version).await {
            Ok(served) => Ok(served.iter().map(|r| r.resource.kind.clone()).collect()),
            Err(err) => Err(DiscoveryFailed::new(err.to_string())),
        };
        group_versions.insert(Discovery::key(&group, &version), result);
    }
    Discovery { group_versions }
}

async fn server_version(
    client: &Client,
    cache: &ServedApis,
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
    match cache.server_version(client).await {
        Ok(version) => ServerVersion::Known(version),
        Err(err) => ServerVersion::Unavailable(err.to_string()),
    }
}

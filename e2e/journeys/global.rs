//! The README quickstart's shape: a catalog in the global catalog namespace (`olm`), a
//! Subscription in the namespace of the all-namespaces OperatorGroup (`operators`, made by the
//! chart) → the CSV succeeds there and a copy (reason Copied) appears in every other namespace,
//! here the journey's own → uninstall removes the copies too.

use anyhow::ensure;

use super::{configmap_catalog_only, uninstall, wait_gone, wait_installed};
use crate::cluster::{self, Cluster, Progress, text};
use crate::fixtures;

pub async fn run(c: &Cluster, ns: &str) -> anyhow::Result<()> {
    let catalogs = c.settings.controller_namespace.clone();
    // The catalog lives outside the journey's namespace: name it after that namespace so runs
    // never collide, and remove it whatever happens.
    let catalog = ns.to_owned();
    let result = journey(c, ns, &catalogs, &catalog).await;
    c.delete(&cluster::catalog_sources(), &catalogs, &catalog)
        .await?;
    c.delete(
        &cluster::core("", "v1", "ConfigMap", "configmaps"),
        &catalogs,
        &format!("{catalog}-data"),
    )
    .await?;
    result
}

async fn journey(c: &Cluster, ns: &str, catalogs: &str, catalog: &str) -> anyhow::Result<()> {
    let operators = c.settings.operators_namespace.clone();
    ensure!(
        c.get(&cluster::subscriptions(), &operators, "demo")
            .await?
            .is_none(),
        "a Subscription {operators}/demo exists already (left from an earlier run?)"
    );
    configmap_catalog_only(c, catalogs, catalog).await?;
    let mut subscription = fixtures::subscription(&operators, catalog, "stable", "Automatic", None);
    subscription["spec"]["sourceNamespace"] = catalogs.into();
    c.create(&cluster::subscriptions(), &operators, subscription)
        .await?;
    wait_installed(c, &operators, "demo", fixtures::V020).await?;
    println!(
        "e2e:   {operators}/{} Succeeded from global catalog {catalogs}/{catalog}",
        fixtures::V020
    );

    c.wait_for(
        format!("a copy of {} in namespace {ns}", fixtures::V020),
        || async {
            let Some(copy) = c.get(&cluster::csvs(), ns, fixtures::V020).await? else {
                return Ok(Progress::Pending("absent".to_owned()));
            };
            let (phase, reason) = (text(&copy, "/status/phase"), text(&copy, "/status/reason"));
            Ok(if reason == "Copied" {
                Progress::Done(())
            } else {
                Progress::Pending(format!("phase {phase:?}, reason {reason:?}"))
            })
        },
    )
    .await?;
    println!("e2e:   copied CSV {} appeared in {ns}", fixtures::V020);

    // All namespaces: OLM grants the operator's permissions cluster-wide too, as ClusterRoles
    // and ClusterRoleBindings labelled with their owner CSV (cluster-scoped objects cannot
    // have a namespaced owner).
    let selector = format!(
        "olm.owner={},olm.owner.kind=ClusterServiceVersion,olm.owner.namespace={operators}",
        fixtures::V020
    );
    let cluster_rbac = c.cluster_rbac(&selector).await?;
    ensure!(
        cluster_rbac.iter().any(|(kind, _)| kind == "ClusterRole")
            && cluster_rbac
                .iter()
                .any(|(kind, _)| kind == "ClusterRoleBinding"),
        "an all-namespaces operator should get a ClusterRole and ClusterRoleBinding ({selector}); \
         found {cluster_rbac:?}"
    );

    uninstall(c, &operators, fixtures::V020).await?;
    c.wait_for(
        format!("the ClusterRoles and ClusterRoleBindings {selector} to be deleted"),
        || async {
            let left = c.cluster_rbac(&selector).await?;
            Ok(if left.is_empty() {
                Progress::Done(())
            } else {
                Progress::Pending(format!("still there: {left:?}"))
            })
        },
    )
    .await?;
    wait_gone(c, &cluster::csvs(), ns, fixtures::V020).await?;
    println!("e2e:   the copy in {ns} went with the CSV");
    Ok(())
}

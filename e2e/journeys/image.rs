//! Catalog from an image: the CatalogSource runs a registry pod from the catalog image (built by
//! e2e/kind.sh from e2e/catalog.Dockerfile), its gRPC connection becomes READY, and a
//! Subscription installs from it. Needs a cluster that runs pods; elsewhere it is skipped with
//! the reason.

use anyhow::ensure;

use super::{Outcome, running_version, uninstall, wait_catalog_ready, wait_installed};
use crate::cluster::{self, Cluster};
use crate::fixtures;

pub async fn run(c: &Cluster, ns: &str) -> anyhow::Result<Outcome> {
    if let Some(reason) = c.why_no_pods().await? {
        return Ok(Outcome::Skipped(format!(
            "{reason}: a catalog from an image needs a registry pod"
        )));
    }
    c.create(
        &cluster::operator_groups(),
        ns,
        fixtures::operator_group(ns),
    )
    .await?;
    let catalog = "e2e-image";
    c.create(
        &cluster::catalog_sources(),
        ns,
        fixtures::image_catalog(ns, catalog, &c.settings.catalog_image),
    )
    .await?;
    wait_catalog_ready(c, ns, catalog).await?;
    println!(
        "e2e:   catalog {catalog} from image {} is ready",
        c.settings.catalog_image
    );
    c.create(
        &cluster::subscriptions(),
        ns,
        fixtures::subscription(ns, catalog, "stable", "Automatic", None),
    )
    .await?;
    wait_installed(c, ns, "demo", fixtures::V020).await?;
    ensure!(
        running_version(c, ns).await?.as_deref() == Some("0.2.0"),
        "the operator Deployment does not run version 0.2.0"
    );
    println!("e2e:   installed {} from the image catalog", fixtures::V020);
    uninstall(c, ns, fixtures::V020).await?;
    Ok(Outcome::Ran)
}

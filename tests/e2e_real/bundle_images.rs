//! Bundles only as images in a real registry: the demo bundles (e2e/bundles/) pushed to a local
//! docker-registry, a catalog whose bundles carry nothing but their image reference served by
//! `olm-rs catalog serve` as a process (a gRPC CatalogSource with `spec.address`), and the
//! controller — the chart's identity, `--registries-config` for the plain-HTTP registry — pulls
//! them and installs to CSV Succeeded.

use std::process::Command;
use std::time::Duration;

use serde_json::json;

use crate::cluster::{self, Cluster, ControllerAccess, Settings};
use crate::real_control_plane::chart::{self, Controller, Rendered};
use crate::real_control_plane::process::Process;
use crate::real_control_plane::{ControlPlane, free_ports};
use crate::registry_support::{Kind, TestRegistry};
use crate::{fixtures, journeys};

const REPO: &str = "olm-rs-e2e-demo-bundle";

/// `Ok(false)` when docker-registry is absent (the caller reports the check skipped).
pub async fn run(plane: &ControlPlane, rendered: &Rendered, token: &str) -> anyhow::Result<bool> {
    let Ok(registry) = TestRegistry::try_start(Kind::Plain) else {
        return Ok(false);
    };
    let dir = plane.dir.join("bundle-images");
    let catalog_dir = dir.join("catalog/olm-rs-e2e-demo");
    std::fs::create_dir_all(&catalog_dir)?;
    for version in ["0.1.0", "0.2.0"] {
        let bundle = fixtures::e2e_dir()
            .join("bundles/olm-rs-e2e-demo")
            .join(version);
        registry
            .push_bundle_dir(REPO, &format!("v{version}"), &bundle)
            .await;
    }
    std::fs::write(
        catalog_dir.join("catalog.yaml"),
        fixtures::image_only_catalog(&registry.host(), REPO)?,
    )?;
    let [catalog_port] = free_ports::<1>()?;
    let mut serve = Command::new(env!("CARGO_BIN_EXE_olm-rs"));
    serve
        .args(["catalog", "serve"])
        .arg(dir.join("catalog"))
        .arg(format!("--addr=127.0.0.1:{catalog_port}"))
        .env_remove("RUST_LOG");
    let mut server = Process::spawn("catalog-serve", serve, &dir)?;

    let registries_conf = dir.join("registries.conf");
    std::fs::write(&registries_conf, registry.registries_conf())?;
    let extra = [format!("--registries-config={}", registries_conf.display())];
    let mut controller = Controller::spawn(
        plane,
        &rendered.without_leader_election(),
        token,
        "olm-rs-controller-images",
        &extra,
    )?;
    controller.wait_ready(Duration::from_secs(60)).await?;

    let settings = Settings {
        controller_namespace: chart::NAMESPACE.to_owned(),
        operators_namespace: "operators".to_owned(),
        catalog_image: String::new(),
        timeout: Duration::from_secs(60),
        keep: false,
        controller: ControllerAccess::Local {
            probe_url: controller.probe_url.clone(),
        },
        no_pods: true,
    };
    let c = Cluster::connect_with(plane.admin_config.clone(), settings).await?;
    let ns = c.create_namespace("olm-rs-e2e-images-").await?;
    let result = async {
        c.create(
            &cluster::operator_groups(),
            &ns,
            fixtures::operator_group(&ns),
        )
        .await?;
        c.create(
            &cluster::catalog_sources(),
            &ns,
            json!({
                "apiVersion": "operators.coreos.com/v1alpha1",
                "kind": "CatalogSource",
                "metadata": {"name": "e2e-images", "namespace": ns},
                "spec": {"sourceType": "grpc", "address": format!("127.0.0.1:{catalog_port}"),
                         "displayName": "olm-rs e2e (bundle images)", "publisher": "olm-rs"},
            }),
        )
        .await?;
        journeys::wait_catalog_ready(&c, &ns, "e2e-images").await?;
        c.create(
            &cluster::subscriptions(),
            &ns,
            fixtures::subscription(&ns, "e2e-images", "stable", "Automatic", None),
        )
        .await?;
        journeys::wait_installed(&c, &ns, "demo", "olm-rs-e2e-demo.v0.2.0").await?;
        println!(
            "e2e-real:   olm-rs-e2e-demo.v0.2.0 Succeeded from bundle images in {}",
            registry.host()
        );
        anyhow::Ok(())
    }
    .await;
    c.delete_namespace(&ns).await;
    if result.is_err() {
        for process in [&mut controller.process, &mut server] {
            println!("---- {}\n{}", process.name, process.log_tail(30));
        }
    }
    result.map(|()| true)
}

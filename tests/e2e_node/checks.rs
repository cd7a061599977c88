//! The real-node checks: the node and the chart first, then the scoped install, then three
//! lanes side by side (the test operator's check leads the third), then the checks that
//! restart or delete the controller's pods, or delete the demo's CRD.

use std::cell::RefCell;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;

use crate::chart_install::{self, NAMESPACE};
use crate::cluster::{Cluster, ControllerAccess, Settings};
use crate::install_checks;
use crate::kind_recipe;
use crate::kubectl_operator;
use crate::operator_checks;
use crate::real_control_plane::ControlPlane;
use crate::real_control_plane::real_node::{NODE_IP, PAUSE_IMAGE, RealNode};
use crate::real_control_plane::suite_runner::Report;
use crate::registry_support::{Kind, TestRegistry};
use crate::rollback_checks;
use crate::signature_checks::{self, SignedSetup};
use crate::suite;
use crate::upgrade_checks;

/// The checks (`--list` prints them): the first three and the last three run alone, in this
/// order; the others in their lanes (`run`).
pub const CHECKS: &[&str] = &[
    "node::pods_run",
    "chart::install",
    "plan::scoped_account_bounds_every_step",
    // Lane A.
    "chart::journeys",
    "upgrades::pin_outlives_catalog_polls",
    "upgrades::range_then_downgrade",
    // Lane B.
    "packages::served_by_the_pod",
    "bundle::images_pulled_by_the_controller_pod",
    "plan::crd_update_with_stored_objects",
    "resolve::dependency_installs",
    "upgrades::rollback_refused_after_crd_change",
    "catalog::registry_poll_upgrades",
    // Lane C: the test operator's check, then two of the demo's.
    "operator::phases_webhooks_apiservice",
    "upgrades::failed_upgrade_rolled_back",
    "signatures::signed_catalog_serves_unsigned_refused",
    // Alone again.
    "kind::local_registry_recipe",
    "kubectl_operator::journey",
    "chart::leader_failover",
];

/// The longest any one wait takes (a busy 2-core machine pulls and starts slowly).
const WAIT: Duration = Duration::from_secs(120);

/// Prints each check's outcome and counts the failures.
/// Runs the checks whose names contain `filter` (all without one); the node and the chart's
/// install always run, since every other check builds on them.
pub async fn run(plane: &ControlPlane, node: &RealNode, filter: Option<&str>) -> usize {
    let mut report = crate::SUITE.report();
    let selected = |name: &str| filter.is_none_or(|f| name.contains(f));
    let started = Instant::now();
    report.check("node::pods_run", started, pods_run(plane).await);

    // A registry that speaks HTTPS with a CA of the test's own: kubectl-operator pulls only
    // over HTTPS; the controller trusts the CA through the chart's bundleImages.caBundle.
    let tls_registry = match TestRegistry::try_start_on(Kind::Tls, NODE_IP) {
        Ok(registry) => registry,
        Err(why) => {
            report.skip("chart::install", &why);
            return report.failures;
        }
    };
    // The image policy every check runs under (it constrains only images of its own scope).
    let signed_setup = SignedSetup::prepare(plane, node);
    let started = Instant::now();
    let catalog_image = match install(plane, node, &tls_registry, signed_setup.as_ref().ok()).await
    {
        Ok(image) => {
            report.check("chart::install", started, Ok(()));
            image
        }
        Err(err) => {
            report.check("chart::install", started, Err(err));
            return report.failures;
        }
    };
    let settings = Settings {
        controller_namespace: NAMESPACE.to_owned(),
        operators_namespace: "operators".to_owned(),
        catalog_image,
        timeout: WAIT,
        keep: std::env::var_os("OLM_RS_E2E_KEEP").is_some(),
        controller: ControllerAccess::InCluster,
        no_pods: false,
    };
    let cluster = match Cluster::connect_with(plane.admin_config.clone(), settings).await {
        Ok(cluster) => cluster,
        Err(err) => {
            report.check("chart::journeys", Instant::now(), Err(err));
            return report.failures;
        }
    };
    let report = RefCell::new(report);
    let run = Runner {
        report: &report,
        selected: &selected,
        cluster: &cluster,
    };
    // First, while the demo CRD does not exist yet.
    run.explained("plan::scoped_account_bounds_every_step", || {
        install_checks::scoped_account_bounds_every_step(&cluster)
    })
    .await;
    // Then three lanes side by side: each check waits mostly on pods, catalogs and pulls, and
    // each has namespaces, catalogs and image repositories of its own. The demo CRD is shared
    // by lanes A and B as it is by any operator installed in several namespaces; the checks
    // that change a CRD's schema use a group of their own; the test operator's package is only
    // in lane C. Lanes of about equal length: four minutes less than one after the other
    // (README, "e2e_node").
    let lane_a = async {
        run.explained("chart::journeys", || journeys(&cluster))
            .await;
        run.check("upgrades::pin_outlives_catalog_polls", || {
            rollback_checks::pin_outlives_catalog_polls(&cluster, node)
        })
        .await;
        run.check("upgrades::range_then_downgrade", || {
            upgrade_checks::range_then_downgrade(&cluster)
        })
        .await;
    };
    let lane_b = async {
        run.explained("packages::served_by_the_pod", || {
            install_checks::package_manifests_served_by_the_pod(
                &cluster,
                &cluster.settings.catalog_image,
            )
        })
        .await;
        run.explained("bundle::images_pulled_by_the_controller_pod", || {
            install_checks::bundle_images_install(&cluster, node)
        })
        .await;
        run.explained("plan::crd_update_with_stored_objects", || {
            install_checks::crd_update_with_objects(&cluster, node)
        })
        .await;
        run.explained("resolve::dependency_installs", || {
            install_checks::dependency_installs(&cluster, node)
        })
        .await;
        run.check("upgrades::rollback_refused_after_crd_change", || {
            rollback_checks::rollback_refused_after_crd_change(&cluster, node)
        })
        .await;
        run.explained("catalog::registry_poll_upgrades", || {
            install_checks::registry_poll_upgrades(&cluster, node)
        })
        .await;
    };
    // The test operator's check, then two of the demo's.
    let lane_c = async {
        run.explained("operator::phases_webhooks_apiservice", || {
            operator_checks::run(&cluster, node)
        })
        .await;
        run.check("upgrades::failed_upgrade_rolled_back", || {
            rollback_checks::failed_upgrade_rolled_back(&cluster, node)
        })
        .await;
        let name = "signatures::signed_catalog_serves_unsigned_refused";
        match &signed_setup {
            Ok(setup) => {
                run.check(name, || {
                    signature_checks::signed_catalog_serves_unsigned_refused(&cluster, node, setup)
                })
                .await
            }
            Err(why) if selected(name) => run.report.borrow_mut().skip(name, why),
            Err(_) => {}
        }
    };
    tokio::join!(lane_a, lane_b, lane_c);
    // Last, one after the other: the kind recipe restarts the controllers, kubectl-operator's
    // `uninstall -X` deletes the demo's CRD, and the failover deletes the leader.
    run.check("kind::local_registry_recipe", || {
        kind_recipe::installs_through_the_node_mirror(&cluster, node)
    })
    .await;
    run.explained("kubectl_operator::journey", || {
        kubectl_operator::journey(&cluster, plane, &tls_registry)
    })
    .await;
    run.explained("chart::leader_failover", || {
        leader_failover(plane, &cluster)
    })
    .await;
    println!(
        "e2e-node:   controller RSS after the checks: {:?} MiB (a debug build)",
        chart_install::controller_rss()
    );
    report.into_inner().failures
}

/// Runs the selected checks, each reported the moment it ends (lanes run side by side).
struct Runner<'a> {
    report: &'a RefCell<Report>,
    selected: &'a dyn Fn(&str) -> bool,
    cluster: &'a Cluster,
}

impl Runner<'_> {
    async fn check<F>(&self, name: &str, check: impl FnOnce() -> F)
    where
        F: Future<Output = anyhow::Result<()>>,
    {
        if !(self.selected)(name) {
            return;
        }
        let started = Instant::now();
        let result = check().await;
        self.report.borrow_mut().check(name, started, result);
    }

    /// [`Self::check`], a failure followed by what the controller's pods say.
    async fn explained<F>(&self, name: &str, check: impl FnOnce() -> F)
    where
        F: Future<Output = anyhow::Result<()>>,
    {
        self.check(name, || async {
            explained(self.cluster, check().await).await
        })
        .await;
    }
}

/// `helm install` with two replicas: both pods Ready through their probes, one leads (the
/// Lease names a pod).
async fn install(
    plane: &ControlPlane,
    node: &RealNode,
    tls_registry: &TestRegistry,
    signed_setup: Option<&SignedSetup>,
) -> anyhow::Result<String> {
    let catalog_image = chart_install::push_images(node).await?;
    let ca = plane.dir.join("tls-registry-ca.pem");
    std::fs::write(&ca, tls_registry.ca_pem.as_deref().unwrap_or_default())?;
    let mut sets = vec!["replicas=2".to_owned()];
    let mut files = vec![("bundleImages.caBundle", ca)];
    if let Some(setup) = signed_setup {
        sets.extend(setup.helm_sets());
        files.extend(setup.helm_files());
    }
    let files: Vec<(&str, &std::path::Path)> =
        files.iter().map(|(k, p)| (*k, p.as_path())).collect();
    chart_install::helm_install(plane, node, &sets, &files)?;
    let started = Instant::now();
    let pods = chart_install::wait_pods_ready(&plane.client, 2, WAIT).await?;
    let ready = started.elapsed();
    let leader = chart_install::wait_leader(&plane.client, &pods, WAIT).await?;
    println!(
        "e2e-node:   controller pods {pods:?} Ready {:.1}s after helm install; {leader} leads; \
         RSS {:?} MiB (a debug build)",
        ready.as_secs_f64(),
        chart_install::controller_rss()
    );
    Ok(catalog_image)
}

/// Every journey of e2e/journeys against the chart-deployed controller, with real pods.
async fn journeys(cluster: &Cluster) -> anyhow::Result<()> {
    let summary = suite::run_journeys(cluster, |_| true).await;
    if !summary.failed.is_empty() {
        bail!("journeys failed: {:?}", summary.failed);
    }
    if !summary.skipped.is_empty() {
        bail!(
            "journeys skipped on a node that runs pods: {:?}",
            summary.skipped
        );
    }
    Ok(())
}

/// `kubectl delete pod` of the leader: another replica takes the Lease (whichever it is) and
/// work continues — a journey runs to its end under the new leader.
async fn leader_failover(plane: &ControlPlane, cluster: &Cluster) -> anyhow::Result<()> {
    let pods = chart_install::wait_pods_ready(&plane.client, 2, WAIT).await?;
    let leader = chart_install::wait_leader(&plane.client, &pods, WAIT).await?;
    let api: Api<Pod> = Api::namespaced(plane.client.clone(), NAMESPACE);
    api.delete(&leader, &DeleteParams::default())
        .await
        .with_context(|| format!("deleting the leader pod {leader}"))?;
    // Whichever takes over — the standby, or the pod that replaces the deleted one — is fine.
    let started = Instant::now();
    let next =
        chart_install::wait_leader_other_than(&plane.client, &[], Some(&leader), WAIT).await?;
    println!(
        "e2e-node:   {next} took the Lease {:.1}s after {leader} was deleted",
        started.elapsed().as_secs_f64()
    );
    let summary = suite::run_journeys(cluster, |name| name == "automatic").await;
    if !summary.failed.is_empty() || summary.passed.is_empty() {
        bail!("after the failover: {:?}", summary.failed);
    }
    // The Deployment replaces the deleted pod; both are Ready again.
    chart_install::wait_pods_ready(&plane.client, 2, WAIT).await?;
    Ok(())
}

/// A pod really runs: it resolves the `kubernetes` Service through CoreDNS and reaches the API
/// server through kube-proxy's rules, then exits 0.
async fn pods_run(plane: &ControlPlane) -> anyhow::Result<()> {
    let pods: Api<Pod> = Api::namespaced(plane.client.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "node-check"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{
                "name": "check",
                "image": PAUSE_IMAGE,
                "command": ["/bin/busybox", "sh", "-c",
                    "/bin/busybox nslookup kubernetes.default.svc.cluster.local && \
                     echo | /bin/busybox nc -w 5 kubernetes.default.svc.cluster.local 443"],
            }],
        },
    }))?;
    pods.create(&PostParams::default(), &pod).await?;
    let started = Instant::now();
    loop {
        let pod = pods.get("node-check").await?;
        let phase = pod.status.and_then(|s| s.phase).unwrap_or_default();
        match phase.as_str() {
            "Succeeded" => break,
            "Failed" => {
                let logs = pods
                    .logs("node-check", &Default::default())
                    .await
                    .unwrap_or_default();
                bail!("the check pod failed:\n{logs}");
            }
            _ if started.elapsed() > WAIT => bail!("the check pod is still {phase}"),
            _ => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
    pods.delete("node-check", &DeleteParams::default())
        .await
        .context("deleting the check pod")?;
    Ok(())
}

/// A failed check's error, followed by what the controller's pods say (their state and last
/// log lines): a failure in CI is read once, from this output.
async fn explained(cluster: &Cluster, result: anyhow::Result<()>) -> anyhow::Result<()> {
    match result {
        Ok(()) => Ok(()),
        Err(err) => {
            let pods = chart_install::describe_pods(&cluster.client, 60).await;
            Err(anyhow::anyhow!("{err:#}\n  the controller's pods:\n{pods}"))
        }
    }
}

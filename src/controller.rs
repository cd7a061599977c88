//! Wiring of the controller process (`olm-rs run`): preflight checks, probes, the reconcilers and
//! graceful shutdown. No decisions are taken here; they live in the pure modules.

use std::net::SocketAddr;

use std::sync::Arc;

use futures::future::BoxFuture;
use kube::Client;

use crate::access_review;
use crate::health::{self, Readiness};
use crate::k8s::clock::{Clock, SystemClock};
use crate::k8s::connections::Connections;
use crate::leader_election::{Fence, LeaderElectionError, LeaderElector, LeaseConfig, LeaseLock};
use crate::metrics::{self, Metrics};
use crate::package_server::{self, PackageServing};
use crate::reconcile::{Context, ControllerOptions};
use crate::startup::{self, StartupError};

/// Options of `olm-rs run`.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Where `/healthz` and `/readyz` are served.
    pub probe_addr: SocketAddr,
    /// What the reconcilers share.
    pub controller: ControllerOptions,
    /// `Some` with `--leader-elect`: reconcilers start only once this replica holds the Lease.
    pub leader_election: Option<LeaderElectionOptions>,
    /// The PackageManifest API (docs/packagemanifests.md); `None`: not served.
    pub packages: Option<PackageServing>,
}

/// Where the leader Lease lives and who competes for it.
#[derive(Debug, Clone)]
pub struct LeaderElectionOptions {
    pub lock: LeaseLock,
    pub config: LeaseConfig,
    /// The connections of the client `run` is given (`k8s::connections::client`): reset when
    /// a write is cut off at the renew deadline (docs/leader-election.md §2.1). `None` for a
    /// client built otherwise; writes in flight are still cut off, without the reset.
    pub connections: Option<Connections>,
}

/// Why the controller process could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The API server could not be reached, or refused olm-rs (see [`StartupError`]).
    #[error(transparent)]
    Startup(#[from] StartupError),
    #[error("cannot serve the PackageManifest API on {addr}: {source}")]
    PackageApi {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot serve probes on {addr}: {source}")]
    Probes {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// The replica stopped acting; the process exits non-zero so the kubelet restarts it as a
    /// standby (client-go does the same).
    #[error(transparent)]
    LeadershipLost(LeaderElectionError),
}

/// Runs until `shutdown` resolves. Probes start first so the kubelet sees a live process while
/// the preflight checks run; readiness turns green only once they pass.
pub async fn run(
    client: Client,
    options: RunOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), RunError> {
    let readiness = Readiness::default();
    readiness.register("api-server", "not contacted yet");
    readiness.register("crds", "not checked yet");

    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let probe_addr = options.probe_addr;
    let metrics = Arc::new(Metrics::new());
    // Said once, and kept in a metric an operator can alert on (docs/image-signatures.md §7).
    let policy = &options.controller.bundle_images.image_policy;
    metrics.set_image_policy_enforced(policy.enforced());
    match policy.file() {
        Some(file) => {
            tracing::info!(policy = %file.display(), "in-process image pulls obey the image policy")
        }
        None => tracing::warn!(
            "no image policy (--image-policy): every catalog and bundle image pulled in-process is accepted, as OLM does"
        ),
    }
    let probes = tokio::spawn(health::serve(
        probe_addr,
        health::router(readiness.clone()).merge(metrics::router(Arc::clone(&metrics))),
        wait_for(stop_rx.clone()),
    ));

    // Probes answer while the API server and the CRDs are waited for; a shutdown during the
    // wait is a clean exit.
    let mut shutdown = Box::pin(shutdown);
    let mut outcome = tokio::select! {
        waited = wait_until_allowed(&client, &readiness) => waited.map_err(RunError::from),
        () = &mut shutdown => {
            tracing::info!("shutdown requested while waiting for the API server; stopping");
            let _ = stop_tx.send(true);
            let _ = probes.await;
            return Ok(());
        }
    };
    if outcome.is_ok() {
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        // Every writer holds `writer`: with leader election, it sends writes only while this
        // replica leads and its renew deadline has not passed (docs/leader-election.md §2).
        let fence = match &options.leader_election {
            None => Fence::open(),
            Some(election) => {
                let fence = Fence::closed(election.config, Arc::clone(&clock));
                if let Some(connections) = &election.connections {
                    fence.reset_on_cut_off(connections.clone());
                }
                fence
            }
        };
        let writer = fence.guard(&client);
        let ctx = Arc::new(Context::with_metrics(
            writer.clone(),
            Arc::clone(&clock),
            options.controller.clone(),
            Arc::clone(&metrics),
        ));
        // Served by every replica, leader or not: reads need no Lease.
        let package_tasks = match &options.packages {
            Some(packages) => {
                start_package_api(&client, &writer, &ctx, packages, stop_rx.clone()).await
            }
            None => Ok(Vec::new()),
        };
        let package_tasks = match package_tasks {
            Ok(tasks) => tasks,
            Err(error) => {
                let _ = stop_tx.send(true);
                let _ = probes.await;
                return Err(error);
            }
        };
        tracing::info!(
            global_catalog_namespace = %options.controller.global_catalog_namespace,
            leader_election = options.leader_election.is_some(),
            "olm-rs controller ready"
        );
        // The replica that runs the reconcilers has the catalogs: the package API's Service
        // sends requests to it (docs/packagemanifests.md §8).
        let serving_pod = options
            .packages
            .as_ref()
            .and_then(|p| p.serving_pod.clone());
        let leading = {
            let writer = writer.clone();
            async move {
                if let Some(pod) = &serving_pod {
                    package_server::serving_pod::mark(&writer, pod, true).await;
                }
                run_reconcilers(ctx).await
            }
        };
        match options.leader_election {
            None => tokio::select! {
                () = shutdown => tracing::info!("shutdown requested; stopping"),
                () = leading => tracing::warn!("all reconcilers stopped"),
            },
            // A standby stays ready (it serves probes and metrics) while it waits: a rolling
            // update must be able to start new replicas while the old leader holds the Lease.
            Some(election) => {
                let elector = LeaderElector::new(client, election.lock, election.config, clock)
                    .with_metrics(Arc::clone(&metrics))
                    .with_fence(fence);
                outcome = elector
                    .run(leading, shutdown)
                    .await
                    .map_err(RunError::LeadershipLost);
            }
        }
        for task in package_tasks {
            task.abort();
        }
    }

    let _ = stop_tx.send(true);
    let probe_result = probes.await;
    outcome?;
    match probe_result {
        Ok(Ok(())) => Ok(()),
        Ok(Err(source)) => Err(RunError::Probes {
            addr: probe_addr,
            source,
        }),
        // The probe task only ends by returning; a JoinError means it panicked, which the
        // runtime already reported. Treat it as a stopped probe server.
        Err(join) => Err(RunError::Probes {
            addr: probe_addr,
            source: std::io::Error::other(join.to_string()),
        }),
    }
}

/// Waits until every OLM kind is served, then checks that olm-rs may watch what it watches:
/// a missing RBAC rule stops the process naming each permission, instead of watches that are
/// refused and retried forever behind a green `/readyz`. An API server that cannot answer
/// SelfSubjectAccessReviews (olm-rs's embedded one) skips the check (docs/controller-startup.md).
async fn wait_until_allowed(client: &Client, readiness: &Readiness) -> Result<(), StartupError> {
    startup::wait_until_served(client, readiness).await?;
    match access_review::missing_watch_permissions(client).await {
        Ok(missing) if missing.is_empty() => Ok(()),
        Ok(missing) => {
            let error = StartupError::MissingPermissions { missing };
            readiness.set_not_ready("crds", error.to_string());
            tracing::error!("{error}");
            Err(error)
        }
        // A server without the authorization API (olm-rs's embedded one, which authorizes
        // nothing) has nothing to check: not worth a warning on every `olm-rs sandbox` start.
        Err(error) if crate::k8s::errors::is_not_found(&error) => {
            tracing::debug!(%error, "the API server has no SelfSubjectAccessReview; permissions not checked");
            Ok(())
        }
        Err(error) => {
            tracing::warn!(%error, "cannot check olm-rs's permissions (SelfSubjectAccessReview); going on");
            Ok(())
        }
    }
}

/// Starts keeping the PackageManifests current and, for `olm-rs run`, serving them over
/// HTTPS with their certificate kept; returns the tasks to stop at shutdown. `writer` is the
/// fenced client: the certificate keeper writes only as the leader. `client` serves the
/// reads, the access reviews, and the one write a replica makes before it may lead: taking
/// the serving label off its own Pod, so that the Service does not send requests to a
/// replica that just started (docs/leader-election.md §2).
async fn start_package_api(
    client: &Client,
    writer: &Client,
    ctx: &Arc<Context>,
    packages: &PackageServing,
    stop: tokio::sync::watch::Receiver<bool>,
) -> Result<Vec<tokio::task::JoinHandle<()>>, RunError> {
    if let Some(pod) = &packages.serving_pod {
        package_server::serving_pod::mark(client, pod, false).await;
    }
    let contents: Arc<dyn package_server::CatalogContents> = ctx.catalogs.clone();
    let mut tasks = vec![tokio::spawn(package_server::keep_current(
        ctx.watches.catalog_sources(),
        contents,
        Arc::clone(&packages.store),
        packages.feed.clone(),
    ))];
    if let Some(https) = &packages.https {
        let listener = package_server::tls::bind(https.addr)
            .await
            .map_err(|source| RunError::PackageApi {
                addr: https.addr,
                source,
            })?;
        tracing::info!(addr = %https.addr, service = %https.service.service(), "serving the PackageManifest API");
        let tls = Arc::new(package_server::tls::TlsState::default());
        let api = package_server::PackageApi {
            store: Arc::clone(&packages.store),
            feed: packages.feed.clone(),
            authorizer: Arc::new(package_server::SubjectAccessReviewer::new(client.clone())),
            clock: Arc::clone(&ctx.clock),
        };
        tasks.push(tokio::spawn(package_server::tls::serve(
            listener,
            api,
            Arc::clone(&tls),
            wait_for(stop),
        )));
        let keeper = package_server::cert_keeper::CertKeeper {
            client: writer.clone(),
            service: https.service.clone(),
            clock: Arc::clone(&ctx.clock),
            tls,
            events: ctx.events.clone(),
            metrics: Arc::clone(&ctx.metrics),
        };
        tasks.push(tokio::spawn(keeper.run()));
    }
    Ok(tasks)
}

/// Every reconciler of the process; each runs until the process stops.
fn reconcilers(ctx: &Arc<Context>) -> Vec<BoxFuture<'static, ()>> {
    vec![
        Box::pin(crate::reconcile::cluster_service_version::run(ctx.clone())),
        Box::pin(crate::reconcile::catalog_source::run(ctx.clone())),
        Box::pin(crate::reconcile::operator_group::run(ctx.clone())),
        Box::pin(crate::reconcile::subscription::run(
            ctx.clone(),
            ctx.catalogs.clone(),
            crate::reconcile::subscription::catalog_changes(&ctx.catalogs),
        )),
        Box::pin(crate::reconcile::install_plan::run(ctx.clone())),
        Box::pin(crate::reconcile::operator::run(ctx.clone())),
    ]
}

/// Runs every reconciler of the process (what `olm-rs run` starts once it leads) until they
/// all stop. Public so flow tests drive the same set of controllers, cooperating as deployed.
pub async fn run_reconcilers(ctx: Arc<Context>) {
    let all = reconcilers(&ctx);
    if all.is_empty() {
        // Nothing to run yet: stay up until shutdown rather than exiting early.
        std::future::pending::<()>().await;
    }
    futures::future::join_all(all).await;
}

async fn wait_for(mut stop: tokio::sync::watch::Receiver<bool>) {
    // An error means the sender is gone, which also means "stop".
    let _ = stop.wait_for(|stopped| *stopped).await;
}

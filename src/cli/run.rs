//! `olm-rs run`: the controller process.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;

use jiff::SignedDuration;
use olm_rs::bundle_unpack::unpack_pod::UnpackPodOptions;
use olm_rs::catalog_source::registry_objects::RegistryPodOptions;
use olm_rs::catalog_source::serving::ServingMode;
use olm_rs::certs::ServiceName;
use olm_rs::controller::{self, LeaderElectionOptions, RunOptions};
use olm_rs::go_duration::parse_go_duration;
use olm_rs::leader_election::{self, LeaseConfig, LeaseLock};
use olm_rs::oci::{DEFAULT_REGISTRIES_D, load_image_policy};
use olm_rs::package_manifest::ManifestStore;
use olm_rs::package_server::serving_pod::PodRef;
use olm_rs::package_server::{HttpsOptions, PackageServing};
use olm_rs::reconcile::ControllerOptions;
use olm_rs::reconcile::bundle_images::{BundleImageOptions, BundleImages, SecretRef};
use olm_rs::reconcile::catalog_source::CatalogSourceOptions;
use olm_rs::telemetry::{self, LogFormat};

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Address of the `/healthz` and `/readyz` endpoints.
    #[arg(long, env = "OLM_RS_PROBE_ADDR", default_value = "0.0.0.0:8080")]
    pub probe_addr: SocketAddr,
    /// Namespace whose CatalogSources every namespace may use (OLM's global catalog namespace).
    #[arg(long, env = "OLM_RS_GLOBAL_CATALOG_NAMESPACE", default_value = "olm")]
    pub global_catalog_namespace: String,
    /// Log format: `text` or `json`.
    #[arg(long, env = "OLM_RS_LOG_FORMAT", default_value = "text")]
    pub log_format: LogFormat,
    /// Log filter (`info`, `olm_rs=debug`, ...); `RUST_LOG` wins when set.
    #[arg(long, env = "OLM_RS_LOG_LEVEL", default_value = "info")]
    pub log_level: String,
    /// Hold a coordination.k8s.io Lease before acting, so that of several replicas only one
    /// reconciles. A replica that loses the Lease exits (status 2) and restarts as a standby.
    #[arg(long, env = "OLM_RS_LEADER_ELECT")]
    pub leader_elect: bool,
    /// Namespace of the Lease (the chart sets POD_NAMESPACE); default: the client's namespace.
    #[arg(long, env = "POD_NAMESPACE")]
    pub leader_election_namespace: Option<String>,
    /// Name of the Lease.
    #[arg(long, env = "OLM_RS_LEADER_ELECTION_LEASE", default_value = leader_election::LEASE_NAME)]
    pub leader_election_lease: String,
    /// How long a Lease stays valid without renewal, as seen by standbys (`15s`, `1m`).
    #[arg(
        long,
        env = "OLM_RS_LEADER_ELECTION_LEASE_DURATION",
        default_value = "15s"
    )]
    pub leader_election_lease_duration: SignedDuration,
    /// How long the leader keeps acting without a successful renewal.
    #[arg(
        long,
        env = "OLM_RS_LEADER_ELECTION_RENEW_DEADLINE",
        default_value = "10s"
    )]
    pub leader_election_renew_deadline: SignedDuration,
    /// Wait between two attempts to acquire or renew the Lease.
    #[arg(
        long,
        env = "OLM_RS_LEADER_ELECTION_RETRY_PERIOD",
        default_value = "2s"
    )]
    pub leader_election_retry_period: SignedDuration,
    /// containers-registries.conf (v2) for bundle images: mirrors, `insecure = true` (plain
    /// HTTP), `blocked`. Default: /etc/containers/registries.conf when it exists.
    #[arg(long, env = "OLM_RS_REGISTRIES_CONFIG", value_name = "FILE")]
    pub registries_config: Option<PathBuf>,
    /// containers-policy.json (the node's is /etc/containers/policy.json): every in-process
    /// pull of a catalog or bundle image obeys it, sigstore signatures verified
    /// (docs/image-signatures.md). Unset: every image is accepted, as OLM does.
    #[arg(long, env = "OLM_RS_IMAGE_POLICY", value_name = "FILE")]
    pub image_policy: Option<PathBuf>,
    /// containers-registries.d directory: where signatures are (`use-sigstore-attachments`).
    /// Default with --image-policy: /etc/containers/registries.d (none when missing).
    #[arg(long, env = "OLM_RS_REGISTRIES_D", value_name = "DIR")]
    pub registries_d: Option<PathBuf>,
    /// Extra PEM CA certificates trusted for image registries.
    #[arg(long, env = "OLM_RS_REGISTRY_CA_FILE", value_name = "FILE")]
    pub registry_ca_file: Option<PathBuf>,
    /// A pull secret tried for every bundle image, besides the CatalogSource's spec.secrets
    /// (repeatable).
    #[arg(long = "pull-secret", value_name = "NAMESPACE/NAME")]
    pub pull_secrets: Vec<SecretRef>,
    /// How long a bundle image may take to pull before its lookup fails (Go duration; `0`:
    /// no limit). An OperatorGroup's operatorframework.io/bundle-unpack-timeout overrides it.
    #[arg(
        long,
        env = "OLM_RS_BUNDLE_UNPACK_TIMEOUT",
        value_name = "DURATION",
        default_value = "10m",
        value_parser = parse_go_duration
    )]
    pub bundle_unpack_timeout: Duration,
    /// An image with olm-rs at /usr/local/bin/olm-rs (the chart gives the controller's own).
    /// With it, a bundle image the controller cannot pull itself (registry unreachable or
    /// unresolvable, TLS or login refused) is unpacked by a pod whose image the kubelet pulls,
    /// as OLM does (docs/bundle-images.md); without it such a pull fails.
    #[arg(long, env = "OLM_RS_BUNDLE_UNPACK_IMAGE", value_name = "IMAGE")]
    pub bundle_unpack_image: Option<String>,
    /// Directory where pulled bundles are kept (re-read after a restart); default: memory only.
    #[arg(long, env = "OLM_RS_BUNDLE_CACHE_DIR", value_name = "DIR")]
    pub bundle_cache_dir: Option<PathBuf>,
    /// Registry pods under the `restricted` pod security level run as user 1001 with
    /// `runAsNonRoot` (as OLM's upstream install does), so PodSecurity admission accepts them.
    /// `=false` leaves the user to the cluster (OpenShift's SCCs assign one).
    #[arg(
        long,
        env = "OLM_RS_SET_WORKLOAD_USER_ID",
        value_name = "BOOL",
        default_value_t = true,
        num_args = 0..=1,
        default_missing_value = "true",
        action = clap::ArgAction::Set
    )]
    pub set_workload_user_id: bool,
    /// Serve the PackageManifest API (`kubectl get packagemanifests`) over HTTPS for the API
    /// server's aggregation layer. `=false` turns it off (docs/packagemanifests.md).
    #[arg(
        long,
        env = "OLM_RS_PACKAGE_API",
        value_name = "BOOL",
        default_value_t = true,
        num_args = 0..=1,
        default_missing_value = "true",
        action = clap::ArgAction::Set
    )]
    pub package_api: bool,
    /// Address of the PackageManifest API (HTTPS).
    #[arg(long, env = "OLM_RS_PACKAGE_API_ADDR", default_value = "0.0.0.0:5443")]
    pub package_api_addr: SocketAddr,
    /// The Service the API server reaches the PackageManifest API by, in the pod's namespace
    /// (`POD_NAMESPACE`): the serving certificate is issued for it.
    #[arg(
        long,
        env = "OLM_RS_PACKAGE_API_SERVICE",
        default_value = "olm-rs-packageserver"
    )]
    pub package_api_service: String,
    /// How `spec.image` catalogs are served: `in-process` (the controller pulls the image and
    /// serves its file-based catalog; no pod) or `pod` (OLM's registry pod and Service). A
    /// CatalogSource's `olm-rs.io/catalog-serving` annotation overrides it.
    #[arg(
        long,
        env = "OLM_RS_CATALOG_SERVING",
        value_name = "MODE",
        default_value = "in-process"
    )]
    pub catalog_serving: ServingMode,
    /// Directory where in-process catalog images are unpacked, by digest (re-read after a
    /// restart); default: `catalog-images` in the bundle cache directory, else a temporary one.
    #[arg(long, env = "OLM_RS_CATALOG_CACHE_DIR", value_name = "DIR")]
    pub catalog_cache_dir: Option<PathBuf>,
}

/// The user registry pods run as under `restricted` with `--set-workload-user-id` (OLM's).
pub const WORKLOAD_USER_ID: i64 = 1001;

/// The default registries.conf, used when present.
pub const DEFAULT_REGISTRIES_CONFIG: &str = "/etc/containers/registries.conf";

impl RunArgs {
    /// The bundle image settings; the files named are read now, so a bad flag fails at once.
    pub fn bundle_images(&self) -> anyhow::Result<BundleImageOptions> {
        let registries_config = self.registries_config.clone().or_else(|| {
            let default = PathBuf::from(DEFAULT_REGISTRIES_CONFIG);
            default.exists().then_some(default)
        });
        // An invalid policy stops the controller here: never a silent accept-anything.
        let registries_d = self
            .registries_d
            .clone()
            .unwrap_or_else(|| PathBuf::from(DEFAULT_REGISTRIES_D));
        let image_policy = load_image_policy(self.image_policy.as_deref(), Some(&registries_d))
            .context("--image-policy")?;
        let options = BundleImageOptions {
            registries_config,
            registry_ca_file: self.registry_ca_file.clone(),
            cache_dir: self.bundle_cache_dir.clone(),
            pull_secrets: self.pull_secrets.clone(),
            unpack_timeout: self.bundle_unpack_timeout,
            image_policy: std::sync::Arc::new(image_policy),
            unpack_pod: self
                .bundle_unpack_image
                .clone()
                .filter(|i| !i.is_empty())
                .map(|util_image| UnpackPodOptions {
                    util_image,
                    loader: super::bundle_unpack::own_loader(),
                    workload_user_id: self.set_workload_user_id.then_some(WORKLOAD_USER_ID),
                }),
        };
        if let Some(error) = BundleImages::new(options.clone()).config_error() {
            anyhow::bail!("bundle image settings: {error}");
        }
        Ok(options)
    }

    /// The Lease timings, checked before anything connects (a bad flag fails at once).
    fn lease_config(&self) -> anyhow::Result<LeaseConfig> {
        let config = LeaseConfig {
            lease_duration: self.leader_election_lease_duration,
            renew_deadline: self.leader_election_renew_deadline,
            retry_period: self.leader_election_retry_period,
        };
        config.validate()?;
        Ok(config)
    }

    /// The leader election settings, or `None` without `--leader-elect`.
    fn leader_election(
        &self,
        config: LeaseConfig,
        client: &kube::Client,
        connections: Option<olm_rs::k8s::connections::Connections>,
    ) -> Option<LeaderElectionOptions> {
        if !self.leader_elect {
            return None;
        }
        let namespace = self
            .leader_election_namespace
            .clone()
            .filter(|ns| !ns.is_empty())
            .unwrap_or_else(|| client.default_namespace().to_owned());
        Some(LeaderElectionOptions {
            lock: LeaseLock {
                namespace,
                name: self.leader_election_lease.clone(),
                identity: leader_election::default_identity(),
            },
            config,
            connections,
        })
    }
}

pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    telemetry::init_logging(args.log_format, &args.log_level);
    let lease_config = args.lease_config()?;
    let bundle_images = args.bundle_images()?;
    // The reconcilers run together in one future (`controller::run_reconcilers`), on the
    // thread that blocks on it; a single worker thread carries the spawned tasks (HTTP
    // connections, shared watches, catalog connections), so the process uses two cores at
    // most. More workers only scatter the same allocations over more malloc arenas: on the
    // copied-CSV bench at 2,000 namespaces, two workers held about 4 MiB more resident memory
    // than one, for no gain in time (docs/controller-startup.md, "While running").
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        let config = kube::Config::infer()
            .await
            .context("loading Kubernetes credentials (in-cluster service account or KUBECONFIG)")?;
        // olm-rs's own connections, so that a deposed leader's writes in flight are cut off
        // at its renew deadline with their connections reset (docs/leader-election.md §2.1).
        // Through a proxy, kube's client (writes still cut off, without the reset).
        let (client, connections) = if config.proxy_url.is_some() {
            (
                kube::Client::try_from(config).context("building the API client")?,
                None,
            )
        } else {
            let (client, connections) = olm_rs::k8s::connections::client(config)?;
            (client, Some(connections))
        };
        let leader_election = args.leader_election(lease_config, &client, connections);
        let packages = args.package_api.then(|| {
            let namespace = args
                .leader_election_namespace
                .clone()
                .filter(|ns| !ns.is_empty())
                .unwrap_or_else(|| client.default_namespace().to_owned());
            let serving_pod = std::env::var("POD_NAME")
                .ok()
                .filter(|name| !name.is_empty())
                .map(|name| PodRef {
                    namespace: namespace.clone(),
                    name,
                });
            PackageServing {
                serving_pod,
                store: Arc::new(ManifestStore::new(args.global_catalog_namespace.clone())),
                feed: Default::default(),
                https: Some(HttpsOptions {
                    addr: args.package_api_addr,
                    service: ServiceName::new(&args.package_api_service, &namespace),
                }),
            }
        });
        let options = RunOptions {
            probe_addr: args.probe_addr,
            leader_election,
            packages,
            controller: ControllerOptions {
                global_catalog_namespace: args.global_catalog_namespace,
                bundle_images,
                catalog_sources: CatalogSourceOptions {
                    registry_pod: RegistryPodOptions {
                        workload_user_id: args.set_workload_user_id.then_some(WORKLOAD_USER_ID),
                        ..RegistryPodOptions::default()
                    },
                    serving: args.catalog_serving,
                    cache_dir: args.catalog_cache_dir,
                    ..CatalogSourceOptions::default()
                },
                ..ControllerOptions::default()
            },
        };
        controller::run(client, options, shutdown_signal()).await?;
        Ok(ExitCode::SUCCESS)
    })
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM (what the kubelet sends).
pub async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(signal) => signal,
                Err(err) => {
                    tracing::warn!(%err, "cannot listen for SIGTERM; only Ctrl-C stops olm-rs");
                    let _ = interrupt.await;
                    return;
                }
            };
        tokio::select! {
            _ = interrupt => {},
            _ = terminate.recv() => {},
        }
    }
    #[cfg(not(unix))]
    {
        let _ = interrupt.await;
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    #[derive(Parser)]
    struct Command {
        #[command(flatten)]
        run: super::RunArgs,
    }

    fn workload_user_id(args: &[&str]) -> bool {
        let argv = std::iter::once("olm-rs").chain(args.iter().copied());
        Command::try_parse_from(argv)
            .expect("valid flags")
            .run
            .set_workload_user_id
    }

    #[test]
    fn the_package_api_is_served_unless_turned_off() {
        let parse = |args: &[&str]| {
            let argv = std::iter::once("olm-rs").chain(args.iter().copied());
            Command::try_parse_from(argv).expect("valid flags").run
        };
        let default = parse(&[]);
        assert!(default.package_api);
        assert_eq!(default.package_api_addr.to_string(), "0.0.0.0:5443");
        assert_eq!(default.package_api_service, "olm-rs-packageserver");
        assert!(!parse(&["--package-api=false"]).package_api);
        assert_eq!(
            parse(&["--package-api-addr=127.0.0.1:9443"])
                .package_api_addr
                .port(),
            9443
        );
    }

    #[test]
    fn registry_pods_get_a_workload_user_unless_turned_off() {
        assert!(workload_user_id(&[]));
        assert!(workload_user_id(&["--set-workload-user-id"]));
        assert!(workload_user_id(&["--set-workload-user-id=true"]));
        assert!(!workload_user_id(&["--set-workload-user-id=false"]));
        let argv = ["olm-rs", "--set-workload-user-id=maybe"];
        assert!(Command::try_parse_from(argv).is_err());
    }
}

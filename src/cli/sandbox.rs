//! `olm-rs sandbox`: OLM in a simulated cluster, in this process. Prints every state change of
//! the CatalogSource, Subscription, InstallPlans and CSVs as it happens, then stays up for
//! `kubectl` until Ctrl-C.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context as _, bail};
use clap::{Args, ValueEnum};
use jiff::SignedDuration;

use olm_rs::api::Approval;
use olm_rs::reconcile::bundle_images::BundleImageOptions;
use olm_rs::sandbox_run::{
    CATALOG_NAMESPACE, CATALOG_SOURCE, OPERATORS_NAMESPACE, Report, Sandbox, SandboxOptions,
    SubscriptionRequest,
};
use olm_rs::telemetry::{self, LogFormat};

/// Where the sample catalog lives in a checkout; tried after `./examples/catalog`.
const CRATE_EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/catalog");

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ApprovalFlag {
    #[value(name = "Automatic", alias = "automatic")]
    Automatic,
    #[value(name = "Manual", alias = "manual")]
    Manual,
}

#[derive(Debug, Args)]
pub struct SandboxArgs {
    /// Port of the Kubernetes API on 127.0.0.1 (0 picks a free one).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Catalog to serve (FBC directory). Default: ./examples/catalog, else the sample catalog
    /// of the olm-rs source tree this binary was built from.
    #[arg(long, value_name = "DIR")]
    pub catalog: Option<PathBuf>,
    /// Package to subscribe to (default: the catalog's only package).
    #[arg(long)]
    pub package: Option<String>,
    /// Channel (default: the package's default channel).
    #[arg(long)]
    pub channel: Option<String>,
    /// CSV to install first (default: the oldest entry of the channel, so every upgrade shows).
    #[arg(long, conflicts_with = "head")]
    pub starting_csv: Option<String>,
    /// Subscribe without a startingCSV: OLM installs the channel head directly.
    #[arg(long)]
    pub head: bool,
    /// InstallPlan approval of the Subscription.
    #[arg(long, value_enum, default_value = "Automatic")]
    pub approval: ApprovalFlag,
    /// Where to write the kubeconfig (default: a file in a new temporary directory, removed
    /// on exit).
    #[arg(long, value_name = "PATH")]
    pub kubeconfig_out: Option<PathBuf>,
    /// Exit 0 once the Subscription is at the channel head with its CSV Succeeded (and the
    /// replaced CSVs gone); exit 1 if that takes longer than --timeout. For scripts and CI.
    #[arg(long)]
    pub exit_when_settled: bool,
    /// With --exit-when-settled: how long to wait (`90s`, `2m`).
    #[arg(long, default_value = "120s")]
    pub timeout: SignedDuration,
    /// Log filter for the controllers' own logs on stderr (`warn`, `info`, `olm_rs=debug`).
    #[arg(long, env = "OLM_RS_LOG_LEVEL", default_value = "warn")]
    pub log_level: String,
    /// containers-registries.conf (v2) used to pull the catalog's bundle images (as `olm-rs
    /// run --registries-config`).
    #[arg(long, value_name = "FILE")]
    pub registries_config: Option<PathBuf>,
    /// Extra PEM CA certificates trusted for image registries (as `olm-rs run`).
    #[arg(long, value_name = "FILE")]
    pub registry_ca_file: Option<PathBuf>,
}

impl SandboxArgs {
    fn request(&self) -> SubscriptionRequest {
        SubscriptionRequest {
            package: self.package.clone(),
            channel: self.channel.clone(),
            starting_csv: self.starting_csv.clone(),
            head: self.head,
            approval: match self.approval {
                ApprovalFlag::Automatic => Approval::Automatic,
                ApprovalFlag::Manual => Approval::Manual,
            },
        }
    }
}

/// `--catalog`, else `./examples/catalog`, else the source tree's; a clear error if none exists.
fn catalog_dir(flag: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(dir) = flag {
        if !dir.is_dir() {
            bail!("--catalog {}: no such directory", dir.display());
        }
        return Ok(dir.to_path_buf());
    }
    for candidate in [Path::new("examples/catalog"), Path::new(CRATE_EXAMPLES)] {
        if candidate.is_dir() {
            return Ok(candidate.to_path_buf());
        }
    }
    bail!(
        "no catalog to serve: neither ./examples/catalog nor {CRATE_EXAMPLES} exists \
         (this binary was built from a source tree that is gone); pass --catalog DIR"
    )
}

/// `println!` returning the write error instead of panicking: a closed pipe (`| head`) means
/// nobody reads any more, and the sandbox stops cleanly.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*)
    }};
}

pub fn run(args: SandboxArgs) -> anyhow::Result<ExitCode> {
    telemetry::init_logging(LogFormat::Text, &args.log_level);
    let catalog = catalog_dir(args.catalog.as_deref())?;
    let timeout = std::time::Duration::try_from(args.timeout)
        .ok()
        .filter(|t| !t.is_zero())
        .with_context(|| format!("--timeout {:#}: must be positive", args.timeout))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        let started = Instant::now();
        let options = SandboxOptions {
            api_addr: SocketAddr::from(([127, 0, 0, 1], args.port)),
            catalog,
            subscription: args.request(),
            bundle_images: BundleImageOptions {
                registries_config: args.registries_config.clone(),
                registry_ca_file: args.registry_ca_file.clone(),
                ..BundleImageOptions::default()
            },
        };
        let sandbox = Sandbox::start(options).await?;
        let kubeconfig = KubeconfigFile::write(args.kubeconfig_out.clone(), &sandbox)?;
        say!("{}", banner(&sandbox, &kubeconfig.path))?;

        let mut follower = sandbox.follow().await;
        sandbox.subscribe().await?;
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let shutdown = super::run::shutdown_signal();
        tokio::pin!(shutdown);
        let mut was_settled = false;
        let mut hinted = false;
        let mut code = ExitCode::SUCCESS;
        loop {
            tokio::select! {
                () = &mut shutdown => {
                    let _ = say!("stopping (Ctrl-C)…");
                    break;
                }
                () = &mut deadline, if args.exit_when_settled => {
                    eprintln!(
                        "error: the Subscription {OPERATORS_NAMESPACE}/{} did not settle within {:#} \
                         (head {}); see the lines above for where it stopped",
                        sandbox.choice().package,
                        args.timeout,
                        sandbox.choice().head,
                    );
                    code = ExitCode::FAILURE;
                    break;
                }
                report = follower.next() => match report {
                    Some(Report::Line { transition, settled }) => {
                        if say!("{}  {transition}", now()).is_err() {
                            break;
                        }
                        match settled {
                            // At the channel head, not only AtLatestKnown: a Subscription
                            // reads AtLatestKnown while a hop's plan finishes, before it
                            // resolves the next hop (docs/subscription-plans.md, "Co-upgrades").
                            Some(s) if !was_settled && s.installed_csv == sandbox.choice().head => {
                                was_settled = true;
                                let line = say!(
                                    "settled: {} Succeeded, Subscription AtLatestKnown ({:.1}s)",
                                    s.installed_csv,
                                    started.elapsed().as_secs_f64()
                                );
                                if line.is_err() {
                                    break;
                                }
                                if args.exit_when_settled {
                                    break;
                                }
                                if !hinted {
                                    hinted = true;
                                    if say!("{}", try_it(&sandbox)).is_err() {
                                        break;
                                    }
                                }
                            }
                            Some(_) => {}
                            None => was_settled = false,
                        }
                    }
                    Some(Report::WatchError(message)) => eprintln!("warning: {message}"),
                    None => bail!("the sandbox's watches stopped unexpectedly"),
                },
            }
        }
        drop(follower);
        sandbox.shutdown().await?;
        drop(kubeconfig);
        if code == ExitCode::SUCCESS {
            let _ = say!("stopped.");
        }
        Ok(code)
    })
}

fn now() -> String {
    jiff::Zoned::now().strftime("%H:%M:%S%.3f").to_string()
}

fn banner(sandbox: &Sandbox, kubeconfig: &Path) -> String {
    let choice = sandbox.choice();
    let (catalog, packages, bundles) = sandbox.catalog();
    let from = match &choice.starting_csv {
        Some(csv) => format!("starting at {csv}"),
        None => "installing the head".to_owned(),
    };
    format!(
        "olm-rs sandbox: a SIMULATED cluster. The Kubernetes API runs in this process, in memory;\n\
         no pod ever runs — a simulator marks Deployments available. The OLM controllers are the\n\
         real olm-rs ones. Nothing here touches a real cluster.\n\n  \
         API server    {url}\n  \
         catalog       {catalog}: {packages} package(s), {bundles} bundle(s), served on {registry} \
         as CatalogSource {CATALOG_NAMESPACE}/{CATALOG_SOURCE}\n  \
         subscription  {OPERATORS_NAMESPACE}/{package}: channel {channel}, {from}, head {head}, \
         approval {approval}\n\n\
         export KUBECONFIG={kubeconfig}\n",
        url = sandbox.url(),
        catalog = catalog.display(),
        registry = sandbox.registry_address(),
        package = choice.package,
        channel = choice.channel,
        head = choice.head,
        approval = choice.approval,
        kubeconfig = kubeconfig.display(),
    )
}

fn try_it(sandbox: &Sandbox) -> String {
    let choice = sandbox.choice();
    let mut text =
        "The sandbox stays up until Ctrl-C. In another shell, after the export above:\n  \
                    kubectl get csv,installplan,subscription -w\n"
            .to_owned();
    if let Some(other) = choice.channels.iter().find(|c| **c != choice.channel) {
        text.push_str(&format!(
            "  kubectl patch subscription {} --type merge -p '{{\"spec\":{{\"channel\":\"{other}\"}}}}'\n",
            choice.package
        ));
    }
    text.push_str(if choice.approval == Approval::Manual {
        "  (approve each InstallPlan with the command printed on its RequiresApproval line)"
    } else {
        "  (restart with --approval Manual to approve each InstallPlan by hand)"
    });
    text
}

/// The kubeconfig written for `kubectl`; a default one lives in its own temporary directory,
/// removed on exit.
struct KubeconfigFile {
    path: PathBuf,
    remove_dir: Option<PathBuf>,
}

impl KubeconfigFile {
    fn write(out: Option<PathBuf>, sandbox: &Sandbox) -> anyhow::Result<Self> {
        let (path, remove_dir) = match out {
            Some(path) => (path, None),
            None => {
                let dir =
                    std::env::temp_dir().join(format!("olm-rs-sandbox-{}", std::process::id()));
                std::fs::create_dir_all(&dir)
                    .with_context(|| format!("creating {}", dir.display()))?;
                (dir.join("kubeconfig"), Some(dir))
            }
        };
        std::fs::write(&path, sandbox.kubeconfig_yaml())
            .with_context(|| format!("writing the kubeconfig to {}", path.display()))?;
        Ok(Self { path, remove_dir })
    }
}

/// Also on an early error return: a kubeconfig pointing at a stopped sandbox is useless.
impl Drop for KubeconfigFile {
    fn drop(&mut self) {
        if let Some(dir) = self.remove_dir.take() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

//! Subcommands. Each lives in its own file; this one only routes.

pub mod bundle_unpack;
mod catalog;
mod catalog_serve;
mod run;
#[cfg(feature = "sandbox")]
mod sandbox;
// Without the `sandbox` feature the subcommand stays, and says how to get it.
#[cfg(not(feature = "sandbox"))]
#[path = "sandbox_unavailable.rs"]
mod sandbox;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod crds;
mod resolve;
mod takeover;

#[derive(Debug, Parser)]
#[command(
    name = "olm-rs",
    version,
    about = "Operator Lifecycle Manager, re-built in Rust"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the controller against the cluster in KUBECONFIG (or in-cluster credentials).
    // Boxed: the controller's flags are many times the size of the other commands'.
    Run(Box<run::RunArgs>),
    /// Print the olm-rs version.
    Version,
    /// Print the CustomResourceDefinitions (OLM's five kinds, OLMConfig and OperatorCondition) as one YAML stream.
    ///
    /// The ClusterServiceVersion CRD is too large for client-side apply; use
    /// `olm-rs crds | kubectl apply --server-side -f -`.
    Crds,
    /// Catalog tools: validate, render, graph, upgrade-path, serve.
    Catalog(catalog::CatalogArgs),
    /// Preview what a Subscription would install and its whole upgrade path, or why nothing
    /// would be installed.
    Resolve(resolve::ResolveArgs),
    /// Start a simulated cluster with OLM in it and the sample catalog, subscribe, and print
    /// every phase change; then stay up for `kubectl` until Ctrl-C.
    Sandbox(sandbox::SandboxArgs),
    /// Before moving a cluster from OLM to olm-rs: with `--dry-run`, list per object what
    /// olm-rs would write on the cluster in KUBECONFIG, writing nothing.
    Takeover(takeover::TakeoverArgs),
    /// Inside an unpack pod (docs/bundle-images.md): `install DIR` copies olm-rs into the
    /// pod's shared volume; `emit` writes the bundle image's manifests to stdout.
    #[command(hide = true)]
    BundleUnpack(bundle_unpack::BundleUnpackArgs),
}

pub fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Run(args) => run::run(*args),
        Command::Version => {
            println!("olm-rs {}", env!("CARGO_PKG_VERSION"));
            Ok(ExitCode::SUCCESS)
        }
        Command::Crds => crds::run(),
        Command::Catalog(args) => catalog::run(args),
        Command::Resolve(args) => resolve::run(args),
        Command::Sandbox(args) => sandbox::run(args),
        Command::Takeover(args) => takeover::run(args),
        Command::BundleUnpack(args) => bundle_unpack::run(args),
    }
}

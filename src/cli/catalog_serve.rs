//! `olm-rs catalog serve CATALOG`: the registry gRPC API over a catalog directory, a drop-in for
//! `opm serve` (same API, same health answers, port 50051 by default).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context as _;
use clap::Args;

use olm_rs::catalog::validated;
use olm_rs::registry::server;
use olm_rs::telemetry::{self, LogFormat};

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// FBC directory, or a directory of registry+v1 bundle directories.
    pub catalog: PathBuf,
    /// Address to serve the registry API on.
    #[arg(long, env = "OLM_RS_REGISTRY_ADDR", default_value = "0.0.0.0:50051")]
    pub addr: SocketAddr,
    /// Log format: `text` or `json`.
    #[arg(long, env = "OLM_RS_LOG_FORMAT", default_value = "text")]
    pub log_format: LogFormat,
    /// Log filter (`info`, `olm_rs=debug`, ...); `RUST_LOG` wins when set.
    #[arg(long, env = "OLM_RS_LOG_LEVEL", default_value = "info")]
    pub log_level: String,
}

pub fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    telemetry::init_logging(args.log_format, &args.log_level);
    let started = Instant::now();
    let loaded = match validated::load_for_serving(&args.catalog) {
        Ok(loaded) => loaded,
        Err(err) => {
            // The problems are the answer: print them all and refuse to serve.
            eprintln!("error: {err}");
            return Ok(ExitCode::FAILURE);
        }
    };
    let packages = loaded.index.packages().len();
    let bundles = loaded.index.bundle_count();
    let index = Arc::new(loaded.index);
    // Only the index is kept from here on; what loading and validation freed goes back.
    crate::release_free_memory();

    // Two workers are plenty for a registry; fewer threads, less memory.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(args.addr)
            .await
            .with_context(|| format!("cannot listen on {}", args.addr))?;
        tracing::info!(
            catalog = %args.catalog.display(),
            kind = ?loaded.kind,
            packages,
            bundles,
            addr = %args.addr,
            startup_ms = started.elapsed().as_millis() as u64,
            "serving registry"
        );
        server::serve(index, listener, super::run::shutdown_signal()).await?;
        tracing::info!("registry stopped");
        Ok(ExitCode::SUCCESS)
    })
}

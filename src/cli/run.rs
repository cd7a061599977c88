//! `olm-rs run`: the controller process.

use std::net::SocketAddr;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;

use olm_rs::controller::{self, RunOptions};
use olm_rs::reconcile::ControllerOptions;
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
}

pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    telemetry::init_logging(args.log_format, &args.log_level);
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(async move {
        let client = kube::Client::try_default()
            .await
            .context("loading Kubernetes credentials (in-cluster service account or KUBECONFIG)")?;
        let options = RunOptions {
            probe_addr: args.probe_addr,
            controller: ControllerOptions {
                global_catalog_namespace: args.global_catalog_namespace,
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

//! `olm-rs-test-operator`: a small operator for the tests with real pods. It serves what
//! operators serve, on the certificates OLM mounts (docs/certificates.md §5), so that a test can
//! let the API server itself call it:
//!
//! - **health** (plain HTTP, `--health-port`, default 8081): `/livez` answers 200 while the
//!   process runs; `/healthz` and `/readyz` answer 200, or 503 with `--never-ready`.
//!   `--crash-after 2s` makes the process exit with status 1 after that long (a crash loop under
//!   a kubelet);
//! - **webhooks** (HTTPS, `--webhook-port`, default 9443, `tls.crt`/`tls.key` in
//!   `--webhook-cert-dir`, default `/tmp/k8s-webhook-server/serving-certs`):
//!   `POST /validate` — a validating admission webhook (`AdmissionReview` v1) that denies an
//!   object whose `spec.deny` is `true` and allows every other;
//!   `POST /convert` — a conversion webhook (`ConversionReview` v1) for `Gadget`:
//!   `v1alpha1` `spec.size` ⇄ `v1` `spec.replicas` (webhooks.rs);
//! - **an aggregated API** (HTTPS, `--apiserver-port`, default 8443, `apiserver.crt`/
//!   `apiserver.key` in `--apiserver-cert-dir`, default `/apiserver.local.config/certificates`):
//!   discovery and a read-only, cluster-scoped resource `reports` of group `--api-group` and
//!   version `--api-version` (aggregated.rs).
//!
//! The certificate files are read again for each new connection when they changed (tls.rs), so
//! a rotated Secret is served without a restart. Every flag has an environment variable
//! (`TESTOP_…`), so a CSV can configure a role through `env` or `args`.

mod aggregated;
mod tls;
mod webhooks;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use clap::Parser;
use tokio::net::TcpListener;

#[derive(Debug, Parser)]
#[command(
    name = "olm-rs-test-operator",
    about = "A small operator for olm-rs's tests"
)]
struct Args {
    /// Address every server listens on.
    #[arg(long, env = "TESTOP_BIND_ADDRESS", default_value = "0.0.0.0")]
    bind_address: IpAddr,
    /// Port of the plain-HTTP health server (/livez, /healthz, /readyz).
    #[arg(long, env = "TESTOP_HEALTH_PORT", default_value_t = 8081)]
    health_port: u16,
    /// /healthz and /readyz answer 503 for as long as the process runs.
    #[arg(long, env = "TESTOP_NEVER_READY")]
    never_ready: bool,
    /// Exit with status 1 after this long (`2s`, `500ms`, or seconds).
    #[arg(long, env = "TESTOP_CRASH_AFTER", value_parser = parse_duration)]
    crash_after: Option<Duration>,
    /// Port of the HTTPS webhook server (/validate, /convert).
    #[arg(long, env = "TESTOP_WEBHOOK_PORT", default_value_t = 9443)]
    webhook_port: u16,
    /// Directory holding the webhook server's `tls.crt` and `tls.key`.
    #[arg(
        long,
        env = "TESTOP_WEBHOOK_CERT_DIR",
        default_value = "/tmp/k8s-webhook-server/serving-certs"
    )]
    webhook_cert_dir: PathBuf,
    /// Port of the HTTPS aggregated API server.
    #[arg(long, env = "TESTOP_APISERVER_PORT", default_value_t = 8443)]
    apiserver_port: u16,
    /// Directory holding the aggregated API server's `apiserver.crt` and `apiserver.key`.
    #[arg(
        long,
        env = "TESTOP_APISERVER_CERT_DIR",
        default_value = "/apiserver.local.config/certificates"
    )]
    apiserver_cert_dir: PathBuf,
    /// API group of the aggregated API.
    #[arg(long, env = "TESTOP_API_GROUP", default_value = aggregated::DEFAULT_GROUP)]
    api_group: String,
    /// API version of the aggregated API.
    #[arg(long, env = "TESTOP_API_VERSION", default_value = aggregated::DEFAULT_VERSION)]
    api_version: String,
    /// The version this operator reports (in its `Report` and its log).
    #[arg(long, env = "TESTOP_VERSION", default_value = "0.0.0")]
    operator_version: String,
    /// Name of the one `Report` the aggregated API lists (the pod's name in a pod).
    #[arg(long, env = "HOSTNAME", default_value = "olm-rs-test-operator")]
    report_name: String,
}

/// `2s`, `500ms`, `1m` or a number of seconds.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit() && c != '.') {
        Some(i) => text.split_at(i),
        None => (text, "s"),
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration such as 2s or 500ms"))?;
    let seconds = match unit {
        "ms" => value / 1000.0,
        "s" => value,
        "m" => value * 60.0,
        _ => return Err(format!("{text:?}: unit {unit:?} is not ms, s or m")),
    };
    Ok(Duration::from_secs_f64(seconds))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let version = args.operator_version.clone();
    println!("olm-rs-test-operator {version} starting");

    let health = TcpListener::bind(SocketAddr::new(args.bind_address, args.health_port))
        .await
        .with_context(|| format!("binding the health port {}", args.health_port))?;
    let webhook = TcpListener::bind(SocketAddr::new(args.bind_address, args.webhook_port))
        .await
        .with_context(|| format!("binding the webhook port {}", args.webhook_port))?;
    let apiserver = TcpListener::bind(SocketAddr::new(args.bind_address, args.apiserver_port))
        .await
        .with_context(|| format!("binding the aggregated API port {}", args.apiserver_port))?;

    let webhook_tls = Arc::new(tls::ReloadingCert::new(
        args.webhook_cert_dir.join("tls.crt"),
        args.webhook_cert_dir.join("tls.key"),
    ));
    let apiserver_tls = Arc::new(tls::ReloadingCert::new(
        args.apiserver_cert_dir.join("apiserver.crt"),
        args.apiserver_cert_dir.join("apiserver.key"),
    ));
    let api = aggregated::Api {
        group: args.api_group.clone(),
        version: args.api_version.clone(),
        report_name: args.report_name.clone(),
        operator_version: version.clone(),
    };

    println!(
        "serving health on {}, webhooks on {}, the aggregated API {}/{} on {}",
        health.local_addr()?,
        webhook.local_addr()?,
        api.group,
        api.version,
        apiserver.local_addr()?
    );
    if args.never_ready {
        println!("--never-ready: /healthz and /readyz answer 503");
    }

    let crash = async {
        match args.crash_after {
            Some(after) => {
                tokio::time::sleep(after).await;
                eprintln!("olm-rs-test-operator {version}: crashing as asked (--crash-after)");
                std::process::exit(1)
            }
            None => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        r = axum::serve(health, health_routes(args.never_ready)) => r.context("health server")?,
        r = tls::serve(webhook, webhook_tls, webhooks::routes()) => r.context("webhook server")?,
        r = tls::serve(apiserver, apiserver_tls, api.routes()) => r.context("aggregated API server")?,
        () = crash => {}
    }
    Ok(())
}

fn health_routes(never_ready: bool) -> Router {
    let ready = move || async move {
        if never_ready {
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "not ready: started with --never-ready",
            )
        } else {
            (StatusCode::OK, "ok")
        }
    };
    Router::new()
        .route("/livez", get(|| async { "ok" }))
        .route("/healthz", get(ready))
        .route("/readyz", get(ready))
}

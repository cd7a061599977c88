//! `olm-rs takeover --dry-run`: what olm-rs would write on the cluster in KUBECONFIG, per
//! object, before it takes over from OLM — writing nothing (src/dry_run.rs,
//! docs/migrating-from-olm.md §2).

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use http::{Request, Response};
use jiff::SignedDuration;
use kube::client::{Body, ClientBuilder};

use olm_rs::controller::{self, RunOptions};
use olm_rs::dry_run::{self, Sent, Target};
use olm_rs::reconcile::ControllerOptions;
use olm_rs::telemetry::{self, LogFormat};

#[derive(Debug, Args)]
pub struct TakeoverArgs {
    /// Only show what olm-rs would write: every write goes out with `dryRun=All`, so the API
    /// server checks it and stores nothing. (The move itself is the chart's install:
    /// docs/migrating-from-olm.md.)
    #[arg(long)]
    pub dry_run: bool,
    /// How long the controller runs before the report (it keeps deciding on the cluster as it
    /// is, since nothing it sends is stored).
    #[arg(long = "for", default_value = "30s", value_name = "DURATION")]
    pub run_for: SignedDuration,
    /// Namespace whose CatalogSources every namespace may use (OLM's global catalog namespace).
    #[arg(long, default_value = "olm")]
    pub global_catalog_namespace: String,
    /// Show objects whose writes would change nothing too.
    #[arg(long)]
    pub all: bool,
    /// Log filter for the controller's own log lines (stderr).
    #[arg(long, default_value = "warn")]
    pub log_level: String,
}

pub fn run(args: TakeoverArgs) -> anyhow::Result<ExitCode> {
    if !args.dry_run {
        eprintln!(
            "olm-rs takeover: only --dry-run is implemented; the move itself is `helm install` \
             of the chart over OLM's namespace (docs/migrating-from-olm.md §2)"
        );
        return Ok(ExitCode::from(2));
    }
    telemetry::init_logging(LogFormat::Text, &args.log_level);
    let run_for = Duration::try_from(args.run_for).context("--for: a positive duration")?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        let config = kube::Config::infer()
            .await
            .context("loading Kubernetes credentials (KUBECONFIG or in-cluster)")?;
        let server = config.cluster_url.clone();
        let namespace = config.default_namespace.clone();
        let inner = ClientBuilder::try_from(config)
            .context("building a Kubernetes client")?
            .build();
        let sent: Arc<Mutex<Vec<Sent>>> = Arc::default();
        let client = dry_client(inner.clone(), Arc::clone(&sent), namespace);
        let options = RunOptions {
            // An ephemeral port: nothing probes this process.
            probe_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            leader_election: None,
            packages: None,
            controller: ControllerOptions {
                global_catalog_namespace: args.global_catalog_namespace,
                ..ControllerOptions::default()
            },
        };
        eprintln!(
            "olm-rs takeover --dry-run: running the controller against {server} for {}s; \
             every write goes out with dryRun=All (nothing is stored)",
            run_for.as_secs()
        );
        controller::run(client, options, tokio::time::sleep(run_for))
            .await
            .context("running the controller")?;
        let sent = sent.lock().map(|s| s.clone()).unwrap_or_default();
        let mut current = std::collections::HashMap::new();
        for one in &sent {
            let Some(name) = one
                .target
                .name
                .clone()
                .or_else(|| one.answer["metadata"]["name"].as_str().map(str::to_owned))
            else {
                continue;
            };
            let path = one.target.object_path(&name);
            if current.contains_key(&path) {
                continue;
            }
            let request = Request::get(&path).body(Vec::new())?;
            let object = inner.request::<serde_json::Value>(request).await.ok();
            current.insert(path, object);
        }
        let lines = dry_run::report(&sent, |target: &Target, name: &str| {
            current.get(&target.object_path(name)).cloned().flatten()
        });
        print(&lines, args.all);
        Ok(ExitCode::SUCCESS)
    })
}

fn print(lines: &[dry_run::Line], all: bool) {
    let events: usize = lines
        .iter()
        .filter(|l| l.kind == "Event")
        .map(|l| l.count)
        .sum();
    let changing: Vec<&dry_run::Line> = lines
        .iter()
        .filter(|l| l.kind != "Event" && l.effect != dry_run::Effect::NoChange)
        .collect();
    let unchanged = lines
        .iter()
        .filter(|l| l.kind != "Event" && l.effect == dry_run::Effect::NoChange)
        .count();
    println!(
        "{} objects would change; {unchanged} more would be written with no change; \
         {events} events would be recorded",
        changing.len()
    );
    for line in lines.iter().filter(|l| l.kind != "Event") {
        if all || line.effect != dry_run::Effect::NoChange {
            println!("  {line}");
        }
    }
}

/// A client whose writes go out with `dryRun=All`, recorded with the API server's answers;
/// reads (and access reviews) pass as they are.
fn dry_client(inner: kube::Client, sent: Arc<Mutex<Vec<Sent>>>, namespace: String) -> kube::Client {
    let service = tower::service_fn(move |request: Request<Body>| {
        let inner = inner.clone();
        let sent = Arc::clone(&sent);
        async move {
            let method = request.method().as_str().to_owned();
            let path = request.uri().path().to_owned();
            if !dry_run::is_write(&method, &path) {
                return inner.send(request).await;
            }
            let (mut parts, body) = request.into_parts();
            let path_and_query = parts
                .uri
                .path_and_query()
                .map(|pq| pq.as_str().to_owned())
                .unwrap_or_else(|| path.clone());
            let mut uri = parts.uri.into_parts();
            uri.path_and_query = Some(
                dry_run::with_dry_run(&path_and_query)
                    .parse()
                    .map_err(|e: http::uri::InvalidUri| kube::Error::Service(e.into()))?,
            );
            parts.uri = http::Uri::from_parts(uri).map_err(|e| kube::Error::Service(e.into()))?;
            let response = inner.send(Request::from_parts(parts, body)).await?;
            let (parts, body) = response.into_parts();
            let bytes = body.collect_bytes().await?;
            if let Some(target) = Target::parse(&path) {
                let answer = serde_json::from_slice(&bytes).unwrap_or_default();
                if let Ok(mut sent) = sent.lock() {
                    sent.push(Sent {
                        method,
                        target,
                        status: parts.status.as_u16(),
                        answer,
                    });
                }
            }
            Ok::<_, kube::Error>(Response::from_parts(parts, Body::from(bytes)))
        }
    });
    kube::Client::new(service, namespace)
}

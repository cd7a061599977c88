//! The journeys in the order they run, and the runner shared by `cargo test --test e2e` (any
//! cluster in `KUBECONFIG`) and tests/e2e_embedded.rs (olm-rs's embedded API server with a local
//! `olm-rs run`).

use std::time::Instant;

use futures::future::BoxFuture;

use crate::cluster::Cluster;
use crate::journeys::{self, Outcome};

type Journey = for<'a> fn(&'a Cluster, &'a str) -> BoxFuture<'a, anyhow::Result<Outcome>>;

/// Each journey gets a fresh namespace (`olm-rs-e2e-<name>-…`).
pub const JOURNEYS: &[(&str, Journey)] = &[
    ("leader", |c, _| {
        Box::pin(async move { journeys::leader::run(c).await.map(|()| Outcome::Ran) })
    }),
    ("image", |c, ns| Box::pin(journeys::image::run(c, ns))),
    ("automatic", |c, ns| {
        Box::pin(async move { journeys::automatic::run(c, ns).await.map(|()| Outcome::Ran) })
    }),
    ("manual", |c, ns| {
        Box::pin(async move { journeys::manual::run(c, ns).await.map(|()| Outcome::Ran) })
    }),
    ("adoption", |c, ns| {
        Box::pin(async move { journeys::adoption::run(c, ns).await.map(|()| Outcome::Ran) })
    }),
    ("global", |c, ns| {
        Box::pin(async move { journeys::global::run(c, ns).await.map(|()| Outcome::Ran) })
    }),
];

/// Which journeys passed, were skipped (with why) and failed (with the error).
#[derive(Debug, Default)]
pub struct Summary {
    pub passed: Vec<String>,
    pub skipped: Vec<(String, String)>,
    pub failed: Vec<(String, String)>,
}

/// Runs the selected journeys one after the other, printing progress.
pub async fn run_journeys(cluster: &Cluster, selected: impl Fn(&str) -> bool) -> Summary {
    let mut summary = Summary::default();
    for (name, journey) in JOURNEYS {
        if !selected(name) {
            continue;
        }
        println!("e2e: journey::{name} ...");
        let started = Instant::now();
        let result = match cluster
            .create_namespace(&format!("olm-rs-e2e-{name}-"))
            .await
        {
            Ok(ns) => {
                let result = journey(cluster, &ns).await;
                if cluster.settings.keep {
                    println!("e2e:   keeping namespace {ns} (OLM_RS_E2E_KEEP)");
                } else {
                    cluster.delete_namespace(&ns).await;
                }
                result
            }
            Err(err) => Err(err.context("creating the journey's namespace")),
        };
        let secs = started.elapsed().as_secs_f64();
        match result {
            Ok(Outcome::Ran) => {
                println!("e2e: journey::{name} ... ok ({secs:.1}s)");
                summary.passed.push((*name).to_owned());
            }
            Ok(Outcome::Skipped(why)) => {
                println!("e2e: journey::{name} ... skipped: {why}");
                summary.skipped.push(((*name).to_owned(), why));
            }
            Err(err) => {
                println!("e2e: journey::{name} ... FAILED ({secs:.1}s)\n  {err:#}");
                summary
                    .failed
                    .push(((*name).to_owned(), format!("{err:#}")));
            }
        }
    }
    summary
}

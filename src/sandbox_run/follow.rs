//! Watches (never polls) the objects `olm-rs sandbox` reports on and turns their changes into
//! [`Report`]s through the pure [`Tracker`].

use std::pin::Pin;

use futures::{Stream, StreamExt};
use kube::{Api, Client, Resource};
use kube_runtime::WatchStreamExt;
use kube_runtime::watcher::{self, Event};
use serde::de::DeserializeOwned;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::tracker::{self, Kind, Observed, Raw, Settled, Tracker, Transition};
use crate::api::{CatalogSource, ClusterServiceVersion, InstallPlan, Subscription};

/// One printed line and whether the Subscription has settled after it.
#[derive(Debug, Clone)]
pub enum Report {
    Line {
        transition: Transition,
        settled: Option<Settled>,
    },
    /// A watch failed (it retries with back-off); worth showing, not fatal.
    WatchError(String),
}

/// Reports arrive here while the watches run; dropping it stops them.
pub struct Follower {
    reports: mpsc::Receiver<Report>,
    task: JoinHandle<()>,
}

impl Follower {
    /// The next report; `None` only if the watches stopped.
    pub async fn next(&mut self) -> Option<Report> {
        self.reports.recv().await
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        self.task.abort();
    }
}

enum Seen {
    Applied(Observed, Raw),
    Deleted(Kind, String),
    Listed,
    Failed(String),
}

type SeenStream = Pin<Box<dyn Stream<Item = Seen> + Send>>;

fn watch<K, F>(api: Api<K>, kind: Kind, describe: F) -> SeenStream
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
    F: Fn(&K) -> (Observed, Raw) + Send + 'static,
{
    Box::pin(
        watcher::watcher(api, watcher::Config::default())
            .default_backoff()
            .map(move |event| match event {
                Ok(Event::Apply(obj) | Event::InitApply(obj)) => {
                    let (o, r) = describe(&obj);
                    Some(Seen::Applied(o, r))
                }
                Ok(Event::Delete(obj)) => {
                    let meta = obj.meta();
                    let name = meta.name.clone().unwrap_or_default();
                    let name = match (kind, &meta.namespace) {
                        (Kind::CatalogSource, Some(ns)) => format!("{ns}/{name}"),
                        _ => name,
                    };
                    Some(Seen::Deleted(kind, name))
                }
                Ok(Event::InitDone) => Some(Seen::Listed),
                Ok(Event::Init) => None,
                Err(err) => Some(Seen::Failed(format!("watching {}s: {err}", kind.label()))),
            })
            .filter_map(std::future::ready),
    )
}

/// Starts watching CatalogSources in `catalog_namespace` and Subscriptions, InstallPlans and
/// CSVs in `namespace`; returns once every watch has listed, so no later change is missed.
pub async fn follow(client: Client, catalog_namespace: &str, namespace: &str) -> Follower {
    let plan_namespace = namespace.to_owned();
    let streams: Vec<SeenStream> = vec![
        watch(
            Api::<CatalogSource>::namespaced(client.clone(), catalog_namespace),
            Kind::CatalogSource,
            tracker::catalog_source,
        ),
        watch(
            Api::<Subscription>::namespaced(client.clone(), namespace),
            Kind::Subscription,
            tracker::subscription,
        ),
        watch(
            Api::<InstallPlan>::namespaced(client.clone(), namespace),
            Kind::InstallPlan,
            move |plan| tracker::install_plan(plan, &plan_namespace),
        ),
        watch(
            Api::<ClusterServiceVersion>::namespaced(client, namespace),
            Kind::Csv,
            tracker::csv,
        ),
    ];
    let watches = streams.len();
    let (tx, reports) = mpsc::channel(256);
    let (listed_tx, listed_rx) = oneshot::channel();
    let task = tokio::spawn(run(
        futures::stream::select_all(streams),
        watches,
        tx,
        listed_tx,
    ));
    // An error means the task ended early (its receiver is gone); the reports say why.
    let _ = listed_rx.await;
    Follower { reports, task }
}

async fn run(
    mut seen: futures::stream::SelectAll<SeenStream>,
    watches: usize,
    tx: mpsc::Sender<Report>,
    listed: oneshot::Sender<()>,
) {
    let mut tracker = Tracker::new();
    let mut listed = Some(listed);
    let mut lists_done = 0;
    while let Some(event) = seen.next().await {
        let report = match event {
            Seen::Applied(observed, raw) => tracker.observe(observed, raw),
            Seen::Deleted(kind, name) => tracker.deleted(kind, &name),
            Seen::Listed => {
                lists_done += 1;
                if lists_done >= watches
                    && let Some(listed) = listed.take()
                {
                    let _ = listed.send(());
                }
                None
            }
            Seen::Failed(message) => {
                if tx.send(Report::WatchError(message)).await.is_err() {
                    return;
                }
                None
            }
        };
        if let Some(transition) = report {
            let settled = tracker.settled();
            if tx
                .send(Report::Line {
                    transition,
                    settled,
                })
                .await
                .is_err()
            {
                return;
            }
        }
    }
}

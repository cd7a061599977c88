//! The operand watches (docs/operator-api.md §2, §5): one metadata-only watch per
//! `operator_api::operands::OperandWatch` an Operator needs, run as the CSV's ServiceAccount
//! (impersonated: olm-rs holds no right on operand kinds), started when the Operator's sync
//! first needs it and stopped when a sync no longer does. Each change of an operand queues the
//! Operator; its label is written, once, as the same account.
//!
//! A refusal (the account may not list, watch or patch the operands) is told once, as a log
//! line and a Warning Event on the CSV, and never fails the Operator's sync: the rest of the
//! Operator is kept as before. A refused watch keeps trying quietly (kube-runtime's back-off,
//! up to 30 s; a refusal in its first [`GRACE`] is not told); refused label patches are tried
//! again after [`PATCH_RETRY`].

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Api, DynamicObject, PartialObjectMeta};
use kube::{Client, Resource};
use kube_runtime::WatchStreamExt;
use kube_runtime::watcher;

use crate::api::ClusterServiceVersion;
use crate::api::event::ObjectEvent;
use crate::k8s::effects::{Write, perform};
use crate::k8s::errors::ApiFailure;
use crate::k8s::impersonate::impersonating;
use crate::k8s::store::{NamespacedStore, StoreWriter, namespaced_store};
use crate::operator_api::operands::{Operand, OperandWatch};
use crate::reconcile::Context;
use crate::reconcile::work_queue::WorkQueue;

/// The Event reason of a refused operand watch or label (on the CSV).
pub const OPERANDS_FORBIDDEN: &str = "OperandsForbidden";
/// Label patches answered by a transient failure: the sync looks again after this long.
pub const TRANSIENT_RETRY: Duration = Duration::from_secs(5);
/// How long label patches refused to an account wait before they are tried again.
const PATCH_RETRY: Duration = Duration::from_secs(300);
/// A watch refused this soon after it started is not told yet: the account's RBAC, just
/// made, may not have reached the API server's authorizer.
const GRACE: Duration = Duration::from_secs(10);
/// Operands per page of a watch's initial list.
const PAGE_SIZE: u32 = 100;

type Meta = PartialObjectMeta<DynamicObject>;

/// The running operand watches of every Operator.
pub struct OperandWatches {
    queue: WorkQueue<String>,
    running: Mutex<BTreeMap<OperandWatch, Running>>,
}

struct Running {
    store: NamespacedStore<Meta>,
    refusals: Arc<Mutex<Refusals>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What was refused and already told.
#[derive(Default)]
struct Refusals {
    watch: bool,
    patch_until: Option<Instant>,
}

impl OperandWatches {
    pub fn new(queue: &WorkQueue<String>) -> Self {
        Self {
            queue: queue.clone(),
            running: Mutex::new(BTreeMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<OperandWatch, Running>> {
        // Every update inserts or removes whole entries: a poisoned map is still consistent.
        self.running.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs exactly the watches of `operator` that `wanted` lists: starts the missing ones,
    /// stops (and forgets the operands of) those no longer wanted.
    pub fn ensure(
        &self,
        ctx: &Arc<Context>,
        operator: &str,
        wanted: &std::collections::BTreeSet<OperandWatch>,
    ) {
        let mut running = self.lock();
        running.retain(|w, _| w.operator != operator || wanted.contains(w));
        for watch in wanted {
            if !running.contains_key(watch) {
                tracing::debug!(operator, operands = %watch.scope(), account = %watch.account, "operand watch starts");
                running.insert(watch.clone(), self.start(ctx, watch));
            }
        }
    }

    fn start(&self, ctx: &Arc<Context>, watch: &OperandWatch) -> Running {
        let (store, writer) = namespaced_store::<Meta>();
        let refusals = Arc::new(Mutex::new(Refusals::default()));
        let task = tokio::spawn(run_watch(
            Arc::clone(ctx),
            watch.clone(),
            writer,
            Arc::clone(&refusals),
            self.queue.clone(),
        ));
        Running {
            store,
            refusals,
            task,
        }
    }

    /// The operands the watches of `operator` hold now.
    pub fn operands(&self, operator: &str) -> Vec<Operand> {
        let running = self.lock();
        running
            .iter()
            .filter(|(w, _)| w.operator == operator)
            .flat_map(|(w, r)| {
                r.store.all().into_iter().map(move |m| {
                    Operand::new(
                        w,
                        m.metadata.namespace.clone(),
                        m.metadata.name.as_deref().unwrap_or_default(),
                        m.metadata.labels.clone().unwrap_or_default(),
                    )
                })
            })
            .collect()
    }

    /// Writes `labels` as each watch's account. A refusal is told once and paused for
    /// [`PATCH_RETRY`]; an operand gone is fine. Returns whether a transient failure asks the
    /// sync to look again soon.
    pub async fn label(&self, ctx: &Context, labels: Vec<(&OperandWatch, Write)>) -> bool {
        let mut again = false;
        for (watch, write) in labels {
            let Some(refusals) = self.lock().get(watch).map(|r| Arc::clone(&r.refusals)) else {
                continue;
            };
            if refusals_of(&refusals)
                .patch_until
                .is_some_and(|t| Instant::now() < t)
            {
                continue;
            }
            let client = match account_client(ctx, watch) {
                Some(client) => client,
                None => continue,
            };
            let Err(error) = perform(&client, &write).await else {
                continue;
            };
            match error.failure() {
                ApiFailure::NotFound => {}
                ApiFailure::Forbidden | ApiFailure::Unauthorized => {
                    let told = refusals_of(&refusals)
                        .patch_until
                        .replace(Instant::now() + PATCH_RETRY)
                        .is_some();
                    if !told {
                        let why = format!(
                            "service account {}/{} may not patch {}: operands are not labelled \
                             for Operator {} (grant it patch on them); tried again in {} s: {}",
                            watch.csv_namespace,
                            watch.account,
                            watch.scope(),
                            watch.operator,
                            PATCH_RETRY.as_secs(),
                            server_says(&error.source)
                        );
                        tell(ctx, watch, why).await;
                    }
                }
                _ => {
                    tracing::debug!(%error, "operand label not written; tried again");
                    again = true;
                }
            }
        }
        again
    }
}

fn refusals_of(r: &Mutex<Refusals>) -> std::sync::MutexGuard<'_, Refusals> {
    r.lock().unwrap_or_else(|p| p.into_inner())
}

fn account_client(ctx: &Context, watch: &OperandWatch) -> Option<Client> {
    match impersonating(&ctx.client, &watch.csv_namespace, &watch.account) {
        Ok(client) => Some(client),
        Err(error) => {
            tracing::warn!(%error, account = %watch.account, "cannot act as the operator's service account");
            None
        }
    }
}

/// A refusal, told once: a log line and a Warning Event on the CSV.
async fn tell(ctx: &Context, watch: &OperandWatch, why: String) {
    tracing::warn!(operator = %watch.operator, "{why}");
    let csv = ObjectReference {
        api_version: Some(ClusterServiceVersion::api_version(&()).into_owned()),
        kind: Some(ClusterServiceVersion::kind(&()).into_owned()),
        namespace: Some(watch.csv_namespace.clone()),
        name: Some(watch.csv_name.clone()),
        ..ObjectReference::default()
    };
    ctx.events
        .emit(&csv, &ObjectEvent::warning(OPERANDS_FORBIDDEN, why))
        .await;
}

/// The API server's own sentence for a refusal (`… cannot patch resource "gadgets" …`), or
/// the error as kube shows it.
fn server_says(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) if !status.message.is_empty() => status.message.clone(),
        other => other.to_string(),
    }
}

fn watch_says(error: &watcher::Error) -> String {
    match error {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => server_says(e),
        watcher::Error::WatchError(status) if !status.message.is_empty() => status.message.clone(),
        other => other.to_string(),
    }
}

fn forbidden(error: &watcher::Error) -> bool {
    let failure = match error {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => ApiFailure::of(e),
        watcher::Error::WatchError(status) => {
            return matches!(status.code, 401 | 403);
        }
        _ => return false,
    };
    matches!(failure, ApiFailure::Forbidden | ApiFailure::Unauthorized)
}

/// One watch: keeps the store current and queues the Operator on every change.
async fn run_watch(
    ctx: Arc<Context>,
    watch: OperandWatch,
    mut writer: StoreWriter<Meta>,
    refusals: Arc<Mutex<Refusals>>,
    queue: WorkQueue<String>,
) {
    let Some(client) = account_client(&ctx, &watch) else {
        return;
    };
    let resource = watch.resource();
    // `Api<PartialObjectMeta<_>>`: metadata-only lists and watches.
    let api: Api<Meta> = match &watch.namespace {
        Some(ns) => Api::namespaced_with(client, ns, &resource),
        None => Api::all_with(client, &resource),
    };
    let started = Instant::now();
    let config = watcher::Config::default().page_size(PAGE_SIZE);
    let mut events = std::pin::pin!(watcher::watcher(api, config).default_backoff());
    while let Some(event) = events.next().await {
        match event {
            Ok(event) => {
                if std::mem::take(&mut refusals_of(&refusals).watch) {
                    tracing::info!(operator = %watch.operator, operands = %watch.scope(), "operands are read again");
                }
                // The end of a list too: a sync that ran while it was being read saw none of it.
                let listed = matches!(event, watcher::Event::InitDone);
                if !writer.apply_owned(event).is_empty() || listed {
                    queue.add(watch.operator.clone());
                }
            }
            Err(error) if forbidden(&error) && started.elapsed() > GRACE => {
                let first = !std::mem::replace(&mut refusals_of(&refusals).watch, true);
                if first {
                    let why = format!(
                        "service account {}/{} may not list and watch {}: operands are not \
                         listed in Operator {} (grant it get, list, watch and patch on them): {}",
                        watch.csv_namespace,
                        watch.account,
                        watch.scope(),
                        watch.operator,
                        watch_says(&error)
                    );
                    tell(&ctx, &watch, why).await;
                }
            }
            Err(error) => {
                tracing::debug!(%error, operands = %watch.scope(), "operand watch error; it restarts");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;

    fn status(code: u16) -> Status {
        serde_json::from_value(serde_json::json!({
            "status": "Failure", "message": "m", "reason": "r", "code": code
        }))
        .unwrap()
    }

    #[test]
    fn refusals_are_told_apart_from_other_watch_failures() {
        let api = |code| kube::Error::Api(Box::new(status(code)));
        assert!(forbidden(&watcher::Error::InitialListFailed(api(403))));
        assert!(forbidden(&watcher::Error::WatchStartFailed(api(401))));
        assert!(forbidden(&watcher::Error::WatchError(Box::new(status(
            403
        )))));
        assert!(!forbidden(&watcher::Error::InitialListFailed(api(404))));
        assert!(!forbidden(&watcher::Error::WatchFailed(api(500))));
        assert_eq!(
            watch_says(&watcher::Error::InitialListFailed(api(403))),
            "m",
            "the server's sentence alone"
        );
    }
}

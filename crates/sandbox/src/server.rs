//! [`ApiServer`]: the shared state and the change notifier that wakes watches and controllers.
//! The ways in (an in-process `kube::Client`, HTTP on a local port) are module `connect`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::watch;

use super::state::State;
use super::workload_simulator::WorkloadSimulator;

/// Tunables; `Default` is what `ApiServer::new()` uses.
#[derive(Debug, Clone)]
pub struct ApiServerOptions {
    /// Run the workload simulator (Deployments become Available, APIServices Available).
    pub simulate_workloads: bool,
    /// How long the simulator waits before it reports a Deployment's status.
    pub simulator_delay: Duration,
    /// Changes kept per resource for watches; a watch resuming from an older
    /// `resourceVersion` gets `410 Gone` and must re-list.
    pub watch_log_capacity: usize,
    /// How often a watch with `allowWatchBookmarks=true` gets a BOOKMARK event.
    pub bookmark_interval: Duration,
    /// `gitVersion` reported by `/version` (major/minor are derived from it).
    pub git_version: String,
    /// How long a new CRD's versions answer `404 page not found` (their discovery document and
    /// their objects) while `/apis` already lists its group — the moment a real API server
    /// takes to establish a CRD, during which a controller must wait, not fail.
    pub crd_establish_delay: Duration,
}

impl Default for ApiServerOptions {
    fn default() -> Self {
        ApiServerOptions {
            simulate_workloads: true,
            simulator_delay: Duration::from_millis(20),
            watch_log_capacity: 1000,
            bookmark_interval: Duration::from_secs(5),
            git_version: "v1.33.0".into(),
            crd_establish_delay: Duration::ZERO,
        }
    }
}

pub(crate) struct Inner {
    state: Mutex<State>,
    /// The store's latest resourceVersion; every write publishes it to wake watchers.
    changes: watch::Sender<u64>,
    /// Bumped to close every open watch (see [`ApiServer::restart_watches`]).
    watch_epoch: watch::Sender<u64>,
    pub(crate) opts: ApiServerOptions,
    simulator: WorkloadSimulator,
    background_started: AtomicBool,
    /// Groups handed to other handlers (`register_aggregated`).
    aggregated: std::sync::RwLock<Vec<super::aggregated::AggregatedApi>>,
}

/// An in-memory Kubernetes API server. Cheap to clone: clones share one store.
#[derive(Clone)]
pub struct ApiServer {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for ApiServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiServer")
            .field("opts", &self.inner.opts)
            .finish_non_exhaustive()
    }
}

impl ApiServer {
    /// A server that has not started its built-in controllers (module `connect` starts them
    /// once a tokio runtime is there).
    pub(crate) fn unstarted(opts: ApiServerOptions) -> Self {
        let state =
            State::with_crd_establish_delay(opts.watch_log_capacity, opts.crd_establish_delay);
        let (changes, _) = watch::channel(state.store.current_rv());
        let simulator = WorkloadSimulator::new(opts.simulate_workloads, opts.simulator_delay);
        ApiServer {
            inner: Arc::new(Inner {
                state: Mutex::new(state),
                changes,
                watch_epoch: watch::channel(0).0,
                opts,
                simulator,
                background_started: AtomicBool::new(false),
                aggregated: std::sync::RwLock::default(),
            }),
        }
    }

    /// Hands every request under `api.group` to `api.router`, as an APIService does.
    pub fn register_aggregated(&self, api: super::aggregated::AggregatedApi) {
        let mut all = self
            .inner
            .aggregated
            .write()
            .unwrap_or_else(|p| p.into_inner());
        all.retain(|a| a.group != api.group);
        all.push(api);
    }

    pub(crate) fn aggregated(&self) -> Vec<super::aggregated::AggregatedApi> {
        self.inner
            .aggregated
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn simulator(&self) -> &WorkloadSimulator {
        &self.inner.simulator
    }

    pub fn options(&self) -> &ApiServerOptions {
        &self.inner.opts
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves the store consistent (each write is one
        // `put`/`remove`), so a poisoned lock is still usable.
        self.inner.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn read<R>(&self, f: impl FnOnce(&State) -> R) -> R {
        f(&self.lock())
    }

    /// Runs a write and wakes watchers and controllers if the store changed.
    pub(crate) fn write<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        let (out, rv) = {
            let mut state = self.lock();
            let out = f(&mut state);
            (out, state.store.current_rv())
        };
        self.inner.changes.send_if_modified(|old| {
            let changed = *old != rv;
            *old = rv;
            changed
        });
        out
    }

    /// A receiver that wakes on every change to the store.
    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.inner.changes.subscribe()
    }

    /// Closes every open watch and forgets the change history, as an API server restart after
    /// etcd compaction does: watchers reconnect, get `410 Gone` for their old version, and
    /// re-list. For testing that controllers recover.
    pub fn restart_watches(&self) {
        self.lock().store.compact();
        self.inner.watch_epoch.send_modify(|e| *e += 1);
    }

    pub(crate) fn watch_epoch(&self) -> watch::Receiver<u64> {
        self.inner.watch_epoch.subscribe()
    }

    /// Marks the built-in controllers started; true for the one caller that must start them.
    pub(crate) fn claim_background(&self) -> bool {
        self.inner
            .background_started
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }
}

//! The handle of the workload simulator (module `simulator`): whether it runs, its delay and
//! the Deployments it must fail. Kept apart from the loop so the server can own one without
//! depending on what the loop depends on.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

/// Handle to the simulator of one [`ApiServer`](crate::ApiServer).
#[derive(Debug)]
pub struct WorkloadSimulator {
    pub(crate) shared: Arc<Shared>,
}

#[derive(Debug)]
pub(crate) struct Shared {
    enabled: AtomicBool,
    /// How long the simulator waits after a change before it reports status (fixed at start).
    delay: Duration,
    /// (namespace, name) of Deployments that must fail.
    failing: Mutex<BTreeSet<(String, String)>>,
    pub(crate) wake: Notify,
}

impl WorkloadSimulator {
    pub(crate) fn new(enabled: bool, delay: Duration) -> Self {
        WorkloadSimulator {
            shared: Arc::new(Shared {
                enabled: AtomicBool::new(enabled),
                delay,
                failing: Mutex::new(BTreeSet::new()),
                wake: Notify::new(),
            }),
        }
    }

    pub fn is_enabled(&self) -> bool {
        self.shared.enabled.load(Ordering::Acquire)
    }

    /// Turns the simulator on or off; while off, Deployment and APIService status is left alone.
    pub fn set_enabled(&self, enabled: bool) {
        self.shared.enabled.store(enabled, Ordering::Release);
        self.shared.wake.notify_one();
    }

    /// Makes the Deployment `namespace/name` (now or once it exists) report a failed rollout.
    pub fn fail_deployment(&self, namespace: &str, name: &str) {
        self.failing_set()
            .insert((namespace.to_string(), name.to_string()));
        self.shared.wake.notify_one();
    }

    /// Undoes [`fail_deployment`](Self::fail_deployment): the Deployment becomes Available.
    pub fn heal_deployment(&self, namespace: &str, name: &str) {
        self.failing_set()
            .remove(&(namespace.to_string(), name.to_string()));
        self.shared.wake.notify_one();
    }

    pub(crate) fn failing_set(&self) -> std::sync::MutexGuard<'_, BTreeSet<(String, String)>> {
        self.shared
            .failing
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn delay(&self) -> Duration {
        self.shared.delay
    }
}

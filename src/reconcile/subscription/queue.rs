//! A work queue of namespaces: each namespace is synced by at most one worker at a time (the
//! "process-wide lock" OLM takes around plan creation), events for a namespace being synced
//! mark it for one more run, and requeues can be delayed.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

#[derive(Default)]
struct State {
    ready: VecDeque<String>,
    queued: HashSet<String>,
    running: HashSet<String>,
    again: HashSet<String>,
}

#[derive(Default)]
pub struct NamespaceQueue {
    state: Mutex<State>,
    notify: Notify,
}

impl NamespaceQueue {
    pub fn new() -> Arc<Self> {
        Arc::new(NamespaceQueue::default())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Queues `namespace` (once, however often it is added before a worker takes it).
    pub fn add(&self, namespace: &str) {
        let mut state = self.lock();
        if state.running.contains(namespace) {
            state.again.insert(namespace.to_owned());
            return;
        }
        if state.queued.insert(namespace.to_owned()) {
            state.ready.push_back(namespace.to_owned());
            drop(state);
            self.notify.notify_one();
        }
    }

    /// Queues `namespace` after `delay`.
    pub fn add_after(self: &Arc<Self>, namespace: &str, delay: Duration) {
        let queue = Arc::clone(self);
        let namespace = namespace.to_owned();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            queue.add(&namespace);
        });
    }

    /// The next namespace to sync; call [`NamespaceQueue::done`] afterwards.
    pub async fn next(&self) -> String {
        loop {
            let notified = self.notify.notified();
            {
                let mut state = self.lock();
                if let Some(namespace) = state.ready.pop_front() {
                    state.queued.remove(&namespace);
                    state.running.insert(namespace.clone());
                    if !state.ready.is_empty() {
                        self.notify.notify_one();
                    }
                    return namespace;
                }
            }
            notified.await;
        }
    }

    pub fn done(&self, namespace: &str) {
        let again = {
            let mut state = self.lock();
            state.running.remove(namespace);
            state.again.remove(namespace)
        };
        if again {
            self.add(namespace);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn namespaces_are_deduplicated_and_rerun_when_touched_while_running() {
        let q = NamespaceQueue::new();
        q.add("a");
        q.add("b");
        q.add("a");
        assert_eq!(q.next().await, "a");
        q.add("a"); // while running
        assert_eq!(q.next().await, "b");
        q.done("b");
        q.done("a");
        assert_eq!(q.next().await, "a", "touched while running: runs once more");
        q.done("a");
        let pending = tokio::time::timeout(Duration::from_millis(50), q.next()).await;
        assert!(pending.is_err(), "nothing left");
    }
}

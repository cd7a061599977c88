//! A deduplicating work queue with per-key retry back-off, in the manner of client-go's
//! workqueue: a key added while it waits is queued once; a key added while it is being worked
//! on is run again right after; failures are retried after an exponentially growing delay.
//!
//! This is olm-rs's one engine: every controller's loop runs on [`run_workers`], which times
//! each run into the reconcile metrics, wraps it in a tracing span, retries a conflict soon and
//! any other failure with the queue's back-off (docs/architecture.md §2, "One engine").

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

use crate::k8s::errors::{CONFLICT, DECISION, ReconcileFailure};
use crate::metrics::Metrics;

/// When a run refused with a conflict (409: computed from an older copy) comes back: soon, and
/// without counting as a failure — the watch is about to deliver the newer object.
const CONFLICT_RETRY: Duration = Duration::from_millis(200);

/// The wait before a failed key runs again: `first`, doubling per consecutive failure of the
/// same key, at most `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub first: Duration,
    pub max: Duration,
}

impl Backoff {
    /// client-go's default rate limiter: 5 ms doubling to 5 minutes.
    pub const DEFAULT: Backoff = Backoff {
        first: Duration::from_millis(5),
        max: Duration::from_secs(300),
    };
}

struct State<K> {
    queue: VecDeque<K>,
    /// Keys waiting in `queue`.
    waiting: HashSet<K>,
    /// Keys a worker holds.
    processing: HashSet<K>,
    /// Keys added while being processed: queued again when the worker is done.
    again: HashSet<K>,
    failures: HashMap<K, u32>,
    /// Keys to be queued later, each with its one pending deadline (the earliest asked).
    delayed: HashMap<K, tokio::time::Instant>,
}

/// The queue; cloning shares it.
pub struct WorkQueue<K> {
    state: Arc<Mutex<State<K>>>,
    ready: Arc<Notify>,
    backoff: Backoff,
}

impl<K> Clone for WorkQueue<K> {
    fn clone(&self) -> Self {
        Self {
            state: self.state.clone(),
            ready: self.ready.clone(),
            backoff: self.backoff,
        }
    }
}

impl<K: Clone + Eq + Hash + Send + 'static> Default for WorkQueue<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Clone + Eq + Hash + Send + 'static> WorkQueue<K> {
    pub fn new() -> Self {
        Self::with_backoff(Backoff::DEFAULT)
    }

    /// A queue whose failed keys wait `backoff`.
    pub fn with_backoff(backoff: Backoff) -> Self {
        Self {
            backoff,
            state: Arc::new(Mutex::new(State {
                queue: VecDeque::new(),
                waiting: HashSet::new(),
                processing: HashSet::new(),
                again: HashSet::new(),
                failures: HashMap::new(),
                delayed: HashMap::new(),
            })),
            ready: Arc::new(Notify::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State<K>> {
        // A worker that panicked while holding the lock left consistent sets behind (every
        // mutation is a single insert/remove), so the poisoned state is safe to keep using.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `key` unless it already waits.
    pub fn add(&self, key: K) {
        let mut state = self.lock();
        if state.processing.contains(&key) {
            state.again.insert(key);
            return;
        }
        if state.waiting.insert(key.clone()) {
            state.queue.push_back(key);
            drop(state);
            self.ready.notify_one();
        }
    }

    /// Queues every key of `keys`.
    pub fn add_all(&self, keys: impl IntoIterator<Item = K>) {
        for key in keys {
            self.add(key);
        }
    }

    /// Queues `key` after `delay`. A key has at most one pending delayed add, the earliest
    /// asked (as client-go's delaying queue): a loop that asks to look again after every run —
    /// the CSV controller's resync — would otherwise start one more timer chain per event.
    pub fn add_after(&self, key: K, delay: Duration) {
        if delay.is_zero() {
            self.add(key);
            return;
        }
        let at = tokio::time::Instant::now() + delay;
        {
            let mut state = self.lock();
            if state
                .delayed
                .get(&key)
                .is_some_and(|pending| *pending <= at)
            {
                return;
            }
            state.delayed.insert(key.clone(), at);
        }
        let queue = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep_until(at).await;
            // A sooner add_after replaced this one: its own timer adds the key.
            let due = {
                let mut state = queue.lock();
                let due = state.delayed.get(&key) == Some(&at);
                if due {
                    state.delayed.remove(&key);
                }
                due
            };
            if due {
                queue.add(key);
            }
        });
    }

    /// Queues `key` again after its back-off delay, which doubles with each consecutive failure.
    pub fn retry(&self, key: K) -> Duration {
        let failures = {
            let mut state = self.lock();
            let count = state.failures.entry(key.clone()).or_insert(0);
            *count = count.saturating_add(1);
            *count
        };
        let delay = crate::backoff::delay(failures, self.backoff.first, self.backoff.max);
        self.add_after(key, delay);
        delay
    }

    /// Clears the failure count of `key` after a success.
    pub fn forget(&self, key: &K) {
        self.lock().failures.remove(key);
    }

    /// Waits for the next key and marks it as being processed.
    pub async fn next(&self) -> K {
        loop {
            let notified = self.ready.notified();
            {
                let mut state = self.lock();
                if let Some(key) = state.queue.pop_front() {
                    state.waiting.remove(&key);
                    state.processing.insert(key.clone());
                    let more = !state.queue.is_empty();
                    drop(state);
                    if more {
                        // Wake another worker for the rest.
                        self.ready.notify_one();
                    }
                    return key;
                }
            }
            notified.await;
        }
    }

    /// Marks `key` as finished; queues it again if it was added meanwhile.
    pub fn done(&self, key: &K) {
        let mut state = self.lock();
        state.processing.remove(key);
        if state.again.remove(key) && state.waiting.insert(key.clone()) {
            state.queue.push_back(key.clone());
            drop(state);
            self.ready.notify_one();
        }
    }

    /// Keys waiting (not counting those being processed).
    pub fn len(&self) -> usize {
        self.lock().queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True when nothing waits and nothing is being processed.
    pub fn is_idle(&self) -> bool {
        let state = self.lock();
        state.queue.is_empty() && state.processing.is_empty() && state.again.is_empty()
    }
}

/// What a handler asks for after a successful run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    Done,
    /// Run the key again after this delay (e.g. a write raced with another writer).
    After(Duration),
}

/// One controller loop: its kind (the `kind` label of the reconcile metrics and spans) and how
/// many keys it works on at once.
#[derive(Clone)]
pub struct Loop {
    pub kind: &'static str,
    pub workers: usize,
    pub metrics: Arc<Metrics>,
}

/// Runs `spec.workers` concurrent loops taking keys from `queue` and calling `handle`, each run
/// timed and counted (`Metrics::timed_reconcile`). A conflict runs again after
/// [`CONFLICT_RETRY`]; another failure after the queue's back-off. Never returns.
pub async fn run_workers<K, F, Fut, E>(spec: Loop, queue: WorkQueue<K>, handle: F)
where
    K: Clone + Eq + Hash + Send + std::fmt::Display + 'static,
    F: Fn(K) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Result<Next, E>> + Send,
    E: ReconcileFailure,
{
    let loops = (0..spec.workers.max(1)).map(|_| {
        let (queue, handle, spec) = (queue.clone(), handle.clone(), spec.clone());
        async move {
            loop {
                let key = queue.next().await;
                let object = key.to_string();
                let run = spec.metrics.timed_reconcile(spec.kind, &object, handle(key.clone()));
                match run.await {
                    Ok(Next::Done) => queue.forget(&key),
                    Ok(Next::After(delay)) => {
                        queue.forget(&key);
                        queue.add_after(key.clone(), delay);
                    }
                    Err(err) if err.error_label() == CONFLICT => {
                        tracing::debug!(kind = spec.kind, object, error = %err, "changed while syncing; retrying");
                        queue.add_after(key.clone(), CONFLICT_RETRY);
                    }
                    Err(err) => {
                        let delay = queue.retry(key.clone());
                        let error = crate::error_chain::error_chain(&err);
                        if err.error_label() == DECISION {
                            tracing::debug!(kind = spec.kind, object, error, retry_in = ?delay, "not ready");
                        } else {
                            tracing::warn!(kind = spec.kind, object, error, retry_in = ?delay, "sync failed");
                        }
                    }
                }
                queue.done(&key);
            }
        }
    });
    futures::future::join_all(loops).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run that cannot fail.
    #[derive(Debug, thiserror::Error)]
    #[error("never")]
    enum Never {}

    impl ReconcileFailure for Never {
        fn error_label(&self) -> &'static str {
            match *self {}
        }
    }

    #[tokio::test]
    async fn duplicates_collapse_and_adds_during_processing_rerun() {
        let q: WorkQueue<&str> = WorkQueue::new();
        q.add("a");
        q.add("a");
        q.add("b");
        assert_eq!(q.len(), 2);
        let a = q.next().await;
        assert_eq!(a, "a");
        q.add("a"); // while processing
        assert_eq!(q.len(), 1);
        q.done(&"a");
        assert_eq!(q.len(), 2);
        assert_eq!(q.next().await, "b");
        q.done(&"b");
        assert_eq!(q.next().await, "a");
        q.done(&"a");
        assert!(q.is_idle());
    }

    #[tokio::test]
    async fn retries_back_off_exponentially_and_forget_resets() {
        let q: WorkQueue<u8> = WorkQueue::new();
        assert_eq!(q.retry(1), Duration::from_millis(5));
        assert_eq!(q.retry(1), Duration::from_millis(10));
        assert_eq!(q.retry(1), Duration::from_millis(20));
        q.forget(&1);
        assert_eq!(q.retry(1), Duration::from_millis(5));
        for _ in 0..40 {
            q.retry(2);
        }
        assert_eq!(q.retry(2), Backoff::DEFAULT.max);
        // The first retry of key 1 (5 ms) comes back first.
        let next = tokio::time::timeout(Duration::from_secs(5), q.next()).await;
        assert_eq!(next.ok(), Some(1));
    }

    #[tokio::test]
    async fn a_key_has_one_delayed_add_the_earliest() {
        let ms = Duration::from_millis;
        let q: WorkQueue<&str> = WorkQueue::new();
        q.add_after("a", ms(400));
        q.add_after("a", ms(500));
        q.add_after("a", ms(20));
        tokio::time::sleep(ms(100)).await;
        assert_eq!(q.len(), 1, "the sooner add replaced the later ones");
        assert_eq!(q.next().await, "a");
        q.done(&"a");
        tokio::time::sleep(ms(600)).await;
        assert!(q.is_idle(), "the replaced timers add nothing");
        q.add_after("a", ms(20));
        tokio::time::sleep(ms(100)).await;
        assert_eq!(q.len(), 1, "a key is delayed again once its add ran");
    }

    #[tokio::test]
    async fn workers_process_every_key() {
        let q: WorkQueue<u32> = WorkQueue::new();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = seen.clone();
        let spec = Loop {
            kind: "test",
            workers: 4,
            metrics: Arc::new(Metrics::new()),
        };
        let runner = tokio::spawn(run_workers(spec, q.clone(), move |k: u32| {
            let record = record.clone();
            async move {
                record.lock().unwrap().push(k);
                Ok::<_, Never>(Next::Done)
            }
        }));
        q.add_all(0..100);
        for _ in 0..200 {
            if seen.lock().unwrap().len() == 100 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        runner.abort();
        let mut got = seen.lock().unwrap().clone();
        got.sort();
        assert_eq!(got, (0..100).collect::<Vec<_>>());
    }
}

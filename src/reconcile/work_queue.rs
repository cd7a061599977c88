//! A deduplicating work queue with per-key retry back-off, in the manner of client-go's
//! workqueue: a key added while it waits is queued once; a key added while it is being worked
//! on is run again right after; failures are retried after an exponentially growing delay.
//!
//! kube-runtime's `Controller` skips keys whose object is gone from its store, but the
//! OperatorGroup side must act on deletions (ClusterRoles of a deleted group, copies of a
//! deleted CSV), so those loops run on this queue instead; so does the Subscription side, whose
//! unit of work is a namespace (docs/resolution.md §1), not an object.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tracing::Instrument as _;

use tokio::sync::Notify;

/// First retry delay after a failure; doubles per consecutive failure of the same key.
const BASE_DELAY: Duration = Duration::from_millis(5);
/// Longest retry delay.
const MAX_DELAY: Duration = Duration::from_secs(300);

struct State<K> {
    queue: VecDeque<K>,
    /// Keys waiting in `queue`.
    waiting: HashSet<K>,
    /// Keys a worker holds.
    processing: HashSet<K>,
    /// Keys added while being processed: queued again when the worker is done.
    again: HashSet<K>,
    failures: HashMap<K, u32>,
}

/// The queue; cloning shares it.
pub struct WorkQueue<K> {
    state: Arc<Mutex<State<K>>>,
    ready: Arc<Notify>,
}

impl<K> Clone for WorkQueue<K> {
    fn clone(&self) -> Self {
        Self {
            state: self.state.clone(),
            ready: self.ready.clone(),
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
        Self {
            state: Arc::new(Mutex::new(State {
                queue: VecDeque::new(),
                waiting: HashSet::new(),
                processing: HashSet::new(),
                again: HashSet::new(),
                failures: HashMap::new(),
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

    /// Queues `key` after `delay`.
    pub fn add_after(&self, key: K, delay: Duration) {
        if delay.is_zero() {
            self.add(key);
            return;
        }
        let queue = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            queue.add(key);
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
        let delay = crate::backoff::delay(failures, BASE_DELAY, MAX_DELAY);
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

/// Runs `workers` concurrent loops taking keys from `queue` and calling `handle`. Errors are
/// logged and retried with back-off. Never returns.
pub async fn run_workers<K, F, Fut, E>(
    name: &'static str,
    queue: WorkQueue<K>,
    workers: usize,
    handle: F,
) where
    K: Clone + Eq + Hash + Send + std::fmt::Debug + 'static,
    F: Fn(K) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Result<Next, E>> + Send,
    E: std::fmt::Display,
{
    let loops = (0..workers.max(1)).map(|_| {
        let queue = queue.clone();
        let handle = handle.clone();
        async move {
            loop {
                let key = queue.next().await;
                let span = tracing::debug_span!("reconcile", kind = name, object = ?key);
                match handle(key.clone()).instrument(span).await {
                    Ok(Next::Done) => queue.forget(&key),
                    Ok(Next::After(delay)) => {
                        queue.forget(&key);
                        queue.add_after(key.clone(), delay);
                    }
                    Err(err) => {
                        let delay = queue.retry(key.clone());
                        tracing::warn!(loop_name = name, ?key, error = %err, retry_in = ?delay, "sync failed");
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
        assert_eq!(q.retry(2), MAX_DELAY);
        // The first retry of key 1 (5 ms) comes back first.
        let next = tokio::time::timeout(Duration::from_secs(5), q.next()).await;
        assert_eq!(next.ok(), Some(1));
    }

    #[tokio::test]
    async fn workers_process_every_key() {
        let q: WorkQueue<u32> = WorkQueue::new();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = seen.clone();
        let runner = tokio::spawn(run_workers("test", q.clone(), 4, move |k: u32| {
            let record = record.clone();
            async move {
                record.lock().unwrap().push(k);
                Ok::<_, std::convert::Infallible>(Next::Done)
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

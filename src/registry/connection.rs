//! One live connection per catalog: connect, health check, read the whole catalog into the
//! shared `CatalogCache`, keep checking, and reconnect with back-off when the registry goes
//! away. The state it reports mirrors gRPC channel states (`IDLE`, `CONNECTING`, `READY`,
//! `TRANSIENT_FAILURE`, `SHUTDOWN`), which the CatalogSource controller copies into
//! `status.connectionState` (docs/catalog.md §1).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::catalog::{self, CatalogIndex};
use crate::k8s::clock::Clock;

use super::client::{ClientTimeouts, RegistryClient};
use super::convert::from_api;
use crate::api::CatalogRef;
use crate::catalog_cache::{CatalogCache, CatalogHealth, HealthReason};

/// gRPC channel states, as `status.connectionState.lastObservedState` spells them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkState {
    Idle,
    Connecting,
    Ready,
    TransientFailure,
    Shutdown,
}

impl LinkState {
    pub fn as_str(self) -> &'static str {
        match self {
            LinkState::Idle => "IDLE",
            LinkState::Connecting => "CONNECTING",
            LinkState::Ready => "READY",
            LinkState::TransientFailure => "TRANSIENT_FAILURE",
            LinkState::Shutdown => "SHUTDOWN",
        }
    }
}

/// What a connection reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionStatus {
    pub address: String,
    pub state: LinkState,
    /// When `state` was entered.
    pub since: Timestamp,
    /// Why the registry could not be reached, while in `TRANSIENT_FAILURE`.
    pub error: Option<String>,
    /// Why the content the registry served was refused (connection fine, catalog invalid).
    pub content_error: Option<String>,
}

/// Timing of connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionOptions {
    pub timeouts: ClientTimeouts,
    /// First wait after a failure; doubles per failure up to `backoff_max`.
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
    /// How often a READY registry is health-checked.
    pub health_interval: Duration,
    /// How often a READY registry's content is read again (a registry may be replaced behind
    /// the same address without the connection noticing).
    pub refresh_interval: Duration,
}

impl Default for ConnectionOptions {
    fn default() -> Self {
        Self {
            timeouts: ClientTimeouts::default(),
            backoff_initial: Duration::from_secs(1),
            backoff_max: Duration::from_secs(60),
            health_interval: Duration::from_secs(30),
            refresh_interval: Duration::from_secs(15 * 60),
        }
    }
}

use crate::backoff::delay as backoff;

struct Task(JoinHandle<()>);

impl Drop for Task {
    fn drop(&mut self) {
        self.0.abort();
    }
}

struct Handle {
    address: String,
    status: watch::Receiver<ConnectionStatus>,
    _task: Task,
}

/// Every catalog's connection. Dropping it stops them all.
pub struct Connections {
    handles: Mutex<HashMap<CatalogRef, Handle>>,
    cache: Arc<CatalogCache>,
    clock: Arc<dyn Clock>,
    options: ConnectionOptions,
    changed: mpsc::UnboundedSender<CatalogRef>,
}

impl Connections {
    /// The receiver yields the key of every catalog whose connection state changed, so the
    /// controller can requeue it.
    pub fn new(
        cache: Arc<CatalogCache>,
        clock: Arc<dyn Clock>,
        options: ConnectionOptions,
    ) -> (Connections, mpsc::UnboundedReceiver<CatalogRef>) {
        let (changed, rx) = mpsc::unbounded_channel();
        (
            Connections {
                handles: Mutex::new(HashMap::new()),
                cache,
                clock,
                options,
                changed,
            },
            rx,
        )
    }

    /// Makes sure `key` has a connection to `address` (restarting it when the address changed)
    /// and returns its current status.
    pub fn ensure(&self, key: &CatalogRef, address: &str) -> ConnectionStatus {
        let mut handles = self.lock();
        if let Some(h) = handles.get(key).filter(|h| h.address == address) {
            return h.status.borrow().clone();
        }
        let handle = self.start(key, address);
        let status = handle.status.borrow().clone();
        handles.insert(key.clone(), handle);
        status
    }

    /// Drops and redials the connection (after the registry pod was replaced).
    pub fn reconnect(&self, key: &CatalogRef) {
        let mut handles = self.lock();
        if let Some(address) = handles.get(key).map(|h| h.address.clone()) {
            let handle = self.start(key, &address);
            handles.insert(key.clone(), handle);
        }
    }

    pub fn status(&self, key: &CatalogRef) -> Option<ConnectionStatus> {
        self.lock().get(key).map(|h| h.status.borrow().clone())
    }

    /// Stops the connection; the cache entry is the caller's business.
    pub fn close(&self, key: &CatalogRef) {
        self.lock().remove(key);
    }

    pub fn keys(&self) -> Vec<CatalogRef> {
        self.lock().keys().cloned().collect()
    }

    fn start(&self, key: &CatalogRef, address: &str) -> Handle {
        let initial = ConnectionStatus {
            address: address.to_owned(),
            state: LinkState::Idle,
            since: self.clock.now(),
            error: None,
            content_error: None,
        };
        let (tx, rx) = watch::channel(initial);
        let worker = Worker {
            key: key.clone(),
            address: address.to_owned(),
            cache: Arc::clone(&self.cache),
            clock: Arc::clone(&self.clock),
            options: self.options,
            status: tx,
            changed: self.changed.clone(),
        };
        let _ = self.changed.send(key.clone());
        Handle {
            address: address.to_owned(),
            status: rx,
            _task: Task(tokio::spawn(worker.run())),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<CatalogRef, Handle>> {
        self.handles.lock().unwrap_or_else(|p| p.into_inner())
    }
}

struct Worker {
    key: CatalogRef,
    address: String,
    cache: Arc<CatalogCache>,
    clock: Arc<dyn Clock>,
    options: ConnectionOptions,
    status: watch::Sender<ConnectionStatus>,
    changed: mpsc::UnboundedSender<CatalogRef>,
}

impl Worker {
    async fn run(self) {
        let mut failures = 0u32;
        loop {
            self.report(LinkState::Connecting, None, None);
            let error = match RegistryClient::connect(&self.address, self.options.timeouts).await {
                Ok(client) => match self.serve_while_healthy(&client, &mut failures).await {
                    Ok(never) => match never {},
                    Err(e) => e,
                },
                Err(e) => LinkError::Client(e),
            };
            tracing::info!(catalog = %self.key, address = %self.address, %error, "registry connection failed");
            self.cache.set_health(
                &self.key,
                CatalogHealth::unhealthy(
                    HealthReason::Unreachable,
                    format!("catalog {} unreachable: {error}", self.key),
                    self.clock.now(),
                ),
                false,
            );
            self.report(LinkState::TransientFailure, Some(error.to_string()), None);
            failures = failures.saturating_add(1);
            tokio::time::sleep(backoff(
                failures,
                self.options.backoff_initial,
                self.options.backoff_max,
            ))
            .await;
        }
    }

    /// Loads, then health-checks and refreshes until something fails; returns what failed.
    async fn serve_while_healthy(
        &self,
        client: &RegistryClient,
        failures: &mut u32,
    ) -> Result<std::convert::Infallible, LinkError> {
        client.check_health().await?;
        self.load(client).await?;
        *failures = 0;
        let mut since_refresh = Duration::ZERO;
        loop {
            tokio::time::sleep(self.options.health_interval).await;
            client.check_health().await?;
            since_refresh += self.options.health_interval;
            if since_refresh >= self.options.refresh_interval {
                since_refresh = Duration::ZERO;
                self.load(client).await?;
            }
        }
    }

    /// Reads the catalog, checks it and publishes it. A transport failure is returned; invalid
    /// content is reported (the registry is up, but its catalog is not used).
    async fn load(&self, client: &RegistryClient) -> Result<(), LinkError> {
        let content = client.fetch_content().await?;
        let key = self.key.clone();
        // Converting and indexing thousands of bundles is CPU work: keep it off the runtime.
        let outcome = tokio::task::spawn_blocking(move || build_index(&key, &content)).await?;
        let now = self.clock.now();
        match outcome {
            Ok(index) => {
                self.cache.set_index(&self.key, Arc::new(index), now);
                self.report(LinkState::Ready, None, None);
            }
            Err(invalid) => {
                let problems = invalid.to_string();
                tracing::warn!(catalog = %self.key, %problems, "registry serves an invalid catalog");
                self.cache.set_health(
                    &self.key,
                    CatalogHealth::unhealthy(HealthReason::Invalid, problems.clone(), now),
                    true,
                );
                self.report(LinkState::Ready, None, Some(problems));
            }
        }
        Ok(())
    }

    fn report(&self, state: LinkState, error: Option<String>, content_error: Option<String>) {
        let now = self.clock.now();
        let changed = self.status.send_if_modified(|s| {
            if s.state == state && s.error == error && s.content_error == content_error {
                return false;
            }
            if s.state != state {
                s.since = now;
            }
            s.state = state;
            s.error = error;
            s.content_error = content_error;
            true
        });
        if changed {
            let _ = self.changed.send(self.key.clone());
        }
    }
}

/// Why a registry connection is down (the worker reconnects with back-off).
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    #[error(transparent)]
    Client(#[from] super::client::ClientError),
    #[error("indexing the catalog stopped: {0}")]
    Stopped(#[from] tokio::task::JoinError),
}

/// A catalog that does not validate, described as [`describe_problems`] does.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", catalog::validated::describe_problems(.problems))]
pub struct InvalidCatalog {
    pub problems: Vec<catalog::Problem>,
}

/// Registry answers → checked index, or the validation problems.
pub fn build_index(
    key: &CatalogRef,
    content: &super::client::RegistryContent,
) -> Result<CatalogIndex, InvalidCatalog> {
    let (config, warnings) = from_api::declarative_config(content);
    for w in warnings
        .iter()
        .chain(content.skipped.iter().map(|(_, e)| e))
    {
        tracing::warn!(catalog = %key, warning = %w, "registry content");
    }
    let problems = catalog::validate::validate(&config);
    if !problems.is_empty() {
        return Err(InvalidCatalog { problems });
    }
    Ok(CatalogIndex::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_are_spelled_as_grpc_spells_them() {
        let all = [
            LinkState::Idle,
            LinkState::Connecting,
            LinkState::Ready,
            LinkState::TransientFailure,
            LinkState::Shutdown,
        ];
        let names: Vec<&str> = all.iter().map(|s| s.as_str()).collect();
        assert_eq!(
            names,
            [
                "IDLE",
                "CONNECTING",
                "READY",
                "TRANSIENT_FAILURE",
                "SHUTDOWN"
            ]
        );
    }
}

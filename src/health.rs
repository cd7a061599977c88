//! `/healthz` and `/readyz` for the kubelet's probes.
//!
//! Liveness only says the process serves HTTP. Readiness is the conjunction of named checks
//! (API reachable, CRDs present, caches synced, ...) so that `/readyz` can say *which* one is not
//! ready instead of a bare 503.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;

/// The state of one readiness check.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Check {
    Ready,
    /// Not ready, with the explanation shown on `/readyz`.
    NotReady(String),
}

/// Why `/readyz` answers 503; the text is the body it answers with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotReady {
    #[error("no readiness check registered yet")]
    NothingRegistered,
    /// The checks that are not ready, by name, each with why.
    #[error("{}", failing_lines(.0))]
    Failing(Vec<(&'static str, String)>),
}

fn failing_lines(failing: &[(&'static str, String)]) -> String {
    failing
        .iter()
        .map(|(name, why)| format!("[-] {name}: {why}\n"))
        .collect()
}

/// Shared readiness state: every component registers a check and flips it.
#[derive(Clone, Default)]
pub struct Readiness {
    checks: Arc<Mutex<BTreeMap<&'static str, Check>>>,
}

impl Readiness {
    /// Registers `name` as not ready yet, with `why` as the explanation shown on `/readyz`.
    pub fn register(&self, name: &'static str, why: impl Into<String>) {
        self.lock().insert(name, Check::NotReady(why.into()));
    }

    pub fn set_ready(&self, name: &'static str) {
        self.lock().insert(name, Check::Ready);
    }

    pub fn set_not_ready(&self, name: &'static str, why: impl Into<String>) {
        self.lock().insert(name, Check::NotReady(why.into()));
    }

    /// The lines of the checks when every registered check is ready (and at least one is
    /// registered), otherwise the checks that are not.
    pub fn report(&self) -> Result<String, NotReady> {
        let checks = self.lock();
        if checks.is_empty() {
            return Err(NotReady::NothingRegistered);
        }
        let mut failing = Vec::new();
        let mut lines = Vec::new();
        for (name, state) in checks.iter() {
            match state {
                Check::Ready => lines.push(format!("[+] {name} ok")),
                Check::NotReady(why) => failing.push((*name, why.clone())),
            }
        }
        if failing.is_empty() {
            Ok(lines.join("\n") + "\n")
        } else {
            Err(NotReady::Failing(failing))
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<&'static str, Check>> {
        // A poisoned lock only means a panic elsewhere while holding it; the map itself is
        // still consistent (single inserts), so keep serving probes.
        self.checks
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The probe router; other endpoints (metrics) are merged into it by the caller.
pub fn router(readiness: Readiness) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .with_state(readiness)
}

async fn readyz(State(readiness): State<Readiness>) -> (StatusCode, String) {
    match readiness.report() {
        Ok(body) => (StatusCode::OK, body),
        Err(not_ready) => (StatusCode::SERVICE_UNAVAILABLE, not_ready.to_string()),
    }
}

/// Binds `addr` and serves `router` until `shutdown` resolves.
pub async fn serve(
    addr: SocketAddr,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    tracing::info!(%addr, "serving health probes");
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_names_the_check_that_is_not_ready() {
        let readiness = Readiness::default();
        assert!(
            readiness.report().is_err(),
            "nothing registered is not ready"
        );
        readiness.register("api", "connecting");
        readiness.register("crds", "not checked");
        readiness.set_ready("api");
        let err = readiness.report().unwrap_err().to_string();
        assert_eq!(err, "[-] crds: not checked\n");
        assert!(!err.contains("api"), "{err}");
        readiness.set_ready("crds");
        assert!(readiness.report().unwrap().contains("[+] crds ok"));
        readiness.set_not_ready("api", "watch failed");
        assert!(
            readiness
                .report()
                .unwrap_err()
                .to_string()
                .contains("api: watch failed")
        );
    }
}

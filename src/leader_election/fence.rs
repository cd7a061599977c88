//! The write fence (docs/leader-election.md §2): a replica sends a write to the API server
//! only while it leads and its last renewal's deadline has not passed, and a write still
//! unanswered at that deadline is cut off there, its connection reset (§2.1).
//!
//! client-go's election does not stop a deposed leader from writing: its work is told to stop
//! and may not have noticed yet. olm-rs puts the check in the client every writer holds, so no
//! write path can forget it: the executor (`k8s::effects`), the InstallPlan steps (through the
//! service-account client built on it), events, the package API's certificate keeper. The
//! Lease itself is written with a client of its own, without the fence: renewing is how the
//! fence opens again.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use futures::FutureExt;
use http::{Method, Request};
use jiff::Timestamp;
use kube::Client;
use kube::client::Body;
use tokio::sync::watch;

use super::decision::{LeaseConfig, may_write, write_cut_off};
use crate::k8s::clock::Clock;
use crate::k8s::connections::Connections;

/// When the fence stopped a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Moment {
    /// Before it was sent: nothing of it left the process.
    BeforeSending,
    /// While it was unanswered at the renew deadline: its connections were reset, so what
    /// the kernel still held of it was discarded.
    InFlight,
}

impl std::fmt::Display for Moment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::BeforeSending => "not sent",
            Self::InFlight => "cut off unanswered at the renew deadline",
        })
    }
}

/// A write refused because this replica may not write now.
#[derive(Debug, thiserror::Error)]
#[error(
    "{moment}: {method} {path}: this replica does not hold the leader Lease, or its renew \
     deadline passed (docs/leader-election.md §2)"
)]
pub struct Fenced {
    pub method: Method,
    pub path: String,
    pub moment: Moment,
}

impl Fenced {
    /// Whether `error` or one of its sources is a fenced write: a standby's writers expect
    /// it and need not report it as a failure.
    pub fn in_chain(error: &(dyn std::error::Error + 'static)) -> bool {
        let mut next = Some(error);
        while let Some(e) = next {
            if e.downcast_ref::<Fenced>().is_some() {
                return true;
            }
            next = e.source();
        }
        false
    }
}

/// Whether this process may write now. Cloning shares the state.
#[derive(Clone)]
pub struct Fence(Option<Arc<Gate>>);

struct Gate {
    config: LeaseConfig,
    clock: Arc<dyn Clock>,
    /// When the last successful renewal started; `None` while not leading. A channel, so
    /// that writes in flight learn of a renewal or a loss at once.
    last_renewed: watch::Sender<Option<Timestamp>>,
    /// The client's connections, reset when a write is cut off in flight.
    connections: OnceLock<Connections>,
    refused: AtomicU64,
    cut_off: AtomicU64,
}

impl std::fmt::Debug for Fence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            None => f.write_str("Fence(open: no leader election)"),
            Some(_) => write!(f, "Fence(may write: {})", self.may_write()),
        }
    }
}

impl Fence {
    /// Without leader election the process is the only writer: always open.
    pub fn open() -> Self {
        Self(None)
    }

    /// Closed until the elector reports a renewal (`renewed`).
    pub fn closed(config: LeaseConfig, clock: Arc<dyn Clock>) -> Self {
        Self(Some(Arc::new(Gate {
            config,
            clock,
            last_renewed: watch::Sender::new(None),
            connections: OnceLock::new(),
            refused: AtomicU64::new(0),
            cut_off: AtomicU64::new(0),
        })))
    }

    /// The connections of the client this fence guards: all of them are reset when a write
    /// is cut off in flight (docs/leader-election.md §2.1). Only the first call counts.
    pub fn reset_on_cut_off(&self, connections: Connections) {
        if let Some(gate) = &self.0 {
            let _ = gate.connections.set(connections);
        }
    }

    /// The elector's word: the start of the last successful renewal, or `None` (not leading).
    pub fn renewed(&self, at: Option<Timestamp>) {
        if let Some(gate) = &self.0 {
            gate.last_renewed.send_replace(at);
        }
    }

    /// Whether a write may be sent now (`decision::may_write`).
    pub fn may_write(&self) -> bool {
        self.0.as_ref().is_none_or(|gate| gate.may_write())
    }

    /// How many writes this fence refused before sending them.
    pub fn refused(&self) -> u64 {
        self.0
            .as_ref()
            .map_or(0, |gate| gate.refused.load(Ordering::Relaxed))
    }

    /// How many writes this fence cut off unanswered at the renew deadline.
    pub fn cut_off(&self) -> u64 {
        self.0
            .as_ref()
            .map_or(0, |gate| gate.cut_off.load(Ordering::Relaxed))
    }

    /// Refuses a write request when the fence is closed.
    pub fn check<B>(&self, request: &Request<B>) -> Result<(), Fenced> {
        if !is_write(request.method(), request.uri().path()) || self.may_write() {
            return Ok(());
        }
        if let Some(gate) = &self.0 {
            gate.refused.fetch_add(1, Ordering::Relaxed);
        }
        Err(Fenced {
            method: request.method().clone(),
            path: request.uri().path().to_owned(),
            moment: Moment::BeforeSending,
        })
    }

    /// `client`, with every write checked against this fence before it is sent, and cut off
    /// if still unanswered when the fence closes. An open fence (no leader election) returns
    /// `client` itself.
    pub fn guard(&self, client: &Client) -> Client {
        let Some(gate) = &self.0 else {
            return client.clone();
        };
        let (inner, fence, gate) = (client.clone(), self.clone(), Arc::clone(gate));
        let service = tower::service_fn(move |request: Request<Body>| {
            let (inner, fence, gate) = (inner.clone(), fence.clone(), Arc::clone(&gate));
            async move {
                if let Err(refused) = fence.check(&request) {
                    tracing::debug!(%refused, "write fenced");
                    return Err(kube::Error::Service(Box::new(refused)));
                }
                if !is_write(request.method(), request.uri().path()) {
                    return inner.send(request).await;
                }
                let (method, path) = (request.method().clone(), request.uri().path().to_owned());
                tokio::select! {
                    biased;
                    answer = inner.send(request) => answer,
                    () = gate.closes() => {
                        let cut = gate.cut(method, path);
                        tracing::warn!(%cut, "write cut off");
                        Err(kube::Error::Service(Box::new(cut)))
                    }
                }
            }
            .boxed()
        });
        Client::new(service, client.default_namespace().to_owned())
    }
}

impl Gate {
    fn may_write(&self) -> bool {
        may_write(*self.last_renewed.borrow(), self.clock.now(), &self.config)
    }

    /// Resolves when a write in flight must be cut off: at the renew deadline, unless a
    /// renewal moved it, or at once when leadership is lost.
    async fn closes(&self) {
        let mut renewals = self.last_renewed.subscribe();
        loop {
            let last = *renewals.borrow_and_update();
            let now = self.clock.now();
            let Some(cut) = write_cut_off(last, &self.config) else {
                return;
            };
            if !may_write(last, now, &self.config) {
                return;
            }
            let left = std::time::Duration::try_from(cut.duration_since(now)).unwrap_or_default();
            tokio::select! {
                () = tokio::time::sleep(left) => {}
                // The sender lives in this gate, so the channel stays open while we wait.
                _ = renewals.changed() => {}
            }
        }
    }

    /// Cuts off a write in flight: every connection of the client is reset, so no byte of it
    /// still held by the kernel reaches the API server later.
    fn cut(&self, method: Method, path: String) -> Fenced {
        self.cut_off.fetch_add(1, Ordering::Relaxed);
        let reset = self.connections.get().map_or(0, Connections::reset_all);
        tracing::debug!(reset, "connections reset at the renew deadline");
        Fenced {
            method,
            path,
            moment: Moment::InFlight,
        }
    }
}

/// Whether a request changes what the API server stores: every method but reads, except the
/// access and token reviews (POSTed, but stored nowhere; the package API asks them on every
/// replica to authorize its readers).
pub fn is_write(method: &Method, path: &str) -> bool {
    if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) {
        return false;
    }
    let review = [
        "/apis/authorization.k8s.io/",
        "/apis/authentication.k8s.io/",
    ]
    .iter()
    .any(|group| path.starts_with(group));
    !review
}

#[cfg(test)]
mod tests {
    use jiff::SignedDuration;

    use super::*;
    use crate::k8s::clock::ManualClock;

    #[test]
    fn writes_are_what_changes_stored_objects() {
        let cases = [
            (Method::GET, "/api/v1/namespaces/a/pods", false),
            (Method::GET, "/api/v1/pods?watch=true", false),
            (Method::HEAD, "/api/v1/pods", false),
            (Method::POST, "/api/v1/namespaces/a/configmaps", true),
            (
                Method::PUT,
                "/apis/operators.coreos.com/v1alpha1/namespaces/a/installplans/p/status",
                true,
            ),
            (
                Method::PATCH,
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/x",
                true,
            ),
            (Method::DELETE, "/api/v1/namespaces/a/secrets/s", true),
            (
                Method::POST,
                "/apis/events.k8s.io/v1/namespaces/a/events",
                true,
            ),
            (
                Method::POST,
                "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                false,
            ),
            (
                Method::POST,
                "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                false,
            ),
            (
                Method::POST,
                "/apis/authentication.k8s.io/v1/tokenreviews",
                false,
            ),
        ];
        for (method, path, write) in cases {
            assert_eq!(is_write(&method, path), write, "{method} {path}");
        }
    }

    #[test]
    fn a_fence_opens_on_renewal_and_closes_at_the_deadline() {
        let clock = ManualClock::new(Timestamp::from_second(1_800_000_000).unwrap());
        let fence = Fence::closed(LeaseConfig::default(), Arc::new(clock.clone()));
        let write = Request::patch("/api/v1/namespaces/a/configmaps/c")
            .body(())
            .unwrap();
        let read = Request::get("/api/v1/namespaces/a/configmaps/c")
            .body(())
            .unwrap();
        assert!(fence.check(&write).is_err(), "a standby does not write");
        assert!(fence.check(&read).is_ok(), "it reads");
        fence.renewed(Some(clock.now()));
        assert!(fence.check(&write).is_ok(), "leading");
        clock.advance(SignedDuration::from_secs(10));
        let refused = fence.check(&write).unwrap_err();
        assert!(
            refused
                .to_string()
                .contains("PATCH /api/v1/namespaces/a/configmaps/c")
        );
        fence.renewed(Some(clock.now()));
        assert!(fence.check(&write).is_ok(), "writes again once renewed");
        fence.renewed(None);
        assert!(fence.check(&write).is_err(), "leadership lost");
        assert_eq!(fence.refused(), 3);
        assert!(Fence::open().check(&write).is_ok(), "no leader election");
    }

    fn hanging_client(received: tokio::sync::mpsc::UnboundedSender<String>) -> Client {
        // An API server that takes every request and never answers: a network cut after the
        // request left.
        let service = tower::service_fn(move |request: Request<Body>| {
            let _ = received.send(request.uri().path().to_owned());
            futures::future::pending::<Result<http::Response<Body>, std::convert::Infallible>>()
        });
        Client::new(service, "default")
    }

    #[tokio::test]
    async fn a_write_unanswered_at_the_renew_deadline_is_cut_off_and_its_connections_reset() {
        use std::time::Duration;
        let config = LeaseConfig {
            lease_duration: SignedDuration::from_secs(3),
            renew_deadline: SignedDuration::from_secs(2),
            retry_period: SignedDuration::from_millis(500),
        };
        let fence = Fence::closed(config, Arc::new(crate::k8s::clock::SystemClock));
        fence.reset_on_cut_off(Connections::default());
        let (tx, mut received) = tokio::sync::mpsc::unbounded_channel();
        let writer = fence.guard(&hanging_client(tx));
        let send = |method: Method, path: &'static str| {
            let writer = writer.clone();
            tokio::spawn(async move {
                let request = Request::builder()
                    .method(method)
                    .uri(path)
                    .body(Vec::new())
                    .unwrap();
                writer.request_text(request).await
            })
        };

        // Sent before the deadline and never answered: before the fix it stayed in flight for
        // as long as the network was cut, and could land after another replica took over.
        let renewed = std::time::Instant::now();
        fence.renewed(Some(Timestamp::now()));
        let write = send(Method::PATCH, "/api/v1/namespaces/a/configmaps/c");
        let read = send(Method::GET, "/api/v1/namespaces/a/configmaps/c");
        received.recv().await.unwrap();
        received.recv().await.unwrap();
        let error = tokio::time::timeout(Duration::from_secs(10), write)
            .await
            .unwrap()
            .unwrap()
            .unwrap_err();
        assert!(
            renewed.elapsed() >= Duration::from_secs(2),
            "not before the deadline"
        );
        assert!(
            error
                .to_string()
                .contains("cut off unanswered at the renew deadline: PATCH"),
            "{error}"
        );
        assert_eq!(fence.cut_off(), 1);
        assert!(!read.is_finished(), "reads are not fenced");
        read.abort();

        // A renewal during the write moves its cut-off; a loss cuts it at once.
        fence.renewed(Some(Timestamp::now()));
        let write = send(Method::POST, "/api/v1/namespaces/a/configmaps");
        received.recv().await.unwrap();
        tokio::time::sleep(Duration::from_millis(1000)).await;
        fence.renewed(Some(Timestamp::now()));
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert!(!write.is_finished(), "renewed at 1 s: allowed until 3 s");
        fence.renewed(None);
        let error = tokio::time::timeout(Duration::from_secs(1), write)
            .await
            .unwrap()
            .unwrap()
            .unwrap_err();
        assert!(error.to_string().contains("cut off"), "{error}");
        assert_eq!(fence.cut_off(), 2);
    }
}

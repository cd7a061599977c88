//! The write fence (docs/leader-election.md §2): a replica sends a write to the API server
//! only while it leads and its last renewal's deadline has not passed.
//!
//! client-go's election does not stop a deposed leader from writing: its work is told to stop
//! and may not have noticed yet. olm-rs puts the check in the client every writer holds, so no
//! write path can forget it: the executor (`k8s::effects`), the InstallPlan steps (through the
//! service-account client built on it), events, the package API's certificate keeper. The
//! Lease itself is written with a client of its own, without the fence: renewing is how the
//! fence opens again.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures::FutureExt;
use http::{Method, Request};
use jiff::Timestamp;
use kube::Client;
use kube::client::Body;

use super::decision::{LeaseConfig, may_write};
use crate::k8s::clock::Clock;

/// A write refused because this replica may not write now.
#[derive(Debug, thiserror::Error)]
#[error(
    "not sent: {method} {path}: this replica does not hold the leader Lease, or its renew \
     deadline passed (docs/leader-election.md §2)"
)]
pub struct Fenced {
    pub method: Method,
    pub path: String,
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
    /// When the last successful renewal started; `None` while not leading.
    last_renewed: Mutex<Option<Timestamp>>,
    refused: AtomicU64,
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
            last_renewed: Mutex::new(None),
            refused: AtomicU64::new(0),
        })))
    }

    /// The elector's word: the start of the last successful renewal, or `None` (not leading).
    pub fn renewed(&self, at: Option<Timestamp>) {
        if let Some(gate) = &self.0 {
            *gate.last_renewed.lock().unwrap_or_else(|p| p.into_inner()) = at;
        }
    }

    /// Whether a write may be sent now (`decision::may_write`).
    pub fn may_write(&self) -> bool {
        self.0.as_ref().is_none_or(|gate| {
            let last = *gate.last_renewed.lock().unwrap_or_else(|p| p.into_inner());
            may_write(last, gate.clock.now(), &gate.config)
        })
    }

    /// How many writes this fence refused.
    pub fn refused(&self) -> u64 {
        self.0
            .as_ref()
            .map_or(0, |gate| gate.refused.load(Ordering::Relaxed))
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
        })
    }

    /// `client`, with every write checked against this fence before it is sent. An open
    /// fence (no leader election) returns `client` itself.
    pub fn guard(&self, client: &Client) -> Client {
        if self.0.is_none() {
            return client.clone();
        }
        let (inner, fence) = (client.clone(), self.clone());
        let service = tower::service_fn(move |request: Request<Body>| {
            let (inner, fence) = (inner.clone(), fence.clone());
            async move {
                if let Err(refused) = fence.check(&request) {
                    tracing::debug!(%refused, "write fenced");
                    return Err(kube::Error::Service(Box::new(refused)));
                }
                inner.send(request).await
            }
            .boxed()
        });
        Client::new(service, client.default_namespace().to_owned())
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
}

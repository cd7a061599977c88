//! The control loops a real cluster runs in kube-controller-manager and apiextensions, reduced to
//! what OLM's behaviour depends on: CRD status, namespace cleanup and garbage collection. They
//! run after every change, asynchronously like the real ones (a client sees the request's
//! answer first, the cleanup a moment later).
//!
//! Like informer-driven controllers they look at what changed, not at the whole store: the
//! store hands them its changes since their last pass ([`Store::take_pending`]). A pass over
//! everything happens only at start and when more changes piled up than the store keeps for
//! them. (Sweeping the whole store after every write made each write cost O(objects) under the
//! server's one lock: 2,000 copied CSVs took minutes.)
//!
//! [`Store::take_pending`]: super::store::Store::take_pending

use std::sync::Arc;

use super::server::ApiServer;
use super::state::{State, crds_gr};
use super::store::Pending;
use super::{crd_controller, gc, namespaces, simulator};

/// Upper bound on passes per wake-up; each pass only acts on what the previous one changed, so
/// real chains (namespace → objects → dependents) settle in a handful.
const MAX_PASSES: usize = 64;

pub(crate) fn spawn(server: &ApiServer) {
    let weak = Arc::downgrade(&server.inner);
    let mut changes = server.subscribe();
    tokio::spawn(async move {
        loop {
            {
                // Holding only a weak reference between passes lets the server be dropped.
                let Some(inner) = weak.upgrade() else { return };
                ApiServer { inner }.write(reconcile);
            }
            if changes.changed().await.is_err() {
                return;
            }
        }
    });
    simulator::spawn(server);
}

/// Runs every cleanup controller on the pending changes until a pass changes nothing.
pub(crate) fn reconcile(state: &mut State) {
    for _ in 0..MAX_PASSES {
        let pending = state.store.take_pending();
        if pending.is_empty() {
            return;
        }
        if touches_crds(state, &pending) {
            crd_controller::sweep(state);
        }
        namespaces::reconcile(state, &pending);
        gc::reconcile(state, &pending);
    }
    tracing::warn!("sandbox controllers did not settle after {MAX_PASSES} passes");
}

/// Whether the CRD controller has work: a CRD changed, or an object of a CRD being deleted
/// did (its cleanup waits for them). CRDs are few, so it then looks at all of them.
fn touches_crds(state: &State, pending: &Pending) -> bool {
    let Pending::Changes(changes) = pending else {
        return true;
    };
    let crds = crds_gr();
    changes
        .iter()
        .any(|(gr, _)| *gr == crds || state.crds.get(gr).is_some_and(|c| c.terminating))
}

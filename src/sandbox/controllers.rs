//! The control loops a real cluster runs in kube-controller-manager and apiextensions, reduced to
//! what OLM's behaviour depends on: CRD status, namespace cleanup and garbage collection. They
//! run after every change, asynchronously like the real ones (a client sees the request's
//! answer first, the cleanup a moment later).

use std::sync::Arc;

use super::server::ApiServer;
use super::state::State;
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

/// Runs every cleanup controller until a pass changes nothing.
pub(crate) fn reconcile(state: &mut State) {
    for _ in 0..MAX_PASSES {
        let before = state.store.current_rv();
        crd_controller::sweep(state);
        namespaces::sweep(state);
        gc::sweep(state);
        if state.store.current_rv() == before {
            return;
        }
    }
    tracing::warn!("sandbox controllers did not settle after {MAX_PASSES} passes");
}

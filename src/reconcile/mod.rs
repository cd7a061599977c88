//! The thin shell: one reconciler per kind, each in its own file, each shaped the same way —
//! read observed state (reflector stores), call the pure core, write through `k8s::apply`.
//!
//! Every reconciler module exposes `pub async fn run(ctx: Arc<Context>)`, which builds its
//! `kube_runtime::Controller` (watches, owned objects, triggers) and runs it until the process
//! stops. `controller::run` starts them all.

pub mod cluster_service_version;
pub mod install_plan;
pub mod subscription;

use std::sync::Arc;

use kube::Client;

use crate::k8s::clock::Clock;
use crate::k8s::events::EventPublisher;

/// Settings that every reconciler may read.
#[derive(Debug, Clone)]
pub struct ControllerOptions {
    /// Catalogs in this namespace are visible from every namespace (OLM's `olm`).
    pub global_catalog_namespace: String,
}

impl Default for ControllerOptions {
    fn default() -> Self {
        Self {
            global_catalog_namespace: "olm".to_owned(),
        }
    }
}

/// What reconcilers share. Nothing global: tests build one against the embedded API server with a
/// manual clock.
#[derive(Clone)]
pub struct Context {
    pub client: Client,
    pub clock: Arc<dyn Clock>,
    pub events: EventPublisher,
    pub options: ControllerOptions,
}

impl Context {
    pub fn new(client: Client, clock: Arc<dyn Clock>, options: ControllerOptions) -> Self {
        let events = EventPublisher::new(client.clone(), std::env::var("POD_NAME").ok());
        Self {
            client,
            clock,
            events,
            options,
        }
    }
}

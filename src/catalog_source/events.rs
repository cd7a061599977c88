//! The events a CatalogSource status change is announced with (pure).

use crate::api::event::ObjectEvent;
use crate::api::{CatalogSourceReason, CatalogSourceStatus, ConnectionState};

/// Events for what changed between the observed and the written status.
pub fn transitions(
    observed: &CatalogSourceStatus,
    written: &CatalogSourceStatus,
) -> Vec<ObjectEvent> {
    let mut notes = Vec::new();
    if written.message.is_some()
        && (written.message != observed.message || written.reason != observed.reason)
    {
        notes.push(ObjectEvent::warning(
            reason_name(written.reason.as_ref()),
            written.message.clone().unwrap_or_default(),
        ));
    }
    let state = |s: &CatalogSourceStatus| {
        s.connection_state
            .as_ref()
            .map(|c| c.last_observed_state.clone())
    };
    let address = written
        .connection_state
        .as_ref()
        .and_then(|c| c.address.as_deref());
    if state(written) == Some(ConnectionState::Ready)
        && state(observed) != Some(ConnectionState::Ready)
        && address.is_some()
    {
        notes.push(ObjectEvent::normal(
            "RegistryReady",
            format!(
                "connected to the registry at {}",
                written
                    .connection_state
                    .as_ref()
                    .and_then(|c| c.address.as_deref())
                    .unwrap_or_default()
            ),
        ));
    }
    notes
}

fn reason_name(reason: Option<&CatalogSourceReason>) -> &'static str {
    match reason {
        Some(CatalogSourceReason::SpecInvalidError) => "SpecInvalidError",
        Some(CatalogSourceReason::ConfigMapError) => "ConfigMapError",
        Some(CatalogSourceReason::RegistryServerError) => "RegistryServerError",
        Some(CatalogSourceReason::InvalidIntervalError) => "InvalidIntervalError",
        _ => "CatalogSourceError",
    }
}

//! Kubernetes Events on the objects olm-rs manages (`kubectl describe csv` shows them).
//!
//! Events are best effort: a failure to publish is logged and never fails a reconcile, because the
//! status condition already carries the same information durably.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube_runtime::events::{Event, EventType, Recorder, Reporter};

use crate::api::event::ObjectEvent;

/// The reporting controller name on every event.
pub const REPORTER: &str = "olm-rs";

#[derive(Clone)]
pub struct EventPublisher {
    recorder: std::sync::Arc<Recorder>,
}

impl EventPublisher {
    pub fn new(client: Client, instance: Option<String>) -> Self {
        let reporter = Reporter {
            controller: REPORTER.to_owned(),
            instance,
        };
        Self {
            recorder: std::sync::Arc::new(Recorder::new(client, reporter)),
        }
    }

    pub async fn warning(
        &self,
        regarding: &ObjectReference,
        reason: &str,
        note: impl Into<String>,
    ) {
        self.publish(regarding, EventType::Warning, reason, note.into())
            .await;
    }

    /// Publishes a decided [`ObjectEvent`].
    pub async fn emit(&self, regarding: &ObjectReference, event: &ObjectEvent) {
        self.publish(regarding, event.type_, &event.reason, event.message.clone())
            .await;
    }

    async fn publish(
        &self,
        regarding: &ObjectReference,
        type_: EventType,
        reason: &str,
        note: String,
    ) {
        let event = Event {
            type_,
            reason: reason.to_owned(),
            // The events API caps notes at 1 kB.
            note: Some(truncate(note, 1024)),
            action: reason.to_owned(),
            secondary: None,
        };
        if let Err(err) = self.recorder.publish(&event, regarding).await {
            tracing::warn!(
                %err,
                reason,
                object = regarding.name.as_deref().unwrap_or_default(),
                namespace = regarding.namespace.as_deref().unwrap_or_default(),
                "could not publish event"
            );
        }
    }
}

fn truncate(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut cut = max;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::truncate;

    #[test]
    fn truncate_respects_char_boundaries() {
        assert_eq!(truncate("abc".into(), 10), "abc");
        assert_eq!(truncate("abcdef".into(), 3), "abc");
        // 'é' is two bytes; cutting inside it backs off to the previous boundary.
        assert_eq!(truncate("aé".into(), 2), "a");
    }
}

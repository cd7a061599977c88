//! An Event a decision wants published on the object it concerns (`kubectl describe` shows
//! it). Every controller's pure decision returns these; the shell publishes them through
//! `k8s::events::EventPublisher::publish` (best effort).

pub use kube_runtime::events::EventType;

/// One Event to publish: Kubernetes' type (`Normal` / `Warning`), a CamelCase reason, a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectEvent {
    pub type_: EventType,
    pub reason: String,
    pub message: String,
}

impl ObjectEvent {
    pub fn normal(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(EventType::Normal, reason, message)
    }

    pub fn warning(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(EventType::Warning, reason, message)
    }

    pub fn new(type_: EventType, reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            type_,
            reason: reason.into(),
            message: message.into(),
        }
    }

    pub fn is_warning(&self) -> bool {
        self.type_ == EventType::Warning
    }
}

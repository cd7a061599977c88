//! What a decision asks the cluster for, as a value, and the one executor that carries it out
//! (docs/controller-startup.md, "One reconciler shape").
//!
//! Every controller observes from shared stores, calls a pure `decide` of the core, and hands the
//! [`Effects`] it returns to [`execute`]: the writes in order (an object's dependencies before
//! the object), then the events, then the requeue. The writes stop at the first failure, so a
//! decision is never half-applied past a refused step; every write is idempotent, so the next
//! sync, deciding again on fresh data, completes it.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::core::DynamicObject;
use kube::{Client, Resource, ResourceExt};
use serde::Serialize;

mod answers;
mod fan_out;
mod noted;

pub use answers::{Answered, Answers, Fill};
pub use fan_out::{FanOut, FanOutOutcome, FanOutReport, FanOutWrite, execute_fan_out};
pub use noted::{Noted, NotedFailure, NotedWrite, execute_noted};

use super::events::EventPublisher;
use super::write::{self, ApiError, DeleteOptions, ObjectKey, Operation, Ownership};
use crate::api::event::ObjectEvent;

/// A body to send, encoded only when sent; compared by its JSON (table tests compare
/// decisions).
#[derive(Clone)]
pub struct Body(Arc<dyn Encode>);

trait Encode: Send + Sync {
    fn encode(&self) -> Result<serde_json::Value, serde_json::Error>;
}

impl<T: Serialize + Send + Sync> Encode for T {
    fn encode(&self) -> Result<serde_json::Value, serde_json::Error> {
        serde_json::to_value(self)
    }
}

impl Body {
    pub fn new(value: impl Serialize + Send + Sync + 'static) -> Self {
        Self(Arc::new(value))
    }

    /// The JSON sent.
    pub fn to_json(&self) -> Result<serde_json::Value, serde_json::Error> {
        self.0.encode()
    }
}

impl PartialEq for Body {
    fn eq(&self, other: &Self) -> bool {
        match (self.to_json(), other.to_json()) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        }
    }
}

impl fmt::Debug for Body {
    /// The JSON, except a Secret's data: key material never reaches a log line or a test
    /// failure message.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.to_json() {
            Ok(mut json) => {
                if json.get("kind").and_then(|k| k.as_str()) == Some("Secret")
                    && let Some(object) = json.as_object_mut()
                {
                    for field in ["data", "stringData"] {
                        if let Some(value) = object.get_mut(field) {
                            *value = serde_json::Value::String("<redacted>".to_owned());
                        }
                    }
                }
                write!(f, "{json}")
            }
            Err(err) => write!(f, "<unencodable: {err}>"),
        }
    }
}

/// One write of a decision.
#[derive(Clone, Debug, PartialEq)]
pub enum Write {
    /// Server-side apply of a whole object (apiVersion, kind, name in the body).
    Apply {
        key: ObjectKey,
        object: Body,
        ownership: Ownership,
    },
    /// Create; when the name is taken the write fails with a conflict (409).
    Create { key: ObjectKey, object: Body },
    /// Create unless the name is taken: a taken name is no failure, and the answer is `None`
    /// (an object of a fixed name written once, such as an InstallPlan's CSV step, whose
    /// earlier write may have gone unrecorded: docs/install-plans.md §7.3).
    CreateIfAbsent { key: ObjectKey, object: Body },
    /// JSON merge patch of metadata or spec, only at `resource_version` when given.
    MergePatch {
        key: ObjectKey,
        patch: Body,
        resource_version: Option<String>,
    },
    /// Replace the status, only at the resourceVersion it was computed from.
    Status {
        key: ObjectKey,
        resource_version: String,
        status: Body,
    },
    /// Replace the status of an object an earlier write of the same execution wrote (created,
    /// say), at the resourceVersion that write was answered with; `fills` copy values of
    /// earlier answers (a created object's uid) into the status first ([`Answers::resolve`]).
    StatusAfter {
        key: ObjectKey,
        status: Body,
        fills: Vec<Fill>,
    },
    /// Delete; an object already gone is fine.
    Delete {
        key: ObjectKey,
        options: DeleteOptions,
    },
}

impl Write {
    /// Apply `obj` (typed) under `ownership`.
    pub fn apply<K>(obj: K, ownership: Ownership) -> Self
    where
        K: Resource<DynamicType = ()> + Serialize + Send + Sync + 'static,
    {
        Self::Apply {
            key: ObjectKey::of(&obj),
            object: Body::new(obj),
            ownership,
        }
    }

    /// Create `obj` (typed).
    pub fn create<K>(obj: K) -> Self
    where
        K: Resource<DynamicType = ()> + Serialize + Send + Sync + 'static,
    {
        Self::Create {
            key: ObjectKey::of(&obj),
            object: Body::new(obj),
        }
    }

    /// Write `status` as the status of `obj`, guarded by the resourceVersion `obj` was read
    /// at. `None` when `obj` has no resourceVersion (it was never read from a server).
    pub fn status<K>(obj: &K, status: impl Serialize + Send + Sync + 'static) -> Option<Self>
    where
        K: Resource<DynamicType = ()>,
    {
        Some(Self::Status {
            key: ObjectKey::of(obj),
            resource_version: obj.resource_version()?,
            status: Body::new(status),
        })
    }

    /// Delete `key` whatever its version.
    pub fn delete(key: ObjectKey) -> Self {
        Self::Delete {
            key,
            options: DeleteOptions::default(),
        }
    }

    /// Delete `obj` only as it was observed (409 if it changed since).
    pub fn delete_observed<K: Resource<DynamicType = ()>>(obj: &K) -> Self {
        Self::Delete {
            key: ObjectKey::of(obj),
            options: DeleteOptions {
                resource_version: obj.resource_version(),
                ..DeleteOptions::default()
            },
        }
    }

    /// What the write does, as tables and logs name it.
    pub fn verb(&self) -> &'static str {
        match self {
            Write::Apply { .. } => "apply",
            Write::Create { .. } | Write::CreateIfAbsent { .. } => "create",
            Write::MergePatch { .. } => "patch",
            Write::Status { .. } | Write::StatusAfter { .. } => "status",
            Write::Delete { .. } => "delete",
        }
    }

    /// The object written.
    pub fn key(&self) -> &ObjectKey {
        match self {
            Write::Apply { key, .. }
            | Write::Create { key, .. }
            | Write::CreateIfAbsent { key, .. }
            | Write::MergePatch { key, .. }
            | Write::Status { key, .. }
            | Write::StatusAfter { key, .. }
            | Write::Delete { key, .. } => key,
        }
    }
}

/// An Event on an object.
#[derive(Clone, Debug, PartialEq)]
pub struct EventOn {
    pub regarding: ObjectReference,
    pub event: ObjectEvent,
}

/// The reference of an object, as an Event's subject.
pub fn reference_of<K: Resource<DynamicType = ()>>(obj: &K) -> ObjectReference {
    ObjectReference {
        api_version: Some(K::api_version(&()).into_owned()),
        kind: Some(K::kind(&()).into_owned()),
        name: obj.meta().name.clone(),
        namespace: obj.meta().namespace.clone(),
        uid: obj.meta().uid.clone(),
        ..ObjectReference::default()
    }
}

/// Everything one decision asks for.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Effects {
    /// In order: an object's dependencies come first.
    pub writes: Vec<Write>,
    /// Published after every write succeeded.
    pub events: Vec<EventOn>,
    /// Look again after this long, without an event (`None`: on the next event or resync).
    pub requeue: Option<Duration>,
}

impl Effects {
    pub fn write(&mut self, write: Write) -> &mut Self {
        self.writes.push(write);
        self
    }

    pub fn event_on<K: Resource<DynamicType = ()>>(
        &mut self,
        obj: &K,
        event: ObjectEvent,
    ) -> &mut Self {
        self.events.push(EventOn {
            regarding: reference_of(obj),
            event,
        });
        self
    }

    /// Requeue after `after`, or sooner if an earlier requeue was asked.
    pub fn requeue_after(&mut self, after: Duration) -> &mut Self {
        self.requeue = Some(self.requeue.map_or(after, |d| d.min(after)));
        self
    }

    pub fn is_empty(&self) -> bool {
        self.writes.is_empty() && self.events.is_empty() && self.requeue.is_none()
    }
}

/// What the executor did: each write's answer, in order (`None` for a delete of an object
/// already gone, or a create-if-absent whose name was taken).
#[derive(Debug, Default)]
pub struct Executed {
    pub written: Vec<Option<DynamicObject>>,
}

/// Carries out `effects`: the writes in order, stopping at the first failure, then the events
/// (best effort). A failed write fails the whole call; the events of a decision that was not
/// carried out are not published.
pub async fn execute(
    client: &Client,
    events: &EventPublisher,
    effects: &Effects,
) -> Result<Executed, ApiError> {
    execute_answered(client, events, effects, &mut Answers::default()).await
}

/// [`execute`] as one part of a larger execution: a [`Write::StatusAfter`] may refer to the
/// answers of writes of earlier parts, noted in `answers` (a co-upgrade's plan, created with
/// one Subscription's effects, is named in the status of each Subscription it serves).
pub async fn execute_answered(
    client: &Client,
    events: &EventPublisher,
    effects: &Effects,
    answers: &mut Answers,
) -> Result<Executed, ApiError> {
    let mut executed = Executed::default();
    for one in &effects.writes {
        let answer = perform(client, &*answers.resolve(one)?).await?;
        answers.note(one, answer.as_ref());
        executed.written.push(answer);
    }
    for EventOn { regarding, event } in &effects.events {
        events.emit(regarding, event).await;
    }
    Ok(executed)
}

fn encoded(
    key: &ObjectKey,
    operation: Operation,
    body: &Body,
) -> Result<serde_json::Value, ApiError> {
    body.to_json()
        .map_err(|e| ApiError::new(operation, key.clone(), kube::Error::SerdeError(e)))
}

async fn create(
    client: &Client,
    key: &ObjectKey,
    object: &Body,
) -> Result<DynamicObject, ApiError> {
    let body = encoded(key, Operation::Create, object)?;
    let obj: DynamicObject = serde_json::from_value(body)
        .map_err(|e| ApiError::new(Operation::Create, key.clone(), kube::Error::SerdeError(e)))?;
    key.api(client)
        .create(&super::post_params(), &obj)
        .await
        .map_err(|e| ApiError::new(Operation::Create, key.clone(), e))
}

/// One write. A [`Write::StatusAfter`] alone has no earlier answer to refer to: it is refused
/// as a conflict ([`Answers::resolve`]).
pub async fn perform(client: &Client, one: &Write) -> Result<Option<DynamicObject>, ApiError> {
    match one {
        Write::StatusAfter { key, .. } => Err(answers::unanswered(key, key)),
        Write::Apply {
            key,
            object,
            ownership,
        } => {
            let body = encoded(key, Operation::Apply, object)?;
            write::apply_dynamic(client, key, &body, *ownership)
                .await
                .map(Some)
        }
        Write::Create { key, object } => create(client, key, object).await.map(Some),
        Write::CreateIfAbsent { key, object } => match create(client, key, object).await {
            Ok(created) => Ok(Some(created)),
            Err(taken) if taken.is_conflict() => Ok(None),
            Err(e) => Err(e),
        },
        Write::MergePatch {
            key,
            patch,
            resource_version,
        } => {
            let body = encoded(key, Operation::Patch, patch)?;
            write::merge_patch(client, key, &body, resource_version.as_deref())
                .await
                .map(Some)
        }
        Write::Status {
            key,
            resource_version,
            status,
        } => {
            let body = encoded(key, Operation::WriteStatus, status)?;
            write::write_status(client, key, resource_version, &body)
                .await
                .map(Some)
        }
        Write::Delete { key, options } => write::delete(client, key, options).await.map(|_| None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Subscription;

    fn subscription(rv: Option<&str>) -> Subscription {
        let mut sub: Subscription = serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "Subscription",
            "metadata": {"name": "etcd", "namespace": "demo"},
            "spec": {"name": "etcd", "source": "c", "sourceNamespace": "olm"},
        }))
        .unwrap();
        sub.metadata.resource_version = rv.map(str::to_owned);
        sub
    }

    #[test]
    fn a_status_write_carries_the_version_it_was_computed_from() {
        let sub = subscription(Some("42"));
        let Some(Write::Status {
            key,
            resource_version,
            ..
        }) = Write::status(&sub, serde_json::json!({"state": "AtLatestKnown"}))
        else {
            panic!("a status write");
        };
        assert_eq!(resource_version, "42");
        assert_eq!(key.to_string(), "Subscription demo/etcd");
        assert!(
            Write::status(
                &subscription(None),
                serde_json::json!({"state": "AtLatestKnown"})
            )
            .is_none(),
            "never a blind status write"
        );
    }

    #[test]
    fn a_secret_body_never_shows_its_data() {
        let body = Body::new(serde_json::json!({
            "kind": "Secret",
            "metadata": {"name": "webhook-cert"},
            "data": {"tls.key": "c2VjcmV0"},
        }));
        let shown = format!("{body:?}");
        assert!(!shown.contains("c2VjcmV0"), "{shown}");
        assert!(shown.contains("webhook-cert"), "{shown}");
    }

    #[test]
    fn bodies_compare_by_their_json_and_requeues_keep_the_soonest() {
        assert_eq!(
            Body::new(serde_json::json!({"a": 1})),
            Body::new(serde_json::json!({"a": 1}))
        );
        assert_ne!(
            Body::new(serde_json::json!({"a": 1})),
            Body::new(serde_json::json!({"a": 2}))
        );
        let mut effects = Effects::default();
        assert!(effects.is_empty());
        effects
            .requeue_after(Duration::from_secs(5))
            .requeue_after(Duration::from_secs(1))
            .requeue_after(Duration::from_secs(3));
        assert_eq!(effects.requeue, Some(Duration::from_secs(1)));
    }
}

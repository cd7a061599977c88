//! Writes that refer to the answer of an earlier write of the same execution
//! (docs/subscription-plans.md, "One sync"): a decision that creates an object can say, in the
//! same value, what follows the create — the object's status, and another object's status that
//! names it by uid and resourceVersion — although neither is known until the API server answers.
//! The decision states where each value goes ([`Fill`]); the executor takes it from the answer
//! ([`Answers`]) just before it sends the write, which then goes the one write path like any
//! other (the field manager, the leadership fence, the resourceVersion guard).

use std::borrow::Cow;

use kube::ResourceExt;
use kube::core::DynamicObject;
use kube::core::Status;

use super::{Body, Write};
use crate::k8s::write::{ApiError, ObjectKey, Operation};

/// Which field of an earlier answer a [`Fill`] copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answered {
    Uid,
    ResourceVersion,
}

/// One value of a [`Write::StatusAfter`] taken from an earlier answer: `field` of the last
/// answer for `from`, put at the JSON pointer `at` of the status (its parent must be an object
/// of the status; the last segment is set).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fill {
    pub from: ObjectKey,
    pub field: Answered,
    pub at: &'static str,
}

/// The last answer of each object written so far in one execution. A delete forgets its
/// object: nothing after it may refer to it.
#[derive(Debug, Default)]
pub struct Answers {
    last: Vec<(ObjectKey, DynamicObject)>,
}

impl Answers {
    /// Notes what `write` was answered with.
    pub fn note(&mut self, write: &Write, answer: Option<&DynamicObject>) {
        let key = write.key();
        self.last.retain(|(k, _)| k != key);
        if let (false, Some(answer)) = (matches!(write, Write::Delete { .. }), answer) {
            self.last.push((key.clone(), answer.clone()));
        }
    }

    /// The last answer for `key`.
    pub fn of(&self, key: &ObjectKey) -> Option<&DynamicObject> {
        self.last.iter().find(|(k, _)| k == key).map(|(_, a)| a)
    }

    /// `write` as it is sent: a [`Write::StatusAfter`] becomes the plain status write at the
    /// resourceVersion of its object's last answer, with its fills made; any other write is
    /// sent as it is. An answer that is missing (the write it refers to did not happen in this
    /// execution) is a conflict: the write was decided on something that is not so, and the
    /// next decision, on fresh data, says what to do instead.
    pub fn resolve<'w>(&self, write: &'w Write) -> Result<Cow<'w, Write>, ApiError> {
        let Write::StatusAfter { key, status, fills } = write else {
            return Ok(Cow::Borrowed(write));
        };
        let resource_version = self
            .of(key)
            .and_then(ResourceExt::resource_version)
            .ok_or_else(|| unanswered(key, key))?;
        let mut json = status.to_json().map_err(|e| {
            ApiError::new(
                Operation::WriteStatus,
                key.clone(),
                kube::Error::SerdeError(e),
            )
        })?;
        for fill in fills {
            let answer = self
                .of(&fill.from)
                .ok_or_else(|| unanswered(key, &fill.from))?;
            let value = match fill.field {
                Answered::Uid => answer.uid(),
                Answered::ResourceVersion => answer.resource_version(),
            }
            .ok_or_else(|| unanswered(key, &fill.from))?;
            put(&mut json, fill.at, value);
        }
        Ok(Cow::Owned(Write::Status {
            key: key.clone(),
            resource_version,
            status: Body::new(json),
        }))
    }
}

/// Sets the value at the JSON pointer `at`, when its parent is an object.
fn put(json: &mut serde_json::Value, at: &str, value: String) {
    let Some((parent, last)) = at.rsplit_once('/') else {
        return;
    };
    if let Some(object) = json.pointer_mut(parent).and_then(|p| p.as_object_mut()) {
        object.insert(last.to_owned(), value.into());
    }
}

/// The refusal of a write whose earlier answer is missing, as the 409 it amounts to.
pub(super) fn unanswered(key: &ObjectKey, missing: &ObjectKey) -> ApiError {
    ApiError::new(
        Operation::WriteStatus,
        key.clone(),
        kube::Error::Api(
            Status::failure(
                &format!("decided on a write of {missing} that has no answer here"),
                "Conflict",
            )
            .with_code(409)
            .boxed(),
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{InstallPlan, Subscription};
    use serde_json::json;

    fn answer(kind: &str, name: &str, uid: &str, rv: &str) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": kind,
            "metadata": {"name": name, "namespace": "ns", "uid": uid, "resourceVersion": rv},
        }))
        .unwrap()
    }

    #[test]
    fn a_status_after_takes_its_version_and_fills_from_the_last_answers() {
        let plan = ObjectKey::new::<InstallPlan>(Some("ns"), "install-a");
        let sub = ObjectKey::new::<Subscription>(Some("ns"), "etcd");
        let after = Write::StatusAfter {
            key: sub.clone(),
            status: Body::new(json!({"installPlanRef": {"name": "install-a"}})),
            fills: vec![
                Fill {
                    from: plan.clone(),
                    field: Answered::Uid,
                    at: "/installPlanRef/uid",
                },
                Fill {
                    from: plan.clone(),
                    field: Answered::ResourceVersion,
                    at: "/installPlanRef/resourceVersion",
                },
            ],
        };
        let mut answers = Answers::default();
        assert!(answers.resolve(&after).unwrap_err().is_conflict());
        let create = Write::Create {
            key: plan.clone(),
            object: Body::new(json!({})),
        };
        answers.note(
            &create,
            Some(&answer("InstallPlan", "install-a", "u1", "7")),
        );
        let status = Write::Status {
            key: plan.clone(),
            resource_version: "7".into(),
            status: Body::new(json!({})),
        };
        answers.note(
            &status,
            Some(&answer("InstallPlan", "install-a", "u1", "8")),
        );
        assert!(
            answers.resolve(&after).unwrap_err().is_conflict(),
            "no answer for the Subscription itself yet"
        );
        let guard = Write::Status {
            key: sub.clone(),
            resource_version: "3".into(),
            status: Body::new(json!({})),
        };
        answers.note(&guard, Some(&answer("Subscription", "etcd", "s1", "9")));
        let sent = answers.resolve(&after).unwrap().into_owned();
        assert_eq!(
            sent,
            Write::Status {
                key: sub,
                resource_version: "9".into(),
                status: Body::new(json!({"installPlanRef": {
                    "name": "install-a", "uid": "u1", "resourceVersion": "8"}})),
            }
        );
        answers.note(&Write::delete(plan.clone()), None);
        assert!(answers.of(&plan).is_none(), "a delete forgets its object");
    }
}

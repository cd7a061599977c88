//! Conditions shared by the OLM kinds, and the one helper that sets them.
//!
//! OLM uses four condition shapes: `metav1.Condition` (OperatorGroup, CatalogSource,
//! OLMConfig), `SubscriptionCondition`, `InstallPlanCondition` and `BundleLookupCondition`.
//! They differ in their time fields but agree on what matters: a condition is identified by
//! its `type`, and `lastTransitionTime` moves only when `status` changes. [`set_condition`]
//! implements that once for all of them through the [`StatusCondition`] trait.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

pub use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition as MetaCondition;

use super::string_enum::string_enum;

string_enum! {
    /// `status` of a condition: `True`, `False` or `Unknown` (core/v1 ConditionStatus).
    pub enum ConditionStatus (schema: open) {
        True = "True",
        False = "False",
        Unknown = "Unknown",
    }
}

impl From<bool> for ConditionStatus {
    fn from(value: bool) -> Self {
        if value { Self::True } else { Self::False }
    }
}

/// What [`set_condition`] needs to know about a condition type.
pub trait StatusCondition {
    /// The condition's `type` (its identity within the list).
    fn condition_type(&self) -> &str;
    /// The condition's `status` (`True`, `False`, `Unknown`).
    fn status(&self) -> &str;
    /// `reason`, empty when absent.
    fn reason(&self) -> &str;
    /// `message`, empty when absent.
    fn message(&self) -> &str;
    /// `lastTransitionTime`, if set.
    fn last_transition_time(&self) -> Option<&Time>;
    /// Sets `lastTransitionTime`.
    fn set_last_transition_time(&mut self, time: Option<Time>);
    /// Sets the shape's "last seen/updated" time (`lastHeartbeatTime`, `lastUpdateTime`);
    /// shapes without one ignore it.
    fn set_last_update_time(&mut self, _time: Time) {}
    /// Whether two conditions of the same type say the same thing. OLM compares type,
    /// status, reason and message (docs/install-plans.md §2); shapes with more
    /// observed data (e.g. `observedGeneration`) extend this.
    fn same_observation(&self, other: &Self) -> bool {
        self.condition_type() == other.condition_type()
            && self.status() == other.status()
            && self.reason() == other.reason()
            && self.message() == other.message()
    }
}

/// Adds or replaces the condition of `condition`'s type and returns whether the list changed.
///
/// * Same observation as the existing entry (type, status, reason, message): nothing changes,
///   not even the update/heartbeat time — so an unchanged status is never rewritten.
/// * Same status, different reason/message: replaced, the old `lastTransitionTime` is kept.
/// * New type or different status: `lastTransitionTime` = `now`.
///
/// The update/heartbeat time is set to `now` whenever the entry is written.
pub fn set_condition<C: StatusCondition>(
    conditions: &mut Vec<C>,
    mut condition: C,
    now: &Time,
) -> bool {
    let existing = conditions
        .iter_mut()
        .find(|c| c.condition_type() == condition.condition_type());
    match existing {
        Some(existing) if existing.same_observation(&condition) => false,
        Some(existing) => {
            let transition = if existing.status() == condition.status() {
                existing
                    .last_transition_time()
                    .cloned()
                    .or_else(|| Some(now.clone()))
            } else {
                Some(now.clone())
            };
            condition.set_last_transition_time(transition);
            condition.set_last_update_time(now.clone());
            *existing = condition;
            true
        }
        None => {
            condition.set_last_transition_time(Some(now.clone()));
            condition.set_last_update_time(now.clone());
            conditions.push(condition);
            true
        }
    }
}

/// Removes every condition of the given type; returns whether one was removed.
pub fn remove_condition<C: StatusCondition>(conditions: &mut Vec<C>, condition_type: &str) -> bool {
    let before = conditions.len();
    conditions.retain(|c| c.condition_type() != condition_type);
    conditions.len() != before
}

/// The condition of the given type, if present.
pub fn find_condition<'a, C: StatusCondition>(
    conditions: &'a [C],
    condition_type: &str,
) -> Option<&'a C> {
    conditions
        .iter()
        .find(|c| c.condition_type() == condition_type)
}

impl StatusCondition for MetaCondition {
    fn condition_type(&self) -> &str {
        &self.type_
    }
    fn status(&self) -> &str {
        &self.status
    }
    fn reason(&self) -> &str {
        &self.reason
    }
    fn message(&self) -> &str {
        &self.message
    }
    fn last_transition_time(&self) -> Option<&Time> {
        Some(&self.last_transition_time)
    }
    fn set_last_transition_time(&mut self, time: Option<Time>) {
        // metav1.Condition requires the field; `set_condition` always passes `Some`.
        if let Some(time) = time {
            self.last_transition_time = time;
        }
    }
    fn same_observation(&self, other: &Self) -> bool {
        self.type_ == other.type_
            && self.status == other.status
            && self.reason == other.reason
            && self.message == other.message
            && self.observed_generation == other.observed_generation
    }
}

/// Builds a `metav1.Condition` (its `lastTransitionTime` is filled in by [`set_condition`]).
pub fn meta_condition(
    condition_type: &str,
    status: ConditionStatus,
    reason: &str,
    message: &str,
    observed_generation: Option<i64>,
    now: &Time,
) -> MetaCondition {
    MetaCondition {
        type_: condition_type.to_owned(),
        status: status.as_str().to_owned(),
        reason: reason.to_owned(),
        message: message.to_owned(),
        observed_generation,
        last_transition_time: now.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Time {
        Time(jiff::Timestamp::from_second(seconds).unwrap())
    }

    fn cond(kind: &str, status: ConditionStatus, reason: &str, message: &str) -> MetaCondition {
        meta_condition(kind, status, reason, message, None, &at(0))
    }

    #[test]
    fn new_condition_gets_now_as_transition_time() {
        let mut list = Vec::new();
        assert!(set_condition(
            &mut list,
            cond("A", ConditionStatus::True, "R", "m"),
            &at(10)
        ));
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].last_transition_time, at(10));
    }

    #[test]
    fn identical_condition_changes_nothing() {
        let mut list = Vec::new();
        set_condition(
            &mut list,
            cond("A", ConditionStatus::True, "R", "m"),
            &at(10),
        );
        assert!(!set_condition(
            &mut list,
            cond("A", ConditionStatus::True, "R", "m"),
            &at(20)
        ));
        assert_eq!(list[0].last_transition_time, at(10));
    }

    #[test]
    fn same_status_new_message_keeps_transition_time() {
        let mut list = Vec::new();
        set_condition(
            &mut list,
            cond("A", ConditionStatus::True, "R", "m"),
            &at(10),
        );
        assert!(set_condition(
            &mut list,
            cond("A", ConditionStatus::True, "R2", "other"),
            &at(20)
        ));
        assert_eq!(list[0].reason, "R2");
        assert_eq!(list[0].message, "other");
        assert_eq!(list[0].last_transition_time, at(10));
    }

    #[test]
    fn status_flip_moves_transition_time() {
        let mut list = Vec::new();
        set_condition(
            &mut list,
            cond("A", ConditionStatus::True, "R", "m"),
            &at(10),
        );
        set_condition(
            &mut list,
            cond("B", ConditionStatus::True, "R", "m"),
            &at(10),
        );
        assert!(set_condition(
            &mut list,
            cond("A", ConditionStatus::False, "R", "m"),
            &at(30)
        ));
        assert_eq!(list.len(), 2);
        assert_eq!(list[0].status, "False");
        assert_eq!(list[0].last_transition_time, at(30));
        assert_eq!(list[1].last_transition_time, at(10));
    }

    #[test]
    fn remove_and_find_by_type() {
        let mut list = Vec::new();
        set_condition(
            &mut list,
            cond("A", ConditionStatus::True, "R", "m"),
            &at(10),
        );
        assert!(find_condition(&list, "A").is_some());
        assert!(remove_condition(&mut list, "A"));
        assert!(!remove_condition(&mut list, "A"));
        assert!(find_condition(&list, "A").is_none());
    }
}

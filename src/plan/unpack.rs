//! When a bundle image is pulled, retried and given up (pure; docs/install-plans.md §9
//! semantics without Jobs). A lookup's own condition keeps the timing: `BundleLookupPending`
//! since the attempt began (its `lastTransitionTime`), `BundleLookupFailed` since it failed.
//!
//! - The unpack timeout (`--bundle-unpack-timeout`, default 10m, overridden per namespace by the
//!   OperatorGroup annotation `operatorframework.io/bundle-unpack-timeout`; `0` = none) bounds
//!   how long a lookup stays pending; then it fails with `DeadlineExceeded`.
//! - Transient failures (registry unreachable, timeouts) keep it pending and are retried with a
//!   backoff that grows with the time already spent (1 s up to 1 min).
//! - Other failures (authentication refused, image not found, invalid content, blocked) fail it
//!   at once. A failed lookup is tried again after
//!   `operatorframework.io/bundle-unpack-min-retry-interval` when set, else after 5 minutes —
//!   when OLM's failed unpack Job vanishes (TTL 300 s) and the next resolution makes a new one.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::go_duration::DurationError;

use super::image_bundle::set_lookup_condition;
use crate::api::install_plan::bundle_lookup_reason;
use crate::api::keys::{
    BUNDLE_UNPACK_MIN_RETRY_INTERVAL_ANNOTATION, BUNDLE_UNPACK_TIMEOUT_ANNOTATION,
};
use crate::api::{BundleLookup, BundleLookupCondition, BundleLookupConditionType};

/// OLM's `--bundle-unpack-timeout` default.
pub const DEFAULT_UNPACK_TIMEOUT: Duration = Duration::from_secs(600);
/// How long a failed lookup waits without a min-retry-interval annotation.
pub const DEFAULT_FAILED_RETRY: Duration = Duration::from_secs(300);
const MIN_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// The unpack timing of one namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnpackPolicy {
    /// `None`: no deadline.
    pub timeout: Option<Duration>,
    /// How long a failed lookup waits before the next attempt.
    pub failed_retry: Duration,
}

/// The policy for a namespace from its OperatorGroup's annotations (when it has exactly one)
/// and the controller-wide timeout (`0` = none). `parse` reads a Go duration. An annotation
/// that does not parse is an error in OLM's words.
pub fn unpack_policy(
    annotations: Option<&BTreeMap<String, String>>,
    default_timeout: Duration,
    parse: impl Fn(&str) -> Result<Duration, DurationError>,
) -> Result<UnpackPolicy, UnpackAnnotationError> {
    let read = |key: &'static str, what: &'static str| match annotations.and_then(|a| a.get(key)) {
        None => Ok(None),
        Some(value) => parse(value)
            .map(Some)
            .map_err(|source| UnpackAnnotationError {
                what,
                key,
                value: value.clone(),
                source,
            }),
    };
    let timeout =
        read(BUNDLE_UNPACK_TIMEOUT_ANNOTATION, "unpack timeout")?.unwrap_or(default_timeout);
    let retry = read(
        BUNDLE_UNPACK_MIN_RETRY_INTERVAL_ANNOTATION,
        "unpack retry interval",
    )?;
    Ok(UnpackPolicy {
        timeout: Some(timeout).filter(|t| !t.is_zero()),
        failed_retry: retry
            .filter(|r| !r.is_zero())
            .unwrap_or(DEFAULT_FAILED_RETRY),
    })
}

/// An unpack annotation of the OperatorGroup that does not parse, in OLM's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("failed to parse {what} annotation({key}: {value}): {source}")]
pub struct UnpackAnnotationError {
    /// What the annotation sets (`unpack timeout`).
    pub what: &'static str,
    pub key: &'static str,
    pub value: String,
    #[source]
    pub source: DurationError,
}

/// Why a pull did not give a bundle, classified by the shell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullFailure {
    /// One of the `bundle_lookup_reason` pull reasons.
    pub reason: &'static str,
    /// Plain words naming the image (and the file or registry at fault).
    pub message: String,
    /// Worth retrying soon (the registry may come back).
    pub transient: bool,
}

/// What to do with a lookup now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NextAttempt {
    /// Pull, giving up after `within` (`None`: no deadline).
    PullNow { within: Option<Duration> },
    /// Nothing until then.
    Wait(Duration),
}

/// Decides whether `lookup` is pulled now. A pending lookup past its deadline is failed here
/// (`DeadlineExceeded`); a failed one whose retry time has come is made pending again (a new
/// attempt with a new deadline). Returns the decision and whether the lookup changed.
pub fn next_attempt(
    lookup: &mut BundleLookup,
    policy: &UnpackPolicy,
    now: Timestamp,
) -> (NextAttempt, bool) {
    let at = Time(now);
    match current(lookup) {
        Some((BundleLookupConditionType::BundleLookupFailed, condition)) => {
            let waited = since(condition, now);
            if waited < policy.failed_retry {
                return (NextAttempt::Wait(policy.failed_retry - waited), false);
            }
            let message = format!(
                "pulling bundle image {} again after a failure: {}",
                lookup.path,
                condition.message.as_deref().unwrap_or_default()
            );
            let changed = set_lookup_condition(
                lookup,
                BundleLookupConditionType::BundleLookupPending,
                bundle_lookup_reason::PULL_RETRYING,
                &message,
                &at,
            );
            (
                NextAttempt::PullNow {
                    within: policy.timeout,
                },
                changed,
            )
        }
        Some((_, condition)) => {
            let elapsed = since(condition, now);
            match policy.timeout {
                Some(timeout) if elapsed >= timeout => {
                    let last = condition
                        .message
                        .clone()
                        .filter(|_| {
                            condition.reason.as_deref() == Some(bundle_lookup_reason::PULL_RETRYING)
                        })
                        .map(|m| format!("; last attempt: {m}"))
                        .unwrap_or_default();
                    let message = format!(
                        "bundle image {} was not pulled within the unpack timeout of {}{last}",
                        lookup.path,
                        go_duration(timeout)
                    );
                    set_lookup_condition(
                        lookup,
                        BundleLookupConditionType::BundleLookupFailed,
                        bundle_lookup_reason::DEADLINE_EXCEEDED,
                        &message,
                        &at,
                    );
                    (NextAttempt::Wait(policy.failed_retry), true)
                }
                Some(timeout) => (
                    NextAttempt::PullNow {
                        within: Some(timeout - elapsed),
                    },
                    false,
                ),
                None => (NextAttempt::PullNow { within: None }, false),
            }
        }
        // No condition (a plan written by hand or by OLM): start now.
        None => {
            set_lookup_condition(
                lookup,
                BundleLookupConditionType::BundleLookupPending,
                bundle_lookup_reason::PULL_NOT_STARTED,
                &format!("bundle image {} not yet pulled", lookup.path),
                &at,
            );
            (
                NextAttempt::PullNow {
                    within: policy.timeout,
                },
                true,
            )
        }
    }
}

/// Records a failed pull: a transient failure keeps the lookup pending (retried after the
/// returned delay), any other fails it. Returns the delay and whether the lookup changed.
pub fn record_failure(
    lookup: &mut BundleLookup,
    failure: &PullFailure,
    policy: &UnpackPolicy,
    now: Timestamp,
) -> (Duration, bool) {
    let at = Time(now);
    if failure.transient {
        let elapsed = current(lookup).map_or(Duration::ZERO, |(_, c)| since(c, now));
        let changed = set_lookup_condition(
            lookup,
            BundleLookupConditionType::BundleLookupPending,
            bundle_lookup_reason::PULL_RETRYING,
            &failure.message,
            &at,
        );
        (
            crate::backoff::after_elapsed(elapsed, MIN_BACKOFF, MAX_BACKOFF),
            changed,
        )
    } else {
        let changed = set_lookup_condition(
            lookup,
            BundleLookupConditionType::BundleLookupFailed,
            failure.reason,
            &failure.message,
            &at,
        );
        (policy.failed_retry, changed)
    }
}

/// The lookup's state condition (pending or failed).
fn current(lookup: &BundleLookup) -> Option<(BundleLookupConditionType, &BundleLookupCondition)> {
    let conditions = lookup.conditions.as_deref().unwrap_or_default();
    [
        BundleLookupConditionType::BundleLookupFailed,
        BundleLookupConditionType::BundleLookupPending,
    ]
    .into_iter()
    .find_map(|t| conditions.iter().find(|c| c.type_ == t).map(|c| (t, c)))
}

fn since(condition: &BundleLookupCondition, now: Timestamp) -> Duration {
    condition
        .last_transition_time
        .as_ref()
        .and_then(|t| Duration::try_from(now.duration_since(t.0)).ok())
        .unwrap_or_default()
}

/// The failure of a lookup, if it failed: (reason, message).
pub fn lookup_failure(lookup: &BundleLookup) -> Option<(&str, &str)> {
    match current(lookup) {
        Some((BundleLookupConditionType::BundleLookupFailed, c)) => Some((
            c.reason.as_deref().unwrap_or_default(),
            c.message.as_deref().unwrap_or_default(),
        )),
        _ => None,
    }
}

/// Whether the lookup is still pending (not failed).
pub fn lookup_pending(lookup: &BundleLookup) -> bool {
    !matches!(
        current(lookup),
        Some((BundleLookupConditionType::BundleLookupFailed, _))
    )
}

/// A duration as Go prints it (`10m0s`, `1h0m0s`, `30s`, `1.5s`).
pub fn go_duration(d: Duration) -> String {
    let secs = d.as_secs();
    let (h, m, s) = (secs / 3600, (secs % 3600) / 60, secs % 60);
    let millis = d.subsec_millis();
    let seconds = if millis == 0 {
        format!("{s}s")
    } else {
        format!("{}s", format!("{s}.{millis:03}").trim_end_matches('0'))
    };
    match (h, m) {
        (0, 0) => seconds,
        (0, m) => format!("{m}m{seconds}"),
        (h, m) => format!("{h}h{m}m{seconds}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::CatalogRef;
    use crate::plan::image_bundle::bundle_lookup;

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(secs).unwrap()
    }

    fn lookup() -> BundleLookup {
        bundle_lookup(
            "op.v1",
            "localhost:5000/op:v1",
            &CatalogRef::new("olm", "cat"),
            None,
            &[],
            &Time(t(1_000)),
        )
    }

    fn parse(text: &str) -> Result<Duration, DurationError> {
        match text {
            "0" => Ok(Duration::ZERO),
            "30s" => Ok(Duration::from_secs(30)),
            "2m" => Ok(Duration::from_secs(120)),
            other => Err(DurationError::Invalid {
                text: other.to_owned(),
            }),
        }
    }

    #[test]
    fn policy_from_the_operator_group_annotations() {
        let default = unpack_policy(None, DEFAULT_UNPACK_TIMEOUT, parse).unwrap();
        assert_eq!(default.timeout, Some(Duration::from_secs(600)));
        assert_eq!(default.failed_retry, DEFAULT_FAILED_RETRY);
        let a = BTreeMap::from([
            (BUNDLE_UNPACK_TIMEOUT_ANNOTATION.to_owned(), "0".to_owned()),
            (
                BUNDLE_UNPACK_MIN_RETRY_INTERVAL_ANNOTATION.to_owned(),
                "30s".to_owned(),
            ),
        ]);
        let p = unpack_policy(Some(&a), DEFAULT_UNPACK_TIMEOUT, parse).unwrap();
        assert_eq!(p.timeout, None, "0 removes the deadline");
        assert_eq!(p.failed_retry, Duration::from_secs(30));
        let bad = BTreeMap::from([(
            BUNDLE_UNPACK_TIMEOUT_ANNOTATION.to_owned(),
            "soon".to_owned(),
        )]);
        assert_eq!(
            unpack_policy(Some(&bad), DEFAULT_UNPACK_TIMEOUT, parse)
                .unwrap_err()
                .to_string(),
            "failed to parse unpack timeout annotation(operatorframework.io/bundle-unpack-timeout: soon): time: invalid duration \"soon\""
        );
    }

    #[test]
    fn transient_failures_retry_until_the_deadline() {
        let policy = UnpackPolicy {
            timeout: Some(Duration::from_secs(120)),
            failed_retry: Duration::from_secs(30),
        };
        let mut l = lookup();
        assert_eq!(
            next_attempt(&mut l, &policy, t(1_000)),
            (
                NextAttempt::PullNow {
                    within: Some(Duration::from_secs(120))
                },
                false
            )
        );
        let down = PullFailure {
            reason: bundle_lookup_reason::REGISTRY_UNREACHABLE,
            message: "registry localhost:5000 is unreachable".into(),
            transient: true,
        };
        let (delay, changed) = record_failure(&mut l, &down, &policy, t(1_040));
        assert!(changed);
        assert_eq!(
            delay,
            Duration::from_secs(10),
            "a quarter of the 40 s spent"
        );
        assert!(lookup_pending(&l));
        assert_eq!(
            next_attempt(&mut l, &policy, t(1_100)).0,
            NextAttempt::PullNow {
                within: Some(Duration::from_secs(20))
            },
            "the deadline counts from the first attempt"
        );
        let (next, changed) = next_attempt(&mut l, &policy, t(1_120));
        assert!(changed);
        assert_eq!(next, NextAttempt::Wait(Duration::from_secs(30)));
        let (reason, message) = lookup_failure(&l).unwrap();
        assert_eq!(reason, "DeadlineExceeded");
        assert_eq!(
            message,
            "bundle image localhost:5000/op:v1 was not pulled within the unpack timeout of 2m0s; last attempt: registry localhost:5000 is unreachable"
        );
    }

    #[test]
    fn other_failures_fail_at_once_and_are_retried_after_the_interval() {
        let policy = UnpackPolicy {
            timeout: None,
            failed_retry: Duration::from_secs(30),
        };
        let mut l = lookup();
        let denied = PullFailure {
            reason: bundle_lookup_reason::UNAUTHORIZED,
            message: "registry localhost:5000 refused the credentials".into(),
            transient: false,
        };
        assert_eq!(
            record_failure(&mut l, &denied, &policy, t(1_010)),
            (Duration::from_secs(30), true)
        );
        assert_eq!(lookup_failure(&l).unwrap().0, "ImagePullUnauthorized");
        assert_eq!(
            next_attempt(&mut l, &policy, t(1_030)),
            (NextAttempt::Wait(Duration::from_secs(10)), false)
        );
        let (next, changed) = next_attempt(&mut l, &policy, t(1_040));
        assert!(changed);
        assert_eq!(next, NextAttempt::PullNow { within: None });
        assert!(lookup_pending(&l));
        assert_eq!(
            l.conditions.as_ref().unwrap().len(),
            1,
            "one state condition at a time"
        );
    }

    #[test]
    fn durations_print_as_go_prints_them() {
        assert_eq!(go_duration(Duration::from_secs(600)), "10m0s");
        assert_eq!(go_duration(Duration::from_secs(3600)), "1h0m0s");
        assert_eq!(go_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(go_duration(Duration::from_secs(30)), "30s");
    }
}

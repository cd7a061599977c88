//! When the controller cannot pull a catalog image itself but the node may (docs/catalog-images.md
//! §7): a registry it cannot reach or resolve, TLS or a login it is refused, no credentials it
//! can read — the kind recipe's `localhost:5001` that only the node's containerd mirrors, a
//! node's own `config.json`, OpenShift's mirror sets. The catalog is then served as OLM serves
//! it, by a registry pod whose image the kubelet pulls; the status, a condition and an event
//! say so and why, and in-process serving is tried again after a while. Pure: the controller
//! keeps the [`Fallback`] of each catalog and asks these functions what to do.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::CatalogSourceStatus;
use crate::api::conditions::{ConditionStatus, meta_condition, set_condition};
use crate::api::event::ObjectEvent;

use super::in_process::{CONTENT_CONDITION, CheckOutcome};

/// How long a catalog is served by its registry pod before in-process serving is tried again.
pub const RETRY_IN_PROCESS: Duration = Duration::from_secs(5 * 60);
/// Reason of [`CONTENT_CONDITION`] while a registry pod serves a catalog the controller could
/// not pull.
pub const REGISTRY_POD: &str = "RegistryPod";
/// Event when a catalog falls back to its registry pod.
pub const FELL_BACK_EVENT: &str = "CatalogServedByRegistryPod";

/// A catalog served by its registry pod because the controller could not pull its image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fallback {
    /// `spec.image` when the pull failed: another image is tried in-process at once.
    pub image: String,
    /// The failure's kind (`Unreachable`, `Unauthorized`, …) and words.
    pub kind: String,
    pub cause: String,
    pub since: Timestamp,
    /// When in-process serving is tried again.
    pub retry_at: Timestamp,
    /// The CatalogSource as it was ([`fingerprint`]): any change to it (a label, an
    /// annotation, the spec) tries in-process serving again at once.
    pub touched: String,
}

/// What of a CatalogSource counts as a change for [`route`]: its generation, labels and
/// annotations (not its status, which every sync writes).
pub fn fingerprint(cs: &crate::api::CatalogSource) -> String {
    format!(
        "{:?}|{:?}|{:?}",
        cs.metadata.generation, cs.metadata.labels, cs.metadata.annotations
    )
}

/// Whether a failure of the controller's own pull is one the node may not meet: the kubelet
/// pulls through the node's mirrors, resolver, trust store and credentials. A missing image,
/// content that is no catalog or is invalid, a registry `registries.conf` blocks: the node would
/// fare no better (or must not try), and the failure is reported as it is.
pub fn node_may_pull(kind: &str) -> bool {
    matches!(
        kind,
        "Unreachable" | "TimedOut" | "Unauthorized" | "ClientSetupError"
    )
}

/// Where an image catalog served in-process by default goes on this sync.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route<'a> {
    /// Serve in-process (the default, or the cause went away).
    InProcess,
    /// Ask the registry whether the controller can pull the image now; while it cannot, the
    /// registry pod keeps serving.
    Retry(&'a Fallback),
    /// The registry pod serves.
    RegistryPod(&'a Fallback),
}

/// The route of a catalog whose fallback (if any) is `fallback`, for `image` and the
/// CatalogSource as `touched` now.
pub fn route<'a>(
    fallback: Option<&'a Fallback>,
    image: &str,
    touched: &str,
    now: Timestamp,
) -> Route<'a> {
    match fallback {
        None => Route::InProcess,
        // The spec names another image: try it as any new image.
        Some(f) if f.image != image => Route::InProcess,
        Some(f) if now >= f.retry_at || f.touched != touched => Route::Retry(f),
        Some(f) => Route::RegistryPod(f),
    }
}

/// The fallback after the controller's own check of `image` ended with `outcome`: one is
/// entered (or kept, from `previous`) when the pull failed for a cause the node may not meet
/// and nothing is served in-process; any other outcome ends it. `retry` is how long until the
/// next try.
pub fn after_check(
    outcome: &CheckOutcome,
    served_in_process: bool,
    image: &str,
    touched: &str,
    previous: Option<&Fallback>,
    now: Timestamp,
    retry: Duration,
) -> Option<Fallback> {
    let CheckOutcome::Failed { kind, message, .. } = outcome else {
        return None;
    };
    if served_in_process || !node_may_pull(kind) {
        return None;
    }
    Some(Fallback {
        image: image.to_owned(),
        kind: kind.clone(),
        cause: message.clone(),
        since: previous
            .filter(|p| p.image == image)
            .map_or(now, |p| p.since),
        retry_at: now
            .checked_add(jiff::SignedDuration::try_from(retry).unwrap_or(jiff::SignedDuration::MAX))
            .unwrap_or(Timestamp::MAX),
        touched: touched.to_owned(),
    })
}

/// The words of the fallback's condition and event.
pub fn explain(f: &Fallback) -> String {
    format!(
        "served by a registry pod, whose image the kubelet pulls with the node's mirrors and \
         credentials: olm-rs could not pull {} itself ({}: {}); serving it in-process is tried \
         again at {}",
        f.image, f.kind, f.cause, f.retry_at
    )
}

/// Marks a pod-mode status with the fallback: [`CONTENT_CONDITION`] `True`, reason
/// [`REGISTRY_POD`], and a warning event when the catalog falls back (not on every sync).
/// Without a fallback, a leftover condition of that reason goes: pod mode chosen on purpose
/// needs no explanation.
pub fn mark_status(
    status: &mut CatalogSourceStatus,
    fallback: Option<&Fallback>,
    generation: Option<i64>,
    now: Timestamp,
    events: &mut Vec<ObjectEvent>,
) {
    let mut conditions = status.conditions.take().unwrap_or_default();
    let was_fallback = conditions
        .iter()
        .any(|c| c.type_ == CONTENT_CONDITION && c.reason == REGISTRY_POD);
    match fallback {
        Some(f) => {
            let text = explain(f);
            let now = Time(now);
            set_condition(
                &mut conditions,
                meta_condition(
                    CONTENT_CONDITION,
                    ConditionStatus::True,
                    REGISTRY_POD,
                    &text,
                    generation,
                    &now,
                ),
                &now,
            );
            if !was_fallback {
                events.push(ObjectEvent::warning(FELL_BACK_EVENT, text));
            }
        }
        None if was_fallback => {
            conditions.retain(|c| c.type_ != CONTENT_CONDITION);
        }
        None => {}
    }
    status.conditions = (!conditions.is_empty()).then_some(conditions);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(secs).unwrap()
    }

    fn failed(kind: &str) -> CheckOutcome {
        CheckOutcome::Failed {
            kind: kind.into(),
            message: format!("catalog image reg:5000/cat:v1: {kind}"),
            transient: true,
        }
    }

    fn fallback(image: &str, since: i64, retry_at: i64) -> Fallback {
        Fallback {
            image: image.into(),
            kind: "Unreachable".into(),
            cause: "connection refused".into(),
            since: at(since),
            retry_at: at(retry_at),
            touched: "v1".into(),
        }
    }

    #[test]
    fn only_failures_the_node_may_not_meet_fall_back() {
        let minute = Duration::from_secs(60);
        // (case, outcome, served in-process, previous fallback, (since, retry_at) wanted)
        type Row = (
            &'static str,
            CheckOutcome,
            bool,
            Option<Fallback>,
            Option<(i64, i64)>,
        );
        let table: Vec<Row> = vec![
            (
                "unreachable",
                failed("Unreachable"),
                false,
                None,
                Some((100, 160)),
            ),
            (
                "timed out",
                failed("TimedOut"),
                false,
                None,
                Some((100, 160)),
            ),
            (
                "refused login",
                failed("Unauthorized"),
                false,
                None,
                Some((100, 160)),
            ),
            (
                "no OCI client",
                failed("ClientSetupError"),
                false,
                None,
                Some((100, 160)),
            ),
            (
                "not found: the node would not find it either",
                failed("NotFound"),
                false,
                None,
                None,
            ),
            ("not a catalog", failed("NotACatalog"), false, None, None),
            (
                "invalid catalog",
                failed("InvalidCatalog"),
                false,
                None,
                None,
            ),
            (
                "blocked by registries.conf: never around the block",
                failed("Blocked"),
                false,
                None,
                None,
            ),
            (
                "earlier content still served in-process",
                failed("Unreachable"),
                true,
                None,
                None,
            ),
            ("served now", CheckOutcome::Swapped, false, None, None),
            (
                "still failing: the fallback keeps its start",
                failed("Unreachable"),
                false,
                Some(fallback("reg:5000/cat:v1", 40, 100)),
                Some((40, 160)),
            ),
            (
                "a new image starts its own fallback",
                failed("Unreachable"),
                false,
                Some(fallback("reg:5000/cat:v0", 40, 100)),
                Some((100, 160)),
            ),
        ];
        for (case, outcome, served, previous, want) in table {
            let got = after_check(
                &outcome,
                served,
                "reg:5000/cat:v1",
                "v1",
                previous.as_ref(),
                at(100),
                minute,
            );
            let got = got.map(|f| (f.since.as_second(), f.retry_at.as_second()));
            assert_eq!(got, want, "{case}");
        }
    }

    #[test]
    fn the_registry_pod_serves_until_the_retry_is_due_or_the_catalog_changes() {
        let f = fallback("reg:5000/cat:v1", 0, 300);
        let image = "reg:5000/cat:v1";
        assert_eq!(route(None, image, "v1", at(10)), Route::InProcess);
        assert_eq!(route(Some(&f), image, "v1", at(10)), Route::RegistryPod(&f));
        assert_eq!(route(Some(&f), image, "v1", at(300)), Route::Retry(&f));
        assert_eq!(
            route(Some(&f), image, "v2", at(10)),
            Route::Retry(&f),
            "a touched CatalogSource tries again at once"
        );
        assert_eq!(
            route(Some(&f), "reg:5000/cat:v2", "v1", at(10)),
            Route::InProcess
        );
    }

    #[test]
    fn the_condition_says_which_mode_serves_and_why_and_the_event_comes_once() {
        let f = fallback("reg:5000/cat:v1", 0, 300);
        let mut status = CatalogSourceStatus::default();
        let mut events = Vec::new();
        mark_status(&mut status, Some(&f), Some(2), at(10), &mut events);
        let condition = &status.conditions.as_ref().unwrap()[0];
        assert_eq!(
            (
                condition.type_.as_str(),
                condition.status.as_str(),
                condition.reason.as_str()
            ),
            (CONTENT_CONDITION, "True", REGISTRY_POD)
        );
        assert_eq!(
            condition.message,
            "served by a registry pod, whose image the kubelet pulls with the node's mirrors and \
             credentials: olm-rs could not pull reg:5000/cat:v1 itself (Unreachable: connection \
             refused); serving it in-process is tried again at 1970-01-01T00:05:00Z"
        );
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].reason, FELL_BACK_EVENT);
        assert_eq!(events[0].message, condition.message);

        events.clear();
        mark_status(&mut status, Some(&f), Some(2), at(20), &mut events);
        assert!(events.is_empty(), "no second event while it stays so");

        mark_status(&mut status, None, Some(2), at(30), &mut events);
        assert_eq!(status.conditions, None, "pod mode by choice says nothing");
    }
}

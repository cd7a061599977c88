//! Which Subscriptions a CRD change may free from a refusal (docs/upgrades.md §2, §3): a
//! downgrade refused (`VersionHeld`, reason `DowngradeRefused`) or a rollback refused
//! (`RolledBack=False`, reason `RollbackRefused`) because of a version the cluster's CRD no
//! longer serves, or still stores. Both are decided again at the Subscription's next sync; a
//! change to the CRD the refusal names (a served version coming back, a stored version
//! migrated away) queues that sync instead of waiting for the periodic resync.

use crate::api::{ConditionStatus, Subscription, SubscriptionConditionType};

use super::rollback::reason::ROLLBACK_REFUSED;
use super::version_request::reason::DOWNGRADE_REFUSED;

/// Whether `sub` holds a downgrade or rollback refusal that names the CRD `crd` (the words
/// of `plan::downgrade_safety::DowngradeRefused`: "… CRD <name> …").
pub fn refused_for_crd(sub: &Subscription, crd: &str) -> bool {
    let named = format!("CRD {crd} ");
    sub.status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .any(|c| {
            let refusal = if c.type_ == SubscriptionConditionType::VersionHeld {
                c.reason.as_deref() == Some(DOWNGRADE_REFUSED)
            } else if c.type_ == SubscriptionConditionType::RolledBack {
                c.status == ConditionStatus::False && c.reason.as_deref() == Some(ROLLBACK_REFUSED)
            } else {
                false
            };
            refusal && c.message.as_deref().is_some_and(|m| m.contains(&named))
        })
}

/// The namespaces (each once, sorted) of the `subscriptions` a change of CRD `crd` may free.
pub fn namespaces_to_recheck<'a>(
    subscriptions: impl IntoIterator<Item = &'a Subscription>,
    crd: &str,
) -> Vec<String> {
    let mut out: Vec<String> = subscriptions
        .into_iter()
        .filter(|s| refused_for_crd(s, crd))
        .filter_map(|s| s.metadata.namespace.clone())
        .collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn sub(namespace: &str, condition: Option<(&str, &str, &str, &str)>) -> Subscription {
        let conditions: Vec<_> = condition
            .into_iter()
            .map(|(type_, status, reason, message)| {
                json!({"type": type_, "status": status, "reason": reason, "message": message})
            })
            .collect();
        serde_json::from_value(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
            "metadata": {"name": "s", "namespace": namespace},
            "spec": {"source": "c", "sourceNamespace": "olm", "name": "widget"},
            "status": {"lastUpdated": "1970-01-01T00:00:00Z", "conditions": conditions},
        }))
        .unwrap()
    }

    const NOT_SERVED: &str = "downgrade to w.v1.0.0 refused: it owns CRD widgets.example.com at version v1alpha1, which the cluster's CRD no longer serves (served: v1); nothing was changed";
    const STORED: &str = "upgrade to w.v2.0.0 (version 2.0.0) failed (InstallCheckFailed: x); rollback to w.v1.0.0 (version 1.0.0) refused: downgrade to w.v1.0.0 refused: its CRD widgets.example.com has no version v2, which is still in the cluster CRD's status.storedVersions, so objects stored at v2 would be lost; nothing was changed";

    #[test]
    fn a_crd_change_rechecks_the_refusals_that_name_it() {
        let table = [
            (
                Some(("VersionHeld", "True", "DowngradeRefused", NOT_SERVED)),
                "widgets.example.com",
                true,
            ),
            (
                Some(("RolledBack", "False", "RollbackRefused", STORED)),
                "widgets.example.com",
                true,
            ),
            // Another CRD, even one whose name ends the same, frees nothing.
            (
                Some(("VersionHeld", "True", "DowngradeRefused", NOT_SERVED)),
                "gadgets.example.com",
                false,
            ),
            (
                Some(("VersionHeld", "True", "DowngradeRefused", NOT_SERVED)),
                "example.com",
                false,
            ),
            // A hold that is no refusal, a rollback that happened: nothing to re-check.
            (
                Some((
                    "VersionHeld",
                    "True",
                    "NewerVersionOutsideRange",
                    NOT_SERVED,
                )),
                "widgets.example.com",
                false,
            ),
            (
                Some(("RolledBack", "True", "InstallCheckFailed", STORED)),
                "widgets.example.com",
                false,
            ),
            (None, "widgets.example.com", false),
        ];
        for (condition, crd, want) in table {
            assert_eq!(
                refused_for_crd(&sub("ns", condition), crd),
                want,
                "{condition:?} {crd}"
            );
        }
    }

    #[test]
    fn each_namespace_is_queued_once() {
        let refused = Some(("VersionHeld", "True", "DowngradeRefused", NOT_SERVED));
        let subs = [
            sub("b", refused),
            sub("a", refused),
            sub("b", refused),
            sub("c", None),
        ];
        assert_eq!(
            namespaces_to_recheck(&subs, "widgets.example.com"),
            ["a", "b"]
        );
    }
}

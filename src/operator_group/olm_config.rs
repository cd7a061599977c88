//! The `DisabledCopiedCSVs` condition of OLMConfig `cluster` (docs/operator-groups.md §10 "Disabling").

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::olm_config::{
    CONDITION_DISABLED_COPIED_CSVS, REASON_COPIED_CSVS_DISABLED, REASON_COPIED_CSVS_ENABLED,
};
use crate::api::{ConditionStatus, MetaCondition, meta_condition};

/// Reason of the Warning event kept on an all-namespaces CSV while copying is disabled.
pub const DISABLED_COPIED_CSVS_EVENT_REASON: &str = "DisabledCopiedCSVs";

/// Message of that event.
pub fn disabled_event_message(namespace: &str, name: &str) -> String {
    format!("CSV copying disabled for {namespace}/{name}")
}

/// What the copy planner found across all-namespace operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyCensus {
    pub disabled: bool,
    /// Copies of all-namespace operators that should not exist (disabled) still do.
    pub unexpected_copies: bool,
    /// Copies that should exist (enabled) are missing.
    pub missing_copies: bool,
}

/// The condition OLM writes for `census`.
pub fn disabled_copied_csvs_condition(
    census: CopyCensus,
    generation: Option<i64>,
    now: &Time,
) -> MetaCondition {
    let (status, reason, message) = match census {
        CopyCensus {
            disabled: true,
            unexpected_copies: false,
            ..
        } => (
            ConditionStatus::True,
            REASON_COPIED_CSVS_DISABLED,
            "Copied CSVs are disabled and no unexpected copied CSVs were found for operators installed in AllNamespace mode",
        ),
        CopyCensus { disabled: true, .. } => (
            ConditionStatus::False,
            REASON_COPIED_CSVS_DISABLED,
            "Copied CSVs are disabled and at least one unexpected copied CSV was found for an operator installed in AllNamespace mode",
        ),
        CopyCensus {
            missing_copies: false,
            ..
        } => (
            ConditionStatus::False,
            REASON_COPIED_CSVS_ENABLED,
            "Copied CSVs are enabled and present across the cluster",
        ),
        CopyCensus { .. } => (
            ConditionStatus::False,
            REASON_COPIED_CSVS_ENABLED,
            "Copied CSVs are enabled and at least one copied CSVs is missing",
        ),
    };
    meta_condition(
        CONDITION_DISABLED_COPIED_CSVS,
        status,
        reason,
        message,
        generation,
        now,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Time {
        Time(jiff::Timestamp::UNIX_EPOCH)
    }

    fn census(disabled: bool, unexpected: bool, missing: bool) -> CopyCensus {
        CopyCensus {
            disabled,
            unexpected_copies: unexpected,
            missing_copies: missing,
        }
    }

    #[test]
    fn four_states() {
        let c = disabled_copied_csvs_condition(census(true, false, false), Some(2), &now());
        assert_eq!(
            (c.type_.as_str(), c.status.as_str(), c.reason.as_str()),
            ("DisabledCopiedCSVs", "True", "CopiedCSVsDisabled")
        );
        assert_eq!(c.observed_generation, Some(2));
        let c = disabled_copied_csvs_condition(census(true, true, false), None, &now());
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("False", "CopiedCSVsDisabled")
        );
        assert!(c.message.contains("at least one unexpected copied CSV"));
        let c = disabled_copied_csvs_condition(census(false, false, false), None, &now());
        assert_eq!(
            c.message,
            "Copied CSVs are enabled and present across the cluster"
        );
        assert_eq!(c.reason, "CopiedCSVsEnabled");
        let c = disabled_copied_csvs_condition(census(false, false, true), None, &now());
        assert_eq!(
            c.message,
            "Copied CSVs are enabled and at least one copied CSVs is missing"
        );
        assert_eq!(
            disabled_event_message("ops", "op.v1"),
            "CSV copying disabled for ops/op.v1"
        );
    }
}

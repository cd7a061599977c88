//! ClusterServiceVersion status: phases, reasons, requirement results and the phase history
//! (docs/api-types.md §2.4, docs/csv-phases.md §4).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::string_enum::string_enum;

/// Most `status.conditions` entries kept; the oldest are dropped (docs/api-types.md §2.4).
pub const CSV_CONDITIONS_LIMIT: usize = 20;

string_enum! {
    /// `status.phase`. `None` (`""`) means never processed; `Unknown` is declared by OLM but
    /// never set.
    pub enum CsvPhase (schema: open) {
        None = "",
        Pending = "Pending",
        InstallReady = "InstallReady",
        Installing = "Installing",
        Succeeded = "Succeeded",
        Failed = "Failed",
        Unknown = "Unknown",
        Replacing = "Replacing",
        Deleting = "Deleting",
    }
}

string_enum! {
    /// `status.reason` (and `status.conditions[].reason`).
    pub enum CsvReason (schema: open) {
        RequirementsUnknown = "RequirementsUnknown",
        RequirementsNotMet = "RequirementsNotMet",
        AllRequirementsMet = "AllRequirementsMet",
        OwnerConflict = "OwnerConflict",
        InstallComponentFailed = "InstallComponentFailed",
        InstallComponentFailedNoRetry = "InstallComponentFailedNoRetry",
        InvalidInstallStrategy = "InvalidInstallStrategy",
        InstallWaiting = "InstallWaiting",
        InstallSucceeded = "InstallSucceeded",
        InstallCheckFailed = "InstallCheckFailed",
        ComponentUnhealthy = "ComponentUnhealthy",
        BeingReplaced = "BeingReplaced",
        Replaced = "Replaced",
        NeedsReinstall = "NeedsReinstall",
        NeedsCertRotation = "NeedsCertRotation",
        ApiServiceResourceIssue = "APIServiceResourceIssue",
        ApiServiceResourcesNeedReinstall = "APIServiceResourcesNeedReinstall",
        ApiServiceInstallFailed = "APIServiceInstallFailed",
        Copied = "Copied",
        InvalidInstallModes = "InvalidInstallModes",
        NoTargetNamespaces = "NoTargetNamespaces",
        UnsupportedOperatorGroup = "UnsupportedOperatorGroup",
        NoOperatorGroup = "NoOperatorGroup",
        TooManyOperatorGroups = "TooManyOperatorGroups",
        InterOperatorGroupOwnerConflict = "InterOperatorGroupOwnerConflict",
        CannotModifyStaticOperatorGroupProvidedApis = "CannotModifyStaticOperatorGroupProvidedAPIs",
        DetectedClusterChange = "DetectedClusterChange",
        InvalidWebhookDescription = "InvalidWebhookDescription",
        OperatorConditionNotUpgradeable = "OperatorConditionNotUpgradeable",
        WaitingOnCleanup = "WaitingOnCleanup",
    }
}

string_enum! {
    /// `requirementStatus[].status` and `dependents[].status`. `DeploymentFound` /
    /// `DeploymentNotFound` are the non-enum strings OLM writes for owned APIServices.
    pub enum RequirementStatusReason (schema: open) {
        Present = "Present",
        NotPresent = "NotPresent",
        PresentNotSatisfied = "PresentNotSatisfied",
        PresentNotAvailable = "PresentNotAvailable",
        DeploymentFound = "DeploymentFound",
        DeploymentNotFound = "DeploymentNotFound",
        Satisfied = "Satisfied",
        NotSatisfied = "NotSatisfied",
    }
}

/// ClusterServiceVersionStatus; written only by OLM.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterServiceVersionStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<CsvPhase>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<CsvReason>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Set on every recorded status change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    /// Set when `phase` changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// History of (phase, reason) changes, newest last, at most 20.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<CsvCondition>>,
    /// Result of the last requirements check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requirement_status: Option<Vec<RequirementStatus>>,
    /// When serving certificates were last (re)generated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certs_last_updated: Option<Time>,
    /// When the next certificate rotation is planned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certs_rotate_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleanup: Option<CleanupStatus>,
}

/// One entry of the CSV's phase history.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CsvCondition {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<CsvPhase>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<CsvReason>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}

/// Result of checking one requirement (a CRD, APIService, ServiceAccount, ...).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RequirementStatus {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub status: RequirementStatusReason,
    /// Always written, possibly empty.
    #[serde(default)]
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dependents: Option<Vec<DependentStatus>>,
}

/// Status of a dependent requirement (one PolicyRule of a ServiceAccount).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DependentStatus {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub status: RequirementStatusReason,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Declared by OLM for "delete operands on uninstall"; not written by current OLM.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CleanupStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_deletion: Option<Vec<ResourceList>>,
}

/// Custom resources of one group/kind that block deletion.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ResourceList {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub instances: Vec<ResourceInstance>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ResourceInstance {
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

impl ClusterServiceVersionStatus {
    /// The phase, `CsvPhase::None` when absent.
    pub fn phase(&self) -> CsvPhase {
        self.phase.clone().unwrap_or(CsvPhase::None)
    }

    /// Records a phase/reason/message the way OLM does ("set if changed", docs/csv-phases.md §4): nothing
    /// happens when all three are unchanged (returns `false`). Otherwise `lastUpdateTime` = now,
    /// `lastTransitionTime` = now if the phase changed, and a history entry is appended when the
    /// last entry's phase or reason differs (a message-only change adds none); the history is
    /// trimmed to the newest [`CSV_CONDITIONS_LIMIT`].
    pub fn record_phase(
        &mut self,
        phase: CsvPhase,
        reason: CsvReason,
        message: &str,
        now: &Time,
    ) -> bool {
        if self.phase() == phase
            && self.reason.as_ref() == Some(&reason)
            && self.message.as_deref().unwrap_or_default() == message
        {
            return false;
        }
        if self.phase() != phase {
            self.phase = Some(phase);
            self.last_transition_time = Some(now.clone());
        }
        self.last_update_time = Some(now.clone());
        self.reason = Some(reason);
        self.message = Some(message.to_owned());

        let history = self.conditions.get_or_insert_with(Vec::new);
        let differs = history
            .last()
            .is_none_or(|last| last.phase != self.phase || last.reason != self.reason);
        if differs {
            history.push(CsvCondition {
                phase: self.phase.clone(),
                reason: self.reason.clone(),
                message: self.message.clone(),
                last_update_time: self.last_update_time.clone(),
                last_transition_time: self.last_transition_time.clone(),
            });
        }
        if history.len() > CSV_CONDITIONS_LIMIT {
            history.drain(..history.len() - CSV_CONDITIONS_LIMIT);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Time {
        Time(jiff::Timestamp::from_second(seconds).unwrap())
    }

    #[test]
    fn record_phase_tracks_transitions_and_history() {
        let mut status = ClusterServiceVersionStatus::default();
        assert!(status.record_phase(
            CsvPhase::Pending,
            CsvReason::RequirementsUnknown,
            "first",
            &at(1)
        ));
        assert!(!status.record_phase(
            CsvPhase::Pending,
            CsvReason::RequirementsUnknown,
            "first",
            &at(2)
        ));
        assert_eq!(
            status.last_update_time,
            Some(at(1)),
            "unchanged status is not rewritten"
        );

        // Message-only change: bumps lastUpdateTime, keeps transition time, no new history entry.
        assert!(status.record_phase(
            CsvPhase::Pending,
            CsvReason::RequirementsUnknown,
            "second",
            &at(3)
        ));
        assert_eq!(status.last_update_time, Some(at(3)));
        assert_eq!(status.last_transition_time, Some(at(1)));
        assert_eq!(status.conditions.as_ref().unwrap().len(), 1);

        // Reason change within the same phase: new history entry, same transition time.
        status.record_phase(
            CsvPhase::Pending,
            CsvReason::RequirementsNotMet,
            "x",
            &at(4),
        );
        assert_eq!(status.conditions.as_ref().unwrap().len(), 2);
        assert_eq!(status.last_transition_time, Some(at(1)));

        status.record_phase(
            CsvPhase::Succeeded,
            CsvReason::InstallSucceeded,
            "ok",
            &at(5),
        );
        assert_eq!(status.last_transition_time, Some(at(5)));
        let last = status.conditions.as_ref().unwrap().last().unwrap().clone();
        assert_eq!(last.phase, Some(CsvPhase::Succeeded));
        assert_eq!(last.last_transition_time, Some(at(5)));
    }

    #[test]
    fn history_keeps_the_newest_twenty() {
        let mut status = ClusterServiceVersionStatus::default();
        for i in 0..30 {
            let reason = if i % 2 == 0 {
                CsvReason::InstallWaiting
            } else {
                CsvReason::InstallSucceeded
            };
            status.record_phase(CsvPhase::Installing, reason, &format!("{i}"), &at(i));
        }
        let history = status.conditions.unwrap();
        assert_eq!(history.len(), CSV_CONDITIONS_LIMIT);
        assert_eq!(history.last().unwrap().message.as_deref(), Some("29"));
        assert_eq!(history.first().unwrap().message.as_deref(), Some("10"));
    }

    #[test]
    fn empty_phase_is_none() {
        let status: ClusterServiceVersionStatus = serde_json::from_str(r#"{"phase": ""}"#).unwrap();
        assert_eq!(status.phase(), CsvPhase::None);
    }
}

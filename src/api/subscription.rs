//! Subscription (`operators.coreos.com/v1alpha1`): docs/api-types.md §4.2,
//! docs/install-plans.md §1–§3.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, EnvFromSource, EnvVar, ObjectReference, ResourceRequirements, Toleration, Volume,
    VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::conditions::{ConditionStatus, StatusCondition};
use super::string_enum::string_enum;

string_enum! {
    /// Approval policy: `spec.installPlanApproval` of a Subscription, `spec.approval` of an
    /// InstallPlan.
    pub enum Approval (schema: open) {
        Automatic = "Automatic",
        Manual = "Manual",
    }
}

/// SubscriptionSpec defines an Application that can be installed.
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "operators.coreos.com",
    version = "v1alpha1",
    kind = "Subscription",
    plural = "subscriptions",
    singular = "subscription",
    namespaced,
    status = "SubscriptionStatus",
    derive = "PartialEq",
    shortname = "sub",
    shortname = "subs",
    category = "olm",
    printcolumn = r#"{"name": "Package", "type": "string", "jsonPath": ".spec.name", "description": "The package subscribed to"}"#,
    printcolumn = r#"{"name": "Source", "type": "string", "jsonPath": ".spec.source", "description": "The catalog source for the specified package"}"#,
    printcolumn = r#"{"name": "Channel", "type": "string", "jsonPath": ".spec.channel", "description": "The channel of updates to subscribe to"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionSpec {
    /// Name of the CatalogSource.
    #[serde(default)]
    pub source: String,
    /// Namespace of the CatalogSource.
    #[serde(default)]
    pub source_namespace: String,
    /// Package name.
    #[serde(default)]
    pub name: String,
    /// Channel; empty means the package's default channel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    /// CSV to install first when nothing is installed yet.
    #[serde(
        rename = "startingCSV",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub starting_csv: Option<String>,
    /// Manual or Automatic; anything but the exact string Manual behaves as Automatic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_plan_approval: Option<Approval>,
    /// Overrides for the operator's Deployments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<SubscriptionConfig>,
}

impl SubscriptionSpec {
    /// The approval OLM applies: `Manual` only for the exact string, else `Automatic`.
    pub fn effective_approval(&self) -> Approval {
        match self.install_plan_approval {
            Some(Approval::Manual) => Approval::Manual,
            _ => Approval::Automatic,
        }
    }
}

/// Configuration injected into the operator's Deployments.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionConfig {
    /// Accepted and stored; not used by OLM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerations: Option<Vec<Toleration>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_from: Option<Vec<EnvFromSource>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<Vec<EnvVar>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volumes: Option<Vec<Volume>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_mounts: Option<Vec<VolumeMount>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

string_enum! {
    /// `status.state`.
    pub enum SubscriptionState (schema: open) {
        None = "",
        /// Declared by OLM, never set.
        UpgradeAvailable = "UpgradeAvailable",
        UpgradePending = "UpgradePending",
        AtLatestKnown = "AtLatestKnown",
        /// OLM's Go constant is named "Failed"; the value is `UpgradeFailed`.
        UpgradeFailed = "UpgradeFailed",
    }
}

string_enum! {
    /// `status.conditions[].type`.
    pub enum SubscriptionConditionType (schema: open) {
        CatalogSourcesUnhealthy = "CatalogSourcesUnhealthy",
        InstallPlanMissing = "InstallPlanMissing",
        InstallPlanPending = "InstallPlanPending",
        InstallPlanFailed = "InstallPlanFailed",
        ResolutionFailed = "ResolutionFailed",
        BundleUnpacking = "BundleUnpacking",
        BundleUnpackFailed = "BundleUnpackFailed",
        Deprecated = "Deprecated",
        PackageDeprecated = "PackageDeprecated",
        ChannelDeprecated = "ChannelDeprecated",
        BundleDeprecated = "BundleDeprecated",
        /// olm-rs: the `olm-rs.io/version` range holds the Subscription where it is
        /// (docs/upgrades.md).
        VersionHeld = "VersionHeld",
        /// olm-rs: a failed upgrade was rolled back (`True`), or the rollback was refused
        /// (`False`) (docs/upgrades.md §3).
        RolledBack = "RolledBack",
    }
}

/// Reasons used on Subscription conditions (a free string on the wire: OLM also copies
/// InstallPlan phases and InstallPlan condition reasons into it).
pub mod reason {
    pub const NO_CATALOG_SOURCES_FOUND: &str = "NoCatalogSourcesFound";
    pub const ALL_CATALOG_SOURCES_HEALTHY: &str = "AllCatalogSourcesHealthy";
    pub const CATALOG_SOURCES_ADDED: &str = "CatalogSourcesAdded";
    pub const CATALOG_SOURCES_UPDATED: &str = "CatalogSourcesUpdated";
    pub const CATALOG_SOURCES_DELETED: &str = "CatalogSourcesDeleted";
    pub const UNHEALTHY_CATALOG_SOURCE_FOUND: &str = "UnhealthyCatalogSourceFound";
    pub const REFERENCED_INSTALL_PLAN_NOT_FOUND: &str = "ReferencedInstallPlanNotFound";
    pub const INSTALL_PLAN_NOT_YET_RECONCILED: &str = "InstallPlanNotYetReconciled";
    pub const INSTALL_PLAN_FAILED: &str = "InstallPlanFailed";
    pub const CONSTRAINTS_NOT_SATISFIABLE: &str = "ConstraintsNotSatisfiable";
    pub const ERROR_PREVENTED_RESOLUTION: &str = "ErrorPreventedResolution";
    pub const UNPACKING_IN_PROGRESS: &str = "UnpackingInProgress";
    pub const BUNDLE_UNPACK_FAILED: &str = "BundleUnpackFailed";
    pub const ERROR_PREVENTED_UNPACKING: &str = "ErrorPreventedUnpacking";
    pub const ENSURE_INSTALL_PLAN_FAILED: &str = "EnsureInstallPlanFailed";
    /// Declared for `status.reason`, never written by OLM.
    pub const INVALID_CATALOG: &str = "InvalidCatalog";
    /// Declared for `status.reason`, never written by OLM.
    pub const UPGRADE_SUCCEEDED: &str = "UpgradeSucceeded";
}

/// SubscriptionStatus; `lastUpdated` is required by the schema.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionStatus {
    /// The CSV the Subscription is moving to / last resolved to.
    #[serde(
        rename = "currentCSV",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub current_csv: Option<String>,
    /// The CSV that exists on cluster for this Subscription.
    #[serde(
        rename = "installedCSV",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub installed_csv: Option<String>,
    /// Deprecated duplicate of installPlanRef.
    #[serde(
        rename = "installplan",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub install_plan: Option<InstallPlanReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<SubscriptionState>,
    /// Declared; not written by OLM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// spec.generation of the referenced InstallPlan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_plan_generation: Option<i64>,
    /// Latest InstallPlan containing currentCSV.
    #[serde(
        rename = "installPlanRef",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub install_plan_ref: Option<ObjectReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog_health: Option<Vec<SubscriptionCatalogHealth>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<SubscriptionCondition>>,
    /// Bumped on every status change.
    pub last_updated: Time,
}

impl SubscriptionStatus {
    /// An empty status stamped with `now`.
    pub fn new(now: Time) -> Self {
        Self {
            current_csv: None,
            installed_csv: None,
            install_plan: None,
            state: None,
            reason: None,
            install_plan_generation: None,
            install_plan_ref: None,
            catalog_health: None,
            conditions: None,
            last_updated: now,
        }
    }

    /// The state, `SubscriptionState::None` when absent.
    pub fn state(&self) -> SubscriptionState {
        self.state.clone().unwrap_or(SubscriptionState::None)
    }
}

/// Deprecated reference to an InstallPlan (note the key `uuid`, not `uid`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstallPlanReference {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub uuid: String,
}

/// A Subscription's view of one CatalogSource's health.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionCatalogHealth {
    #[serde(default)]
    pub catalog_source_ref: ObjectReference,
    pub last_updated: Time,
    #[serde(default)]
    pub healthy: bool,
}

/// SubscriptionCondition (not metav1.Condition: it has `lastHeartbeatTime` and no
/// `observedGeneration`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionCondition {
    #[serde(rename = "type")]
    #[serde(default)]
    pub type_: SubscriptionConditionType,
    #[serde(default)]
    pub status: ConditionStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_heartbeat_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}

impl SubscriptionCondition {
    /// A condition without times (they are set by `set_condition`); empty reason/message are
    /// left out.
    pub fn new(
        type_: SubscriptionConditionType,
        status: ConditionStatus,
        reason: &str,
        message: &str,
    ) -> Self {
        let non_empty = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        Self {
            type_,
            status,
            reason: non_empty(reason),
            message: non_empty(message),
            last_heartbeat_time: None,
            last_transition_time: None,
        }
    }
}

impl StatusCondition for SubscriptionCondition {
    fn condition_type(&self) -> &str {
        self.type_.as_str()
    }
    fn status(&self) -> &str {
        self.status.as_str()
    }
    fn reason(&self) -> &str {
        self.reason.as_deref().unwrap_or_default()
    }
    fn message(&self) -> &str {
        self.message.as_deref().unwrap_or_default()
    }
    fn last_transition_time(&self) -> Option<&Time> {
        self.last_transition_time.as_ref()
    }
    fn set_last_transition_time(&mut self, time: Option<Time>) {
        self.last_transition_time = time;
    }
    fn set_last_update_time(&mut self, time: Time) {
        self.last_heartbeat_time = Some(time);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::conditions::set_condition;

    #[test]
    fn only_exact_manual_is_manual() {
        let spec = |approval: Option<&str>| SubscriptionSpec {
            source: "s".into(),
            source_namespace: "ns".into(),
            name: "p".into(),
            channel: None,
            starting_csv: None,
            install_plan_approval: approval.map(Approval::from),
            config: None,
        };
        assert_eq!(spec(Some("Manual")).effective_approval(), Approval::Manual);
        assert_eq!(
            spec(Some("manual")).effective_approval(),
            Approval::Automatic
        );
        assert_eq!(spec(None).effective_approval(), Approval::Automatic);
    }

    #[test]
    fn status_wire_names_are_olms() {
        let status: SubscriptionStatus = serde_json::from_value(serde_json::json!({
            "currentCSV": "a.v1", "installedCSV": "a.v1", "state": "AtLatestKnown",
            "installplan": {"apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan", "name": "install-x", "uuid": "u"},
            "installPlanRef": {"name": "install-x", "namespace": "ns"},
            "installPlanGeneration": 2,
            "lastUpdated": "2025-01-01T00:00:00Z"
        }))
        .unwrap();
        assert_eq!(status.state(), SubscriptionState::AtLatestKnown);
        assert_eq!(status.install_plan.as_ref().unwrap().uuid, "u");
        let back = serde_json::to_value(&status).unwrap();
        assert_eq!(back["installplan"]["uuid"], "u");
        assert_eq!(back["lastUpdated"], "2025-01-01T00:00:00Z");
    }

    #[test]
    fn subscription_conditions_use_heartbeat_as_update_time() {
        let now = Time(jiff::Timestamp::from_second(100).unwrap());
        let mut list = Vec::new();
        let c = SubscriptionCondition::new(
            SubscriptionConditionType::CatalogSourcesUnhealthy,
            ConditionStatus::False,
            reason::ALL_CATALOG_SOURCES_HEALTHY,
            "all available catalogsources are healthy",
        );
        assert!(set_condition(&mut list, c, &now));
        assert_eq!(list[0].last_heartbeat_time, Some(now.clone()));
        assert_eq!(list[0].last_transition_time, Some(now));
    }
}

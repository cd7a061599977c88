//! InstallPlan (`operators.coreos.com/v1alpha1`): docs/api-types.md §4.3.

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::conditions::{ConditionStatus, StatusCondition};
use super::string_enum::string_enum;
use super::subscription::Approval;

/// InstallPlanSpec defines a set of Application resources to be installed.
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "operators.coreos.com",
    version = "v1alpha1",
    kind = "InstallPlan",
    plural = "installplans",
    singular = "installplan",
    namespaced,
    status = "InstallPlanStatus",
    derive = "PartialEq",
    shortname = "ip",
    category = "olm",
    printcolumn = r#"{"name": "CSV", "type": "string", "jsonPath": ".spec.clusterServiceVersionNames[0]", "description": "The first CSV in the list of clusterServiceVersionNames"}"#,
    printcolumn = r#"{"name": "Approval", "type": "string", "jsonPath": ".spec.approval", "description": "The approval mode"}"#,
    printcolumn = r#"{"name": "Approved", "type": "boolean", "jsonPath": ".spec.approved"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct InstallPlanSpec {
    /// Legacy; not set by current OLM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Legacy; not set by current OLM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_namespace: Option<String>,
    /// Names of the CSV steps, in step order.
    #[serde(default)]
    pub cluster_service_version_names: Vec<String>,
    /// Automatic or Manual.
    #[serde(default)]
    pub approval: Approval,
    /// Whether the plan may run; flipped by the user for Manual plans.
    #[serde(default)]
    pub approved: bool,
    /// Monotonic per-namespace counter (not metadata.generation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
}

string_enum! {
    /// `status.phase`. `Planning` is declared by OLM but never entered.
    pub enum InstallPlanPhase (schema: open) {
        None = "",
        Planning = "Planning",
        RequiresApproval = "RequiresApproval",
        Installing = "Installing",
        Complete = "Complete",
        Failed = "Failed",
    }
}

string_enum! {
    /// `status.conditions[].type`. `Resolved` is declared, unused.
    pub enum InstallPlanConditionType (schema: open) {
        Resolved = "Resolved",
        Installed = "Installed",
    }
}

string_enum! {
    /// `status.conditions[].reason`. When an InstallCheckFailed condition is cleared OLM writes
    /// `Unknown` (kept as `Other`).
    pub enum InstallPlanConditionReason (schema: open) {
        PlanUnknown = "PlanUnknown",
        InstallCheckFailed = "InstallCheckFailed",
        DependenciesConflict = "DependenciesConflict",
        InstallComponentFailed = "InstallComponentFailed",
    }
}

string_enum! {
    /// `status.plan[].status` (note `WaitingForApi`, not "API").
    pub enum StepStatus (schema: open) {
        Unknown = "Unknown",
        NotPresent = "NotPresent",
        Present = "Present",
        Created = "Created",
        /// Declared, unused.
        NotCreated = "NotCreated",
        WaitingForApi = "WaitingForApi",
        UnsupportedResource = "UnsupportedResource",
    }
}

string_enum! {
    /// `status.bundleLookups[].conditions[].type`.
    pub enum BundleLookupConditionType (schema: open) {
        BundleLookupPending = "BundleLookupPending",
        BundleLookupFailed = "BundleLookupFailed",
        /// Internal to OLM.
        BundleLookupNotPersisted = "BundleLookupNotPersisted",
    }
}

/// Reasons on bundle lookup conditions (a free string: Job failure reasons such as
/// `DeadlineExceeded` are copied verbatim).
pub mod bundle_lookup_reason {
    pub const JOB_NOT_STARTED: &str = "JobNotStarted";
    pub const JOB_INCOMPLETE: &str = "JobIncomplete";
    pub const JOB_FAILED: &str = "JobFailed";
    pub const CATALOG_SOURCE_MISSING: &str = "CatalogSourceMissing";
    pub const BUNDLE_NOT_UNPACKED: &str = "BundleNotUnpacked";
    /// olm-rs pulls bundle images itself (no Jobs); these say where the pull stands.
    pub const PULL_NOT_STARTED: &str = "PullNotStarted";
    /// A transient failure (registry unreachable, timeout): retried with backoff.
    pub const PULL_RETRYING: &str = "PullRetrying";
    /// The unpack deadline passed (OLM's Job reason for the same thing).
    pub const DEADLINE_EXCEEDED: &str = "DeadlineExceeded";
    pub const UNAUTHORIZED: &str = "ImagePullUnauthorized";
    pub const IMAGE_NOT_FOUND: &str = "ImageNotFound";
    pub const REGISTRY_UNREACHABLE: &str = "RegistryUnreachable";
    pub const INVALID_BUNDLE_CONTENT: &str = "InvalidBundleContent";
    pub const IMAGE_BLOCKED: &str = "ImageBlocked";
    /// The image policy refused the bundle image (docs/image-signatures.md §6).
    pub const IMAGE_POLICY_REFUSED: &str = "ImagePolicyRefused";
    /// Anything else the pull reported.
    pub const PULL_FAILED: &str = "PullFailed";
}

/// InstallPlanStatus; `phase` and `catalogSources` are required by the schema.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstallPlanStatus {
    #[serde(default)]
    pub phase: InstallPlanPhase,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<InstallPlanCondition>>,
    /// Distinct CatalogSource names (no namespaces) referenced by steps.
    #[serde(default)]
    pub catalog_sources: Vec<String>,
    /// Ordered steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<Vec<Step>>,
    /// Bundles resolved by image reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bundle_lookups: Option<Vec<BundleLookup>>,
    /// ServiceAccount from the namespace's OperatorGroup spec.serviceAccountName.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attenuated_service_account_ref: Option<ObjectReference>,
    /// First time execution started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// InstallPlanCondition: every field is optional on the wire.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstallPlanCondition {
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<InstallPlanConditionType>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ConditionStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<InstallPlanConditionReason>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl StatusCondition for InstallPlanCondition {
    fn condition_type(&self) -> &str {
        self.type_
            .as_ref()
            .map(InstallPlanConditionType::as_str)
            .unwrap_or_default()
    }
    fn status(&self) -> &str {
        self.status
            .as_ref()
            .map(ConditionStatus::as_str)
            .unwrap_or_default()
    }
    fn reason(&self) -> &str {
        self.reason
            .as_ref()
            .map(InstallPlanConditionReason::as_str)
            .unwrap_or_default()
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
        self.last_update_time = Some(time);
    }
}

/// One resource of the plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Step {
    /// Name of the CSV the step belongs to.
    #[serde(default)]
    pub resolving: String,
    #[serde(default)]
    pub resource: StepResource,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,
    #[serde(default)]
    pub status: StepStatus,
}

/// The object a step creates.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepResource {
    #[serde(default)]
    pub source_name: String,
    #[serde(default)]
    pub source_namespace: String,
    /// `""` for core kinds.
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub name: String,
    /// Full JSON of the object, or a JSON reference to an unpacked-bundle ConfigMap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<String>,
}

/// A request to pull and unpack a bundle.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BundleLookup {
    /// Bundle image reference.
    #[serde(default)]
    pub path: String,
    /// CSV name.
    #[serde(default)]
    pub identifier: String,
    /// CSV being replaced (may be empty).
    #[serde(default)]
    pub replaces: String,
    #[serde(default)]
    pub catalog_source_ref: ObjectReference,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<BundleLookupCondition>>,
    /// JSON `{"properties":[…]}` of the bundle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BundleLookupCondition {
    #[serde(rename = "type")]
    #[serde(default)]
    pub type_: BundleLookupConditionType,
    #[serde(default)]
    pub status: ConditionStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}

impl StatusCondition for BundleLookupCondition {
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
        self.last_update_time = Some(time);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_status_spelling_round_trips() {
        let step: Step = serde_json::from_value(serde_json::json!({
            "resolving": "a.v1",
            "resource": {"sourceName": "cat", "sourceNamespace": "olm", "group": "", "version": "v1",
                          "kind": "ServiceAccount", "name": "sa"},
            "status": "WaitingForApi"
        }))
        .unwrap();
        assert_eq!(step.status, StepStatus::WaitingForApi);
        let status = InstallPlanStatus {
            plan: Some(vec![step]),
            ..Default::default()
        };
        let back = serde_json::to_value(&status).unwrap();
        assert_eq!(back["plan"][0]["status"], "WaitingForApi");
        assert_eq!(back["phase"], "", "phase is always written (required)");
        assert_eq!(back["catalogSources"], serde_json::json!([]));
    }
}

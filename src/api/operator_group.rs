//! OperatorGroup: `operators.coreos.com/v1` (storage) and the deprecated `v1alpha2`
//! (docs/api-types.md §3). olm-rs reads and watches v1; v1alpha2 is served for old clients.

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::conditions::MetaCondition;
use super::resource::root_with_optional_spec;
use super::string_enum::string_enum;

/// Condition type set while more than one OperatorGroup exists in the namespace.
pub const CONDITION_MULTIPLE_OPERATOR_GROUPS: &str = "MultipleOperatorGroup";
/// Reason of [`CONDITION_MULTIPLE_OPERATOR_GROUPS`].
pub const REASON_MULTIPLE_OPERATOR_GROUPS_FOUND: &str = "MultipleOperatorGroupsFound";
/// Message of [`CONDITION_MULTIPLE_OPERATOR_GROUPS`].
pub const MESSAGE_MULTIPLE_OPERATOR_GROUPS: &str =
    "Multiple OperatorGroup found in the same namespace";
/// Condition type set while `spec.serviceAccountName` names a missing ServiceAccount.
pub const CONDITION_SERVICE_ACCOUNT: &str = "OperatorGroupServiceAccount";
/// Reason of [`CONDITION_SERVICE_ACCOUNT`] (message: `ServiceAccount <name> not found`).
pub const REASON_SERVICE_ACCOUNT_NOT_FOUND: &str = "ServiceAccountNotFound";

string_enum! {
    /// `spec.upgradeStrategy` (the v1 CRD enforces this list; the controller treats anything
    /// else as `Default`).
    pub enum UpgradeStrategy (schema: closed) {
        Default = "Default",
        TechPreviewUnsafeFailForward = "TechPreviewUnsafeFailForward",
    }
}

root_with_optional_spec! {
    /// OperatorGroup is the unit of multitenancy for OLM managed operators. It constrains the
    /// installation of operators in its namespace to a specified set of target namespaces.
    pub struct OperatorGroup {
        spec: OperatorGroupSpec,
        status: OperatorGroupStatus,
    }
    group = "operators.coreos.com", version = "v1", kind = "OperatorGroup",
    plural = "operatorgroups", scope = ::kube::core::NamespaceResourceScope
}

/// OperatorGroupSpec is the spec for an OperatorGroup resource.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("default" = {"upgradeStrategy": "Default"}))]
pub struct OperatorGroupSpec {
    /// Selects target namespaces by label; ignored when targetNamespaces is set. An empty
    /// selector selects all namespaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// Explicit set of target namespaces; wins over selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub target_namespaces: Option<Vec<String>>,
    /// ServiceAccount (in this namespace) whose permissions bound what OLM may install for
    /// member operators.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
    /// When true OLM never edits the olm.providedAPIs annotation.
    #[serde(
        rename = "staticProvidedAPIs",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub static_provided_apis: Option<bool>,
    /// Upgrade strategy for operators in the namespace: Default or TechPreviewUnsafeFailForward.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Default"))]
    pub upgrade_strategy: Option<UpgradeStrategy>,
}

impl OperatorGroupSpec {
    /// The strategy OLM applies: `TechPreviewUnsafeFailForward` only when spelled exactly so.
    pub fn effective_upgrade_strategy(&self) -> UpgradeStrategy {
        match self.upgrade_strategy {
            Some(UpgradeStrategy::TechPreviewUnsafeFailForward) => {
                UpgradeStrategy::TechPreviewUnsafeFailForward
            }
            _ => UpgradeStrategy::Default,
        }
    }

    /// Whether `staticProvidedAPIs` is set to true.
    pub fn is_static(&self) -> bool {
        self.static_provided_apis.unwrap_or(false)
    }
}

/// OperatorGroupStatus is the status for an OperatorGroup resource.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperatorGroupStatus {
    /// Resolved target namespaces; all namespaces is `[""]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub namespaces: Option<Vec<String>>,
    /// The ServiceAccount named by spec.serviceAccountName, once found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_ref: Option<ObjectReference>,
    /// Last time OLM changed namespaces or serviceAccountRef.
    pub last_updated: Time,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<MetaCondition>>,
}

impl OperatorGroupStatus {
    /// An empty status stamped with `now`.
    pub fn new(now: Time) -> Self {
        Self {
            namespaces: None,
            service_account_ref: None,
            last_updated: now,
            conditions: None,
        }
    }
}

/// The deprecated `operators.coreos.com/v1alpha2` OperatorGroup: v1 without
/// `spec.upgradeStrategy`, `status.conditions` and the list-type markers.
pub mod v1alpha2 {
    use super::*;

    root_with_optional_spec! {
        /// OperatorGroup is the unit of multitenancy for OLM managed operators. It constrains the
        /// installation of operators in its namespace to a specified set of target namespaces.
        pub struct OperatorGroup {
            spec: OperatorGroupSpec,
            status: OperatorGroupStatus,
        }
        group = "operators.coreos.com", version = "v1alpha2", kind = "OperatorGroup",
        plural = "operatorgroups", scope = ::kube::core::NamespaceResourceScope
    }

    /// OperatorGroupSpec is the spec for an OperatorGroup resource.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    pub struct OperatorGroupSpec {
        /// Selects target namespaces by label; ignored when targetNamespaces is set.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub selector: Option<LabelSelector>,
        /// Explicit list of target namespaces; wins over selector.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub target_namespaces: Option<Vec<String>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub service_account_name: Option<String>,
        #[serde(
            rename = "staticProvidedAPIs",
            default,
            skip_serializing_if = "Option::is_none"
        )]
        pub static_provided_apis: Option<bool>,
    }

    /// OperatorGroupStatus is the status for an OperatorGroup resource.
    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    pub struct OperatorGroupStatus {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub namespaces: Option<Vec<String>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub service_account_ref: Option<ObjectReference>,
        pub last_updated: Time,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_is_optional_and_always_written() {
        let og: OperatorGroup = serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1",
            "kind": "OperatorGroup",
            "metadata": {"name": "global-operators", "namespace": "operators"}
        }))
        .unwrap();
        assert_eq!(og.spec, OperatorGroupSpec::default());
        let back = serde_json::to_value(&og).unwrap();
        assert_eq!(back["apiVersion"], "operators.coreos.com/v1");
        assert_eq!(back["kind"], "OperatorGroup");
        assert_eq!(back["spec"], serde_json::json!({}));
        assert!(back.get("status").is_none());
    }

    #[test]
    fn unknown_upgrade_strategy_means_default() {
        let spec: OperatorGroupSpec =
            serde_json::from_str(r#"{"upgradeStrategy": "Bogus"}"#).unwrap();
        assert_eq!(spec.effective_upgrade_strategy(), UpgradeStrategy::Default);
        assert_eq!(
            serde_json::to_value(&spec).unwrap()["upgradeStrategy"],
            "Bogus"
        );
        let spec: OperatorGroupSpec =
            serde_json::from_str(r#"{"upgradeStrategy": "TechPreviewUnsafeFailForward"}"#).unwrap();
        assert_eq!(
            spec.effective_upgrade_strategy(),
            UpgradeStrategy::TechPreviewUnsafeFailForward
        );
    }

    #[test]
    fn v1alpha2_has_its_own_api_version() {
        let og = v1alpha2::OperatorGroup::new("og", v1alpha2::OperatorGroupSpec::default());
        let back = serde_json::to_value(&og).unwrap();
        assert_eq!(back["apiVersion"], "operators.coreos.com/v1alpha2");
    }
}

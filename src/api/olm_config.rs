//! OLMConfig (`operators.coreos.com/v1`, cluster-scoped): cluster-wide OLM switches. OLM
//! reads only the object named `cluster` (docs/operator-groups.md §10 "Disabling").

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::conditions::MetaCondition;
use super::resource::root_with_optional_spec;

/// The only OLMConfig object OLM reads.
pub const OLM_CONFIG_NAME: &str = "cluster";
/// Condition type reporting the copied-CSV switch.
pub const CONDITION_DISABLED_COPIED_CSVS: &str = "DisabledCopiedCSVs";
/// Reason while copied CSVs are disabled.
pub const REASON_COPIED_CSVS_DISABLED: &str = "CopiedCSVsDisabled";
/// Reason while copied CSVs are enabled.
pub const REASON_COPIED_CSVS_ENABLED: &str = "CopiedCSVsEnabled";
/// Package server sync interval when none is configured.
pub const DEFAULT_PACKAGE_SERVER_SYNC_INTERVAL: &str = "12h";

root_with_optional_spec! {
    /// OLMConfig is a resource responsible for configuring OLM.
    pub struct OlmConfig {
        spec: OlmConfigSpec,
        status: OlmConfigStatus,
    }
    group = "operators.coreos.com", version = "v1", kind = "OLMConfig",
    plural = "olmconfigs", scope = ::kube::core::ClusterResourceScope
}

/// OLMConfigSpec is the spec for an OLMConfig resource.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OlmConfigSpec {
    /// Features contains the list of configurable OLM features.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub features: Option<Features>,
}

/// Features contains the list of configurable OLM features.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Features {
    /// Disables OLM's "Copied CSV" feature for operators installed in all-namespace groups.
    /// When re-enabled, OLM recreates the copies.
    #[serde(
        rename = "disableCopiedCSVs",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub disable_copied_csvs: Option<bool>,
    /// Sync interval of packageserver pods (hours, minutes and seconds only, e.g. "60m").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(s|m|h))+$"))]
    pub package_server_sync_interval: Option<String>,
}

/// OLMConfigStatus is the status for an OLMConfig resource.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OlmConfigStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<MetaCondition>>,
}

impl OlmConfigSpec {
    /// Whether copied CSVs are disabled (`false` when unset).
    pub fn copied_csvs_disabled(&self) -> bool {
        self.features
            .as_ref()
            .and_then(|f| f.disable_copied_csvs)
            .unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_cluster_object_reads_and_features_parse() {
        let config: OlmConfig = serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1", "kind": "OLMConfig", "metadata": {"name": "cluster"}
        }))
        .unwrap();
        assert!(!config.spec.copied_csvs_disabled());

        let config: OlmConfig = serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1", "kind": "OLMConfig", "metadata": {"name": "cluster"},
            "spec": {"features": {"disableCopiedCSVs": true, "packageServerSyncInterval": "1h30m"}}
        }))
        .unwrap();
        assert!(config.spec.copied_csvs_disabled());
        let back = serde_json::to_value(&config).unwrap();
        assert_eq!(back["kind"], "OLMConfig");
        assert_eq!(
            back["spec"]["features"]["packageServerSyncInterval"],
            "1h30m"
        );
    }
}

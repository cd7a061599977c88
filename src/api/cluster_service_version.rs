//! ClusterServiceVersion (`operators.coreos.com/v1alpha1`): the spec (docs/api-types.md §2.1–§2.2).
//!
//! Owned/required API descriptions live in `csv_definitions.rs`, the status in `csv_status.rs`.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::DeploymentSpec;
use k8s_openapi::api::rbac::v1::PolicyRule;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::csv_definitions::{
    ApiServiceDefinitions, CustomResourceDefinitions, WebhookDescription,
};
use super::csv_status::ClusterServiceVersionStatus;
use super::error::ApiError;
use super::string_enum::string_enum;

/// The only install strategy OLM understands (`spec.install.strategy`).
pub const INSTALL_STRATEGY_DEPLOYMENT: &str = "deployment";

/// ClusterServiceVersionSpec declarations tell OLM how to install an operator that can manage
/// apps for a given version.
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "operators.coreos.com",
    version = "v1alpha1",
    kind = "ClusterServiceVersion",
    plural = "clusterserviceversions",
    singular = "clusterserviceversion",
    namespaced,
    status = "ClusterServiceVersionStatus",
    derive = "PartialEq",
    shortname = "csv",
    shortname = "csvs",
    category = "olm",
    printcolumn = r#"{"name": "Display", "type": "string", "jsonPath": ".spec.displayName", "description": "The name of the CSV"}"#,
    printcolumn = r#"{"name": "Version", "type": "string", "jsonPath": ".spec.version", "description": "The version of the CSV"}"#,
    printcolumn = r#"{"name": "Release", "type": "string", "jsonPath": ".spec.release", "description": "The release of this version of the CSV"}"#,
    printcolumn = r#"{"name": "Replaces", "type": "string", "jsonPath": ".spec.replaces", "description": "The name of a CSV that this one replaces"}"#,
    printcolumn = r#"{"name": "Phase", "type": "string", "jsonPath": ".status.phase"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterServiceVersionSpec {
    /// How to run the operator.
    #[serde(default)]
    pub install: NamedInstallStrategy,
    /// Semantic version of the operator (a leading `v` and a missing minor/patch are tolerated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Packaging/build identifier of the same version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 20), extend("x-kubernetes-validations" = release_rules()))]
    pub release: Option<String>,
    /// Free-text maturity (planning, alpha, beta, stable, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maturity: Option<String>,
    /// CRDs owned and required by the operator.
    #[serde(
        rename = "customresourcedefinitions",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub custom_resource_definitions: Option<CustomResourceDefinitions>,
    /// Aggregated APIs owned and required by the operator.
    #[serde(
        rename = "apiservicedefinitions",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub api_service_definitions: Option<ApiServiceDefinitions>,
    /// Admission and conversion webhooks OLM manages for the operator.
    #[serde(
        rename = "webhookdefinitions",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub webhook_definitions: Option<Vec<WebhookDescription>>,
    /// Built-in or other APIs that must be discoverable.
    #[serde(
        rename = "nativeAPIs",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub native_apis: Option<Vec<GroupVersionKind>>,
    /// Minimum Kubernetes server version (semver, leading `v` allowed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_kube_version: Option<String>,
    /// Human-readable name.
    #[serde(default)]
    pub display_name: String,
    /// Markdown description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keywords: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maintainers: Option<Vec<Maintainer>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<AppLink>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub links: Option<Vec<AppLink>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icon: Option<Vec<Icon>>,
    /// Install modes the operator supports; a type that is not listed is unsupported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_modes: Option<Vec<InstallMode>>,
    /// Name of the CSV this one replaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<String>,
    /// CSV names this one skips in the upgrade graph (catalog build time only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skips: Option<Vec<String>>,
    /// Informational labels (not applied to anything).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    /// Informational annotations (not the object's metadata.annotations).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
    /// Label selector for related resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// Cleanup behaviour when the CSV is deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleanup: Option<CleanupSpec>,
    /// Images the operator and its operands use (mirroring tools read it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub related_images: Option<Vec<RelatedImage>>,
}

/// The CEL rules OLM puts on `spec.release` (docs/api-types.md §2.1).
fn release_rules() -> serde_json::Value {
    serde_json::json!([
        {
            "rule": "self.matches('^[0-9A-Za-z-]+(\\\\.[0-9A-Za-z-]+)*$')",
            "message": "release version must be composed of dot-separated identifiers containing only alphanumerics and hyphens"
        },
        {
            "rule": "!self.matches('(^|\\\\.)0[0-9]+(\\\\.|$)')",
            "message": "numeric identifiers in release version must not have leading zeros"
        }
    ])
}

/// `spec.install`: the install strategy.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NamedInstallStrategy {
    /// Strategy name; only `deployment` is understood.
    #[serde(default)]
    pub strategy: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<StrategyDetailsDeployment>,
}

/// Details of the `deployment` install strategy.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StrategyDetailsDeployment {
    /// Deployments OLM creates in the CSV namespace (may be empty).
    #[serde(default)]
    pub deployments: Vec<StrategyDeploymentSpec>,
    /// Namespaced rules granted in the CSV namespace (and target namespaces).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permissions: Option<Vec<StrategyDeploymentPermissions>>,
    /// Cluster-wide rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_permissions: Option<Vec<StrategyDeploymentPermissions>>,
}

/// One Deployment of the install strategy.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StrategyDeploymentSpec {
    /// Name of the Deployment.
    #[serde(default)]
    pub name: String,
    /// The Deployment's spec.
    #[serde(default)]
    pub spec: DeploymentSpec,
    /// Labels of the Deployment object (singular JSON name, as OLM spells it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<BTreeMap<String, String>>,
}

/// RBAC rules granted to one ServiceAccount.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StrategyDeploymentPermissions {
    /// ServiceAccount in the CSV namespace.
    #[serde(default)]
    pub service_account_name: String,
    #[serde(default)]
    pub rules: Vec<PolicyRule>,
}

string_enum! {
    /// `spec.installModes[].type`.
    pub enum InstallModeType (schema: open) {
        OwnNamespace = "OwnNamespace",
        SingleNamespace = "SingleNamespace",
        MultiNamespace = "MultiNamespace",
        AllNamespaces = "AllNamespaces",
    }
}

/// Whether the operator supports one install mode.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InstallMode {
    #[serde(rename = "type")]
    #[serde(default)]
    pub type_: InstallModeType,
    #[serde(default)]
    pub supported: bool,
}

/// A group/version/kind triple (metav1.GroupVersionKind).
#[derive(
    Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub struct GroupVersionKind {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub kind: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Maintainer {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AppLink {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Icon {
    #[serde(rename = "base64data")]
    #[serde(default)]
    pub base64_data: String,
    #[serde(rename = "mediatype")]
    #[serde(default)]
    pub media_type: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CleanupSpec {
    #[serde(default)]
    pub enabled: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RelatedImage {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub image: String,
}

impl ClusterServiceVersionSpec {
    /// `spec.version` parsed the way OLM parses it (see [`parse_operator_version`]); `None`
    /// when the field is absent.
    pub fn operator_version(&self) -> Option<Result<semver::Version, ApiError>> {
        self.version.as_deref().map(parse_operator_version)
    }

    /// The deployment strategy details, when the strategy is `deployment` and has a spec.
    pub fn deployment_strategy(&self) -> Option<&StrategyDetailsDeployment> {
        (self.install.strategy == INSTALL_STRATEGY_DEPLOYMENT)
            .then_some(self.install.spec.as_ref())
            .flatten()
    }

    /// Whether `install_modes` lists `mode` as supported (an unlisted mode is unsupported).
    pub fn supports_install_mode(&self, mode: &InstallModeType) -> bool {
        self.install_modes
            .iter()
            .flatten()
            .any(|m| &m.type_ == mode && m.supported)
    }
}

/// Parses an operator version tolerantly, as OLM does: surrounding whitespace and one leading
/// `v` are dropped, leading zeros of the numeric parts are removed, and a missing minor/patch is
/// filled with `0` (`v1.2` → `1.2.0`). A shortened version may not carry pre-release or build
/// metadata (`1.2-rc1` is an error).
pub fn parse_operator_version(text: &str) -> Result<semver::Version, ApiError> {
    let invalid = |reason: String| ApiError::InvalidVersion {
        value: text.to_owned(),
        reason,
    };
    let trimmed = text.trim();
    let trimmed = trimmed.strip_prefix('v').unwrap_or(trimmed);
    let mut parts: Vec<String> = trimmed.splitn(3, '.').map(strip_leading_zeros).collect();
    if parts.len() < 3 {
        if parts.last().is_some_and(|p| p.contains(['+', '-'])) {
            return Err(invalid(
                "a shortened version cannot carry pre-release or build metadata".into(),
            ));
        }
        parts.resize(3, "0".to_owned());
    }
    semver::Version::parse(&parts.join(".")).map_err(|e| invalid(e.to_string()))
}

fn strip_leading_zeros(part: &str) -> String {
    if part.len() <= 1 {
        return part.to_owned();
    }
    let stripped = part.trim_start_matches('0');
    if stripped.starts_with(|c: char| c.is_ascii_digit()) {
        stripped.to_owned()
    } else {
        format!("0{stripped}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tolerant_versions_parse_like_olm() {
        let cases = [
            ("1.2.3", "1.2.3"),
            ("v1.2.3", "1.2.3"),
            ("v1.2", "1.2.0"),
            ("3", "3.0.0"),
            (" 0.1.0-alpha.1+build ", "0.1.0-alpha.1+build"),
            ("01.002.3", "1.2.3"),
        ];
        for (input, want) in cases {
            let got = parse_operator_version(input).unwrap();
            assert_eq!(got.to_string(), want, "{input}");
        }
    }

    #[test]
    fn bad_versions_name_the_value() {
        let err = parse_operator_version("1.2-rc1").unwrap_err().to_string();
        assert!(err.contains("1.2-rc1"), "{err}");
        assert!(parse_operator_version("one.two.three").is_err());
    }

    #[test]
    fn wire_names_are_olms() {
        let spec: ClusterServiceVersionSpec = serde_json::from_value(serde_json::json!({
            "displayName": "Demo",
            "install": {"strategy": "deployment", "spec": {"deployments": [{
                "name": "demo", "label": {"a": "b"},
                "spec": {"selector": {}, "template": {}}
            }]}},
            "customresourcedefinitions": {"owned": [{"name": "demos.example.com", "version": "v1", "kind": "Demo"}]},
            "nativeAPIs": [{"group": "", "version": "v1", "kind": "Pod"}],
            "installModes": [{"type": "OwnNamespace", "supported": true}, {"type": "Weird", "supported": true}],
            "relatedImages": [{"name": "x", "image": "y"}],
            "icon": [{"base64data": "AA==", "mediatype": "image/png"}]
        }))
        .unwrap();
        let deployments = &spec.deployment_strategy().unwrap().deployments;
        assert_eq!(deployments[0].label.as_ref().unwrap()["a"], "b");
        assert!(spec.supports_install_mode(&InstallModeType::OwnNamespace));
        assert!(!spec.supports_install_mode(&InstallModeType::AllNamespaces));
        let back = serde_json::to_value(&spec).unwrap();
        assert_eq!(back["installModes"][1]["type"], "Weird");
        assert!(back.get("nativeAPIs").is_some());
        assert!(
            back.get("version").is_none(),
            "unset optional fields are not sent"
        );
    }
}

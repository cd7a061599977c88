//! The APIs a ClusterServiceVersion owns or requires: CRD and APIService descriptions, their
//! UI descriptors, and webhook definitions (docs/api-types.md §2.3).

use k8s_openapi::api::admissionregistration::v1::RuleWithOperations;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::string_enum::string_enum;

/// `spec.customresourcedefinitions`. An owned CRD is implicitly required.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CustomResourceDefinitions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owned: Option<Vec<CrdDescription>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<Vec<CrdDescription>>,
}

/// `spec.apiservicedefinitions`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ApiServiceDefinitions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owned: Option<Vec<ApiServiceDescription>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<Vec<ApiServiceDescription>>,
}

/// A CRD the operator owns or requires.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CrdDescription {
    /// Full CRD name `<plural>.<group>`.
    #[serde(default)]
    pub name: String,
    /// The CRD version the operator uses.
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Vec<ApiResourceReference>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_descriptors: Option<Vec<Descriptor>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_descriptors: Option<Vec<Descriptor>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action_descriptors: Option<Vec<Descriptor>>,
}

impl CrdDescription {
    /// `(plural, group)`: OLM splits the name at the first dot; `None` when it has no dot.
    pub fn plural_and_group(&self) -> Option<(&str, &str)> {
        self.name.split_once('.')
    }
}

/// An aggregated API the operator serves or requires.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApiServiceDescription {
    /// Plural resource name served (not the APIService name).
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub kind: String,
    /// Deployment (of the install strategy) that serves the API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_name: Option<String>,
    /// Port the extension server listens on (443 when 0 or absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_port: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Vec<ApiResourceReference>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_descriptors: Option<Vec<Descriptor>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_descriptors: Option<Vec<Descriptor>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action_descriptors: Option<Vec<Descriptor>>,
}

impl ApiServiceDescription {
    /// Name of the APIService object: `<version>.<group>`.
    pub fn api_service_name(&self) -> String {
        format!("{}.{}", self.version, self.group)
    }
}

/// A Kubernetes resource type used by a custom resource (UI only).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ApiResourceReference {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub version: String,
}

/// A UI descriptor of one field or action (spec, status and action descriptors share it).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    #[serde(default)]
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(
        rename = "x-descriptors",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub x_descriptors: Option<Vec<String>>,
    /// Raw JSON in OLM's Go type; its CRD schema declares a base64 string, so that is what the
    /// API server accepts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<RawJsonAsBytes>")]
    pub value: Option<serde_json::Value>,
}

pub type SpecDescriptor = Descriptor;
pub type StatusDescriptor = Descriptor;
pub type ActionDescriptor = Descriptor;

/// Schema stand-in for Go's `json.RawMessage` as controller-gen renders it.
struct RawJsonAsBytes;

impl JsonSchema for RawJsonAsBytes {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "RawJsonAsBytes".into()
    }
    fn inline_schema() -> bool {
        true
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "string", "format": "byte" })
    }
}

string_enum! {
    /// `spec.webhookdefinitions[].type` (the CRD enforces this list).
    pub enum WebhookAdmissionType (schema: closed) {
        ValidatingAdmissionWebhook = "ValidatingAdmissionWebhook",
        MutatingAdmissionWebhook = "MutatingAdmissionWebhook",
        ConversionWebhook = "ConversionWebhook",
    }
}

/// Port OLM uses for a webhook when `containerPort` is not given (also the CRD default).
pub const DEFAULT_WEBHOOK_PORT: i32 = 443;

/// A webhook OLM configures for the operator.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookDescription {
    /// Webhook name inside the configuration; with `-` appended, the configuration's
    /// `metadata.generateName`.
    #[serde(default)]
    pub generate_name: String,
    #[serde(rename = "type")]
    #[serde(default)]
    pub type_: WebhookAdmissionType,
    /// Deployment that serves the webhook.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_name: Option<String>,
    /// Service port and webhook client port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535), extend("default" = DEFAULT_WEBHOOK_PORT))]
    pub container_port: Option<i32>,
    /// Service targetPort; the container port when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_port: Option<IntOrString>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rules: Option<Vec<RuleWithOperations>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_selector: Option<LabelSelector>,
    #[serde(default)]
    pub side_effects: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<i32>,
    #[serde(default)]
    pub admission_review_versions: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reinvocation_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_path: Option<String>,
    /// CRDs (owned by this CSV) whose conversion OLM manages.
    #[serde(
        rename = "conversionCRDs",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub conversion_crds: Option<Vec<String>>,
}

impl WebhookDescription {
    /// The port OLM uses: `containerPort`, or 443 when absent or 0.
    pub fn effective_container_port(&self) -> i32 {
        self.container_port
            .filter(|p| *p != 0)
            .unwrap_or(DEFAULT_WEBHOOK_PORT)
    }

    /// `deploymentName` made a DNS-1035 label (dots become dashes); the webhook Service is
    /// named `<this>-service`.
    pub fn domain_name(&self) -> String {
        self.deployment_name
            .as_deref()
            .unwrap_or_default()
            .replace('.', "-")
    }
}

//! CatalogSource (`operators.coreos.com/v1alpha1`): docs/api-types.md §4.1.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Affinity, Toleration};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::conditions::MetaCondition;
use super::string_enum::string_enum;

/// A CatalogSource by namespace and name: the key every part of olm-rs knows a catalog by.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CatalogRef {
    pub namespace: String,
    pub name: String,
}

impl CatalogRef {
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        CatalogRef {
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl std::fmt::Display for CatalogRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

string_enum! {
    /// `spec.sourceType`. `internal` is the deprecated alias of `configmap`.
    pub enum SourceType (schema: open) {
        Grpc = "grpc",
        ConfigMap = "configmap",
        Internal = "internal",
    }
}

string_enum! {
    /// `spec.grpcPodConfig.securityContextConfig` (the CRD enforces this list).
    pub enum SecurityConfig (schema: closed) {
        Legacy = "legacy",
        Restricted = "restricted",
    }
}

string_enum! {
    /// `status.reason`.
    pub enum CatalogSourceReason (schema: open) {
        SpecInvalidError = "SpecInvalidError",
        ConfigMapError = "ConfigMapError",
        RegistryServerError = "RegistryServerError",
        InvalidIntervalError = "InvalidIntervalError",
    }
}

string_enum! {
    /// `status.connectionState.lastObservedState`: gRPC channel states.
    pub enum ConnectionState (schema: open) {
        Idle = "IDLE",
        Connecting = "CONNECTING",
        Ready = "READY",
        TransientFailure = "TRANSIENT_FAILURE",
        Shutdown = "SHUTDOWN",
    }
}

/// Poll interval OLM uses when `updateStrategy.registryPoll.interval` does not parse.
pub const DEFAULT_REGISTRY_POLL_INTERVAL: &str = "15m";

/// CatalogSourceSpec: a repository of operator bundles.
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "operators.coreos.com",
    version = "v1alpha1",
    kind = "CatalogSource",
    plural = "catalogsources",
    singular = "catalogsource",
    namespaced,
    status = "CatalogSourceStatus",
    derive = "PartialEq",
    shortname = "catsrc",
    category = "olm",
    printcolumn = r#"{"name": "Display", "type": "string", "jsonPath": ".spec.displayName", "description": "The pretty name of the catalog"}"#,
    printcolumn = r#"{"name": "Type", "type": "string", "jsonPath": ".spec.sourceType", "description": "The type of the catalog"}"#,
    printcolumn = r#"{"name": "Publisher", "type": "string", "jsonPath": ".spec.publisher", "description": "The publisher of the catalog"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct CatalogSourceSpec {
    /// grpc, configmap or internal (deprecated alias of configmap).
    #[serde(default)]
    pub source_type: SourceType,
    /// Higher is preferred when choosing dependency providers across catalogs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i64>,
    /// ConfigMap (same namespace) holding the catalog, for configmap sources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<String>,
    /// host:port of an existing registry (grpc, used when image is empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// Catalog image OLM runs as a registry pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Overrides for the registry pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc_pod_config: Option<GrpcPodConfig>,
    /// Polling of the catalog image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_strategy: Option<UpdateStrategy>,
    /// Pull secrets (same namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secrets: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publisher: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icon: Option<CatalogIcon>,
}

impl CatalogSourceSpec {
    /// The poll interval text, when polling is configured.
    pub fn poll_interval(&self) -> Option<&str> {
        self.update_strategy
            .as_ref()?
            .registry_poll
            .as_ref()?
            .interval
            .as_deref()
    }
}

/// Overrides for the registry pod of a grpc image catalog.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GrpcPodConfig {
    /// Replaces the default `{kubernetes.io/os: linux}` when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerations: Option<Vec<Toleration>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
    /// Priority class of the pod (empty string clears it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
    /// legacy or restricted; derived from the namespace's pod-security label when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_context_config: Option<SecurityConfig>,
    /// Memory request of the registry container (also sets GOMEMLIMIT).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_target: Option<Quantity>,
    /// Serve the catalog content with a well-known opm binary instead of the image's own server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extract_content: Option<ExtractContentConfig>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExtractContentConfig {
    /// Directory of the file-based catalog inside the image.
    #[serde(default)]
    pub catalog_dir: String,
    /// Directory of the pre-built cache inside the image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_dir: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateStrategy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry_poll: Option<RegistryPoll>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RegistryPoll {
    /// Go duration (`15m`, `1h30m`, ...); OLM falls back to 15m when it does not parse.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CatalogIcon {
    #[serde(rename = "base64data")]
    #[serde(default)]
    pub base64_data: String,
    #[serde(rename = "mediatype")]
    #[serde(default)]
    pub media_type: String,
}

/// CatalogSourceStatus.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CatalogSourceStatus {
    /// Human text of the last failed sync step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<CatalogSourceReason>,
    /// When OLM last started a poll.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latest_image_registry_poll: Option<Time>,
    /// configmap sources only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map_reference: Option<ConfigMapResourceReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry_service: Option<RegistryServiceStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_state: Option<GrpcConnectionState>,
    /// Used by the catalog image template feature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Option<Vec<MetaCondition>>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMapResourceReference {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub namespace: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RegistryServiceStatus {
    /// Always `grpc`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_namespace: Option<String>,
    /// A string, e.g. `"50051"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<Time>,
}

impl RegistryServiceStatus {
    /// `<serviceName>.<serviceNamespace>.svc:<port>`, when all three are set.
    pub fn address(&self) -> Option<String> {
        Some(format!(
            "{}.{}.svc:{}",
            self.service_name.as_deref()?,
            self.service_namespace.as_deref()?,
            self.port.as_deref()?
        ))
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GrpcConnectionState {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    #[serde(default)]
    pub last_observed_state: ConnectionState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_connect: Option<Time>,
}

impl CatalogSource {
    /// What OLM dials: `spec.address` if non-empty, else the registry Service address.
    pub fn address(&self) -> Option<String> {
        match self.spec.address.as_deref() {
            Some(address) if !address.is_empty() => Some(address.to_owned()),
            _ => self.status.as_ref()?.registry_service.as_ref()?.address(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn address_prefers_spec_then_registry_service() {
        let mut cs = CatalogSource::new(
            "operatorhubio-catalog",
            serde_json::from_value(
                serde_json::json!({"sourceType": "grpc", "image": "quay.io/x:latest"}),
            )
            .unwrap(),
        );
        assert_eq!(cs.address(), None);
        cs.status = Some(CatalogSourceStatus {
            registry_service: Some(RegistryServiceStatus {
                protocol: Some("grpc".into()),
                service_name: Some("operatorhubio-catalog".into()),
                service_namespace: Some("olm".into()),
                port: Some("50051".into()),
                created_at: None,
            }),
            ..Default::default()
        });
        assert_eq!(
            cs.address().as_deref(),
            Some("operatorhubio-catalog.olm.svc:50051")
        );
        cs.spec.address = Some("10.0.0.1:50051".into());
        assert_eq!(cs.address().as_deref(), Some("10.0.0.1:50051"));
    }

    #[test]
    fn unknown_source_type_round_trips() {
        let spec: CatalogSourceSpec = serde_json::from_str(r#"{"sourceType": "ftp"}"#).unwrap();
        assert_eq!(spec.source_type, SourceType::Other("ftp".into()));
        assert_eq!(serde_json::to_value(&spec).unwrap()["sourceType"], "ftp");
    }
}

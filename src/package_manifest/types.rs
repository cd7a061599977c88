//! The `packages.operators.coreos.com/v1` wire types: `PackageManifest` and its list, field
//! names and optional fields as OLM's package server writes them (docs/packagemanifests.md §2).
//!
//! Go's `omitempty` does not drop a struct, so `provider`, `currentCSVDesc.provider`,
//! `customresourcedefinitions` and `apiservicedefinitions` are always present (as `{}` when
//! empty); slices, maps and strings are dropped when empty.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub const GROUP: &str = "packages.operators.coreos.com";
pub const VERSION: &str = "v1";
pub const API_VERSION: &str = "packages.operators.coreos.com/v1";
pub const KIND: &str = "PackageManifest";
pub const LIST_KIND: &str = "PackageManifestList";
pub const RESOURCE: &str = "packagemanifests";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PackageManifest {
    pub api_version: String,
    pub kind: String,
    pub metadata: ManifestMeta,
    pub spec: Value,
    pub status: PackageManifestStatus,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManifestMeta {
    pub name: String,
    pub namespace: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// The CatalogSource's, as RFC 3339 text (`null` when unknown, as Go writes a zero time).
    pub creation_timestamp: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PackageManifestStatus {
    pub catalog_source: String,
    pub catalog_source_display_name: String,
    pub catalog_source_publisher: String,
    pub catalog_source_namespace: String,
    pub provider: AppLink,
    pub package_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecation: Option<Deprecation>,
    pub channels: Vec<PackageChannel>,
    pub default_channel: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppLink {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub url: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deprecation {
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PackageChannel {
    pub name: String,
    #[serde(rename = "currentCSV")]
    pub current_csv: String,
    #[serde(rename = "currentCSVDesc")]
    pub current_csv_desc: CsvDescription,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecation: Option<Deprecation>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub entries: Vec<ChannelEntry>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChannelEntry {
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecation: Option<Deprecation>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CsvDescription {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub display_name: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub icon: Vec<Icon>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub version: String,
    pub provider: AppLink,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keywords: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<AppLink>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub maintainers: Vec<Maintainer>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub maturity: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub install_modes: Vec<Value>,
    pub customresourcedefinitions: ApiDescriptions,
    pub apiservicedefinitions: ApiDescriptions,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub native_apis: Vec<Value>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub min_kube_version: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub related_images: Vec<String>,
}

/// `owned` / `required` API descriptions, each cut down to the fields OLM keeps.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ApiDescriptions {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub owned: Vec<Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required: Vec<Value>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Icon {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub base64data: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mediatype: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Maintainer {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub email: String,
}

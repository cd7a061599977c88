//! Building the PackageManifests of one catalog (pure): one per package, from the catalog
//! index and the CatalogSource's metadata, as OLM's package server builds them
//! (docs/packagemanifests.md §3). Built once per catalog content, then served from memory.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use crate::catalog::api_projection;
use crate::catalog::{CatalogIndex, ChannelIndex, PackageIndex};

use super::types::{
    API_VERSION, ApiDescriptions, AppLink, ChannelEntry, CsvDescription, Deprecation, Icon, KIND,
    Maintainer, ManifestMeta, PackageChannel, PackageManifest, PackageManifestStatus,
};

/// Label prefixes that, when any label has them, stop the default os/arch labels.
const OS_LABEL_PREFIX: &str = "operatorframework.io/os";
const ARCH_LABEL_PREFIX: &str = "operatorframework.io/arch";
const DEFAULT_OS_LABEL: &str = "operatorframework.io/os.linux";
const DEFAULT_ARCH_LABEL: &str = "operatorframework.io/arch.amd64";
const SUPPORTED: &str = "supported";

/// What a PackageManifest shows of its CatalogSource.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CatalogMeta {
    pub namespace: String,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    /// RFC 3339, as the API server wrote it.
    pub creation_timestamp: Option<String>,
    pub display_name: String,
    pub publisher: String,
}

/// The icon the `icon` subresource serves: the default channel head's first icon.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackageIcon {
    /// Still base64-encoded, as in the CSV.
    pub base64data: String,
    pub mediatype: String,
    /// `"<package>.<channel>.<csv>"`, quoted, as OLM forms it.
    pub etag: String,
}

/// One package of a catalog, ready to serve: the manifest without icons (get and list strip
/// them) and the icon apart.
#[derive(Debug, Clone, PartialEq)]
pub struct BuiltPackage {
    pub manifest: PackageManifest,
    pub icon: Option<PackageIcon>,
}

/// Why a package has no PackageManifest (OLM leaves it out and logs; so do we).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("catalog {catalog}: package {package} has no channel with a usable head CSV")]
pub struct ElidedPackage {
    pub catalog: String,
    pub package: String,
}

/// Every package of the catalog, sorted by name, and the packages left out.
pub fn build_catalog(
    meta: &CatalogMeta,
    index: &CatalogIndex,
) -> (Vec<BuiltPackage>, Vec<ElidedPackage>) {
    let mut built = Vec::with_capacity(index.packages().len());
    let mut elided = Vec::new();
    for package in index.packages() {
        match build_package(meta, package) {
            Some(p) => built.push(p),
            None => elided.push(ElidedPackage {
                catalog: format!("{}/{}", meta.namespace, meta.name),
                package: package.name().to_owned(),
            }),
        }
    }
    (built, elided)
}

/// A channel's head CSV as JSON, or `None` when the channel has no head or no CSV: OLM leaves
/// such a channel out ("eliding channel").
fn head_csv(package: &PackageIndex, channel: &ChannelIndex) -> Option<(String, Value)> {
    let head = channel.graph().channel_head().ok()?;
    let bundle = package.bundle(&head.name)?;
    let text = api_projection::csv_json(package.package(), bundle)?;
    let csv: Value = serde_json::from_str(&text).ok()?;
    Some((head.name.clone(), csv))
}

fn build_package(meta: &CatalogMeta, package: &PackageIndex) -> Option<BuiltPackage> {
    let mut labels = meta.labels.clone();
    labels.insert("catalog".into(), meta.name.clone());
    labels.insert("catalog-namespace".into(), meta.namespace.clone());
    let mut default_channel = package.default_channel_name().unwrap_or("").to_owned();

    let mut channels = Vec::new();
    let mut provider: Option<AppLink> = None;
    let mut default_csv: Option<Value> = None;
    let mut default_elided = false;
    let mut icon = None;
    // Channels come sorted by name from the index (docs/packagemanifests.md §3: OLM's order).
    for channel in package.channels() {
        let is_default = channel.name() == default_channel;
        let Some((csv_name, csv)) = head_csv(package, channel) else {
            default_elided |= is_default;
            continue;
        };
        let desc = csv_description(&csv);
        if default_csv.is_none() || is_default {
            icon = desc.icon.first().map(|i| PackageIcon {
                base64data: i.base64data.clone(),
                mediatype: i.mediatype.clone(),
                etag: format!("\"{}.{}.{}\"", package.name(), channel.name(), csv_name),
            });
            default_csv = Some(csv.clone());
        }
        if provider.is_none() || (!default_channel.is_empty() && is_default) {
            provider = Some(desc.provider.clone());
        }
        channels.push(PackageChannel {
            name: channel.name().to_owned(),
            current_csv: csv_name,
            current_csv_desc: CsvDescription {
                icon: Vec::new(),
                ..desc
            },
            deprecation: package.channel_deprecation(channel.name()).map(deprecation),
            entries: channel_entries(package, channel),
        });
    }
    let first = channels.first()?;
    if default_elided {
        default_channel = first.name.clone();
    }
    let provider = provider.unwrap_or_default();
    labels.insert("provider".into(), provider.name.clone());
    labels.insert("provider-url".into(), provider.url.clone());
    if let Some(csv) = &default_csv {
        labels.extend(string_map(&csv["metadata"]["labels"]));
    }
    set_default_os_arch(&mut labels);

    let manifest = PackageManifest {
        api_version: API_VERSION.into(),
        kind: KIND.into(),
        metadata: ManifestMeta {
            name: package.name().to_owned(),
            namespace: meta.namespace.clone(),
            labels,
            creation_timestamp: meta.creation_timestamp.clone(),
        },
        spec: json!({}),
        status: PackageManifestStatus {
            catalog_source: meta.name.clone(),
            catalog_source_display_name: meta.display_name.clone(),
            catalog_source_publisher: meta.publisher.clone(),
            catalog_source_namespace: meta.namespace.clone(),
            provider,
            package_name: package.name().to_owned(),
            deprecation: package.package_deprecation().map(deprecation),
            channels,
            default_channel,
        },
    };
    Some(BuiltPackage { manifest, icon })
}

fn deprecation(message: &str) -> Deprecation {
    Deprecation {
        message: message.to_owned(),
    }
}

/// The channel's bundles that are not deprecated, highest version first (ties by name).
fn channel_entries(package: &PackageIndex, channel: &ChannelIndex) -> Vec<ChannelEntry> {
    let mut entries: Vec<_> = channel
        .graph()
        .entries()
        .iter()
        .filter(|e| package.bundle_deprecation(&e.name).is_none())
        .collect();
    entries.sort_by(|a, b| b.version.cmp(&a.version).then_with(|| a.name.cmp(&b.name)));
    entries
        .into_iter()
        .map(|e| ChannelEntry {
            name: e.name.clone(),
            version: package
                .bundle(&e.name)
                .and_then(|b| b.version_string())
                .or_else(|| e.version.as_ref().map(ToString::to_string))
                .unwrap_or_default(),
            deprecation: None,
        })
        .collect()
}

fn set_default_os_arch(labels: &mut BTreeMap<String, String>) {
    let has = |prefix: &str| labels.keys().any(|k| k.starts_with(prefix));
    let (needs_os, needs_arch) = (!has(OS_LABEL_PREFIX), !has(ARCH_LABEL_PREFIX));
    if needs_os {
        labels.insert(DEFAULT_OS_LABEL.into(), SUPPORTED.into());
    }
    if needs_arch {
        labels.insert(DEFAULT_ARCH_LABEL.into(), SUPPORTED.into());
    }
}

fn string_map(v: &Value) -> BTreeMap<String, String> {
    v.as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

fn str_of(v: &Value) -> String {
    v.as_str().unwrap_or("").to_owned()
}

fn app_link(v: &Value) -> AppLink {
    AppLink {
        name: str_of(&v["name"]),
        url: str_of(&v["url"]),
    }
}

fn array(v: &Value) -> &[Value] {
    v.as_array().map(Vec::as_slice).unwrap_or(&[])
}

/// An API description cut down to the fields OLM keeps (the rest, descriptors and resources,
/// would only make lists heavy).
fn cut_down(list: &Value, keep: &[&str]) -> Vec<Value> {
    array(list)
        .iter()
        .map(|d| {
            let mut out = Map::new();
            for key in keep {
                if let Some(v) = d.get(*key).filter(|v| match v {
                    Value::String(s) => !s.is_empty(),
                    Value::Null => false,
                    _ => true,
                }) {
                    out.insert((*key).to_owned(), v.clone());
                }
            }
            Value::Object(out)
        })
        .collect()
}

const CRD_KEEP: [&str; 5] = ["name", "version", "kind", "displayName", "description"];
const API_SERVICE_KEEP: [&str; 6] = [
    "name",
    "group",
    "version",
    "kind",
    "displayName",
    "description",
];

fn descriptions(v: &Value, keep: &[&str]) -> ApiDescriptions {
    ApiDescriptions {
        owned: cut_down(&v["owned"], keep),
        required: cut_down(&v["required"], keep),
    }
}

/// The images a CSV names: its deployments' containers and init containers and its
/// `relatedImages`, each once, sorted (OLM collects them in a set; its order is random).
fn related_images(csv: &Value) -> Vec<String> {
    let spec = &csv["spec"];
    let mut images = BTreeSet::new();
    for deployment in array(&spec["install"]["spec"]["deployments"]) {
        let pod = &deployment["spec"]["template"]["spec"];
        for container in array(&pod["containers"])
            .iter()
            .chain(array(&pod["initContainers"]))
        {
            if let Some(image) = container["image"].as_str().filter(|s| !s.is_empty()) {
                images.insert(image.to_owned());
            }
        }
    }
    for related in array(&spec["relatedImages"]) {
        if let Some(image) = related["image"].as_str().filter(|s| !s.is_empty()) {
            images.insert(image.to_owned());
        }
    }
    images.into_iter().collect()
}

/// `currentCSVDesc` of a channel head (icons included; the caller strips them).
pub fn csv_description(csv: &Value) -> CsvDescription {
    let spec = &csv["spec"];
    CsvDescription {
        display_name: str_of(&spec["displayName"]),
        icon: array(&spec["icon"])
            .iter()
            .map(|i| Icon {
                base64data: str_of(&i["base64data"]),
                mediatype: str_of(&i["mediatype"]),
            })
            .collect(),
        version: str_of(&spec["version"]),
        provider: app_link(&spec["provider"]),
        annotations: string_map(&csv["metadata"]["annotations"]),
        keywords: array(&spec["keywords"])
            .iter()
            .filter_map(|k| k.as_str().map(str::to_owned))
            .collect(),
        links: array(&spec["links"]).iter().map(app_link).collect(),
        maintainers: array(&spec["maintainers"])
            .iter()
            .map(|m| Maintainer {
                name: str_of(&m["name"]),
                email: str_of(&m["email"]),
            })
            .collect(),
        maturity: str_of(&spec["maturity"]),
        description: str_of(&spec["description"]),
        install_modes: array(&spec["installModes"]).to_vec(),
        customresourcedefinitions: descriptions(&spec["customresourcedefinitions"], &CRD_KEEP),
        apiservicedefinitions: descriptions(&spec["apiservicedefinitions"], &API_SERVICE_KEEP),
        native_apis: array(&spec["nativeAPIs"]).to_vec(),
        min_kube_version: str_of(&spec["minKubeVersion"]),
        related_images: related_images(csv),
    }
}

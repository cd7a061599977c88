//! `sourceType: configmap` (and `internal`): the historical "package manifests" catalog kept in
//! a ConfigMap's `customResourceDefinitions`, `clusterServiceVersions` and `packages` keys
//! (docs/catalog.md §4), read straight into a declarative config — no registry pod, no
//! `configmap-server` image (which operator-registry no longer builds).
//!
//! Each CSV becomes a bundle carrying the CSV and the CRDs it owns as inline manifests; channels
//! are built by walking `spec.replaces` from each channel's `currentCSV`; `spec.skips` and the
//! `olm.skipRange` annotation become the entries' skips and skipRange.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::Value;
use serde_json::value::RawValue;

use crate::catalog::properties;
use crate::catalog::{Bundle, Channel, ChannelEntry, DeclarativeConfig, Package, Property};

pub const CRDS_KEY: &str = "customResourceDefinitions";
pub const CSVS_KEY: &str = "clusterServiceVersions";
pub const PACKAGES_KEY: &str = "packages";
const SKIP_RANGE_ANNOTATION: &str = "olm.skipRange";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigMapCatalogError {
    #[error(
        "missing key {key:?} (a configmap catalog needs {CRDS_KEY:?}, {CSVS_KEY:?} and {PACKAGES_KEY:?})"
    )]
    MissingKey { key: &'static str },
    #[error("key {key:?}: not a YAML list: {message}")]
    NotAList { key: &'static str, message: String },
    #[error("key {key:?}, item {index}: {message}")]
    Item {
        key: &'static str,
        index: usize,
        message: String,
    },
    #[error("key {CRDS_KEY:?}: CRD {group}/{version} {kind} ({plural}) appears more than once")]
    DuplicateCrd {
        group: String,
        version: String,
        kind: String,
        plural: String,
    },
    #[error(
        "CSV {csv:?} owns CRD {name} version {version} kind {kind}, which is not in {CRDS_KEY:?}"
    )]
    MissingOwnedCrd {
        csv: String,
        name: String,
        version: String,
        kind: String,
    },
    #[error("package {package:?}, channel {channel:?}: currentCSV {csv:?} is not in {CSVS_KEY:?}")]
    MissingCurrentCsv {
        package: String,
        channel: String,
        csv: String,
    },
}

/// One CRD as the loader indexes it.
struct Crd {
    object: Box<RawValue>,
    /// `plural.group`, the name CSVs refer to it by.
    name: String,
    versions: Vec<String>,
    kind: String,
}

/// Reads the three keys of a configmap catalog into a declarative config.
pub fn declarative_config(
    data: &BTreeMap<String, String>,
) -> Result<DeclarativeConfig, ConfigMapCatalogError> {
    let crds = list(data, CRDS_KEY)?;
    let csvs = list(data, CSVS_KEY)?;
    let packages = list(data, PACKAGES_KEY)?;

    let crds = index_crds(crds)?;
    let mut csv_by_name: HashMap<String, (Value, Box<RawValue>)> = HashMap::new();
    let mut csv_order = Vec::new();
    for (index, csv) in csvs.into_iter().enumerate() {
        let name =
            str_at(&csv, &["metadata", "name"]).ok_or_else(|| ConfigMapCatalogError::Item {
                key: CSVS_KEY,
                index,
                message: "CSV has no metadata.name".to_owned(),
            })?;
        let raw = to_raw(&csv, CSVS_KEY, index)?;
        if csv_by_name.insert(name.clone(), (csv, raw)).is_none() {
            csv_order.push(name);
        }
    }

    let mut config = DeclarativeConfig::default();
    let mut bundle_package: HashMap<String, String> = HashMap::new();
    for (index, pkg) in packages.iter().enumerate() {
        let item_err = |message: &str| ConfigMapCatalogError::Item {
            key: PACKAGES_KEY,
            index,
            message: message.to_owned(),
        };
        let name =
            str_at(pkg, &["packageName"]).ok_or_else(|| item_err("package has no packageName"))?;
        config.packages.push(Package {
            name: name.clone(),
            default_channel: str_at(pkg, &["defaultChannel"]),
            ..Package::default()
        });
        let channels = pkg
            .get("channels")
            .and_then(Value::as_array)
            .ok_or_else(|| item_err("package has no channels list"))?;
        for ch in channels {
            let channel = str_at(ch, &["name"]).ok_or_else(|| item_err("channel has no name"))?;
            let current =
                str_at(ch, &["currentCSV"]).ok_or_else(|| item_err("channel has no currentCSV"))?;
            if !csv_by_name.contains_key(&current) {
                return Err(ConfigMapCatalogError::MissingCurrentCsv {
                    package: name.clone(),
                    channel,
                    csv: current,
                });
            }
            let entries = walk_replaces(&current, &csv_by_name);
            for e in &entries {
                bundle_package
                    .entry(e.name.clone())
                    .or_insert_with(|| name.clone());
            }
            config.channels.push(Channel {
                package: name.clone(),
                name: channel,
                entries,
                ..Channel::default()
            });
        }
    }

    for csv_name in csv_order {
        // CSVs no channel reaches are not part of any package: OLM never offers them either.
        let Some(package) = bundle_package.get(&csv_name) else {
            continue;
        };
        let Some((csv, raw)) = csv_by_name.remove(&csv_name) else {
            continue;
        };
        config
            .bundles
            .push(bundle(package, &csv_name, csv, raw, &crds)?);
    }
    Ok(config)
}

fn list(
    data: &BTreeMap<String, String>,
    key: &'static str,
) -> Result<Vec<Value>, ConfigMapCatalogError> {
    let text = data
        .get(key)
        .ok_or(ConfigMapCatalogError::MissingKey { key })?;
    let value: Value =
        serde_yaml_ng::from_str(text).map_err(|e| ConfigMapCatalogError::NotAList {
            key,
            message: e.to_string(),
        })?;
    match value {
        Value::Array(items) => Ok(items),
        Value::Null => Ok(Vec::new()),
        other => Err(ConfigMapCatalogError::NotAList {
            key,
            message: format!("found a {}", kind_name(&other)),
        }),
    }
}

fn index_crds(items: Vec<Value>) -> Result<Vec<Crd>, ConfigMapCatalogError> {
    let mut seen: HashSet<(String, String, String, String)> = HashSet::new();
    let mut out = Vec::with_capacity(items.len());
    for (index, crd) in items.into_iter().enumerate() {
        let item_err = |message: &str| ConfigMapCatalogError::Item {
            key: CRDS_KEY,
            index,
            message: message.to_owned(),
        };
        let group =
            str_at(&crd, &["spec", "group"]).ok_or_else(|| item_err("CRD has no spec.group"))?;
        let plural = str_at(&crd, &["spec", "names", "plural"])
            .ok_or_else(|| item_err("CRD has no spec.names.plural"))?;
        let kind = str_at(&crd, &["spec", "names", "kind"])
            .ok_or_else(|| item_err("CRD has no spec.names.kind"))?;
        // v1beta1 has `spec.version`; both have `spec.versions[].name`.
        let mut versions: Vec<String> = str_at(&crd, &["spec", "version"]).into_iter().collect();
        for v in crd
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(name) = v.get("name").and_then(Value::as_str)
                && !versions.iter().any(|x| x == name)
            {
                versions.push(name.to_owned());
            }
        }
        if versions.is_empty() {
            return Err(item_err("CRD has no versions"));
        }
        for v in &versions {
            if !seen.insert((group.clone(), v.clone(), kind.clone(), plural.clone())) {
                return Err(ConfigMapCatalogError::DuplicateCrd {
                    group,
                    version: v.clone(),
                    kind,
                    plural,
                });
            }
        }
        out.push(Crd {
            object: to_raw(&crd, CRDS_KEY, index)?,
            name: format!("{plural}.{group}"),
            versions,
            kind,
        });
    }
    Ok(out)
}

/// The channel from `current` down its `spec.replaces` chain, stopping at a CSV that is not in
/// the ConfigMap or at a cycle.
fn walk_replaces(
    current: &str,
    csvs: &HashMap<String, (Value, Box<RawValue>)>,
) -> Vec<ChannelEntry> {
    let mut entries = Vec::new();
    let mut seen = HashSet::new();
    let mut next = Some(current.to_owned());
    while let Some(name) = next.take() {
        let Some((csv, _)) = csvs.get(&name) else {
            break;
        };
        if !seen.insert(name.clone()) {
            break;
        }
        let replaces = str_at(csv, &["spec", "replaces"]);
        entries.push(ChannelEntry {
            name,
            replaces: replaces.clone(),
            skips: csv
                .pointer("/spec/skips")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect(),
            skip_range: str_at(csv, &["metadata", "annotations", SKIP_RANGE_ANNOTATION]),
        });
        next = replaces;
    }
    entries
}

fn bundle(
    package: &str,
    name: &str,
    csv: Value,
    raw: Box<RawValue>,
    crds: &[Crd],
) -> Result<Bundle, ConfigMapCatalogError> {
    let version = str_at(&csv, &["spec", "version"]).unwrap_or_default();
    let mut props = vec![property(
        properties::PACKAGE,
        serde_json::json!({"packageName": package, "version": version}),
    )];
    let mut objects: Vec<Box<RawValue>> = Vec::new();
    let api_entries = |path: &str| -> Vec<&Value> {
        csv.pointer(path)
            .and_then(Value::as_array)
            .map(|a| a.iter().collect())
            .unwrap_or_default()
    };
    for owned in api_entries("/spec/customresourcedefinitions/owned") {
        let crd_name = str_at(owned, &["name"]).unwrap_or_default();
        let version = str_at(owned, &["version"]).unwrap_or_default();
        let kind = str_at(owned, &["kind"]).unwrap_or_default();
        let Some(crd) = crds
            .iter()
            .find(|c| c.name == crd_name && c.kind == kind && c.versions.contains(&version))
        else {
            return Err(ConfigMapCatalogError::MissingOwnedCrd {
                csv: name.to_owned(),
                name: crd_name,
                version,
                kind,
            });
        };
        let group = crd_name.split_once('.').map(|(_, g)| g).unwrap_or_default();
        // Every served version of an owned CRD is provided, as `opm render` does (docs/catalog.md §8.3).
        for v in &crd.versions {
            props.push(gvk(properties::GVK, group, v, &crd.kind));
        }
        if !objects.iter().any(|o| o.get() == crd.object.get()) {
            objects.push(crd.object.clone());
        }
    }
    for owned in api_entries("/spec/apiservicedefinitions/owned") {
        props.push(api_service_gvk(properties::GVK, owned));
    }
    for required in api_entries("/spec/customresourcedefinitions/required") {
        let crd_name = str_at(required, &["name"]).unwrap_or_default();
        let group = crd_name.split_once('.').map(|(_, g)| g).unwrap_or_default();
        props.push(gvk(
            properties::GVK_REQUIRED,
            group,
            &str_at(required, &["version"]).unwrap_or_default(),
            &str_at(required, &["kind"]).unwrap_or_default(),
        ));
    }
    for required in api_entries("/spec/apiservicedefinitions/required") {
        props.push(api_service_gvk(properties::GVK_REQUIRED, required));
    }
    dedup_properties(&mut props);
    objects.push(raw);
    Ok(Bundle {
        package: package.to_owned(),
        name: name.to_owned(),
        image: String::new(),
        properties: props,
        objects,
        ..Bundle::default()
    })
}

fn api_service_gvk(type_: &str, entry: &Value) -> Property {
    gvk(
        type_,
        &str_at(entry, &["group"]).unwrap_or_default(),
        &str_at(entry, &["version"]).unwrap_or_default(),
        &str_at(entry, &["kind"]).unwrap_or_default(),
    )
}

fn gvk(type_: &str, group: &str, version: &str, kind: &str) -> Property {
    property(
        type_,
        serde_json::json!({"group": group, "kind": kind, "version": version}),
    )
}

fn property(type_: &str, value: Value) -> Property {
    // A `serde_json::Value` always serialises.
    let raw = serde_json::value::to_raw_value(&value).unwrap_or_else(|_| RawValue::NULL.to_owned());
    Property::new(type_, raw)
}

fn dedup_properties(props: &mut Vec<Property>) {
    let mut seen = HashSet::new();
    props.retain(|p| seen.insert((p.type_.clone(), p.json().get().to_owned())));
}

fn to_raw(
    value: &Value,
    key: &'static str,
    index: usize,
) -> Result<Box<RawValue>, ConfigMapCatalogError> {
    serde_json::value::to_raw_value(value).map_err(|e| ConfigMapCatalogError::Item {
        key,
        index,
        message: e.to_string(),
    })
}

fn str_at(value: &Value, path: &[&str]) -> Option<String> {
    let mut v = value;
    for p in path {
        v = v.get(p)?;
    }
    v.as_str().filter(|s| !s.is_empty()).map(str::to_owned)
}

fn kind_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "mapping",
    }
}

#[cfg(test)]
#[path = "configmap_catalog_tests.rs"]
mod tests;

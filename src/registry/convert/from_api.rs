//! Wire → declarative config: what a registry sent (ListBundles + GetPackage) rebuilt as the
//! packages, channels and bundles of a file-based catalog, so every catalog — local directory,
//! ConfigMap or remote registry — ends up in the same `CatalogIndex`.
//!
//! Tolerant like OLM's own client: registries built by old `opm` send no `properties`, only
//! `providedApis`/`requiredApis`/`dependencies`, and those are turned into the equivalent
//! properties (OLM's resolver cache does the same).

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::value::RawValue;

use crate::catalog::model::{SCHEMA_BUNDLE, SCHEMA_CHANNEL, SCHEMA_PACKAGE};
use crate::catalog::properties;
use crate::catalog::{
    Bundle, Channel, ChannelEntry, DeclarativeConfig, DeprecationEntry, DeprecationReference,
    Deprecations, Package, Property,
};
use crate::registry::client::RegistryContent;
use crate::registry::proto;

/// Something in the registry's answer that had to be dropped, in words.
pub type Warning = String;

/// Rebuilds a declarative config from a registry's answers.
pub fn declarative_config(content: &RegistryContent) -> (DeclarativeConfig, Vec<Warning>) {
    let mut warnings = Vec::new();
    let mut config = DeclarativeConfig::default();
    let mut deprecations: BTreeMap<String, Deprecations> = BTreeMap::new();
    let mut deprecate =
        |package: &str, schema: &str, name: &str, d: &Option<proto::Deprecation>| {
            let Some(d) = d else { return };
            let entry = DeprecationEntry {
                reference: DeprecationReference {
                    schema: schema.to_owned(),
                    name: name.to_owned(),
                },
                message: d.message.clone(),
            };
            let list = deprecations
                .entry(package.to_owned())
                .or_insert_with(|| Deprecations {
                    package: package.to_owned(),
                    ..Deprecations::default()
                });
            if !list.entries.iter().any(|e| e.reference == entry.reference) {
                list.entries.push(entry);
            }
        };

    for p in &content.packages {
        config.packages.push(Package {
            name: p.name.clone(),
            default_channel: non_empty(&p.default_channel_name),
            ..Package::default()
        });
        deprecate(&p.name, SCHEMA_PACKAGE, "", &p.deprecation);
        for c in &p.channels {
            deprecate(&p.name, SCHEMA_CHANNEL, &c.name, &c.deprecation);
        }
    }

    // Channels in first-seen order; entries in the order the registry listed them.
    let mut channel_slot: HashMap<(&str, &str), usize> = HashMap::new();
    let mut seen_bundles: HashSet<(&str, &str)> = HashSet::new();
    for b in &content.bundles {
        let slot = *channel_slot
            .entry((b.package_name.as_str(), b.channel_name.as_str()))
            .or_insert_with(|| {
                config.channels.push(Channel {
                    package: b.package_name.clone(),
                    name: b.channel_name.clone(),
                    ..Channel::default()
                });
                config.channels.len() - 1
            });
        let channel = &mut config.channels[slot];
        if !channel.entries.iter().any(|e| e.name == b.csv_name) {
            channel.entries.push(ChannelEntry {
                name: b.csv_name.clone(),
                replaces: non_empty(&b.replaces),
                skips: b.skips.iter().filter(|s| !s.is_empty()).cloned().collect(),
                skip_range: non_empty(&b.skip_range),
            });
        }
        if seen_bundles.insert((b.package_name.as_str(), b.csv_name.as_str())) {
            config.bundles.push(bundle(b, &mut warnings));
            deprecate(&b.package_name, SCHEMA_BUNDLE, &b.csv_name, &b.deprecation);
        }
    }
    config.deprecations = deprecations.into_values().collect();
    (config, warnings)
}

fn bundle(b: &proto::Bundle, warnings: &mut Vec<Warning>) -> Bundle {
    let mut props: Vec<Property> = Vec::with_capacity(b.properties.len() + 2);
    for (i, p) in b.properties.iter().enumerate() {
        match raw(&p.value) {
            Some(value) => props.push(Property::new(p.r#type.clone(), value)),
            None => warnings.push(format!(
                "bundle {:?} of package {:?}: property[{i}] of type {:?} is not JSON; dropped",
                b.csv_name, b.package_name, p.r#type
            )),
        }
    }
    let has = |props: &[Property], type_: &str| props.iter().any(|p| p.type_ == type_);

    // Legacy registries: derive what properties would have said.
    if !has(&props, properties::PACKAGE) {
        props.push(json_property(
            properties::PACKAGE,
            &serde_json::json!({"packageName": b.package_name, "version": b.version}),
        ));
    }
    if !has(&props, properties::GVK) {
        for g in &b.provided_apis {
            props.push(gvk_property(properties::GVK, g));
        }
    }
    let mut required: Vec<Property> = Vec::new();
    if b.dependencies.is_empty() {
        for g in &b.required_apis {
            required.push(gvk_property(properties::GVK_REQUIRED, g));
        }
    }
    for d in &b.dependencies {
        match dependency_property(d) {
            Some(p) => required.push(p),
            None => warnings.push(format!(
                "bundle {:?} of package {:?}: dependency of type {:?} with value {:?} is not understood; dropped",
                b.csv_name, b.package_name, d.r#type, d.value
            )),
        }
    }
    // FBC registries send each requirement twice (as a property and as a dependency).
    for p in required {
        if !props.iter().any(|q| same_property(q, &p)) {
            props.push(p);
        }
    }

    let mut objects: Vec<Box<RawValue>> = Vec::with_capacity(b.object.len());
    for (i, o) in b.object.iter().enumerate() {
        match raw(o) {
            Some(v) => objects.push(v),
            None => warnings.push(format!(
                "bundle {:?} of package {:?}: object[{i}] is not JSON; dropped",
                b.csv_name, b.package_name
            )),
        }
    }
    if objects.is_empty() && !b.csv_json.is_empty() {
        match raw(&b.csv_json) {
            Some(v) => objects.push(v),
            None => warnings.push(format!(
                "bundle {:?} of package {:?}: csvJson is not JSON; dropped",
                b.csv_name, b.package_name
            )),
        }
    }
    Bundle {
        package: b.package_name.clone(),
        name: b.csv_name.clone(),
        image: b.bundle_path.clone(),
        properties: props,
        objects,
        ..Bundle::default()
    }
}

/// `{type: olm.gvk, value: {group, version, kind}}` → `olm.gvk.required`;
/// `{type: olm.package, value: {packageName, version: <range>}}` → `olm.package.required`;
/// `olm.label` → `olm.label.required`; `olm.constraint` stays.
fn dependency_property(d: &proto::Dependency) -> Option<Property> {
    let value: serde_json::Value = serde_json::from_str(&d.value).ok()?;
    let text = |key: &str| value.get(key).and_then(|v| v.as_str()).map(str::to_owned);
    match d.r#type.as_str() {
        properties::GVK => Some(json_property(
            properties::GVK_REQUIRED,
            &serde_json::json!({
                "group": text("group")?,
                "kind": text("kind")?,
                "version": text("version")?,
            }),
        )),
        properties::PACKAGE => Some(json_property(
            properties::PACKAGE_REQUIRED,
            &serde_json::json!({
                "packageName": text("packageName")?,
                "versionRange": text("version").or_else(|| text("versionRange"))?,
            }),
        )),
        properties::LABEL => Some(json_property(properties::LABEL_REQUIRED, &value)),
        properties::CONSTRAINT => Some(json_property(properties::CONSTRAINT, &value)),
        _ => None,
    }
}

fn gvk_property(type_: &str, g: &proto::GroupVersionKind) -> Property {
    json_property(
        type_,
        &serde_json::json!({"group": g.group, "kind": g.kind, "version": g.version}),
    )
}

fn json_property(type_: &str, value: &serde_json::Value) -> Property {
    // A `serde_json::Value` always serialises.
    let raw = serde_json::value::to_raw_value(value).unwrap_or_else(|_| RawValue::NULL.to_owned());
    Property::new(type_, raw)
}

fn same_property(a: &Property, b: &Property) -> bool {
    if a.type_ != b.type_ {
        return false;
    }
    let parse = |p: &Property| serde_json::from_str::<serde_json::Value>(p.json().get()).ok();
    match (parse(a), parse(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a.json().get() == b.json().get(),
    }
}

fn raw(text: &str) -> Option<Box<RawValue>> {
    RawValue::from_string(text.to_owned()).ok()
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_owned())
}

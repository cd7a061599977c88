//! `CatalogIndex`: a catalog loaded once, indexed by package, channel and bundle, and shared
//! read-only (`Arc<CatalogIndex>`) by the registry server, the registry client and the resolver.
//! All lookups borrow; nothing is cloned per request.
//!
//! Building never fails: an invalid catalog still gets an index (the resolver reports graph
//! problems per channel, docs/catalog.md §9.2); `validate` says what is wrong with it.

use std::collections::HashMap;

use serde_json::value::RawValue;

use super::model::{
    Bundle, Channel, DeclarativeConfig, Deprecations, OtherBlob, Package, SCHEMA_BUNDLE,
    SCHEMA_CHANNEL, SCHEMA_PACKAGE,
};
use super::properties::{self, GvkValue};
use super::semver_range::{Version, parse_tolerant};
use super::upgrade_graph::{GraphEntry, UpgradeGraph};

/// A bundle with what the index derived from it.
#[derive(Debug, Clone)]
pub struct IndexedBundle {
    bundle: Bundle,
    version: Option<Version>,
    channels: Vec<String>,
}

impl IndexedBundle {
    pub fn bundle(&self) -> &Bundle {
        &self.bundle
    }

    pub fn name(&self) -> &str {
        &self.bundle.name
    }

    pub fn package(&self) -> &str {
        &self.bundle.package
    }

    /// Bundle image (`bundlePath` on the wire); empty when the content is inline.
    pub fn image(&self) -> &str {
        &self.bundle.image
    }

    /// The `olm.package` version, parsed tolerantly as the resolver does.
    pub fn version(&self) -> Option<&Version> {
        self.version.as_ref()
    }

    /// The `olm.package` version exactly as written.
    pub fn version_string(&self) -> Option<String> {
        properties::packages(&self.bundle.properties)
            .next()
            .map(|p| p.version)
    }

    /// Names of the channels that list this bundle, sorted.
    pub fn channels(&self) -> &[String] {
        &self.channels
    }

    pub fn properties(&self) -> &[super::model::Property] {
        &self.bundle.properties
    }

    pub fn provided_gvks(&self) -> impl Iterator<Item = GvkValue> + '_ {
        properties::provided_gvks(&self.bundle.properties)
    }

    pub fn required_gvks(&self) -> impl Iterator<Item = GvkValue> + '_ {
        properties::required_gvks(&self.bundle.properties)
    }

    /// Every inline manifest as JSON text (`object` on the wire).
    pub fn objects(&self) -> impl Iterator<Item = &str> {
        self.bundle.objects.iter().map(|o| o.get())
    }

    /// The inline CSV manifest, if the bundle carries one (`csvJson` on the wire).
    pub fn csv_json(&self) -> Option<&str> {
        self.bundle
            .objects
            .iter()
            .find(|o| object_kind(o).as_deref() == Some("ClusterServiceVersion"))
            .map(|o| o.get())
    }
}

/// `kind` of a manifest without parsing the rest.
pub fn object_kind(object: &RawValue) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct KindOnly {
        kind: Option<String>,
    }
    serde_json::from_str::<KindOnly>(object.get()).ok()?.kind
}

/// A channel and its upgrade graph.
#[derive(Debug, Clone)]
pub struct ChannelIndex {
    channel: Channel,
    graph: UpgradeGraph,
}

impl ChannelIndex {
    pub fn name(&self) -> &str {
        &self.channel.name
    }

    pub fn channel(&self) -> &Channel {
        &self.channel
    }

    pub fn graph(&self) -> &UpgradeGraph {
        &self.graph
    }
}

/// A package with its channels (sorted by name), bundles and deprecations.
#[derive(Debug, Clone)]
pub struct PackageIndex {
    package: Package,
    channels: Vec<ChannelIndex>,
    bundles: Vec<IndexedBundle>,
    bundle_by_name: HashMap<String, usize>,
    deprecations: Option<Deprecations>,
}

impl PackageIndex {
    pub fn name(&self) -> &str {
        &self.package.name
    }

    pub fn package(&self) -> &Package {
        &self.package
    }

    pub fn default_channel_name(&self) -> Option<&str> {
        self.package.default_channel.as_deref()
    }

    pub fn default_channel(&self) -> Option<&ChannelIndex> {
        self.default_channel_name().and_then(|n| self.channel(n))
    }

    pub fn channels(&self) -> &[ChannelIndex] {
        &self.channels
    }

    pub fn channel(&self, name: &str) -> Option<&ChannelIndex> {
        self.channels
            .binary_search_by(|c| c.name().cmp(name))
            .ok()
            .map(|i| &self.channels[i])
    }

    /// Bundles in catalog order.
    pub fn bundles(&self) -> &[IndexedBundle] {
        &self.bundles
    }

    pub fn bundle(&self, name: &str) -> Option<&IndexedBundle> {
        self.bundle_by_name.get(name).map(|&i| &self.bundles[i])
    }

    pub fn deprecations(&self) -> Option<&Deprecations> {
        self.deprecations.as_ref()
    }

    fn deprecation(&self, schema: &str, name: &str) -> Option<&str> {
        self.deprecations
            .as_ref()?
            .entries
            .iter()
            .find(|e| e.reference.schema == schema && e.reference.name == name)
            .map(|e| e.message.as_str())
    }

    /// Message of the package-level deprecation, if any.
    pub fn package_deprecation(&self) -> Option<&str> {
        self.deprecation(SCHEMA_PACKAGE, "")
    }

    pub fn channel_deprecation(&self, channel: &str) -> Option<&str> {
        self.deprecation(SCHEMA_CHANNEL, channel)
    }

    pub fn bundle_deprecation(&self, bundle: &str) -> Option<&str> {
        self.deprecation(SCHEMA_BUNDLE, bundle)
    }
}

/// A channel entry together with where it lives.
#[derive(Debug, Clone, Copy)]
pub struct EntryRef<'a> {
    pub package: &'a PackageIndex,
    pub channel: &'a ChannelIndex,
    pub entry: &'a GraphEntry,
}

#[derive(Debug, Clone, Copy)]
struct EntryPos {
    package: u32,
    channel: u32,
    entry: u32,
}

/// The whole catalog, indexed. Build once, share as `Arc<CatalogIndex>`.
#[derive(Debug, Clone, Default)]
pub struct CatalogIndex {
    packages: Vec<PackageIndex>,
    by_name: HashMap<String, usize>,
    others: Vec<OtherBlob>,
    /// csv name → entries whose `replaces` is it or whose `skips` contain it.
    replacers: HashMap<String, Vec<EntryPos>>,
    /// provided GVK → (package, bundle) positions.
    providers: HashMap<GvkValue, Vec<(u32, u32)>>,
}

impl CatalogIndex {
    /// Indexes an in-memory catalog: from an FBC directory, bundle directories, or bundles
    /// received over gRPC. Channels and bundles of packages that have no `olm.package` blob get
    /// an implicit package with only a name.
    pub fn new(config: DeclarativeConfig) -> CatalogIndex {
        let DeclarativeConfig {
            packages,
            channels,
            bundles,
            deprecations,
            others,
        } = config;
        let mut index = CatalogIndex {
            others,
            ..CatalogIndex::default()
        };
        let mut pending: Vec<PendingPackage> = Vec::new();
        for p in packages {
            if index.by_name.contains_key(&p.name) {
                continue; // a duplicate package blob (opm C2): the first one stays
            }
            index.by_name.insert(p.name.clone(), pending.len());
            pending.push((p, Vec::new(), Vec::new(), None));
        }
        for c in channels {
            let i = pending_slot(&c.package, &mut pending, &mut index.by_name);
            pending[i].1.push(c);
        }
        for b in bundles {
            let i = pending_slot(&b.package, &mut pending, &mut index.by_name);
            pending[i].2.push(b);
        }
        for d in deprecations {
            let i = pending_slot(&d.package, &mut pending, &mut index.by_name);
            pending[i].3.get_or_insert(d);
        }
        let mut order: Vec<usize> = (0..pending.len()).collect();
        order.sort_by(|&a, &b| pending[a].0.name.cmp(&pending[b].0.name));
        let mut slots: Vec<Option<_>> = pending.into_iter().map(Some).collect();
        for i in order {
            if let Some((package, channels, bundles, deprecations)) = slots[i].take() {
                index
                    .packages
                    .push(build_package(package, channels, bundles, deprecations));
            }
        }
        index.by_name = index
            .packages
            .iter()
            .enumerate()
            .map(|(i, p)| (p.package.name.clone(), i))
            .collect();
        index.build_lookups();
        index
    }

    fn build_lookups(&mut self) {
        for (pi, p) in self.packages.iter().enumerate() {
            for (ci, c) in p.channels.iter().enumerate() {
                for (ei, e) in c.graph.entries().iter().enumerate() {
                    let pos = EntryPos {
                        package: pi as u32,
                        channel: ci as u32,
                        entry: ei as u32,
                    };
                    let mut targets: Vec<&String> = e.replaces.iter().chain(&e.skips).collect();
                    targets.dedup();
                    for t in targets {
                        self.replacers.entry(t.clone()).or_default().push(pos);
                    }
                }
            }
            for (bi, b) in p.bundles.iter().enumerate() {
                for gvk in b.provided_gvks() {
                    let list = self.providers.entry(gvk).or_default();
                    if !list.contains(&(pi as u32, bi as u32)) {
                        list.push((pi as u32, bi as u32));
                    }
                }
            }
        }
    }

    /// Packages sorted by name.
    pub fn packages(&self) -> &[PackageIndex] {
        &self.packages
    }

    pub fn package(&self, name: &str) -> Option<&PackageIndex> {
        self.by_name.get(name).map(|&i| &self.packages[i])
    }

    pub fn bundle(&self, package: &str, name: &str) -> Option<&IndexedBundle> {
        self.package(package)?.bundle(name)
    }

    /// Blobs of schemas olm-rs does not interpret.
    pub fn others(&self) -> &[OtherBlob] {
        &self.others
    }

    fn entry_ref(&self, pos: EntryPos) -> EntryRef<'_> {
        let package = &self.packages[pos.package as usize];
        let channel = &package.channels[pos.channel as usize];
        EntryRef {
            package,
            channel,
            entry: &channel.graph.entries()[pos.entry as usize],
        }
    }

    /// Entries in any package and channel whose `replaces` names `csv_name` or whose `skips`
    /// contain it (registry `GetChannelEntriesThatReplace`).
    pub fn entries_that_replace(&self, csv_name: &str) -> impl Iterator<Item = EntryRef<'_>> {
        self.replacers
            .get(csv_name)
            .into_iter()
            .flatten()
            .map(|&pos| self.entry_ref(pos))
    }

    /// Bundles with an `olm.gvk` property equal to `gvk`, by package then catalog order.
    pub fn bundles_that_provide(
        &self,
        gvk: &GvkValue,
    ) -> impl Iterator<Item = (&PackageIndex, &IndexedBundle)> {
        self.providers
            .get(gvk)
            .into_iter()
            .flatten()
            .map(|&(p, b)| {
                let package = &self.packages[p as usize];
                (package, &package.bundles[b as usize])
            })
    }

    /// Total number of bundles.
    pub fn bundle_count(&self) -> usize {
        self.packages.iter().map(|p| p.bundles.len()).sum()
    }
}

type PendingPackage = (Package, Vec<Channel>, Vec<Bundle>, Option<Deprecations>);

/// Position of package `name` in `pending`, adding an implicit package when there is none.
fn pending_slot(
    name: &str,
    pending: &mut Vec<PendingPackage>,
    by_name: &mut HashMap<String, usize>,
) -> usize {
    *by_name.entry(name.to_string()).or_insert_with(|| {
        pending.push((
            Package {
                name: name.to_string(),
                ..Package::default()
            },
            Vec::new(),
            Vec::new(),
            None,
        ));
        pending.len() - 1
    })
}

fn build_package(
    package: Package,
    channels: Vec<Channel>,
    bundles: Vec<Bundle>,
    deprecations: Option<Deprecations>,
) -> PackageIndex {
    let mut bundle_by_name = HashMap::with_capacity(bundles.len());
    let mut indexed = Vec::with_capacity(bundles.len());
    for bundle in bundles {
        if bundle_by_name.contains_key(&bundle.name) {
            continue; // duplicate bundle (opm C10): the first one stays
        }
        let version = properties::packages(&bundle.properties)
            .next()
            .and_then(|p| parse_tolerant(&p.version).ok());
        bundle_by_name.insert(bundle.name.clone(), indexed.len());
        indexed.push(IndexedBundle {
            bundle,
            version,
            channels: Vec::new(),
        });
    }
    let mut channel_index: Vec<ChannelIndex> = Vec::with_capacity(channels.len());
    for channel in channels {
        if channel_index.iter().any(|c| c.channel.name == channel.name) {
            continue; // duplicate channel (opm C6): the first one stays
        }
        let entries: Vec<GraphEntry> = channel
            .entries
            .iter()
            .map(|e| {
                let version = bundle_by_name
                    .get(&e.name)
                    .and_then(|&i| indexed[i].version.clone());
                GraphEntry::new(e, version)
            })
            .collect();
        let graph = UpgradeGraph::new(&package.name, &channel.name, entries);
        channel_index.push(ChannelIndex { channel, graph });
    }
    channel_index.sort_by(|a, b| a.channel.name.cmp(&b.channel.name));
    for c in &channel_index {
        for e in &c.channel.entries {
            if let Some(&i) = bundle_by_name.get(&e.name)
                && !indexed[i].channels.contains(&c.channel.name)
            {
                indexed[i].channels.push(c.channel.name.clone());
            }
        }
    }
    PackageIndex {
        package,
        channels: channel_index,
        bundles: indexed,
        bundle_by_name,
        deprecations,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::model::{ChannelEntry, DeprecationEntry, DeprecationReference, Property};

    fn bundle(pkg: &str, name: &str, version: &str, gvk: Option<&str>) -> Bundle {
        let mut properties = vec![
            Property::from_value(
                properties::PACKAGE,
                &serde_json::json!({"packageName": pkg, "version": version}),
            )
            .unwrap(),
        ];
        if let Some(kind) = gvk {
            properties.push(
                Property::from_value(
                    properties::GVK,
                    &serde_json::json!({"group": "g.io", "kind": kind, "version": "v1"}),
                )
                .unwrap(),
            );
        }
        Bundle {
            package: pkg.into(),
            name: name.into(),
            image: format!("quay.io/x/{name}"),
            properties,
            ..Bundle::default()
        }
    }

    fn entry(name: &str, replaces: Option<&str>, skips: &[&str]) -> ChannelEntry {
        ChannelEntry {
            name: name.into(),
            replaces: replaces.map(Into::into),
            skips: skips.iter().map(|s| s.to_string()).collect(),
            skip_range: None,
        }
    }

    fn catalog() -> CatalogIndex {
        CatalogIndex::new(DeclarativeConfig {
            packages: vec![Package {
                name: "etcd".into(),
                default_channel: Some("stable".into()),
                ..Package::default()
            }],
            channels: vec![
                Channel {
                    package: "etcd".into(),
                    name: "stable".into(),
                    entries: vec![
                        entry("etcd.v2", Some("etcd.v1"), &[]),
                        entry("etcd.v1", None, &[]),
                    ],
                    ..Channel::default()
                },
                Channel {
                    package: "etcd".into(),
                    name: "alpha".into(),
                    entries: vec![
                        entry("etcd.v3", Some("etcd.v2"), &["etcd.v1"]),
                        entry("etcd.v2", None, &[]),
                    ],
                    ..Channel::default()
                },
            ],
            bundles: vec![
                bundle("etcd", "etcd.v1", "1.0.0", Some("EtcdCluster")),
                bundle("etcd", "etcd.v2", "2.0.0", Some("EtcdCluster")),
                bundle("etcd", "etcd.v3", "3.0.0", Some("EtcdBackup")),
                bundle("other", "other.v1", "1.0.0", None),
            ],
            deprecations: vec![Deprecations {
                package: "etcd".into(),
                entries: vec![DeprecationEntry {
                    reference: DeprecationReference {
                        schema: SCHEMA_CHANNEL.into(),
                        name: "alpha".into(),
                    },
                    message: "use stable".into(),
                }],
                ..Deprecations::default()
            }],
            others: vec![],
        })
    }

    #[test]
    fn indexes_packages_channels_bundles() {
        let idx = catalog();
        let names: Vec<_> = idx.packages().iter().map(|p| p.name()).collect();
        assert_eq!(
            names,
            ["etcd", "other"],
            "implicit package for orphan bundle"
        );
        let etcd = idx.package("etcd").unwrap();
        assert_eq!(etcd.default_channel().unwrap().name(), "stable");
        let channels: Vec<_> = etcd.channels().iter().map(|c| c.name()).collect();
        assert_eq!(channels, ["alpha", "stable"]);
        assert_eq!(
            etcd.bundle("etcd.v2").unwrap().channels(),
            ["alpha", "stable"]
        );
        assert_eq!(
            etcd.bundle("etcd.v3")
                .unwrap()
                .version()
                .unwrap()
                .to_string(),
            "3.0.0"
        );
        assert_eq!(
            etcd.channel("stable")
                .unwrap()
                .graph()
                .channel_head()
                .unwrap()
                .name,
            "etcd.v2"
        );
        assert_eq!(etcd.channel_deprecation("alpha"), Some("use stable"));
        assert_eq!(etcd.channel_deprecation("stable"), None);
    }

    #[test]
    fn finds_replacers_and_providers() {
        let idx = catalog();
        let mut replacers: Vec<_> = idx
            .entries_that_replace("etcd.v1")
            .map(|r| format!("{}/{}", r.channel.name(), r.entry.name))
            .collect();
        replacers.sort();
        assert_eq!(replacers, ["alpha/etcd.v3", "stable/etcd.v2"]);
        let gvk = GvkValue {
            group: "g.io".into(),
            kind: "EtcdCluster".into(),
            version: "v1".into(),
        };
        let providers: Vec<_> = idx
            .bundles_that_provide(&gvk)
            .map(|(_, b)| b.name())
            .collect();
        assert_eq!(providers, ["etcd.v1", "etcd.v2"]);
    }
}

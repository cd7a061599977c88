//! Table tests of `decide` over a small hand-built catalog.

use crate::api::CatalogRef;
use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::api::{Subscription, SubscriptionSpec, SubscriptionStatus};
use crate::catalog::CatalogIndex;
use crate::catalog::model::{Bundle, Channel, ChannelEntry, DeclarativeConfig, Package, Property};
use crate::catalog::properties::GvkValue;
use crate::catalog::upgrade_graph::{EdgeKind, NoUpdate};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

fn bundle(pkg: &str, name: &str, version: &str, kind: &str) -> Bundle {
    Bundle {
        package: pkg.into(),
        name: name.into(),
        image: format!("quay.io/test/{name}"),
        properties: vec![
            Property::from_value(
                "olm.package",
                &json!({"packageName": pkg, "version": version}),
            )
            .unwrap(),
            Property::from_value(
                "olm.gvk",
                &json!({"group": "example.com", "kind": kind, "version": "v1"}),
            )
            .unwrap(),
        ],
        ..Bundle::default()
    }
}

fn entry(name: &str, replaces: Option<&str>, skips: &[&str], range: Option<&str>) -> ChannelEntry {
    ChannelEntry {
        name: name.into(),
        replaces: replaces.map(Into::into),
        skips: skips.iter().map(|s| s.to_string()).collect(),
        skip_range: range.map(Into::into),
    }
}

fn channel(pkg: &str, name: &str, entries: Vec<ChannelEntry>) -> Channel {
    Channel {
        package: pkg.into(),
        name: name.into(),
        entries,
        ..Channel::default()
    }
}

/// `etcd`: stable v1 ← v2 ← v3 (replaces); fast: v4 with skipRange <4.0.0 (replaces v3, not in
/// fast); `legacy`: v1 only. `other` provides Widget.
fn catalog() -> CatalogIndex {
    CatalogIndex::new(DeclarativeConfig {
        packages: vec![
            Package {
                name: "etcd".into(),
                default_channel: Some("stable".into()),
                ..Package::default()
            },
            Package {
                name: "other".into(),
                default_channel: Some("stable".into()),
                ..Package::default()
            },
        ],
        channels: vec![
            channel(
                "etcd",
                "stable",
                vec![
                    entry("etcd.v1", None, &[], None),
                    entry("etcd.v2", Some("etcd.v1"), &[], None),
                    entry("etcd.v3", Some("etcd.v2"), &[], None),
                ],
            ),
            channel(
                "etcd",
                "fast",
                vec![entry("etcd.v4", Some("etcd.v3"), &[], Some("<4.0.0"))],
            ),
            channel("etcd", "pinned", vec![entry("etcd.v1", None, &[], None)]),
            channel("other", "stable", vec![entry("other.v1", None, &[], None)]),
        ],
        bundles: vec![
            bundle("etcd", "etcd.v1", "1.0.0", "EtcdCluster"),
            bundle("etcd", "etcd.v2", "2.0.0", "EtcdCluster"),
            bundle("etcd", "etcd.v3", "3.0.0", "EtcdCluster"),
            bundle("etcd", "etcd.v4", "4.0.0", "EtcdCluster"),
            bundle("other", "other.v1", "1.0.0", "Widget"),
        ],
        ..DeclarativeConfig::default()
    })
}

fn sub(name: &str, package: &str, channel: Option<&str>, installed: Option<&str>) -> Subscription {
    let mut s = Subscription::new(
        name,
        SubscriptionSpec {
            source: "community".into(),
            source_namespace: "olm".into(),
            name: package.into(),
            channel: channel.map(Into::into),
            starting_csv: None,
            install_plan_approval: None,
            config: None,
        },
    );
    s.metadata.namespace = Some("ns".into());
    if let Some(csv) = installed {
        let mut status = SubscriptionStatus::new(Time(jiff::Timestamp::UNIX_EPOCH));
        status.installed_csv = Some(csv.into());
        status.current_csv = Some(csv.into());
        s.status = Some(status);
    }
    s
}

fn installed(name: &str, package: Option<&str>, version: &str, kind: &str) -> InstalledCsv {
    InstalledCsv {
        name: name.into(),
        version: crate::catalog::semver_range::parse_tolerant(version).ok(),
        package: package.map(Into::into),
        provided: vec![GvkValue {
            group: "example.com".into(),
            kind: kind.into(),
            version: "v1".into(),
        }],
        phase: "Succeeded".into(),
        properties: Vec::new(),
    }
}

struct World {
    catalogs: Vec<CatalogInput>,
    installed: Vec<InstalledCsv>,
    groups: OperatorGroups,
}

impl World {
    fn new() -> World {
        World {
            catalogs: vec![CatalogInput {
                key: CatalogRef::new("olm", "community"),
                priority: 0,
                uid: None,
                content: CatalogContent::Ready(Arc::new(catalog())),
                healthy: true,
            }],
            installed: Vec::new(),
            groups: OperatorGroups {
                names: vec!["og".into()],
                exclude_global_catalogs: false,
            },
        }
    }

    fn decide(&self, subs: &[Subscription]) -> Vec<Outcome> {
        let ns = NamespaceInput {
            namespace: "ns",
            subscriptions: subs,
            installed: &self.installed,
            catalogs: &self.catalogs,
            operator_groups: &self.groups,
            global_catalog_namespace: "olm",
        };
        decide(&ns).into_iter().map(|d| d.outcome).collect()
    }

    fn one(&self, s: Subscription) -> Outcome {
        self.decide(&[s]).remove(0)
    }
}

fn target(outcome: &Outcome) -> &Target {
    match outcome {
        Outcome::Install(t) => t,
        other => panic!("expected an install, got {other:?}"),
    }
}

fn refusal(outcome: Outcome) -> Refusal {
    match outcome {
        Outcome::Refused(r) => r,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn fresh_install_takes_the_head_of_the_default_channel() {
    let w = World::new();
    let out = w.one(sub("etcd", "etcd", None, None));
    let t = target(&out);
    assert_eq!(
        (t.bundle.as_str(), t.channel.as_str()),
        ("etcd.v3", "stable")
    );
    assert_eq!((t.replaces.as_deref(), t.why), (None, Why::ChannelHead));
    assert_eq!(t.version.as_deref(), Some("3.0.0"));
    let out = w.one(sub("etcd", "etcd", Some("fast"), None));
    assert_eq!(target(&out).bundle, "etcd.v4");
}

#[test]
fn starting_csv_is_installed_exactly_then_upgrades_hop_by_hop() {
    let mut w = World::new();
    let mut s = sub("etcd", "etcd", Some("stable"), None);
    s.spec.starting_csv = Some("etcd.v1".into());
    let out = w.one(s.clone());
    assert_eq!(
        (target(&out).bundle.as_str(), target(&out).why),
        ("etcd.v1", Why::StartingCsv)
    );

    w.installed
        .push(installed("etcd.v1", Some("etcd"), "1.0.0", "EtcdCluster"));
    s.status = sub("etcd", "etcd", None, Some("etcd.v1")).status;
    let out = w.one(s.clone());
    let t = target(&out);
    assert_eq!(
        (t.bundle.as_str(), t.replaces.as_deref()),
        ("etcd.v2", Some("etcd.v1"))
    );
    assert_eq!(t.why, Why::Upgrade(EdgeKind::Replaces));

    w.installed = vec![installed("etcd.v3", Some("etcd"), "3.0.0", "EtcdCluster")];
    s.status = sub("etcd", "etcd", None, Some("etcd.v3")).status;
    match w.one(s) {
        Outcome::UpToDate {
            installed,
            why: NoUpdate::AtHead { channel, .. },
            ..
        } => {
            assert_eq!(
                (installed.as_str(), channel.as_str()),
                ("etcd.v3", "stable")
            );
        }
        other => panic!("expected up to date, got {other:?}"),
    }
}

#[test]
fn missing_starting_csv_names_the_channels_that_list_it() {
    let w = World::new();
    let mut s = sub("etcd", "etcd", Some("fast"), None);
    s.spec.starting_csv = Some("etcd.v1".into());
    let r = refusal(w.one(s));
    assert_eq!(
        r.to_string(),
        "no operators found with name etcd.v1 in channel fast of package etcd in the catalog referenced by subscription etcd; startingCSV etcd.v1 is not in channel \"fast\" of package \"etcd\" in catalog olm/community; it is listed in channels \"pinned\", \"stable\""
    );
}

#[test]
fn channel_switch_follows_a_skip_range() {
    let mut w = World::new();
    w.installed
        .push(installed("etcd.v1", Some("etcd"), "1.0.0", "EtcdCluster"));
    let out = w.one(sub("etcd", "etcd", Some("fast"), Some("etcd.v1")));
    let t = target(&out);
    assert_eq!(
        (t.bundle.as_str(), t.why),
        ("etcd.v4", Why::Upgrade(EdgeKind::SkipRange))
    );
}

#[test]
fn channel_switch_without_a_path_is_explained() {
    let mut w = World::new();
    w.installed
        .push(installed("etcd.v3", Some("etcd"), "3.0.0", "EtcdCluster"));
    let r = refusal(w.one(sub("etcd", "etcd", Some("pinned"), Some("etcd.v3"))));
    assert_eq!(r.reason(), CONSTRAINTS_NOT_SATISFIABLE);
    assert_eq!(
        r.to_string(),
        "the installed operator etcd.v3 cannot move to channel \"pinned\" of package \"etcd\" in catalog olm/community: no entry of channel \"pinned\" replaces or skips etcd.v3 or has a skipRange containing 3.0.0; etcd.v3 is not an entry of this channel"
    );
}

#[test]
fn unknown_package_and_channel_are_explained() {
    let w = World::new();
    let r = refusal(w.one(sub("e", "etcdd", None, None)));
    assert_eq!(
        r.to_string(),
        "no operators found in package etcdd in the catalog referenced by subscription e; package \"etcdd\" is not in catalog olm/community; did you mean \"etcd\"?"
    );
    let r = refusal(w.one(sub("e", "etcd", Some("beta"), None)));
    assert!(
        r.to_string().contains(
            "the package has channels \"fast\", \"pinned\", \"stable\" (default \"stable\")"
        ),
        "{r}"
    );
}

#[test]
fn an_unreadable_catalog_fails_only_its_own_subscriptions() {
    let mut w = World::new();
    w.catalogs.push(CatalogInput {
        key: CatalogRef::new("ns", "broken"),
        priority: 0,
        uid: None,
        content: CatalogContent::Unavailable("connection refused".into()),
        healthy: false,
    });
    let mut bad = sub("bad", "other", None, None);
    bad.spec.source = "broken".into();
    bad.spec.source_namespace = "ns".into();
    let out = w.decide(&[bad, sub("good", "etcd", None, None)]);
    let r = match &out[0] {
        Outcome::Refused(r) => r.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(r.reason(), ERROR_PREVENTED_RESOLUTION);
    assert_eq!(
        r.to_string(),
        "error using catalogsource ns/broken: connection refused; so package \"other\" cannot be resolved until the catalog can be read"
    );
    assert_eq!(target(&out[1]).bundle, "etcd.v3");
}

#[test]
fn catalogs_outside_the_namespace_and_global_namespace_are_invisible() {
    let w = World::new();
    let mut s = sub("e", "etcd", None, None);
    s.spec.source_namespace = "elsewhere".into();
    let r = refusal(w.one(s));
    assert_eq!(
        r.to_string(),
        "no operators found from catalog community in namespace elsewhere referenced by subscription e: catalog source elsewhere/community cannot be used from namespace ns: a Subscription may only use catalogs in its own namespace or in the global catalog namespace olm"
    );
}

#[test]
fn zero_or_two_operator_groups_refuse_every_subscription() {
    let mut w = World::new();
    w.groups.names = vec!["a".into(), "b".into()];
    let out = w.decide(&[
        sub("one", "etcd", None, None),
        sub("two", "other", None, None),
    ]);
    for o in out {
        assert_eq!(refusal(o).reason(), ERROR_PREVENTED_RESOLUTION);
    }
}

#[test]
fn second_subscription_to_a_package_is_refused() {
    let w = World::new();
    let mut first = sub("first", "etcd", None, None);
    first.metadata.creation_timestamp = Some(Time(jiff::Timestamp::from_second(1).unwrap()));
    let mut second = sub("second", "etcd", None, None);
    second.metadata.creation_timestamp = Some(Time(jiff::Timestamp::from_second(2).unwrap()));
    let out = w.decide(&[second, first]);
    assert!(
        refusal(out[0].clone())
            .to_string()
            .contains("already subscribed to by Subscription first")
    );
    assert_eq!(target(&out[1]).bundle, "etcd.v3");
}

#[test]
fn an_api_already_provided_by_another_operator_is_refused() {
    let mut w = World::new();
    w.installed
        .push(installed("rival.v1", Some("rival"), "1.0.0", "Widget"));
    let r = refusal(w.one(sub("o", "other", None, None)));
    assert_eq!(
        r.to_string(),
        "constraints not satisfiable: subscription o exists, subscription o requires community/olm/stable/other.v1, there can be only one provider of Widget (example.com/v1); Subscription o cannot install package \"other\" from any channel of catalog olm/community: bundle other.v1 would be a second provider of Widget (example.com/v1) next to installed operator rival.v1"
    );
}

#[test]
fn an_unclaimed_csv_of_the_package_is_adopted() {
    let mut w = World::new();
    w.installed
        .push(installed("etcd.v2", Some("etcd"), "2.0.0", "EtcdCluster"));
    assert_eq!(
        w.one(sub("etcd", "etcd", None, None)),
        Outcome::Adopt {
            csv: "etcd.v2".into()
        }
    );
}

#[test]
fn an_unclaimed_csv_outside_the_subscribed_channel_is_named_and_left_alone() {
    let mut w = World::new();
    // etcd.v4 is only in channel "fast"; the Subscription follows "stable".
    w.installed
        .push(installed("etcd.v4", Some("etcd"), "4.0.0", "EtcdCluster"));
    let r = refusal(w.one(sub("etcd", "etcd", Some("stable"), None)));
    assert_eq!(r.reason(), CONSTRAINTS_NOT_SATISFIABLE);
    assert_eq!(
        r.to_string(),
        "constraints not satisfiable: clusterserviceversion etcd.v4 exists and is not referenced by a subscription; Subscription etcd does not adopt it because it is not in channel \"stable\" of package \"etcd\" in catalog olm/community; olm-rs leaves etcd.v4 as it is: delete it for package \"etcd\" to be installed from catalog olm/community, or subscribe to what it was installed from"
    );
    // Following "fast", the same CSV is adopted.
    assert_eq!(
        w.one(sub("etcd", "etcd", Some("fast"), None)),
        Outcome::Adopt {
            csv: "etcd.v4".into()
        }
    );
    // A CSV of another package that carries a bundle's name is refused by name too.
    w.installed = vec![installed("etcd.v3", Some("etcd-fork"), "3.0.0", "Fork")];
    let r = refusal(w.one(sub("etcd", "etcd", None, None)));
    assert!(
        r.to_string().contains(
            "clusterserviceversion etcd.v3 exists and is not referenced by a subscription; Subscription etcd does not adopt it because it belongs to package \"etcd-fork\", though package \"etcd\" in catalog olm/community has a bundle of that name"
        ),
        "{r}"
    );
}

#[test]
fn deprecated_property_bundles_are_passed_over() {
    let mut config = DeclarativeConfig {
        packages: vec![Package {
            name: "etcd".into(),
            default_channel: Some("stable".into()),
            ..Package::default()
        }],
        channels: vec![channel(
            "etcd",
            "stable",
            vec![
                entry("etcd.v1", None, &[], None),
                entry("etcd.v2", Some("etcd.v1"), &[], None),
            ],
        )],
        bundles: vec![
            bundle("etcd", "etcd.v1", "1.0.0", "EtcdCluster"),
            bundle("etcd", "etcd.v2", "2.0.0", "EtcdCluster"),
        ],
        ..DeclarativeConfig::default()
    };
    config.bundles[1]
        .properties
        .push(Property::from_value("olm.deprecated", &json!({})).unwrap());
    let mut w = World::new();
    w.catalogs[0].content = CatalogContent::Ready(Arc::new(CatalogIndex::new(config)));
    assert_eq!(
        target(&w.one(sub("etcd", "etcd", None, None))).bundle,
        "etcd.v1"
    );
}

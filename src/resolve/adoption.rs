//! A Subscription without an installed CSV, next to a CSV of its package that runs unclaimed
//! (docs/resolution.md §4.2): re-created after a delete, a GitOps re-sync, a CSV OLM installed
//! before a takeover. OLM refuses it ("exists and is not referenced by a subscription", a known
//! pain); olm-rs adopts the CSV when it is what the Subscription asks for — its package, in a
//! channel it follows of its catalog — and otherwise names it and leaves it alone.

use crate::catalog::CatalogIndex;
use crate::catalog::index::ChannelIndex;

use super::input::{InstalledCsv, NamespaceInput};

/// What an unclaimed installed CSV means for a Subscription that has none.
#[derive(Debug, Clone, PartialEq)]
pub enum Standing<'a> {
    /// Its package, in a channel the Subscription follows: it becomes the Subscription's.
    Adopt(&'a InstalledCsv),
    /// A CSV in the way that is not the Subscription's to take: never adopted, replaced or
    /// deleted; the Subscription is refused, naming it.
    InTheWay(&'a InstalledCsv, Foreign),
}

/// Why an installed CSV in the way is not adopted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Foreign {
    /// Its package, but in none of the channels the Subscription follows in its catalog (it
    /// came from another channel or catalog).
    NotInChannels,
    /// It carries the name of one of the package's bundles but belongs to another package.
    OtherPackage(String),
}

/// The unclaimed installed CSV that decides a fresh Subscription to `package`, whose
/// `channels` (in `index`) it follows, or `None` when none stands in its way. An adoptable CSV
/// wins over one in the way.
pub fn unclaimed_standing<'a>(
    ns: &NamespaceInput<'a>,
    index: &CatalogIndex,
    package: &str,
    channels: &[&ChannelIndex],
) -> Option<Standing<'a>> {
    let claimed = |name: &str| {
        ns.subscriptions.iter().any(|s| {
            s.status.as_ref().is_some_and(|st| {
                st.installed_csv.as_deref() == Some(name) || st.current_csv.as_deref() == Some(name)
            })
        })
    };
    let in_channels = |name: &str| channels.iter().any(|c| c.graph().entry(name).is_some());
    let mut in_the_way = None;
    for csv in ns.installed.iter().filter(|c| !claimed(&c.name)) {
        let bundle_name = index.bundle(package, &csv.name).is_some();
        let of_package = match &csv.package {
            Some(p) => p == package,
            // A CSV without the properties annotation (made by hand, or by an old OLM) is
            // the package's when the catalog lists a bundle of that name in it.
            None => bundle_name,
        };
        match (&csv.package, of_package) {
            (_, true) if in_channels(&csv.name) => return Some(Standing::Adopt(csv)),
            (_, true) => {
                in_the_way.get_or_insert(Standing::InTheWay(csv, Foreign::NotInChannels));
            }
            (Some(other), false) if bundle_name => {
                in_the_way.get_or_insert(Standing::InTheWay(
                    csv,
                    Foreign::OtherPackage(other.clone()),
                ));
            }
            _ => {}
        }
    }
    in_the_way
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{Subscription, SubscriptionStatus};
    use crate::catalog::model::{Bundle, Channel, ChannelEntry, DeclarativeConfig, Package};
    use crate::resolve::input::OperatorGroups;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    /// `etcd`: stable etcd.v1 ← etcd.v2; beta: etcd.v3 (alone).
    fn index() -> CatalogIndex {
        let entry = |name: &str, replaces: Option<&str>| ChannelEntry {
            name: name.into(),
            replaces: replaces.map(Into::into),
            ..ChannelEntry::default()
        };
        let bundle = |name: &str| Bundle {
            package: "etcd".into(),
            name: name.into(),
            ..Bundle::default()
        };
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
                    entries: vec![entry("etcd.v1", None), entry("etcd.v2", Some("etcd.v1"))],
                    ..Channel::default()
                },
                Channel {
                    package: "etcd".into(),
                    name: "beta".into(),
                    entries: vec![entry("etcd.v3", None)],
                    ..Channel::default()
                },
            ],
            bundles: vec![bundle("etcd.v1"), bundle("etcd.v2"), bundle("etcd.v3")],
            ..DeclarativeConfig::default()
        })
    }

    fn csv(name: &str, package: Option<&str>) -> InstalledCsv {
        InstalledCsv {
            name: name.into(),
            version: None,
            package: package.map(Into::into),
            provided: Vec::new(),
            phase: "Succeeded".into(),
            properties: Vec::new(),
        }
    }

    fn claiming(csv: &str) -> Subscription {
        let mut sub: Subscription = serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
            "metadata": {"name": "other", "namespace": "ns"},
            "spec": {"name": "etcd", "source": "community", "sourceNamespace": "olm"}
        }))
        .unwrap();
        let mut status = SubscriptionStatus::new(Time(jiff::Timestamp::UNIX_EPOCH));
        status.installed_csv = Some(csv.into());
        sub.status = Some(status);
        sub
    }

    fn said(standing: Option<Standing<'_>>) -> String {
        match standing {
            Some(Standing::Adopt(csv)) => format!("adopt {}", csv.name),
            Some(Standing::InTheWay(csv, why)) => format!("{} in the way: {why:?}", csv.name),
            None => "nothing".into(),
        }
    }

    #[test]
    fn only_a_csv_of_the_package_in_a_followed_channel_is_adopted() {
        let index = index();
        let stable = index.package("etcd").unwrap().channel("stable").unwrap();
        let beta = index.package("etcd").unwrap().channel("beta").unwrap();
        let groups = OperatorGroups::default();
        // (case, installed CSVs, other Subscriptions, channels followed, standing wanted)
        type Row<'c> = (
            &'static str,
            Vec<InstalledCsv>,
            Vec<Subscription>,
            Vec<&'c ChannelIndex>,
            &'static str,
        );
        let table: Vec<Row<'_>> = vec![
            (
                "the package's CSV in the channel",
                vec![csv("etcd.v2", Some("etcd"))],
                vec![],
                vec![stable],
                "adopt etcd.v2",
            ),
            (
                "without the properties annotation: the catalog's bundle of that name",
                vec![csv("etcd.v1", None)],
                vec![],
                vec![stable],
                "adopt etcd.v1",
            ),
            (
                "the package's CSV from another channel is in the way, never adopted",
                vec![csv("etcd.v3", Some("etcd"))],
                vec![],
                vec![stable],
                "etcd.v3 in the way: NotInChannels",
            ),
            (
                "a CSV the catalog does not list (another catalog's) is in the way",
                vec![csv("etcd.v9", Some("etcd"))],
                vec![],
                vec![stable, beta],
                "etcd.v9 in the way: NotInChannels",
            ),
            (
                "another package's CSV with a bundle's name is in the way",
                vec![csv("etcd.v2", Some("etcd-fork"))],
                vec![],
                vec![stable],
                "etcd.v2 in the way: OtherPackage(\"etcd-fork\")",
            ),
            (
                "another package's CSV of its own name is none of this Subscription's business",
                vec![csv("redis.v1", Some("redis"))],
                vec![],
                vec![stable],
                "nothing",
            ),
            (
                "a CSV without annotation the catalog does not know is left alone",
                vec![csv("hand-made.v1", None)],
                vec![],
                vec![stable],
                "nothing",
            ),
            (
                "a CSV another Subscription claims is not unclaimed",
                vec![csv("etcd.v2", Some("etcd"))],
                vec![claiming("etcd.v2")],
                vec![stable],
                "nothing",
            ),
            (
                "an adoptable CSV wins over one in the way",
                vec![csv("etcd.v3", Some("etcd")), csv("etcd.v1", Some("etcd"))],
                vec![],
                vec![stable],
                "adopt etcd.v1",
            ),
        ];
        for (case, installed, subscriptions, channels, want) in table {
            let ns = NamespaceInput {
                namespace: "ns",
                subscriptions: &subscriptions,
                installed: &installed,
                catalogs: &[],
                operator_groups: &groups,
                global_catalog_namespace: "olm",
            };
            let got = said(unclaimed_standing(&ns, &index, "etcd", &channels));
            assert_eq!(got, want, "{case}");
        }
    }
}

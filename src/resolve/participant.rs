//! A Subscription as the solver sees it: its candidate bundles in order of preference.

use crate::api::Subscription;
use crate::catalog::index::ChannelIndex;

use super::decide::{Why, orphan_of_package, ranked_channels};
use super::input::{CatalogRef, InstalledCsv, NamespaceInput};
use super::model::BundleItem;

/// A Subscription the solver decides: its candidates in order of preference.
pub struct Participant<'a, 's> {
    pub name: &'s str,
    /// The installed CSV it upgrades.
    pub current: Option<&'a InstalledCsv>,
    pub options: Vec<RootOption<'a>>,
}

/// One candidate of a Subscription.
pub struct RootOption<'a> {
    pub item: BundleItem<'a>,
    pub why: Why,
}

/// `sub` as the solver sees it: its candidates in order of preference, the channel head down
/// (or `startingCSV`), or the upgrade candidates nearest the head first. `None` when anything
/// stands in the way (no OperatorGroup, catalog, package or channel; an installed CSV to adopt;
/// nothing to upgrade to): `decide_one` then says what.
pub fn participant<'a, 's>(
    ns: &NamespaceInput<'a>,
    sub: &'s Subscription,
) -> Option<Participant<'a, 's>> {
    let spec = &sub.spec;
    if ns.operator_groups.names.len() != 1
        || !ns
            .catalog_namespaces()
            .contains(&spec.source_namespace.as_str())
    {
        return None;
    }
    let key = CatalogRef::new(&spec.source_namespace, &spec.source);
    let index = ns.catalog(&key)?.index()?;
    let package = index.package(&spec.name)?;
    let channels = ranked_channels(package, spec.channel.as_deref().filter(|c| !c.is_empty()))?;
    let current = sub
        .status
        .as_ref()
        .and_then(|s| s.installed_csv.as_deref())
        .and_then(|name| ns.installed_csv(name));
    // Entries in order; an entry without a bundle (nothing to check) ends the list: the greedy
    // decision installs it when nothing before it fits.
    let mut entries: Vec<(&ChannelIndex, &str, Why)> = Vec::new();
    match current {
        Some(current) => {
            for channel in &channels {
                let Ok(candidates) = channel
                    .graph()
                    .replacement_candidates(&current.name, current.version.as_ref())
                else {
                    continue;
                };
                for c in candidates {
                    entries.push((channel, c.entry.name.as_str(), Why::Upgrade(c.via)));
                }
            }
        }
        None => {
            if orphan_of_package(ns, index, &spec.name).is_some() {
                return None;
            }
            match spec.starting_csv.as_deref().filter(|s| !s.is_empty()) {
                Some(starting) => {
                    let channel = channels
                        .iter()
                        .find(|c| c.graph().entry(starting).is_some())?;
                    entries.push((channel, starting, Why::StartingCsv));
                }
                None => {
                    for channel in &channels {
                        let Ok(order) = channel.graph().channel_order() else {
                            continue;
                        };
                        for entry in order {
                            entries.push((channel, entry.name.as_str(), Why::ChannelHead));
                        }
                    }
                }
            }
        }
    }
    let mut options = Vec::new();
    for (channel, entry, why) in entries {
        let Some(bundle) = package.bundle(entry) else {
            break;
        };
        options.push(RootOption {
            item: BundleItem {
                catalog: key.clone(),
                package,
                channel,
                bundle,
            },
            why,
        });
    }
    if options.is_empty() {
        return None;
    }
    Some(Participant {
        name: sub.metadata.name.as_deref().unwrap_or_default(),
        current,
        options,
    })
}

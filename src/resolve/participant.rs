//! A Subscription as the solver sees it: its candidate bundles in order of preference.

use crate::api::Subscription;
use crate::catalog::index::ChannelIndex;

use super::adoption::unclaimed_standing;
use super::channels::ranked_channels;
use super::input::{InstalledCsv, NamespaceInput};
use super::model::BundleItem;
use super::outcome::Why;
use super::rollback::failed_mark;
use super::version_request::{admits, downgrade_entries, version_request};
use crate::api::CatalogRef;

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
/// stands in the way (no OperatorGroup, catalog, package or channel; an installed CSV to adopt
/// or in the way;
/// nothing to upgrade to): `decide_one` then says what.
/// How many of a Subscription's candidates to list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Depth {
    /// Only the preferred one: what the namespace gets whenever everyone's preferred candidate
    /// fits (the common case, and cheap: one channel's order, not every channel's).
    First,
    /// All of them, in order.
    All,
}

pub fn participant<'a, 's>(
    ns: &NamespaceInput<'a>,
    sub: &'s Subscription,
    depth: Depth,
) -> Option<Participant<'a, 's>> {
    let spec = &sub.spec;
    if ns.operator_groups.names.len() != 1
        || !ns
            .catalog_namespaces()
            .contains(&spec.source_namespace.as_str())
    {
        return None;
    }
    // A malformed range is decide_one's to report.
    let request = version_request(sub).ok()?;
    let request = request.as_ref();
    // Versions a rolled-back upgrade marked as failed are no candidates (docs/upgrades.md §3).
    let failed = failed_mark(sub);
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
    let limit = match depth {
        Depth::First => 1,
        Depth::All => usize::MAX,
    };
    let mut options = Vec::new();
    let mut add = |channel: &'a ChannelIndex, entry: &str, why: Why| -> bool {
        let Some(bundle) = package.bundle(entry) else {
            return false;
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
        options.len() < limit
    };
    match current {
        Some(current) => {
            let mut upward = false;
            'channels: for channel in &channels {
                let Ok(candidates) = channel
                    .graph()
                    .replacement_candidates(&current.name, current.version.as_ref())
                else {
                    continue;
                };
                for c in candidates {
                    if !admits(request, c.entry.version.as_ref())
                        || failed.as_ref().is_some_and(|m| m.bars(c.entry))
                    {
                        continue;
                    }
                    upward = true;
                    if !add(channel, &c.entry.name, Why::Upgrade(c.via)) {
                        break 'channels;
                    }
                }
            }
            // Nothing in range upward, and the range excludes the installed version: a
            // downgrade when asked for (docs/upgrades.md); decide_one says why it holds else.
            if let (Some(request), Some(version)) = (request, current.version.as_ref())
                && request.allow_downgrade
                && !request.range.contains(version)
                && !upward
            {
                for (channel, entry) in downgrade_entries(&channels, version, request) {
                    if !add(channel, &entry.name, Why::Downgrade) {
                        break;
                    }
                }
            }
        }
        None => {
            if unclaimed_standing(ns, index, &spec.name, &channels).is_some() {
                return None;
            }
            match spec.starting_csv.as_deref().filter(|s| !s.is_empty()) {
                Some(starting) => {
                    let channel = channels
                        .iter()
                        .find(|c| c.graph().entry(starting).is_some())?;
                    if !admits(request, channel.graph().entry(starting)?.version.as_ref()) {
                        return None;
                    }
                    add(channel, starting, Why::StartingCsv);
                }
                None => {
                    'channels: for channel in &channels {
                        let Ok(order) = channel.graph().channel_order() else {
                            continue;
                        };
                        for entry in order {
                            if !admits(request, entry.version.as_ref()) {
                                continue;
                            }
                            if !add(channel, &entry.name, Why::ChannelHead) {
                                break 'channels;
                            }
                        }
                    }
                }
            }
        }
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

//! One Subscription's search in its catalog (docs/resolution.md §4): a fresh install (the
//! channel's head or `startingCSV`), the next hop of an upgrade, a hold or a requested downgrade
//! (`olm-rs.io/version`, `olm-rs.io/allow-downgrade`, docs/upgrades.md), each bundle tried
//! against the namespace's claims, and the refusal in plain words when nothing fits.

use crate::catalog::index::{ChannelIndex, IndexedBundle, PackageIndex};
use crate::catalog::semver_range::Version;
use crate::catalog::upgrade_graph::{GraphEntry, GraphError, NoUpdate};

use super::explain::{Refusal, Unsatisfiable};
use super::input::InstalledCsv;
use super::rollback::FailedMark;
use super::solver::{Claims, Rejection, Root};
use super::version_request::{Held, VersionRequest, admits, downgrade_entries};
use crate::api::CatalogRef;

use super::outcome::{Dependency, Outcome, Resolved, Target, Why};

/// One Subscription's search: `'s` is the search's own data, `'a` the namespace's.
pub(super) struct Search<'s, 'a> {
    pub(super) key: &'s CatalogRef,
    pub(super) package: &'a PackageIndex,
    pub(super) channels: &'s [&'a ChannelIndex],
    pub(super) wanted_channel: Option<&'s str>,
    pub(super) sub_name: &'s str,
    /// `olm-rs.io/version` (docs/upgrades.md); `None`: OLM's behaviour.
    pub(super) request: Option<&'s VersionRequest>,
    /// `olm-rs.io/failed-upgrade`: versions a rollback bars (docs/upgrades.md §3).
    pub(super) failed: Option<&'s FailedMark>,
}

impl<'a> Search<'_, 'a> {
    pub(super) fn fresh(&self, starting: Option<&str>, claims: &mut Claims<'a>) -> Resolved {
        if let Some(starting) = starting {
            let Some(channel) = self
                .channels
                .iter()
                .find(|c| c.graph().entry(starting).is_some())
            else {
                return Err(Box::new(Refusal::StartingCsvNotFound {
                    subscription: self.sub_name.to_owned(),
                    catalog: self.key.clone(),
                    package: self.package.name().to_owned(),
                    channel: self.wanted_channel.map(str::to_owned),
                    starting_csv: starting.to_owned(),
                    found_in: self
                        .package
                        .channels()
                        .iter()
                        .filter(|c| c.graph().entry(starting).is_some())
                        .map(|c| c.name().to_owned())
                        .collect(),
                }));
            };
            let mut tried = Tried::default();
            let entry = channel.graph().entry(starting);
            if let (Some(request), Some(entry)) = (self.request, entry)
                && !admits(Some(request), entry.version.as_ref())
            {
                return Err(Box::new(Refusal::StartingCsvOutOfRange {
                    subscription: self.sub_name.to_owned(),
                    starting_csv: starting.to_owned(),
                    version: entry.version.as_ref().map(Version::to_string),
                    range: request.range.to_string(),
                }));
            }
            if let Some(entry) = entry
                && let Some(target) =
                    self.try_entry(channel, entry, None, Why::StartingCsv, claims, &mut tried)
            {
                return Ok(Outcome::Install(target));
            }
            return Err(Box::new(tried.into_refusal(self)));
        }
        let mut tried = Tried::default();
        for channel in self.channels {
            let order = match channel.graph().channel_order() {
                Ok(order) => order,
                Err(error) => {
                    tried.broken.push((channel.name().to_owned(), error));
                    continue;
                }
            };
            for entry in order {
                if !admits(self.request, entry.version.as_ref()) {
                    continue;
                }
                if let Some(target) =
                    self.try_entry(channel, entry, None, Why::ChannelHead, claims, &mut tried)
                {
                    return Ok(Outcome::Install(target));
                }
            }
        }
        // Nothing tried at all: the range left nothing (a broken channel says so itself).
        if let Some(request) = self.request
            && tried.is_empty()
        {
            return Err(Box::new(self.nothing_in_range(request)));
        }
        Err(Box::new(tried.into_refusal(self)))
    }

    /// No entry of the channels is in range: the refusal, naming the newest offered.
    fn nothing_in_range(&self, request: &VersionRequest) -> Refusal {
        let mut offered: Vec<&GraphEntry> = self
            .channels
            .iter()
            .flat_map(|c| c.graph().entries())
            .collect();
        offered.sort_by(|a, b| b.version.cmp(&a.version));
        offered.dedup_by(|a, b| a.name == b.name);
        Refusal::NothingInRange {
            subscription: self.sub_name.to_owned(),
            catalog: self.key.clone(),
            package: self.package.name().to_owned(),
            channel: self.wanted_channel.map(str::to_owned),
            range: request.range.to_string(),
            outside: offered
                .iter()
                .take(5)
                .map(|e| match &e.version {
                    Some(v) => format!("{} (version {v})", e.name),
                    None => format!("{} (no version)", e.name),
                })
                .collect(),
        }
    }

    pub(super) fn upgrade(&self, current: &'a InstalledCsv, claims: &mut Claims<'a>) -> Resolved {
        let mut tried = Tried::default();
        // The newest upgrade candidate the range leaves out (docs/upgrades.md).
        let mut outside: Option<&GraphEntry> = None;
        // The newest the mark of a rolled-back upgrade bars (docs/upgrades.md §3).
        let mut barred: Option<&GraphEntry> = None;
        for channel in self.channels {
            let candidates = match channel
                .graph()
                .replacement_candidates(&current.name, current.version.as_ref())
            {
                Ok(candidates) => candidates,
                Err(error) => {
                    tried.broken.push((channel.name().to_owned(), error));
                    continue;
                }
            };
            for candidate in candidates {
                if self.failed.is_some_and(|m| m.bars(candidate.entry)) {
                    barred = barred.or(Some(candidate.entry));
                    continue;
                }
                if !admits(self.request, candidate.entry.version.as_ref()) {
                    outside = outside.or(Some(candidate.entry));
                    continue;
                }
                let why = Why::Upgrade(candidate.via);
                if let Some(target) = self.try_entry(
                    channel,
                    candidate.entry,
                    Some(current),
                    why,
                    claims,
                    &mut tried,
                ) {
                    return Ok(Outcome::Install(target));
                }
            }
        }
        if !tried.is_empty() {
            return Err(Box::new(tried.into_refusal(self)));
        }
        if let Some(request) = self.request
            && let Some(held) = self.hold_or_downgrade(request, current, outside, claims)
        {
            return held;
        }
        if let (Some(mark), Some(entry)) = (self.failed, barred) {
            return self.held(current, mark.held(&current.name, entry));
        }
        // Nothing replaces the installed CSV. Staying put is always allowed (docs/resolution.md §4
        // step 6), but a Subscription whose channel does not even contain the installed CSV
        // cannot follow that channel: say so instead of staying silent.
        let home = self
            .channels
            .iter()
            .find(|c| c.graph().entry(&current.name).is_some());
        let channel = home.or(self.channels.first()).copied();
        let why = match channel {
            Some(c) => match c
                .graph()
                .next_bundle_for(&current.name, current.version.as_ref())
            {
                Err(why) => why,
                // Unreachable in practice: a candidate would have been found above.
                Ok(_) => NoUpdate::AtHead {
                    channel: c.name().to_owned(),
                    installed: current.name.clone(),
                },
            },
            None => NoUpdate::NoEdge {
                channel: String::new(),
                installed: current.name.clone(),
                version: current.version.as_ref().map(Version::to_string),
                in_channel: false,
                skipped_replacers: Vec::new(),
            },
        };
        match (home, channel) {
            (Some(_), _) => Ok(Outcome::UpToDate {
                installed: current.name.clone(),
                why,
                held: None,
            }),
            (None, Some(c)) if self.wanted_channel.is_some() => {
                Err(Box::new(Refusal::CannotFollowChannel {
                    catalog: self.key.clone(),
                    package: self.package.name().to_owned(),
                    channel: c.name().to_owned(),
                    installed: current.name.clone(),
                    detail: why,
                }))
            }
            // Any channel allowed and none lists the installed CSV: it came from elsewhere
            // (another catalog or package); nothing here upgrades it.
            _ => Ok(Outcome::UpToDate {
                installed: current.name.clone(),
                why,
                held: None,
            }),
        }
    }

    /// With a range and no in-range upgrade: a downgrade when the range excludes the installed
    /// version and one was asked for, else the installed CSV held with the reason; `None` when
    /// the range changes nothing (the installed version is in it and nothing newer is
    /// offered).
    fn hold_or_downgrade(
        &self,
        request: &VersionRequest,
        current: &'a InstalledCsv,
        outside: Option<&GraphEntry>,
        claims: &mut Claims<'a>,
    ) -> Option<Resolved> {
        let installed_version = current.version.as_ref();
        let held = |held: Held| self.held(current, held);
        if admits(Some(request), installed_version) {
            let entry = outside?;
            return Some(held(Held::NewerOutsideRange {
                range: request.range.to_string(),
                installed: current.name.clone(),
                bundle: entry.name.clone(),
                version: entry.version.as_ref().map(Version::to_string),
            }));
        }
        let lower = installed_version
            .map(|v| downgrade_entries(self.channels, v, request))
            .unwrap_or_default();
        if request.allow_downgrade && !lower.is_empty() {
            let mut tried = Tried::default();
            for (channel, entry) in &lower {
                if let Some(target) = self.try_entry(
                    channel,
                    entry,
                    Some(current),
                    Why::Downgrade,
                    claims,
                    &mut tried,
                ) {
                    return Some(Ok(Outcome::Install(target)));
                }
            }
            return Some(Err(Box::new(tried.into_refusal(self))));
        }
        Some(held(Held::InstalledOutsideRange {
            range: request.range.to_string(),
            installed: current.name.clone(),
            version: installed_version.map(Version::to_string),
            downgrade_asked: request.allow_downgrade,
            lower: lower.first().map(|(_, e)| e.name.clone()),
        }))
    }

    /// The installed CSV stays, held for `held`'s reason.
    fn held(&self, current: &InstalledCsv, held: Held) -> Resolved {
        let channel = self.channels.first().map(|c| c.name().to_owned());
        Ok(Outcome::UpToDate {
            installed: current.name.clone(),
            why: NoUpdate::AtHead {
                channel: channel.unwrap_or_default(),
                installed: current.name.clone(),
            },
            held: Some(held),
        })
    }

    /// The target for `entry` with the dependencies it pulls in, unless the entry or its
    /// closure breaks an invariant of the namespace; what was passed over is recorded in `tried`.
    fn try_entry(
        &self,
        channel: &'a ChannelIndex,
        entry: &GraphEntry,
        current: Option<&'a InstalledCsv>,
        why: Why,
        claims: &mut Claims<'a>,
        tried: &mut Tried,
    ) -> Option<Target> {
        let bundle = self.package.bundle(&entry.name);
        let mut dependencies = Vec::new();
        if let Some(bundle) = bundle {
            let root = Root {
                catalog: self.key,
                package: self.package,
                channel,
                bundle,
                replaces: current,
                subscription: self.sub_name,
            };
            match claims.try_install(root) {
                Ok(pulled) => dependencies = pulled.iter().map(Dependency::from).collect(),
                Err(rejection) => {
                    tried.rejected.push((
                        format!(
                            "{}/{}/{}/{}",
                            self.key.name,
                            self.key.namespace,
                            channel.name(),
                            entry.name
                        ),
                        rejection,
                    ));
                    return None;
                }
            }
        }
        Some(Target {
            catalog: self.key.clone(),
            package: self.package.name().to_owned(),
            channel: channel.name().to_owned(),
            bundle: entry.name.clone(),
            version: bundle.and_then(IndexedBundle::version_string),
            replaces: current.map(|c| c.name.clone()),
            why,
            dependencies,
            together: Vec::new(),
        })
    }
}

/// Candidates passed over, to explain a refusal.
#[derive(Default)]
struct Tried {
    /// `<catalogName>/<catalogNamespace>/<channel>/<csv>` (OLM's identifier) and why not.
    rejected: Vec<(String, Rejection)>,
    broken: Vec<(String, GraphError)>,
}

impl Tried {
    fn is_empty(&self) -> bool {
        self.rejected.is_empty() && self.broken.is_empty()
    }

    fn into_refusal(mut self, search: &Search<'_, '_>) -> Refusal {
        let catalog = search.key.clone();
        let package = search.package.name().to_owned();
        let channel = search.wanted_channel.map(str::to_owned);
        if !self.rejected.is_empty()
            && self
                .rejected
                .iter()
                .all(|(_, r)| matches!(r, Rejection::Deprecated))
        {
            return Refusal::AllDeprecated {
                catalog,
                package,
                channel,
                bundles: self
                    .rejected
                    .into_iter()
                    .map(|(id, _)| id.rsplit('/').next().unwrap_or_default().to_owned())
                    .collect(),
            };
        }
        if !self.rejected.is_empty() {
            return Refusal::Unsatisfiable(Box::new(Unsatisfiable {
                subscription: search.sub_name.to_owned(),
                catalog,
                package,
                channel,
                rejected: self.rejected,
            }));
        }
        if let Some((channel, error)) = self.broken.drain(..).next() {
            return Refusal::ChannelUnusable {
                catalog,
                package,
                channel,
                error,
            };
        }
        Refusal::NoBundles {
            subscription: search.sub_name.to_owned(),
            catalog,
            package,
            channel,
        }
    }
}

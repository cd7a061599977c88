//! What each Subscription of a namespace gets (docs/resolution.md §4): a fresh install (channel
//! head, or `startingCSV`), the next hop of its upgrade path, nothing new, or a refusal in plain
//! words. Decided for all Subscriptions of the namespace at once — the seam where dependency
//! solving (a later issue) will plug in — but each decision stands alone: one bad Subscription
//! or catalog never blocks another.

use std::collections::HashMap;

use crate::api::Subscription;
use crate::catalog::index::{ChannelIndex, IndexedBundle, PackageIndex};
use crate::catalog::semver_range::Version;
use crate::catalog::upgrade_graph::{EdgeKind, GraphEntry, GraphError, NoUpdate};

use super::adoption::{Standing, unclaimed_standing};
use super::explain::{Refusal, Unsatisfiable, similar_names};
use super::input::{CatalogContent, InstalledCsv, NamespaceInput};
use super::joint;
use super::participant::{Depth, participant};
use super::rollback::{FailedMark, failed_mark};
use super::solver::{Chosen, Claims, Rejection, Root};
use super::version_request::{Held, VersionRequest, admits, downgrade_entries, version_request};
use crate::api::CatalogRef;

/// The decision for one Subscription.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The Subscription's name.
    pub subscription: String,
    pub outcome: Outcome,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Install `target` (fresh, or one hop up the upgrade path).
    Install(Target),
    /// An installed CSV of the package that no Subscription claims becomes this one's.
    Adopt { csv: String },
    /// The installed CSV stays: nothing newer is reachable from it, or (`held`) nothing the
    /// Subscription's `olm-rs.io/version` range admits (docs/upgrades.md).
    UpToDate {
        installed: String,
        why: NoUpdate,
        held: Option<Held>,
    },
    /// Nothing can be installed, and why.
    Refused(Refusal),
}

/// A bundle chosen for a Subscription.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub catalog: CatalogRef,
    pub package: String,
    pub channel: String,
    /// Bundle (CSV) name.
    pub bundle: String,
    pub version: Option<String>,
    /// The installed CSV this one replaces; `None` for a fresh install.
    pub replaces: Option<String>,
    pub why: Why,
    /// Bundles its requirements pull in (docs/resolution.md §6), in the order they were chosen.
    pub dependencies: Vec<Dependency>,
    /// Other Subscriptions of the namespace whose targets are tied to this one: one needs what
    /// another's bundle provides, directly or through others (a co-upgrade). They are installed
    /// by one plan, as OLM does (docs/subscription-plans.md, "Co-upgrades"). Sorted by name.
    pub together: Vec<String>,
}

/// A bundle installed because another one requires it.
#[derive(Debug, Clone, PartialEq)]
pub struct Dependency {
    pub catalog: CatalogRef,
    pub package: String,
    pub channel: String,
    pub bundle: String,
    pub version: Option<String>,
    /// The bundle whose requirement pulled it in.
    pub required_by: String,
}

impl From<&Chosen<'_>> for Dependency {
    fn from(c: &Chosen<'_>) -> Self {
        Dependency {
            catalog: c.catalog.clone(),
            package: c.package.name().to_owned(),
            channel: c.channel.clone(),
            bundle: c.bundle.name().to_owned(),
            version: c.bundle.version_string(),
            required_by: c.required_by.clone().unwrap_or_default(),
        }
    }
}

/// How the target was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// Fresh install of the channel head (or the first installable entry below it).
    ChannelHead,
    /// Fresh install of `spec.startingCSV`.
    StartingCsv,
    /// Upgrade of the installed CSV along an edge of this kind.
    Upgrade(EdgeKind),
    /// Replaces the installed CSV by an older version its `olm-rs.io/version` range admits,
    /// on request (`olm-rs.io/allow-downgrade`; docs/upgrades.md).
    Downgrade,
    /// Restores the CSV a failed upgrade replaced (`olm-rs.io/on-failed-upgrade`;
    /// docs/upgrades.md §3): planned without approval.
    Rollback,
}

/// Decides for every Subscription of the namespace. Subscriptions the solver can decide (a
/// readable catalog, package and channel with candidates) are solved together (joint.rs); the
/// rest, and those that do not fit next to the others, are decided one by one against what the
/// solver kept, which also explains every refusal. When two Subscriptions compete for a package
/// or an API, the one created first (creation time, then name) keeps it.
pub fn decide(ns: &NamespaceInput<'_>) -> Vec<Decision> {
    let mut order: Vec<&Subscription> = ns.subscriptions.iter().collect();
    order.sort_by(|a, b| {
        let key = |s: &Subscription| {
            (
                s.metadata.creation_timestamp.as_ref().map(|t| t.0),
                s.metadata.name.clone(),
            )
        };
        key(a).cmp(&key(b))
    });
    let mut by_name: HashMap<String, Outcome> = HashMap::new();
    let mut packages: HashMap<&str, &str> = HashMap::new();
    let mut solvable: Vec<&Subscription> = Vec::new();
    for sub in &order {
        let name = name_of(sub);
        if let Some(other) = packages.get(sub.spec.name.as_str()) {
            by_name.insert(
                name.to_owned(),
                Outcome::Refused(Refusal::PackageAlreadySubscribed {
                    package: sub.spec.name.clone(),
                    other: (*other).to_owned(),
                }),
            );
            continue;
        }
        packages.insert(&sub.spec.name, name);
        solvable.push(sub);
    }
    // Everyone's preferred candidate first (cheap, and what a healthy namespace gets); all
    // candidates when those do not fit together.
    let listed = |depth| -> Vec<_> {
        solvable
            .iter()
            .filter_map(|sub| participant(ns, sub, depth))
            .collect()
    };
    let preferred = listed(Depth::First);
    let (participants, accepted) = match joint::solve_all(ns, &preferred) {
        Some(accepted) => (preferred, accepted),
        None => {
            let all = listed(Depth::All);
            let accepted = joint::solve(ns, &all);
            (all, accepted)
        }
    };
    // Only upgrades are tied: a fresh install next to another takes nothing over, so each
    // keeps its own plan (and its own approval).
    let together = joint::tied_groups(&accepted, |i| {
        participants[i].current.map(|_| participants[i].name)
    });
    let mut claims = Claims::new(ns);
    for accepted in accepted {
        let participant = &participants[accepted.participant];
        let option = &participant.options[accepted.option];
        let target = Target {
            catalog: option.item.catalog.clone(),
            package: option.item.package.name().to_owned(),
            channel: option.item.channel.name().to_owned(),
            bundle: option.item.bundle.name().to_owned(),
            version: option.item.bundle.version_string(),
            replaces: participant.current.map(|c| c.name.clone()),
            why: option.why,
            dependencies: accepted.chosen[1..].iter().map(Dependency::from).collect(),
            together: together.get(participant.name).cloned().unwrap_or_default(),
        };
        by_name.insert(participant.name.to_owned(), Outcome::Install(target));
        claims.accept(accepted.chosen);
    }
    for sub in &order {
        let name = name_of(sub);
        if !by_name.contains_key(name) {
            let outcome = decide_one(ns, sub, &mut claims);
            by_name.insert(name.to_owned(), outcome);
        }
    }
    fail_both_sides_of_conflicts(&mut by_name);
    ns.subscriptions
        .iter()
        .map(|sub| {
            let name = sub.metadata.name.clone().unwrap_or_default();
            let outcome = by_name.remove(&name).unwrap_or_else(|| {
                Outcome::Refused(Refusal::PackageAlreadySubscribed {
                    package: sub.spec.name.clone(),
                    other: name.clone(),
                })
            });
            Decision {
                subscription: name,
                outcome,
            }
        })
        .collect()
}

/// The decision for `sub` as if it were the only Subscription of the namespace (the
/// `olm-rs resolve` preview): the installed operators stay, the solver decides.
pub fn decide_alone(ns: &NamespaceInput<'_>, sub: &Subscription) -> Outcome {
    let alone = NamespaceInput {
        subscriptions: std::slice::from_ref(sub),
        ..*ns
    };
    decide(&alone)
        .into_iter()
        .next()
        .map(|d| d.outcome)
        .unwrap_or_else(|| {
            Outcome::Refused(Refusal::PackageAlreadySubscribed {
                package: sub.spec.name.clone(),
                other: name_of(sub).to_owned(),
            })
        })
}

fn name_of(sub: &Subscription) -> &str {
    sub.metadata.name.as_deref().unwrap_or_default()
}

/// A Subscription refused because of what another one would install: both fail, each naming
/// the other; nobody else is affected (the "failure stays local").
fn fail_both_sides_of_conflicts(outcomes: &mut HashMap<String, Outcome>) {
    let mut pairs: Vec<(String, String, String)> = Vec::new();
    for (name, outcome) in outcomes.iter() {
        if let Outcome::Refused(Refusal::Unsatisfiable(u)) = outcome {
            for other in u.conflicts_with() {
                pairs.push((other, name.clone(), u.to_string()));
            }
        }
    }
    pairs.sort();
    for (winner, loser, detail) in pairs {
        if let Some(Outcome::Install(target)) = outcomes.get(&winner) {
            let bundle = target.bundle.clone();
            outcomes.insert(
                winner.clone(),
                Outcome::Refused(Refusal::ConflictsWith {
                    subscription: winner,
                    other: loser,
                    bundle,
                    detail,
                }),
            );
        }
    }
}

/// The decision for one Subscription alone (the `olm-rs resolve` preview).
pub fn decide_one<'a>(
    ns: &NamespaceInput<'a>,
    sub: &Subscription,
    claims: &mut Claims<'a>,
) -> Outcome {
    match resolve(ns, sub, claims) {
        Ok(outcome) => outcome,
        Err(refusal) => Outcome::Refused(*refusal),
    }
}

/// Refusals are boxed on the way out: they are large and the happy path should not pay for them.
type Resolved = Result<Outcome, Box<Refusal>>;

fn resolve<'a>(ns: &NamespaceInput<'a>, sub: &Subscription, claims: &mut Claims<'a>) -> Resolved {
    if ns.operator_groups.names.len() != 1 {
        return Err(Box::new(Refusal::OperatorGroups {
            namespace: ns.namespace.to_owned(),
            names: ns.operator_groups.names.clone(),
        }));
    }
    let spec = &sub.spec;
    let sub_name = sub.metadata.name.as_deref().unwrap_or_default();
    let request = version_request(sub).map_err(|error| Refusal::BadVersionRange {
        subscription: sub_name.to_owned(),
        error,
    })?;
    let key = CatalogRef::new(&spec.source_namespace, &spec.source);
    if !ns
        .catalog_namespaces()
        .contains(&spec.source_namespace.as_str())
    {
        return Err(Box::new(Refusal::CatalogNotVisible {
            subscription: sub.metadata.name.clone().unwrap_or_default(),
            catalog: key,
            namespace: ns.namespace.to_owned(),
            global: ns.global_catalog_namespace.to_owned(),
            global_excluded: ns.operator_groups.exclude_global_catalogs,
        }));
    }
    let catalog = ns.catalog(&key).ok_or_else(|| Refusal::CatalogMissing {
        subscription: sub_name.to_owned(),
        catalog: key.clone(),
        package: spec.name.clone(),
    })?;
    let index = match &catalog.content {
        CatalogContent::Ready(index) => index.as_ref(),
        CatalogContent::Unavailable(reason) | CatalogContent::Loading(reason) => {
            return Err(Box::new(Refusal::CatalogUnavailable {
                catalog: key,
                package: spec.name.clone(),
                reason: reason.clone(),
            }));
        }
    };
    let current = sub
        .status
        .as_ref()
        .and_then(|s| s.installed_csv.as_deref())
        .and_then(|name| ns.installed_csv(name));
    let Some(package) = index.package(&spec.name) else {
        return Err(Box::new(Refusal::PackageNotFound {
            subscription: sub_name.to_owned(),
            catalog: key,
            package: spec.name.clone(),
            similar: similar_names(&spec.name, index.packages().iter().map(PackageIndex::name)),
        }));
    };
    let wanted_channel = spec.channel.as_deref().filter(|c| !c.is_empty());
    let channels =
        ranked_channels(package, wanted_channel).ok_or_else(|| Refusal::ChannelNotFound {
            subscription: sub_name.to_owned(),
            catalog: key.clone(),
            package: spec.name.clone(),
            channel: wanted_channel.unwrap_or_default().to_owned(),
            channels: package
                .channels()
                .iter()
                .map(|c| c.name().to_owned())
                .collect(),
            default_channel: package.default_channel_name().map(str::to_owned),
        })?;
    let failed = failed_mark(sub);
    let search = Search {
        key: &key,
        package,
        channels: &channels,
        wanted_channel,
        sub_name,
        request: request.as_ref(),
        failed: failed.as_ref(),
    };
    match current {
        Some(current) => search.upgrade(current, claims),
        None => {
            match unclaimed_standing(ns, index, &spec.name, &channels) {
                Some(Standing::Adopt(csv)) => {
                    return Ok(Outcome::Adopt {
                        csv: csv.name.clone(),
                    });
                }
                Some(Standing::InTheWay(csv, foreign)) => {
                    return Err(Box::new(Refusal::InstalledInTheWay {
                        subscription: sub_name.to_owned(),
                        csv: csv.name.clone(),
                        package: spec.name.clone(),
                        catalog: key.clone(),
                        channel: wanted_channel.map(str::to_owned),
                        foreign,
                    }));
                }
                None => {}
            }
            let starting = spec.starting_csv.as_deref().filter(|s| !s.is_empty());
            search.fresh(starting, claims)
        }
    }
}

/// Channels to search: the requested one, or all of them, default channel first, then by
/// name (docs/resolution.md §4 step 4). `None` when the requested channel does not exist.
pub(super) fn ranked_channels<'a>(
    package: &'a PackageIndex,
    wanted: Option<&str>,
) -> Option<Vec<&'a ChannelIndex>> {
    if let Some(name) = wanted {
        return package.channel(name).map(|c| vec![c]);
    }
    let default = package.default_channel_name();
    let mut channels: Vec<&ChannelIndex> = package.channels().iter().collect();
    channels.sort_by_key(|c| (Some(c.name()) != default, c.name().to_owned()));
    Some(channels)
}

/// One Subscription's search: `'s` is the search's own data, `'a` the namespace's.
struct Search<'s, 'a> {
    key: &'s CatalogRef,
    package: &'a PackageIndex,
    channels: &'s [&'a ChannelIndex],
    wanted_channel: Option<&'s str>,
    sub_name: &'s str,
    /// `olm-rs.io/version` (docs/upgrades.md); `None`: OLM's behaviour.
    request: Option<&'s VersionRequest>,
    /// `olm-rs.io/failed-upgrade`: versions a rollback bars (docs/upgrades.md §3).
    failed: Option<&'s FailedMark>,
}

impl<'a> Search<'_, 'a> {
    fn fresh(&self, starting: Option<&str>, claims: &mut Claims<'a>) -> Resolved {
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

    fn upgrade(&self, current: &'a InstalledCsv, claims: &mut Claims<'a>) -> Resolved {
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

//! The upgrade graph of one channel: heads, OLM's channel order, and which bundle OLM installs
//! next. docs/catalog.md §9.2, docs/resolution.md §4, docs/catalog.md §7 M6–M8.
//!
//! Edges come only from channel entries (never from CSVs in FBC): an entry `E` with
//! `replaces: R`, `skips: [S…]` or a `skipRange` is an upgrade *into* `E`.

use std::collections::{HashMap, HashSet};
use std::fmt;

use super::model::ChannelEntry;
use super::semver_range::{RangeError, Version, VersionRange};

/// A channel entry with the version of its bundle and its parsed skip range.
#[derive(Debug, Clone)]
pub struct GraphEntry {
    pub name: String,
    pub replaces: Option<String>,
    pub skips: Vec<String>,
    pub skip_range: Option<String>,
    /// `None` when the entry names no bundle or the bundle version does not parse.
    pub version: Option<Version>,
    parsed_range: Option<Result<VersionRange, RangeError>>,
}

impl GraphEntry {
    pub fn new(entry: &ChannelEntry, version: Option<Version>) -> GraphEntry {
        let skip_range = entry.skip_range.clone().filter(|s| !s.is_empty());
        GraphEntry {
            name: entry.name.clone(),
            replaces: entry.replaces.clone().filter(|s| !s.is_empty()),
            skips: entry.skips.clone(),
            parsed_range: skip_range.as_deref().map(VersionRange::parse),
            skip_range,
            version,
        }
    }

    /// The skip range, when present and parsable. OLM ignores unparsable ranges silently
    /// (docs/resolution.md §2); `skip_range_error` says why one was ignored.
    pub fn skip_range_parsed(&self) -> Option<&VersionRange> {
        self.parsed_range.as_ref().and_then(|r| r.as_ref().ok())
    }

    pub fn skip_range_error(&self) -> Option<&RangeError> {
        self.parsed_range.as_ref().and_then(|r| r.as_ref().err())
    }

    /// How this entry can replace the installed bundle `name` at `version`, if it can
    /// (docs/resolution.md §4 step 5).
    pub fn upgrades_from(&self, name: &str, version: Option<&Version>) -> Option<EdgeKind> {
        if self.replaces.as_deref() == Some(name) {
            Some(EdgeKind::Replaces)
        } else if self.skips.iter().any(|s| s == name) {
            Some(EdgeKind::Skips)
        } else if let (Some(range), Some(v)) = (self.skip_range_parsed(), version) {
            range.contains(v).then_some(EdgeKind::SkipRange)
        } else {
            None
        }
    }
}

/// Kind of upgrade edge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum EdgeKind {
    Replaces,
    Skips,
    SkipRange,
}

impl fmt::Display for EdgeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EdgeKind::Replaces => "replaces",
            EdgeKind::Skips => "skips",
            EdgeKind::SkipRange => "skipRange",
        })
    }
}

/// One upgrade edge `from` (newer entry) → `to` (the bundle it upgrades from).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphEdge<'a> {
    pub from: &'a str,
    pub to: &'a str,
    pub kind: EdgeKind,
    /// Whether `to` is an entry of this channel.
    pub to_in_channel: bool,
}

/// A bundle OLM may install next, and the edge that makes it a candidate.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    pub entry: &'a GraphEntry,
    pub via: EdgeKind,
}

/// Problems with the shape of a channel. The first two (and the last three) are `opm validate`
/// messages; the middle three are the resolver's (OLM `sortChannel`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GraphError {
    #[error("no channel head found in graph")]
    NoHead,
    #[error("multiple channel heads found in graph: {}", heads.join(", "))]
    MultipleHeads { heads: Vec<String> },
    #[error(
        "no channel heads (entries not replaced by another entry) found in channel {channel:?} of package {package:?}"
    )]
    NoChainHead { package: String, channel: String },
    #[error(
        "a cycle exists in the chain of replacement beginning with {head:?} in channel {channel:?} of package {package:?}"
    )]
    ChainCycle {
        package: String,
        channel: String,
        head: String,
    },
    #[error("a unique replacement chain within a channel is required to determine the relative order between channel entries, but {} replacement chains were found in channel {channel:?} of package {package:?}: {}", chains.len(), chains.join(", "))]
    MultipleChains {
        package: String,
        channel: String,
        chains: Vec<String>,
    },
    #[error("detected cycle in replaces chain of upgrade graph: {}", chain.join(" -> "))]
    ReplacesCycle { chain: Vec<String> },
    #[error("channel contains one or more stranded bundles: {}", names.join(", "))]
    Stranded { names: Vec<String> },
    #[error("channel must contain at least one bundle")]
    Empty,
}

/// Why OLM would not move the installed bundle (forward) in this channel.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoUpdate {
    #[error("{installed} is the head of channel {channel:?}: nothing newer to install")]
    AtHead { channel: String, installed: String },
    #[error("{}", describe_no_edge(.channel, .installed, .version.as_deref(), *.in_channel, .skipped_replacers))]
    NoEdge {
        channel: String,
        installed: String,
        version: Option<String>,
        in_channel: bool,
        /// Entries that replace or skip the installed bundle but are themselves skipped, so OLM
        /// never offers them (docs/catalog.md §9.2 step 3).
        skipped_replacers: Vec<String>,
    },
    #[error("upgrade path returns to {at}, which was already passed")]
    Loop { at: String },
    #[error("channel {channel:?} cannot be ordered: {source}")]
    Channel { channel: String, source: GraphError },
}

fn describe_no_edge(
    channel: &str,
    installed: &str,
    version: Option<&str>,
    in_channel: bool,
    skipped: &[String],
) -> String {
    let mut s = format!("no entry of channel {channel:?} replaces or skips {installed}");
    match version {
        Some(v) => s.push_str(&format!(" or has a skipRange containing {v}")),
        None => s.push_str(
            " (its version is unknown, so skipRanges were not checked; give the installed version)",
        ),
    }
    if !in_channel {
        s.push_str(&format!("; {installed} is not an entry of this channel"));
    }
    if !skipped.is_empty() {
        s.push_str(&format!(
            "; {} would, but {} skipped by another entry and never offered",
            skipped.join(", "),
            if skipped.len() == 1 { "is" } else { "are" }
        ));
    }
    s
}

/// The steps OLM takes from an installed bundle, one InstallPlan each, and why it stops if it
/// stops before the head.
#[derive(Debug, Clone)]
pub struct UpgradePath<'a> {
    pub steps: Vec<Candidate<'a>>,
    pub stopped: Option<NoUpdate>,
}

/// The graph of one channel of one package.
#[derive(Debug, Clone)]
pub struct UpgradeGraph {
    package: String,
    channel: String,
    entries: Vec<GraphEntry>,
    by_name: HashMap<String, usize>,
    /// Entries no other entry of the channel replaces or skips, in entry order.
    heads: Vec<usize>,
    /// OLM's channel order (head first), or why it cannot be computed.
    order: Result<Vec<usize>, GraphError>,
}

impl UpgradeGraph {
    /// Builds the graph. Entries with a name already seen are ignored (opm rejects them, C7).
    pub fn new(
        package: impl Into<String>,
        channel: impl Into<String>,
        entries: impl IntoIterator<Item = GraphEntry>,
    ) -> UpgradeGraph {
        let (package, channel) = (package.into(), channel.into());
        let mut list = Vec::new();
        let mut by_name = HashMap::new();
        for e in entries {
            if !by_name.contains_key(&e.name) {
                by_name.insert(e.name.clone(), list.len());
                list.push(e);
            }
        }
        let mut targeted = vec![false; list.len()];
        for e in &list {
            for target in e.replaces.iter().chain(&e.skips) {
                if let Some(&i) = by_name.get(target) {
                    targeted[i] = true;
                }
            }
        }
        let heads = (0..list.len()).filter(|&i| !targeted[i]).collect();
        let mut graph = UpgradeGraph {
            package,
            channel,
            entries: list,
            by_name,
            heads,
            order: Ok(Vec::new()),
        };
        graph.order = graph.sort_channel();
        graph
    }

    pub fn package(&self) -> &str {
        &self.package
    }

    pub fn channel(&self) -> &str {
        &self.channel
    }

    /// Entries in catalog order.
    pub fn entries(&self) -> &[GraphEntry] {
        &self.entries
    }

    pub fn entry(&self, name: &str) -> Option<&GraphEntry> {
        self.by_name.get(name).map(|&i| &self.entries[i])
    }

    /// The single entry that no other entry replaces or skips (docs/catalog.md §7 M6).
    pub fn channel_head(&self) -> Result<&GraphEntry, GraphError> {
        match self.heads.as_slice() {
            [] if self.entries.is_empty() => Err(GraphError::Empty),
            [] => Err(GraphError::NoHead),
            [one] => Ok(&self.entries[*one]),
            many => {
                let mut heads: Vec<String> =
                    many.iter().map(|&i| self.entries[i].name.clone()).collect();
                heads.sort();
                Err(GraphError::MultipleHeads { heads })
            }
        }
    }

    /// OLM's channel order: the replaces chain from the head, skipped entries left out
    /// (docs/catalog.md §9.2). Entries not on it are never candidates.
    pub fn channel_order(&self) -> Result<Vec<&GraphEntry>, GraphError> {
        match &self.order {
            Ok(order) => Ok(order.iter().map(|&i| &self.entries[i]).collect()),
            Err(e) => Err(e.clone()),
        }
    }

    fn sort_channel(&self) -> Result<Vec<usize>, GraphError> {
        if self.entries.is_empty() {
            return Ok(Vec::new());
        }
        let skipped: HashSet<&str> = self
            .entries
            .iter()
            .flat_map(|e| &e.skips)
            .filter(|s| self.by_name.contains_key(s.as_str()))
            .map(String::as_str)
            .collect();
        if self.heads.is_empty() {
            return Err(GraphError::NoChainHead {
                package: self.package.clone(),
                channel: self.channel.clone(),
            });
        }
        let mut chains = Vec::new();
        for &head in &self.heads {
            let mut chain = Vec::new();
            let mut visited = vec![false; self.entries.len()];
            let mut current = head;
            loop {
                visited[current] = true;
                if !skipped.contains(self.entries[current].name.as_str()) {
                    chain.push(current);
                }
                let next = self.entries[current]
                    .replaces
                    .as_deref()
                    .and_then(|r| self.by_name.get(r).copied());
                let Some(next) = next else { break };
                if visited[next] {
                    return Err(GraphError::ChainCycle {
                        package: self.package.clone(),
                        channel: self.channel.clone(),
                        head: self.entries[head].name.clone(),
                    });
                }
                current = next;
            }
            chains.push(chain);
        }
        if chains.len() > 1 {
            let describe = |chain: &Vec<usize>| match chain.as_slice() {
                [] => "[]".to_string(),
                [one] => self.entries[*one].name.clone(),
                [first, .., last] => {
                    format!(
                        "{}...{}",
                        self.entries[*first].name, self.entries[*last].name
                    )
                }
            };
            return Err(GraphError::MultipleChains {
                package: self.package.clone(),
                channel: self.channel.clone(),
                chains: chains.iter().map(describe).collect(),
            });
        }
        Ok(chains.pop().unwrap_or_default())
    }

    /// opm's replaces-chain checks (docs/catalog.md §7 M6–M8, opm v1.50.0): exactly one head,
    /// no cycle along `replaces` from it, no stranded entry. Returns the first failure.
    pub fn check_replaces_chain(&self) -> Result<(), GraphError> {
        let head = self.channel_head()?;
        let mut chain_from: Vec<(String, Vec<String>)> = Vec::new();
        let mut on_chain: HashSet<&str> = HashSet::from([head.name.as_str()]);
        let mut current = head;
        loop {
            if !chain_from.iter().any(|(k, _)| *k == current.name) {
                chain_from.push((current.name.clone(), vec![current.name.clone()]));
            }
            let replaces = current.replaces.as_deref().unwrap_or("");
            for (_, chain) in &mut chain_from {
                chain.push(replaces.to_string());
            }
            if on_chain.contains(replaces) {
                let chain = chain_from
                    .into_iter()
                    .find(|(k, _)| k == replaces)
                    .map(|(_, c)| c)
                    .unwrap_or_default();
                return Err(GraphError::ReplacesCycle { chain });
            }
            on_chain.insert(replaces);
            match self.entry(replaces) {
                Some(next) => current = next,
                None => break,
            }
        }
        let skipped: HashSet<&str> = self
            .entries
            .iter()
            .flat_map(|e| &e.skips)
            .map(String::as_str)
            .collect();
        let mut stranded: Vec<String> = self
            .entries
            .iter()
            .map(|e| e.name.as_str())
            .filter(|n| !on_chain.contains(n) && !skipped.contains(n))
            .map(str::to_string)
            .collect();
        if stranded.is_empty() {
            Ok(())
        } else {
            stranded.sort();
            Err(GraphError::Stranded { names: stranded })
        }
    }

    /// Every edge: `replaces` and `skips` as written, `skipRange` to each entry of the channel
    /// whose version is in range.
    pub fn edges(&self) -> Vec<GraphEdge<'_>> {
        let mut out = Vec::new();
        for e in &self.entries {
            if let Some(r) = &e.replaces {
                out.push(GraphEdge {
                    from: &e.name,
                    to: r,
                    kind: EdgeKind::Replaces,
                    to_in_channel: self.by_name.contains_key(r),
                });
            }
            for s in &e.skips {
                out.push(GraphEdge {
                    from: &e.name,
                    to: s,
                    kind: EdgeKind::Skips,
                    to_in_channel: self.by_name.contains_key(s),
                });
            }
            if let Some(range) = e.skip_range_parsed() {
                for other in &self.entries {
                    if other.name != e.name
                        && other.version.as_ref().is_some_and(|v| range.contains(v))
                    {
                        out.push(GraphEdge {
                            from: &e.name,
                            to: &other.name,
                            kind: EdgeKind::SkipRange,
                            to_in_channel: true,
                        });
                    }
                }
            }
        }
        out
    }

    /// The version OLM compares against skip ranges: the given one, else the entry's own.
    fn version_of<'a>(&'a self, name: &str, given: Option<&'a Version>) -> Option<&'a Version> {
        given.or_else(|| self.entry(name).and_then(|e| e.version.as_ref()))
    }

    /// Every entry that can directly replace `installed`, nearest the head first
    /// (docs/resolution.md §4 steps 4–5).
    pub fn replacement_candidates(
        &self,
        installed: &str,
        version: Option<&Version>,
    ) -> Result<Vec<Candidate<'_>>, GraphError> {
        let version = self.version_of(installed, version);
        Ok(self
            .channel_order()?
            .into_iter()
            .filter_map(|entry| {
                entry
                    .upgrades_from(installed, version)
                    .map(|via| Candidate { entry, via })
            })
            .collect())
    }

    /// The bundle OLM installs next over `installed`: the candidate nearest the head. `version`
    /// is needed when `installed` is not an entry of this channel (else its own is used).
    pub fn next_bundle_for(
        &self,
        installed: &str,
        version: Option<&Version>,
    ) -> Result<Candidate<'_>, NoUpdate> {
        let candidates = self
            .replacement_candidates(installed, version)
            .map_err(|source| NoUpdate::Channel {
                channel: self.channel.clone(),
                source,
            })?;
        if let Some(first) = candidates.first() {
            return Ok(*first);
        }
        if self.channel_head().is_ok_and(|h| h.name == installed) {
            return Err(NoUpdate::AtHead {
                channel: self.channel.clone(),
                installed: installed.to_string(),
            });
        }
        let order: HashSet<&str> = self
            .channel_order()
            .map(|o| o.into_iter().map(|e| e.name.as_str()).collect())
            .unwrap_or_default();
        let skipped_replacers = self
            .entries
            .iter()
            .filter(|e| !order.contains(e.name.as_str()))
            .filter(|e| {
                e.replaces.as_deref() == Some(installed) || e.skips.iter().any(|s| s == installed)
            })
            .map(|e| e.name.clone())
            .collect();
        Err(NoUpdate::NoEdge {
            channel: self.channel.clone(),
            installed: installed.to_string(),
            version: self.version_of(installed, version).map(Version::to_string),
            in_channel: self.by_name.contains_key(installed),
            skipped_replacers,
        })
    }

    /// The bundles OLM installs one InstallPlan at a time from `installed` until the head.
    pub fn upgrade_path(&self, installed: &str, version: Option<&Version>) -> UpgradePath<'_> {
        let mut steps: Vec<Candidate<'_>> = Vec::new();
        let mut seen: HashSet<&str> = HashSet::new();
        let mut current = installed;
        let mut current_version = version.cloned();
        seen.insert(installed);
        let stopped = loop {
            match self.next_bundle_for(current, current_version.as_ref()) {
                Ok(step) => {
                    if !seen.insert(step.entry.name.as_str()) {
                        break Some(NoUpdate::Loop {
                            at: step.entry.name.clone(),
                        });
                    }
                    steps.push(step);
                    current = &step.entry.name;
                    current_version = step.entry.version.clone();
                }
                Err(NoUpdate::AtHead { .. }) if !steps.is_empty() => break None,
                Err(reason) => break Some(reason),
            }
        };
        UpgradePath { steps, stopped }
    }

    /// The bundle a new Subscription to this channel installs: the first entry of the channel
    /// order (docs/resolution.md §4, "Fresh install").
    pub fn fresh_install(&self) -> Result<&GraphEntry, GraphError> {
        self.channel_order()?
            .into_iter()
            .next()
            .ok_or(GraphError::Empty)
    }
}

#[cfg(test)]
#[path = "upgrade_graph_tests.rs"]
mod tests;

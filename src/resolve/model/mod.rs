//! The namespace as a problem for resolvo, a CDCL (conflict-driven clause learning) solver built
//! for package managers (docs/dependencies.md, "How the solver decides").
//!
//! resolvo selects at most one solvable per name and satisfies every requirement of every
//! selected solvable; a requirement is a version set over one name. OLM's rules map onto that:
//!
//! - **one bundle per package**: every bundle of a package, from every catalog, and the installed
//!   CSV of that package share the package's name;
//! - **one provider per API**: a bundle (or an installed CSV) requires its own *provider token*
//!   for every API it owns, and all tokens of one API share the API's name;
//! - **a requirement met by one of an ordered list** (OLM's "requires at least one of"): every
//!   requirement gets a name of its own whose solvables are *picks*, one per candidate in OLM's
//!   order (installed operators first, then docs/resolution.md §6's catalog order); a pick
//!   requires exactly its candidate. The order of the picks is the order resolvo tries them, so the
//!   first candidate that leads to a consistent namespace wins;
//! - **a Subscription** is a requirement of the same kind over its own candidates (channel head
//!   down, or the upgrade candidates nearest the head first);
//! - **installed CSVs that stay** are locked by the caller; each keeps the requirements it has met
//!   so far, met by installed operators or by the upgrades of subscribed ones (never broken);
//! - **`olm.deprecated` bundles** are excluded; a bundle whose requirements cannot be read is
//!   unknown to the solver (never chosen).
//!
//! Everything is built lazily, when resolvo asks for a name's candidates or a solvable's
//! dependencies, so a namespace only pays for what its Subscriptions can reach.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use resolvo::{ConditionalRequirement, NameId, SolvableId, StringId, VersionSetId};

mod provider;

use crate::catalog::index::{ChannelIndex, IndexedBundle, PackageIndex};
use crate::catalog::properties::{self, GvkValue};

use super::input::{InstalledCsv, NamespaceInput};
use super::requirement::Requirement;
use super::solver::Claims;
use crate::api::CatalogRef;

/// A catalog bundle as the solver sees it.
#[derive(Debug, Clone)]
pub struct BundleItem<'a> {
    pub catalog: CatalogRef,
    pub package: &'a PackageIndex,
    /// The channel it was first found in (a pick carries the channel it was offered in).
    pub channel: &'a ChannelIndex,
    pub bundle: &'a IndexedBundle,
}

/// A solvable.
#[derive(Debug, Clone)]
pub enum Item<'a> {
    Bundle(BundleItem<'a>),
    Installed(&'a InstalledCsv),
    /// "package `owner` provides `gvk`" (one token for all bundles of a package: only one of
    /// them can be there anyway); `None`: installed operators provide it (one token for all, so
    /// operators already side by side on the cluster are not a conflict of their own).
    Provides {
        gvk: GvkValue,
        owner: Option<String>,
    },
    /// Candidate `target` chosen for requirement `choice`, offered from `channel`.
    Pick {
        choice: ChoiceId,
        target: SolvableId,
        channel: Option<&'a ChannelIndex>,
    },
}

/// A requirement with a name of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ChoiceId(usize);

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum NameKey {
    Package(String),
    /// An installed CSV that does not take part in the package rule.
    Csv(String),
    Gvk(GvkValue),
    Choice(ChoiceId),
}

#[derive(Debug, Clone, Copy)]
enum VersionSet {
    All(NameId),
    Exactly(NameId, SolvableId),
}

enum ChoiceSource<'a> {
    /// Bundles given in order (a Subscription's candidates).
    Fixed(Vec<(SolvableId, &'a ChannelIndex)>),
    /// A requirement of a catalog bundle from `owner_catalog`.
    OfBundle {
        owner_catalog: CatalogRef,
        requirement: Requirement,
    },
    /// A requirement an installed operator has met so far.
    OfInstalled(Requirement),
}

#[derive(Default)]
struct Arena<'a> {
    names: Vec<NameKey>,
    name_ids: HashMap<NameKey, NameId>,
    items: Vec<(NameId, Item<'a>)>,
    /// By catalog number and bundle address.
    bundles: HashMap<(usize, usize), SolvableId>,
    catalog_numbers: HashMap<CatalogRef, usize>,
    /// Provider tokens by API, then by package (`None`: installed operators).
    tokens: HashMap<GvkValue, Vec<(Option<String>, SolvableId)>>,
    sets: Vec<VersionSet>,
    strings: Vec<String>,
    choices: Vec<(ChoiceSource<'a>, Vec<SolvableId>)>,
    requirement_choices: HashMap<SolvableId, Vec<ChoiceId>>,
}

fn name_id(index: usize) -> NameId {
    NameId::from_raw(u32::try_from(index).unwrap_or(u32::MAX))
}

fn solvable_id(index: usize) -> SolvableId {
    SolvableId::from_raw(u32::try_from(index).unwrap_or(u32::MAX))
}

fn index_of(id: SolvableId) -> usize {
    id.into_raw() as usize
}

impl<'a> Arena<'a> {
    fn name(&mut self, key: NameKey) -> NameId {
        if let Some(id) = self.name_ids.get(&key) {
            return *id;
        }
        let id = name_id(self.names.len());
        self.names.push(key.clone());
        self.name_ids.insert(key, id);
        id
    }

    fn add(&mut self, name: NameId, item: Item<'a>) -> SolvableId {
        let id = solvable_id(self.items.len());
        self.items.push((name, item));
        id
    }

    /// The solvable of `bundle` in `catalog`, found the first time in `channel`.
    fn bundle(
        &mut self,
        catalog: &CatalogRef,
        package: &'a PackageIndex,
        channel: &'a ChannelIndex,
        bundle: &'a IndexedBundle,
    ) -> SolvableId {
        let number = match self.catalog_numbers.get(catalog) {
            Some(n) => *n,
            None => {
                let n = self.catalog_numbers.len();
                self.catalog_numbers.insert(catalog.clone(), n);
                n
            }
        };
        let key = (number, std::ptr::from_ref(bundle) as usize);
        if let Some(id) = self.bundles.get(&key) {
            return *id;
        }
        let name = self.name(NameKey::Package(package.name().to_owned()));
        let item = BundleItem {
            catalog: catalog.clone(),
            package,
            channel,
            bundle,
        };
        let id = self.add(name, Item::Bundle(item));
        self.bundles.insert(key, id);
        id
    }

    fn token(&mut self, owner: Option<&str>, gvk: &GvkValue) -> SolvableId {
        if let Some(id) = self.tokens.get(gvk).and_then(|list| {
            list.iter()
                .find(|(o, _)| o.as_deref() == owner)
                .map(|(_, id)| *id)
        }) {
            return id;
        }
        let name = self.name(NameKey::Gvk(gvk.clone()));
        let owner = owner.map(str::to_owned);
        let id = self.add(
            name,
            Item::Provides {
                gvk: gvk.clone(),
                owner: owner.clone(),
            },
        );
        self.tokens
            .entry(gvk.clone())
            .or_default()
            .push((owner, id));
        id
    }

    fn set(&mut self, set: VersionSet) -> VersionSetId {
        self.sets.push(set);
        VersionSetId(u32::try_from(self.sets.len() - 1).unwrap_or(u32::MAX))
    }

    fn string(&mut self, text: String) -> StringId {
        self.strings.push(text);
        StringId(u32::try_from(self.strings.len() - 1).unwrap_or(u32::MAX))
    }

    fn choice(&mut self, source: ChoiceSource<'a>) -> ChoiceId {
        self.choices.push((source, Vec::new()));
        ChoiceId(self.choices.len() - 1)
    }

    fn name_of(&self, id: SolvableId) -> NameId {
        self.items[index_of(id)].0
    }
}

fn is_deprecated(bundle: &IndexedBundle) -> bool {
    bundle
        .properties()
        .iter()
        .any(|p| p.type_ == properties::DEPRECATED)
}

/// Unit propagation rounds allowed for one namespace (all attempts together) before the solver
/// gives up and the Subscriptions not yet decided are explained one by one: catalogs that make a
/// CDCL search run this long are a dependency web nobody should install from.
const ROUNDS: u64 = 2_000_000;

/// Why resolvo was stopped.
#[derive(Debug)]
pub struct TooComplex;

/// The dependency provider resolvo asks.
pub struct Model<'a> {
    rounds: Cell<u64>,
    claims: Claims<'a>,
    /// Installed CSVs in the problem (by name), each with its solvable.
    installed: Vec<(&'a InstalledCsv, SolvableId)>,
    /// Packages whose installed CSV a Subscription may replace in this resolution: their
    /// bundles may meet what installed operators require (co-upgrades).
    upgradable: Vec<String>,
    arena: RefCell<Arena<'a>>,
}

impl<'a> Model<'a> {
    /// `installed`: the installed CSVs that take part (the caller leaves out those on their way
    /// out); `upgradable`: packages a Subscription may upgrade.
    pub fn new(
        ns: &NamespaceInput<'a>,
        mut installed: Vec<&'a InstalledCsv>,
        upgradable: Vec<String>,
    ) -> Self {
        installed.sort_by(|a, b| a.name.cmp(&b.name));
        let mut arena = Arena::default();
        let installed = installed
            .into_iter()
            .map(|csv| {
                // Two installed CSVs of one package (an upgrade still finishing, an operator
                // installed by hand) are a fact, not a conflict to solve: only the first takes
                // part in the package rule.
                let key = match &csv.package {
                    Some(p) if !arena.name_ids.contains_key(&NameKey::Package(p.clone())) => {
                        NameKey::Package(p.clone())
                    }
                    _ => NameKey::Csv(csv.name.clone()),
                };
                let name = arena.name(key);
                (csv, arena.add(name, Item::Installed(csv)))
            })
            .collect();
        Model {
            rounds: Cell::new(0),
            claims: Claims::new(ns),
            installed,
            upgradable,
            arena: RefCell::new(arena),
        }
    }

    pub fn installed(&self) -> &[(&'a InstalledCsv, SolvableId)] {
        &self.installed
    }

    /// A requirement over `options` (in order of preference); deprecated bundles are left out.
    pub fn fixed_choice(&self, options: Vec<BundleItem<'a>>) -> ChoiceId {
        let mut arena = self.arena.borrow_mut();
        let picks = options
            .into_iter()
            .filter(|o| !is_deprecated(o.bundle))
            .map(|o| {
                let id = arena.bundle(&o.catalog, o.package, o.channel, o.bundle);
                (id, o.channel)
            })
            .collect();
        arena.choice(ChoiceSource::Fixed(picks))
    }

    /// The root requirement that `choice` is met.
    pub fn require(&self, choice: ChoiceId) -> ConditionalRequirement {
        let mut arena = self.arena.borrow_mut();
        let name = arena.name(NameKey::Choice(choice));
        arena.set(VersionSet::All(name)).into()
    }

    /// The root requirement that installed `solvable` stays.
    pub fn lock(&self, solvable: SolvableId) -> ConditionalRequirement {
        let mut arena = self.arena.borrow_mut();
        let name = arena.name_of(solvable);
        arena.set(VersionSet::Exactly(name, solvable)).into()
    }

    /// The requirement `set` stands for, when it is one (a root requirement built by `require`).
    pub fn choice_of(&self, set: VersionSetId) -> Option<ChoiceId> {
        let arena = self.arena.borrow();
        match arena.sets.get(set.0 as usize)? {
            VersionSet::All(name) => match arena.names.get(name.into_raw() as usize)? {
                NameKey::Choice(choice) => Some(*choice),
                _ => None,
            },
            VersionSet::Exactly(..) => None,
        }
    }

    pub fn item(&self, id: SolvableId) -> Item<'a> {
        self.arena.borrow().items[index_of(id)].1.clone()
    }

    /// The requirements of `id` the solver has seen, in property order.
    pub fn requirement_choices(&self, id: SolvableId) -> Vec<ChoiceId> {
        self.arena
            .borrow()
            .requirement_choices
            .get(&id)
            .cloned()
            .unwrap_or_default()
    }

    /// The pick of `choice` in `selected`: its target and the channel it was offered from.
    pub fn picked(
        &self,
        choice: ChoiceId,
        selected: &dyn Fn(SolvableId) -> bool,
    ) -> Option<(SolvableId, Option<&'a ChannelIndex>)> {
        let arena = self.arena.borrow();
        arena.choices[choice.0]
            .1
            .iter()
            .find(|p| selected(**p))
            .and_then(|p| match &arena.items[index_of(*p)].1 {
                Item::Pick {
                    target, channel, ..
                } => Some((*target, *channel)),
                _ => None,
            })
    }
}

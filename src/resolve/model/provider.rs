//! How the model answers resolvo: the candidates of a name (every bundle of a package, every
//! provider of an API, the picks of a requirement in OLM's order), the dependencies of a
//! solvable, their order of preference.

use std::any::Any;
use std::fmt::Display;

use resolvo::{
    Candidates, Condition, ConditionId, Dependencies, DependencyProvider, Interner,
    KnownDependencies, NameId, SolvableId, SolverCache, StringId, VersionSetId, VersionSetUnionId,
};

use crate::api::CatalogRef;
use crate::catalog::index::{ChannelIndex, IndexedBundle, PackageIndex};
use crate::catalog::properties::GvkValue;
use crate::resolve::candidates::dependency_candidates;
use crate::resolve::input::InstalledCsv;
use crate::resolve::requirement::{CandidateView, requirements};

use super::{
    Arena, ChoiceId, ChoiceSource, Item, Model, NameKey, ROUNDS, TooComplex, VersionSet, index_of,
    is_deprecated,
};

fn installed_view(csv: &InstalledCsv) -> CandidateView<'_> {
    CandidateView {
        package: csv.package.as_deref().unwrap_or_default(),
        version: csv.version.as_ref(),
        properties: &csv.properties,
    }
}

/// The channel a bundle found outside any requirement is filed under: the package's default
/// channel when it is there, else its first channel.
fn home_channel<'a>(package: &'a PackageIndex, bundle: &IndexedBundle) -> Option<&'a ChannelIndex> {
    let names = bundle.channels();
    package
        .default_channel_name()
        .filter(|d| names.iter().any(|n| n == d))
        .or_else(|| names.first().map(String::as_str))
        .and_then(|name| package.channel(name))
}

impl<'a> Model<'a> {
    /// Installed CSVs matching `requirement`, then catalog bundles in OLM's order.
    fn picks(&self, arena: &mut Arena<'a>, choice: ChoiceId) -> Vec<SolvableId> {
        let mut targets: Vec<(SolvableId, Option<&'a ChannelIndex>)> = Vec::new();
        let (requirement, owner_catalog, only_upgrades) = match &arena.choices[choice.0].0 {
            ChoiceSource::Fixed(list) => {
                targets.extend(list.iter().map(|(id, c)| (*id, Some(*c))));
                (None, None, false)
            }
            ChoiceSource::OfBundle {
                owner_catalog,
                requirement,
            } => (
                Some(requirement.clone()),
                Some(owner_catalog.clone()),
                false,
            ),
            ChoiceSource::OfInstalled(requirement) => (Some(requirement.clone()), None, true),
        };
        if let Some(requirement) = requirement {
            for (csv, id) in &self.installed {
                if requirement.predicate.matches(&installed_view(csv)) {
                    targets.push((*id, None));
                }
            }
            // An installed operator has no catalog: no catalog is "its own".
            let owner = owner_catalog.unwrap_or_else(|| CatalogRef::new("", ""));
            for c in dependency_candidates(&self.claims, &requirement, &owner) {
                if is_deprecated(c.bundle)
                    || (only_upgrades && !self.upgradable.iter().any(|p| p == c.package.name()))
                {
                    continue;
                }
                let id = arena.bundle(&c.catalog, c.package, c.channel, c.bundle);
                targets.push((id, Some(c.channel)));
            }
        }
        let name = arena.name(NameKey::Choice(choice));
        let picks: Vec<SolvableId> = targets
            .into_iter()
            .map(|(target, channel)| {
                arena.add(
                    name,
                    Item::Pick {
                        choice,
                        target,
                        channel,
                    },
                )
            })
            .collect();
        arena.choices[choice.0].1.clone_from(&picks);
        picks
    }

    /// Every bundle of `package` in the visible catalogs, and the installed CSV of it.
    fn package_candidates(&self, arena: &mut Arena<'a>, name: NameId, package: &str) -> Candidates {
        let mut out = Candidates::default();
        out.candidates.extend(
            self.installed
                .iter()
                .map(|(_, id)| *id)
                .filter(|id| arena.name_of(*id) == name),
        );
        for catalog in self.claims.catalogs() {
            let Some(index) = catalog.index() else {
                continue;
            };
            let Some(pkg) = index.package(package) else {
                continue;
            };
            for bundle in pkg.bundles() {
                let Some(channel) = home_channel(pkg, bundle) else {
                    continue;
                };
                let id = arena.bundle(&catalog.key, pkg, channel, bundle);
                if is_deprecated(bundle) {
                    let why = arena.string(format!("bundle {} is deprecated", bundle.name()));
                    out.excluded.push((id, why));
                } else {
                    out.candidates.push(id);
                }
            }
        }
        out
    }

    /// Every provider token of `gvk`: installed operators' (one) and each providing package's.
    fn gvk_candidates(&self, arena: &mut Arena<'a>, gvk: &GvkValue) -> Candidates {
        let mut out = Candidates::default();
        if self
            .installed
            .iter()
            .any(|(csv, _)| csv.provided.contains(gvk))
        {
            out.candidates.push(arena.token(None, gvk));
        }
        let mut packages: Vec<&str> = Vec::new();
        for catalog in self.claims.catalogs() {
            let Some(index) = catalog.index() else {
                continue;
            };
            for (package, _) in index.bundles_that_provide(gvk) {
                if !packages.contains(&package.name()) {
                    packages.push(package.name());
                }
            }
        }
        for package in packages {
            out.candidates.push(arena.token(Some(package), gvk));
        }
        out
    }

    fn dependencies(&self, arena: &mut Arena<'a>, id: SolvableId) -> Dependencies {
        let item = arena.items[index_of(id)].1.clone();
        let mut known = KnownDependencies::default();
        let mut require = |arena: &mut Arena<'a>, set: VersionSet| {
            known.requirements.push(arena.set(set).into());
        };
        match item {
            Item::Bundle(b) => {
                let needs = match requirements(b.bundle.name(), b.bundle.properties()) {
                    Ok(needs) => needs,
                    Err(e) => return Dependencies::Unknown(arena.string(e.to_string())),
                };
                for gvk in b.bundle.provided_gvks() {
                    let token = arena.token(Some(b.package.name()), &gvk);
                    let name = arena.name_of(token);
                    require(arena, VersionSet::Exactly(name, token));
                }
                let mut choices = Vec::new();
                for requirement in needs {
                    let choice = arena.choice(ChoiceSource::OfBundle {
                        owner_catalog: b.catalog.clone(),
                        requirement,
                    });
                    let name = arena.name(NameKey::Choice(choice));
                    require(arena, VersionSet::All(name));
                    choices.push(choice);
                }
                arena.requirement_choices.insert(id, choices);
            }
            Item::Installed(csv) => {
                for gvk in &csv.provided {
                    let token = arena.token(None, gvk);
                    let name = arena.name_of(token);
                    require(arena, VersionSet::Exactly(name, token));
                }
                // An unreadable requirement of an installed operator is not ours to enforce;
                // one not met today is what it waits for, not something to keep.
                let needs = requirements(&csv.name, &csv.properties).unwrap_or_default();
                for requirement in needs {
                    let met = self
                        .installed
                        .iter()
                        .any(|(other, _)| requirement.predicate.matches(&installed_view(other)));
                    if met {
                        let choice = arena.choice(ChoiceSource::OfInstalled(requirement));
                        let name = arena.name(NameKey::Choice(choice));
                        require(arena, VersionSet::All(name));
                    }
                }
            }
            Item::Provides { .. } => {}
            Item::Pick { target, .. } => {
                let name = arena.name_of(target);
                require(arena, VersionSet::Exactly(name, target));
            }
        }
        Dependencies::Known(known)
    }
}

impl Interner for Model<'_> {
    type NameId = NameId;
    type SolvableId = SolvableId;

    fn display_solvable(&self, solvable: SolvableId) -> impl Display + '_ {
        match self.item(solvable) {
            Item::Bundle(b) => format!("{} ({})", b.bundle.name(), b.catalog),
            Item::Installed(csv) => format!("installed {}", csv.name),
            Item::Provides { gvk, .. } => format!("provider of {}", gvk.kind),
            Item::Pick { target, .. } => format!("pick {}", self.display_solvable(target)),
        }
    }

    fn display_name(&self, name: NameId) -> impl Display + '_ {
        format!("{:?}", self.arena.borrow().names[name.into_raw() as usize])
    }

    fn display_version_set(&self, version_set: VersionSetId) -> impl Display + '_ {
        match self.arena.borrow().sets[version_set.0 as usize] {
            VersionSet::All(_) => "any".to_owned(),
            VersionSet::Exactly(_, id) => format!("= {}", self.display_solvable(id)),
        }
    }

    fn display_string(&self, string_id: StringId) -> impl Display + '_ {
        self.arena.borrow().strings[string_id.0 as usize].clone()
    }

    fn version_set_name(&self, version_set: VersionSetId) -> NameId {
        match self.arena.borrow().sets[version_set.0 as usize] {
            VersionSet::All(name) | VersionSet::Exactly(name, _) => name,
        }
    }

    fn solvable_name(&self, solvable: SolvableId) -> NameId {
        self.arena.borrow().name_of(solvable)
    }

    fn version_sets_in_union(&self, _: VersionSetUnionId) -> impl Iterator<Item = VersionSetId> {
        // No unions in this encoding: alternatives are picks of one name.
        std::iter::empty()
    }

    fn resolve_condition(&self, _: ConditionId) -> Condition {
        // No conditional requirements in this encoding; resolvo only asks about conditions it
        // was given.
        Condition::Requirement(VersionSetId(0))
    }
}

impl DependencyProvider for Model<'_> {
    async fn filter_candidates(
        &self,
        candidates: &[SolvableId],
        version_set: VersionSetId,
        inverse: bool,
    ) -> Vec<SolvableId> {
        let set = self.arena.borrow().sets[version_set.0 as usize];
        candidates
            .iter()
            .copied()
            .filter(|c| match set {
                VersionSet::All(_) => !inverse,
                VersionSet::Exactly(_, id) => (*c == id) != inverse,
            })
            .collect()
    }

    async fn get_candidates(&self, name: NameId) -> Option<Candidates> {
        let mut arena = self.arena.borrow_mut();
        let key = arena.names.get(name.into_raw() as usize)?.clone();
        Some(match key {
            NameKey::Package(p) => self.package_candidates(&mut arena, name, &p),
            NameKey::Csv(_) => Candidates {
                candidates: self
                    .installed
                    .iter()
                    .filter(|(_, id)| arena.name_of(*id) == name)
                    .map(|(_, id)| *id)
                    .collect(),
                ..Candidates::default()
            },
            NameKey::Gvk(gvk) => self.gvk_candidates(&mut arena, &gvk),
            NameKey::Choice(choice) => Candidates {
                candidates: self.picks(&mut arena, choice),
                ..Candidates::default()
            },
        })
    }

    async fn sort_candidates(&self, _: &SolverCache<Self>, solvables: &mut [SolvableId]) {
        // Installed operators first, then the order things were offered in (picks are created
        // in OLM's order of preference).
        let arena = self.arena.borrow();
        solvables.sort_by_key(|id| {
            (
                !matches!(arena.items[index_of(*id)].1, Item::Installed(_)),
                index_of(*id),
            )
        });
    }

    async fn get_dependencies(&self, solvable: SolvableId) -> Dependencies {
        let mut arena = self.arena.borrow_mut();
        self.dependencies(&mut arena, solvable)
    }

    fn should_cancel_with_value(&self) -> Option<Box<dyn Any>> {
        let rounds = self.rounds.get() + 1;
        self.rounds.set(rounds);
        (rounds > ROUNDS).then(|| Box::new(TooComplex) as Box<dyn Any>)
    }
}

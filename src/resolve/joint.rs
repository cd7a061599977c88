//! All Subscriptions of a namespace solved together on resolvo (model.rs), so one
//! Subscription's dependencies may pick any provider that fits next to everything else, and
//! installed operators upgrade together when only together they fit (co-upgrades, an API moving
//! from one package to another).
//!
//! Failure stays local: when the whole namespace does not fit, resolvo's conflict names the
//! Subscriptions whose requirements take part in it, and the newest of them gives way; this
//! repeats until the rest fits, then those that gave way are tried again, oldest first (one may
//! fit once a later conflict took another out). Those left out are left to the caller, which
//! explains each against what was kept.

use std::collections::{HashMap, HashSet};

use resolvo::conflict::ConflictEdge;
use resolvo::{
    ConditionalRequirement, Problem, Requirement, SolvableId, Solver, UnsolvableOrCancelled,
};

use crate::catalog::index::ChannelIndex;

use super::input::{InstalledCsv, NamespaceInput};
use super::model::{BundleItem, ChoiceId, Item, Model};
use super::participant::Participant;
use super::solver::Chosen;

/// A Subscription that gets a bundle.
pub struct Accepted<'a> {
    /// Index into the participants.
    pub participant: usize,
    /// Index into its options.
    pub option: usize,
    /// Its bundle first, then the dependencies it pulls in (depth first, in requirement order).
    pub chosen: Vec<Chosen<'a>>,
    /// Other participants whose chosen bundle meets a requirement of its bundle or of what it
    /// pulls in: their bundles are installed together with this one (a co-upgrade).
    pub partners: Vec<usize>,
}

/// Solves `participants` when every one of them fits; `None` when they do not all fit together.
pub fn solve_all<'a>(
    ns: &NamespaceInput<'a>,
    participants: &[Participant<'a, '_>],
) -> Option<Vec<Accepted<'a>>> {
    if participants.is_empty() {
        return Some(Vec::new());
    }
    let (mut solver, choices) = setup(ns, participants);
    let everyone: Vec<usize> = (0..participants.len()).collect();
    let solution = attempt(&mut solver, participants, &choices, &everyone).ok()?;
    Some(attribute(
        solver.provider(),
        participants,
        &choices,
        &everyone,
        &solution,
    ))
}

/// Solves `participants` (oldest first) together; returns those that get a bundle.
pub fn solve<'a>(
    ns: &NamespaceInput<'a>,
    participants: &[Participant<'a, '_>],
) -> Vec<Accepted<'a>> {
    if participants.is_empty() {
        return Vec::new();
    }
    let (mut solver, choices) = setup(ns, participants);
    let mut kept: Vec<usize> = (0..participants.len()).collect();
    let mut dropped = Vec::new();
    let mut solution = loop {
        match attempt(&mut solver, participants, &choices, &kept) {
            Ok(solution) => break solution,
            // Too complex: the caller explains every Subscription one by one.
            Err(Failure::Cancelled) => return Vec::new(),
            Err(Failure::Unsatisfiable(involved)) => {
                // The newest Subscription in the conflict gives way; when the conflict names
                // none (what is installed does not fit on its own), the newest of all.
                let Some(newest) = involved.into_iter().max().or(kept.last().copied()) else {
                    return Vec::new();
                };
                kept.retain(|i| *i != newest);
                dropped.push(newest);
            }
        }
    };
    // One that gave way may fit now that a later conflict took another out.
    dropped.sort_unstable();
    for i in dropped {
        let mut trial = kept.clone();
        trial.push(i);
        trial.sort_unstable();
        if let Ok(fits) = attempt(&mut solver, participants, &choices, &trial) {
            kept = trial;
            solution = fits;
        }
    }
    attribute(solver.provider(), participants, &choices, &kept, &solution)
}

/// The model of the namespace for `participants`, in a solver, with each one's requirement.
fn setup<'a>(
    ns: &NamespaceInput<'a>,
    participants: &[Participant<'a, '_>],
) -> (Solver<Model<'a>>, Vec<ChoiceId>) {
    // An older CSV of a subscribed package, still around while an upgrade finishes: its
    // Subscription has installed another one of the package.
    let left_behind = |csv: &InstalledCsv| {
        let Some(package) = csv.package.as_deref() else {
            return false;
        };
        ns.subscriptions.iter().any(|s| {
            s.spec.name == package
                && s.status
                    .as_ref()
                    .and_then(|st| st.installed_csv.as_deref())
                    .is_some_and(|installed| installed != csv.name)
        })
    };
    let installed: Vec<&InstalledCsv> = ns
        .installed
        .iter()
        .filter(|csv| !matches!(csv.phase.as_str(), "Replacing" | "Deleting"))
        // It does not hold the package against its own Subscription. A CSV whose Subscription
        // has installed nothing yet (one that adopts it, a dependency's Subscription just made
        // by a plan) stays: what others need from it is still met by it, never by a second
        // install of its package next to it (docs/dependencies.md, "What gets chosen").
        .filter(|csv| !left_behind(csv))
        .collect();
    let upgradable = participants
        .iter()
        .filter(|p| p.current.is_some())
        .filter_map(|p| p.options.first())
        .map(|o| o.item.package.name().to_owned())
        .collect();
    let model = Model::new(ns, installed, upgradable);
    let choices: Vec<ChoiceId> = participants
        .iter()
        .map(|p| model.fixed_choice(p.options.iter().map(|o| o.item.clone()).collect()))
        .collect();
    (Solver::new(model), choices)
}

/// Why an attempt found nothing.
enum Failure {
    /// Not satisfiable; the participants whose requirements take part in the conflict.
    Unsatisfiable(Vec<usize>),
    Cancelled,
}

/// Solves for the Subscriptions `set`; every installed CSV not upgraded by one of them stays.
fn attempt(
    solver: &mut Solver<Model<'_>>,
    participants: &[Participant<'_, '_>],
    choices: &[ChoiceId],
    set: &[usize],
) -> Result<Vec<SolvableId>, Failure> {
    let model = solver.provider();
    let upgraded: Vec<&str> = set
        .iter()
        .filter_map(|i| participants[*i].current)
        .map(|c| c.name.as_str())
        .collect();
    let mut requirements: Vec<ConditionalRequirement> =
        set.iter().map(|i| model.require(choices[*i])).collect();
    requirements.extend(
        model
            .installed()
            .iter()
            .filter(|(csv, _)| !upgraded.contains(&csv.name.as_str()))
            .map(|(_, id)| model.lock(*id)),
    );
    match solver.solve(Problem::new().requirements(requirements)) {
        Ok(solution) => Ok(solution),
        Err(UnsolvableOrCancelled::Cancelled(_)) => Err(Failure::Cancelled),
        Err(UnsolvableOrCancelled::Unsolvable(conflict)) => {
            let graph = conflict.graph(solver);
            let model = solver.provider();
            let mut involved: Vec<usize> = graph
                .graph
                .raw_edges()
                .iter()
                .filter(|e| e.source() == graph.root_node)
                .filter_map(|e| match e.weight {
                    ConflictEdge::Requires(Requirement::Single(set)) => model.choice_of(set),
                    _ => None,
                })
                .filter_map(|choice| choices.iter().position(|c| *c == choice))
                .filter(|i| set.contains(i))
                .collect();
            involved.sort_unstable();
            involved.dedup();
            Err(Failure::Unsatisfiable(involved))
        }
    }
}

/// Each kept Subscription's bundle and the dependencies it pulls in; a dependency two
/// Subscriptions need belongs to the older one.
fn attribute<'a>(
    model: &Model<'a>,
    participants: &[Participant<'a, '_>],
    choices: &[ChoiceId],
    kept: &[usize],
    solution: &[SolvableId],
) -> Vec<Accepted<'a>> {
    let selected: HashSet<SolvableId> = solution.iter().copied().collect();
    let is_selected = |id: SolvableId| selected.contains(&id);
    let roots: Vec<(usize, SolvableId)> = kept
        .iter()
        .filter_map(|i| {
            model
                .picked(choices[*i], &is_selected)
                .map(|(t, _)| (*i, t))
        })
        .collect();
    let root_ids: HashMap<SolvableId, usize> = roots.iter().map(|(i, t)| (*t, *i)).collect();
    let mut taken = HashSet::new();
    let mut out = Vec::new();
    for (i, target) in roots {
        let participant = &participants[i];
        let Item::Bundle(root) = model.item(target) else {
            continue;
        };
        let Some(option) = participant.options.iter().position(|o| {
            o.item.catalog == root.catalog && std::ptr::eq(o.item.bundle, root.bundle)
        }) else {
            continue;
        };
        let item = &participant.options[option].item;
        let mut chosen = vec![chosen(
            item,
            item.channel,
            participant.name,
            None,
            participant.current.map(|c| c.name.clone()),
        )];
        let pull = Pull {
            model,
            selected: &is_selected,
            roots: &root_ids,
            subscription: participant.name,
        };
        let mut partners = Vec::new();
        pull.dependencies(
            target,
            root.bundle.name(),
            &mut taken,
            &mut chosen,
            &mut partners,
        );
        partners.retain(|p| *p != i);
        partners.sort_unstable();
        partners.dedup();
        out.push(Accepted {
            participant: i,
            option,
            chosen,
            partners,
        });
    }
    out
}

fn chosen<'a>(
    item: &BundleItem<'a>,
    channel: &ChannelIndex,
    subscription: &str,
    required_by: Option<&str>,
    replaces: Option<String>,
) -> Chosen<'a> {
    Chosen {
        catalog: item.catalog.clone(),
        package: item.package,
        channel: channel.name().to_owned(),
        bundle: item.bundle,
        replaces,
        subscription: subscription.to_owned(),
        required_by: required_by.map(str::to_owned),
        provided: item.bundle.provided_gvks().collect(),
    }
}

/// Walks what a Subscription's bundle pulls in.
struct Pull<'m, 'a> {
    model: &'m Model<'a>,
    selected: &'m dyn Fn(SolvableId) -> bool,
    /// Each Subscription's chosen bundle, with the participant it is chosen for.
    roots: &'m HashMap<SolvableId, usize>,
    subscription: &'m str,
}

impl<'a> Pull<'_, 'a> {
    fn dependencies(
        &self,
        owner: SolvableId,
        owner_name: &str,
        taken: &mut HashSet<SolvableId>,
        out: &mut Vec<Chosen<'a>>,
        partners: &mut Vec<usize>,
    ) {
        for choice in self.model.requirement_choices(owner) {
            let Some((target, channel)) = self.model.picked(choice, self.selected) else {
                continue;
            };
            if let Some(partner) = self.roots.get(&target) {
                partners.push(*partner);
                continue;
            }
            if !taken.insert(target) {
                continue;
            }
            // Installed operators meet requirements without being installed again.
            let Item::Bundle(b) = self.model.item(target) else {
                continue;
            };
            out.push(chosen(
                &b,
                channel.unwrap_or(b.channel),
                self.subscription,
                Some(owner_name),
                None,
            ));
            self.dependencies(target, b.bundle.name(), taken, out, partners);
        }
    }
}

/// For each accepted Subscription that upgrades and is tied to others that upgrade, the others
/// of its group (`upgrading` names the upgrading ones): the groups are the connected parts of
/// "one's bundle or dependencies need another's bundle", in either direction.
pub fn tied_groups<'s>(
    accepted: &[Accepted<'_>],
    upgrading: impl Fn(usize) -> Option<&'s str>,
) -> HashMap<&'s str, Vec<String>> {
    let accepted: Vec<(&Accepted<'_>, &str)> = accepted
        .iter()
        .filter_map(|a| upgrading(a.participant).map(|name| (a, name)))
        .collect();
    let mut group: HashMap<usize, usize> = accepted
        .iter()
        .map(|(a, _)| (a.participant, a.participant))
        .collect();
    fn root(group: &HashMap<usize, usize>, mut i: usize) -> usize {
        while let Some(&parent) = group.get(&i).filter(|p| **p != i) {
            i = parent;
        }
        i
    }
    for (a, _) in &accepted {
        for partner in &a.partners {
            if !group.contains_key(partner) {
                continue;
            }
            let (x, y) = (root(&group, a.participant), root(&group, *partner));
            if x != y {
                group.insert(x.max(y), x.min(y));
            }
        }
    }
    let mut out: HashMap<&str, Vec<String>> = HashMap::new();
    for (a, name) in &accepted {
        let mine = root(&group, a.participant);
        let mut others: Vec<String> = accepted
            .iter()
            .filter(|(b, _)| b.participant != a.participant && root(&group, b.participant) == mine)
            .map(|(_, other)| (*other).to_owned())
            .collect();
        if !others.is_empty() {
            others.sort();
            out.insert(*name, others);
        }
    }
    out
}

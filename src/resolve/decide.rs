//! What each Subscription of a namespace gets (docs/resolution.md §4): a fresh install (channel
//! head, or `startingCSV`), the next hop of its upgrade path, nothing new, or a refusal in plain
//! words. Decided for all Subscriptions of the namespace at once — the seam where dependency
//! solving (a later issue) will plug in — but each decision stands alone: one bad Subscription
//! or catalog never blocks another.

use std::collections::HashMap;

use crate::api::Subscription;
use crate::catalog::index::PackageIndex;

use super::adoption::{Standing, unclaimed_standing};
use super::channels::ranked_channels;
use super::explain::{Refusal, similar_names};
use super::input::{CatalogContent, NamespaceInput};
use super::joint;
use super::outcome::{Decision, Dependency, Outcome, Resolved, Target};
use super::participant::{Depth, participant};
use super::rollback::failed_mark;
use super::search::Search;
use super::solver::Claims;
use super::version_request::version_request;
use crate::api::CatalogRef;

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

//! What each Subscription's choice holds, and the explaining search (docs/dependencies.md).
//!
//! The solver proper is resolvo (model.rs, joint.rs): it decides. This module keeps what was
//! decided (`Claims`: the bundles chosen for each Subscription, the installed CSVs they replace)
//! and answers "why not" for a Subscription the solver could not fit: it walks that
//! Subscription's candidates against what was kept, taking each candidate with its whole
//! closure — every requirement met by an installed operator, by a bundle already chosen, or by
//! the first fitting bundle of the visible catalogs in OLM's order — and records, for every
//! candidate and every requirement's candidate, the first rule it breaks (docs/resolution.md §7:
//! one bundle per package, one provider per API, installed operators stay and keep what they
//! require, `olm.deprecated` bundles are never chosen). That record is the explanation users read:
//! the Subscription → its bundle → the requirement → every candidate and why it was rejected.
//! resolvo's own conflict is a set of clauses over solver variables; the walk says the same in
//! the terms of the catalog. The walk also decides, one by one, the Subscriptions the solver does
//! not take (no catalog, no channel, an installed CSV to adopt, nothing to upgrade to).

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use crate::catalog::index::{ChannelIndex, IndexedBundle, PackageIndex};
use crate::catalog::properties::{self, GvkValue};

use super::candidates::{Candidate, dependency_candidates, near_misses};
use super::input::{CatalogInput, InstalledCsv, NamespaceInput};
use super::requirement::{CandidateView, Requirement, RequirementError, requirements};
use crate::api::CatalogRef;

/// More bundles than this tried for one Subscription candidate means the catalogs hold a
/// pathological dependency web; resolution stops and says so.
const BUDGET: usize = 20_000;

/// A bundle chosen in this resolution.
#[derive(Debug, Clone)]
pub struct Chosen<'a> {
    pub catalog: CatalogRef,
    pub package: &'a PackageIndex,
    pub channel: String,
    pub bundle: &'a IndexedBundle,
    /// The installed CSV it replaces (only a Subscription's own bundle replaces one).
    pub replaces: Option<String>,
    /// The Subscription it was chosen for.
    pub subscription: String,
    /// The bundle whose requirement pulled it in; `None` for the Subscription's own bundle.
    pub required_by: Option<String>,
    /// The APIs it provides (read once: every later candidate is checked against them).
    pub provided: Vec<GvkValue>,
}

impl Chosen<'_> {
    fn view(&self) -> CandidateView<'_> {
        CandidateView {
            package: self.bundle.package(),
            version: self.bundle.version(),
            properties: self.bundle.properties(),
        }
    }
}

/// Who holds a package or an API.
#[derive(Debug, Clone, PartialEq)]
pub struct Holder {
    /// In words: `installed operator x.v1`, `bundle y.v2 chosen for Subscription s`.
    pub text: String,
    /// The other Subscription, when the holder was chosen for one in this resolution.
    pub subscription: Option<String>,
}

/// Why a candidate bundle was not taken.
#[derive(Debug, Clone, PartialEq)]
pub enum Rejection {
    /// `olm.deprecated`.
    Deprecated,
    /// Another bundle of its package is installed or chosen.
    PackageTaken { package: String, by: Holder },
    /// Another operator provides one of its APIs.
    ApiTaken { gvk: GvkValue, by: Holder },
    /// Replacing the installed CSV would take away what another installed operator requires.
    BreaksInstalled {
        csv: String,
        needs: String,
        olm: String,
    },
    /// One of its requirements cannot be read.
    BadRequirement(RequirementError),
    /// One of its requirements cannot be met.
    Unmet(Box<Unmet>),
    /// The search went beyond its budget.
    TooComplex,
}

/// A requirement nothing satisfies, with every candidate considered.
#[derive(Debug, Clone, PartialEq)]
pub struct Unmet {
    /// The bundle that has the requirement.
    pub bundle: String,
    /// OLM's words for it (`providing an API with group: …`).
    pub olm: String,
    /// Ours (`an operator providing Kind (group/version)`).
    pub plain: String,
    /// Candidates that match it and why each was not taken (`<bundle> (<catalog>)`).
    pub tried: Vec<(String, Rejection)>,
    /// Bundles that come close but do not match (a version outside the range), in words.
    pub misses: Vec<String>,
}

/// What the resolution of a namespace has chosen so far, and what is installed.
pub struct Claims<'a> {
    ns: NamespaceInput<'a>,
    /// Installed CSVs (sorted by name) with their requirements.
    installed: Vec<(&'a InstalledCsv, Vec<Requirement>)>,
    /// Visible, readable catalogs.
    catalogs: Vec<&'a CatalogInput>,
    chosen: Vec<Chosen<'a>>,
    /// Installed CSVs that chosen bundles replace.
    replaced: Vec<String>,
    cache: RefCell<HashMap<usize, ParsedRequirements>>,
}

/// A bundle's requirements as read once, or why they cannot be read.
type ParsedRequirements = Result<Arc<Vec<Requirement>>, RequirementError>;

/// A Subscription's own candidate.
#[derive(Debug, Clone, Copy)]
pub struct Root<'a, 's> {
    pub catalog: &'s CatalogRef,
    pub package: &'a PackageIndex,
    pub channel: &'a ChannelIndex,
    pub bundle: &'a IndexedBundle,
    pub replaces: Option<&'a InstalledCsv>,
    pub subscription: &'s str,
}

impl<'a> Claims<'a> {
    pub fn new(ns: &NamespaceInput<'a>) -> Self {
        let mut installed: Vec<(&InstalledCsv, Vec<Requirement>)> = ns
            .installed
            .iter()
            // An unreadable requirement of an installed operator is not ours to enforce.
            .map(|csv| {
                (
                    csv,
                    requirements(&csv.name, &csv.properties).unwrap_or_default(),
                )
            })
            .collect();
        installed.sort_by(|a, b| a.0.name.cmp(&b.0.name));
        let visible = ns.catalog_namespaces();
        let mut catalogs: Vec<&CatalogInput> = ns
            .catalogs
            .iter()
            .filter(|c| visible.contains(&c.key.namespace.as_str()) && c.index().is_some())
            .collect();
        catalogs.sort_by(|a, b| a.key.cmp(&b.key));
        Claims {
            ns: *ns,
            installed,
            catalogs,
            chosen: Vec::new(),
            replaced: Vec::new(),
            cache: RefCell::default(),
        }
    }

    pub fn namespace(&self) -> &NamespaceInput<'a> {
        &self.ns
    }

    pub(super) fn catalogs(&self) -> &[&'a CatalogInput] {
        &self.catalogs
    }

    /// Bundles chosen so far.
    pub fn chosen(&self) -> &[Chosen<'a>] {
        &self.chosen
    }

    /// Takes bundles the solver chose (a Subscription's bundle first, with what it replaces).
    pub fn accept(&mut self, chosen: Vec<Chosen<'a>>) {
        for c in &chosen {
            if let Some(old) = &c.replaces {
                self.replaced.push(old.clone());
            }
        }
        self.chosen.extend(chosen);
    }

    /// Whether `csv` is the installed CSV of one of the namespace's Subscriptions.
    fn is_subscribed(&self, csv: &str) -> bool {
        self.ns
            .subscriptions
            .iter()
            .any(|s| s.status.as_ref().and_then(|st| st.installed_csv.as_deref()) == Some(csv))
    }

    /// Installs `root` with its closure if it fits; returns the dependencies pulled in.
    pub fn try_install(&mut self, root: Root<'a, '_>) -> Result<Vec<Chosen<'a>>, Rejection> {
        let mut search = Search {
            claims: self,
            added: Vec::new(),
            replaced: root.replaces.map(|c| c.name.clone()),
            steps: 0,
        };
        let candidate = Candidate {
            catalog: root.catalog.clone(),
            package: root.package,
            channel: root.channel,
            bundle: root.bundle,
        };
        // Replacing an installed CSV that another installed operator depends on is the reason
        // to give when the closure fails too: it names the operator that holds the upgrade back.
        let breaks = root
            .replaces
            .and_then(|old| search.broken_by_replacing(old, Some(&candidate_view(root.bundle))));
        if let Err(e) = search.add(&candidate, root.subscription, None) {
            return Err(match (e, breaks) {
                (Rejection::Unmet(_), Some(broken)) => broken,
                (e, _) => e,
            });
        }
        if let Some(old) = root.replaces {
            search.keeps_installed_requirements(old)?;
        }
        let mut added = search.added;
        if let Some(first) = added.first_mut() {
            first.replaces = root.replaces.map(|c| c.name.clone());
        }
        if let Some(old) = root.replaces {
            self.replaced.push(old.name.clone());
        }
        self.chosen.extend(added.iter().cloned());
        Ok(added.into_iter().skip(1).collect())
    }

    /// Installed CSVs that stay (not replaced, not on their way out).
    fn staying(
        &self,
        replacing: Option<&str>,
    ) -> impl Iterator<Item = &(&'a InstalledCsv, Vec<Requirement>)> {
        self.installed.iter().filter(move |(csv, _)| {
            Some(csv.name.as_str()) != replacing
                && !self.replaced.contains(&csv.name)
                && !matches!(csv.phase.as_str(), "Replacing" | "Deleting")
        })
    }

    fn requirements_of(
        &self,
        bundle: &IndexedBundle,
    ) -> Result<Arc<Vec<Requirement>>, RequirementError> {
        let key = std::ptr::from_ref(bundle) as usize;
        if let Some(found) = self.cache.borrow().get(&key) {
            return found.clone();
        }
        let parsed = requirements(bundle.name(), bundle.properties()).map(Arc::new);
        self.cache.borrow_mut().insert(key, parsed.clone());
        parsed
    }
}

fn installed_view(csv: &InstalledCsv) -> CandidateView<'_> {
    CandidateView {
        package: csv.package.as_deref().unwrap_or_default(),
        version: csv.version.as_ref(),
        properties: &csv.properties,
    }
}

/// One closure being built.
struct Search<'c, 'a> {
    claims: &'c Claims<'a>,
    added: Vec<Chosen<'a>>,
    /// The installed CSV the root replaces.
    replaced: Option<String>,
    steps: usize,
}

impl<'a> Search<'_, 'a> {
    fn all_chosen(&self) -> impl Iterator<Item = &Chosen<'a>> {
        self.claims.chosen.iter().chain(&self.added)
    }

    /// Adds `candidate` and, recursively, what it requires; leaves nothing behind on failure.
    fn add(
        &mut self,
        candidate: &Candidate<'a>,
        subscription: &str,
        required_by: Option<&str>,
    ) -> Result<(), Rejection> {
        self.steps += 1;
        if self.steps > BUDGET {
            return Err(Rejection::TooComplex);
        }
        self.compatible(candidate)?;
        let needs = self
            .claims
            .requirements_of(candidate.bundle)
            .map_err(Rejection::BadRequirement)?;
        let mark = self.added.len();
        self.added.push(Chosen {
            catalog: candidate.catalog.clone(),
            package: candidate.package,
            channel: candidate.channel.name().to_owned(),
            bundle: candidate.bundle,
            replaces: None,
            subscription: subscription.to_owned(),
            required_by: required_by.map(str::to_owned),
            provided: candidate.bundle.provided_gvks().collect(),
        });
        for requirement in needs.iter() {
            if let Err(e) = self.require(candidate, requirement, subscription) {
                self.added.truncate(mark);
                return Err(e);
            }
        }
        Ok(())
    }

    /// Meets one requirement of `owner`: already met, or the first candidate that fits.
    fn require(
        &mut self,
        owner: &Candidate<'a>,
        requirement: &Requirement,
        subscription: &str,
    ) -> Result<(), Rejection> {
        let predicate = &requirement.predicate;
        let met = self
            .claims
            .staying(self.replaced.as_deref())
            .any(|(csv, _)| predicate.matches(&installed_view(csv)))
            || self.all_chosen().any(|c| predicate.matches(&c.view()));
        if met {
            return Ok(());
        }
        let candidates = dependency_candidates(self.claims, requirement, &owner.catalog);
        let mut tried = Vec::new();
        for candidate in &candidates {
            match self.add(candidate, subscription, Some(owner.bundle.name())) {
                Ok(()) => return Ok(()),
                Err(Rejection::TooComplex) => return Err(Rejection::TooComplex),
                Err(why) => tried.push((candidate.describe(), why)),
            }
        }
        let misses = if candidates.is_empty() {
            near_misses(self.claims, requirement)
        } else {
            Vec::new()
        };
        Err(Rejection::Unmet(Box::new(Unmet {
            bundle: owner.bundle.name().to_owned(),
            olm: requirement.olm_text(),
            plain: requirement.plain(),
            tried,
            misses,
        })))
    }

    /// docs/resolution.md §7: one bundle per package, one provider per API, no deprecated bundle.
    fn compatible(&self, candidate: &Candidate<'a>) -> Result<(), Rejection> {
        let bundle = candidate.bundle;
        if bundle
            .properties()
            .iter()
            .any(|p| p.type_ == properties::DEPRECATED)
        {
            return Err(Rejection::Deprecated);
        }
        let package = bundle.package();
        let staying: Vec<&InstalledCsv> = self
            .claims
            .staying(self.replaced.as_deref())
            .map(|(csv, _)| *csv)
            .collect();
        // A Subscription's own bundle is not held up by older CSVs of its package still around
        // while an upgrade finishes (the Subscription owns the package; two Subscriptions of one
        // package are refused before this).
        let is_root = self.added.is_empty();
        if let Some(csv) = staying.iter().find(|csv| {
            !is_root && csv.package.as_deref() == Some(package) && csv.name != bundle.name()
        }) {
            // A subscribed operator may be upgraded along with its dependent; when that upgrade
            // would break another installed operator, that is the reason worth giving.
            if self.claims.is_subscribed(&csv.name)
                && let Some(broken) = self.broken_by_replacing(csv, Some(&candidate_view(bundle)))
            {
                return Err(broken);
            }
            return Err(Rejection::PackageTaken {
                package: package.to_owned(),
                by: installed_holder(csv),
            });
        }
        if let Some(other) = self
            .all_chosen()
            .find(|c| c.bundle.package() == package && c.bundle.name() != bundle.name())
        {
            return Err(Rejection::PackageTaken {
                package: package.to_owned(),
                by: chosen_holder(other),
            });
        }
        for gvk in bundle.provided_gvks() {
            if let Some(csv) = staying
                .iter()
                .find(|csv| csv.package.as_deref() != Some(package) && csv.provided.contains(&gvk))
            {
                return Err(Rejection::ApiTaken {
                    gvk,
                    by: installed_holder(csv),
                });
            }
            if let Some(other) = self
                .all_chosen()
                .find(|c| c.bundle.package() != package && c.provided.contains(&gvk))
            {
                return Err(Rejection::ApiTaken {
                    gvk,
                    by: chosen_holder(other),
                });
            }
        }
        Ok(())
    }

    /// Replacing `old` must leave every requirement of the installed operators that stay met
    /// when it was met before (docs/resolution.md §6: never break an installed operator's
    /// dependency).
    fn keeps_installed_requirements(&self, old: &InstalledCsv) -> Result<(), Rejection> {
        match self.broken_by_replacing(old, None) {
            Some(broken) => Err(broken),
            None => Ok(()),
        }
    }

    /// The first requirement of an installed operator that stays which `old` meets and nothing
    /// else would once `old` is replaced (by `successor`, when given).
    fn broken_by_replacing(
        &self,
        old: &InstalledCsv,
        successor: Option<&CandidateView<'_>>,
    ) -> Option<Rejection> {
        for (csv, needs) in self.claims.staying(Some(&old.name)) {
            for need in needs {
                let p = &need.predicate;
                if !p.matches(&installed_view(old)) {
                    continue;
                }
                let still = self
                    .claims
                    .staying(Some(&old.name))
                    .any(|(other, _)| p.matches(&installed_view(other)))
                    || self.all_chosen().any(|c| p.matches(&c.view()))
                    || successor.is_some_and(|s| p.matches(s));
                if !still {
                    return Some(Rejection::BreaksInstalled {
                        csv: csv.name.clone(),
                        needs: need.plain(),
                        olm: need.olm_text(),
                    });
                }
            }
        }
        None
    }
}

fn candidate_view(bundle: &IndexedBundle) -> CandidateView<'_> {
    CandidateView {
        package: bundle.package(),
        version: bundle.version(),
        properties: bundle.properties(),
    }
}

fn installed_holder(csv: &InstalledCsv) -> Holder {
    Holder {
        text: format!("installed operator {}", csv.name),
        subscription: None,
    }
}

fn chosen_holder(c: &Chosen<'_>) -> Holder {
    let text = match &c.required_by {
        None => format!(
            "bundle {} chosen for Subscription {}",
            c.bundle.name(),
            c.subscription
        ),
        Some(by) => format!(
            "bundle {} chosen for Subscription {} (required by {by})",
            c.bundle.name(),
            c.subscription
        ),
    };
    Holder {
        text,
        subscription: Some(c.subscription.clone()),
    }
}

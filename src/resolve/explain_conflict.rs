//! Why no candidate of a Subscription could be installed with its dependencies, in OLM's
//! constraint texts first (docs/resolution.md §6, §7, §9 — what scripts grep for), then in plain
//! words: the Subscription → its bundle → the requirement → every candidate considered and why
//! each was rejected, and what would fix it when that can be said.

use std::fmt;

use super::solver::{Holder, Rejection, Unmet};
use crate::api::CatalogRef;

/// How many candidates are listed per requirement before "and N more".
const LISTED: usize = 5;
/// How deep nested requirements are explained.
const DEPTH: usize = 4;

/// Every candidate of a Subscription was rejected.
#[derive(Debug, Clone, PartialEq)]
pub struct Unsatisfiable {
    pub subscription: String,
    pub catalog: CatalogRef,
    pub package: String,
    pub channel: Option<String>,
    /// OLM's identifier of each candidate (`<catalog>/<namespace>/<channel>/<csv>`) and why not.
    pub rejected: Vec<(String, Rejection)>,
}

impl Unsatisfiable {
    /// The other Subscriptions whose choices the candidates collided with, sorted.
    pub fn conflicts_with(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (_, r) in &self.rejected {
            collect_subscriptions(r, &mut out);
        }
        out.retain(|s| *s != self.subscription);
        out.sort();
        out.dedup();
        out
    }

    /// Whether every rejection comes from a requirement that cannot be read (an error, not an
    /// unsatisfiable set).
    pub fn is_bad_input(&self) -> bool {
        self.rejected
            .iter()
            .all(|(_, r)| matches!(r, Rejection::BadRequirement(_)))
    }

    /// OLM's constraint texts for the conflict (`subscription s requires at least one of …`).
    pub fn olm_constraints(&self) -> Vec<String> {
        let ids: Vec<&str> = self.rejected.iter().map(|(id, _)| id.as_str()).collect();
        let mut out = vec![format!("subscription {} exists", self.subscription)];
        out.push(match ids.as_slice() {
            [one] => format!("subscription {} requires {one}", self.subscription),
            [rest @ .., last] => format!(
                "subscription {} requires at least one of {} or {last}",
                self.subscription,
                rest.join(", ")
            ),
            [] => format!(
                "subscription {} has a dependency without any candidates to satisfy it",
                self.subscription
            ),
        });
        for (id, r) in &self.rejected {
            olm_texts(id, r, &mut out);
        }
        let mut seen = Vec::new();
        out.retain(|c| {
            let fresh = !seen.contains(c);
            seen.push(c.clone());
            fresh
        });
        out
    }
}

fn collect_subscriptions(r: &Rejection, out: &mut Vec<String>) {
    match r {
        Rejection::PackageTaken { by, .. } | Rejection::ApiTaken { by, .. } => {
            out.extend(by.subscription.clone());
        }
        Rejection::Unmet(u) => {
            for (_, r) in &u.tried {
                collect_subscriptions(r, out);
            }
        }
        _ => {}
    }
}

fn bundle_name(id: &str) -> &str {
    id.rsplit('/').next().unwrap_or(id)
}

fn olm_texts(id: &str, r: &Rejection, out: &mut Vec<String>) {
    match r {
        Rejection::Deprecated => out.push(format!("bundle {id} is deprecated")),
        Rejection::PackageTaken { package, .. } => {
            out.push(format!(
                "there can be only one operator from package {package}"
            ));
        }
        Rejection::ApiTaken { gvk, .. } => out.push(format!(
            "there can be only one provider of {} ({}/{})",
            gvk.kind, gvk.group, gvk.version
        )),
        Rejection::BreaksInstalled { csv, olm, .. } => {
            out.push(format!("bundle {csv} requires an operator {olm}"));
        }
        Rejection::Unmet(u) => {
            out.push(format!(
                "bundle {} requires an operator {}",
                u.bundle, u.olm
            ));
            for (cand, r) in &u.tried {
                olm_texts(cand, r, out);
            }
        }
        Rejection::BadRequirement(_) | Rejection::TooComplex => {}
    }
}

/// `constraints not satisfiable: <OLM's texts>; <plain words>`.
impl fmt::Display for Unsatisfiable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_bad_input() {
            // Not a conflict: OLM reports the parse error as it is.
            let errors: Vec<String> = self.rejected.iter().map(|(_, r)| reason(r, 0)).collect();
            return write!(
                f,
                "{}; so Subscription {} cannot install package {:?} from catalog {}",
                errors.join("; "),
                self.subscription,
                self.package,
                self.catalog
            );
        }
        write!(
            f,
            "constraints not satisfiable: {}; ",
            self.olm_constraints().join(", ")
        )?;
        let channel = match &self.channel {
            Some(c) => format!("channel {c:?}"),
            None => "any channel".to_owned(),
        };
        write!(
            f,
            "Subscription {} cannot install package {:?} from {channel} of catalog {}: ",
            self.subscription, self.package, self.catalog
        )?;
        // Candidates rejected for the same reason are named together.
        let mut grouped: Vec<(String, Vec<&str>)> = Vec::new();
        for (id, r) in &self.rejected {
            let why = reason(r, 0);
            match grouped.iter_mut().find(|(w, _)| *w == why) {
                Some((_, names)) => names.push(bundle_name(id)),
                None => grouped.push((why, vec![bundle_name(id)])),
            }
        }
        let parts: Vec<String> = grouped
            .iter()
            .map(|(why, names)| match names.as_slice() {
                [one] => format!("bundle {one} {why}"),
                many => format!("bundles {} each {why}", many.join(", ")),
            })
            .collect();
        f.write_str(&parts.join("; "))
    }
}

fn holder(by: &Holder) -> &str {
    &by.text
}

/// Why one candidate was rejected, in plain words (nested requirements up to `DEPTH`).
fn reason(r: &Rejection, depth: usize) -> String {
    match r {
        Rejection::Deprecated => "is marked olm.deprecated".into(),
        Rejection::PackageTaken { package, by } => format!(
            "cannot be installed: only one operator of package {package} may be installed in a namespace, and {} is one",
            holder(by)
        ),
        Rejection::ApiTaken { gvk, by } => format!(
            "would be a second provider of {} ({}/{}) next to {}",
            gvk.kind,
            gvk.group,
            gvk.version,
            holder(by)
        ),
        Rejection::BreaksInstalled { csv, needs, .. } => format!(
            "would replace the only provider of what installed operator {csv} needs ({needs})"
        ),
        Rejection::BadRequirement(e) => e.to_string(),
        Rejection::TooComplex => {
            "has a dependency web too large to search (more than 20000 bundles tried)".into()
        }
        Rejection::Unmet(u) => unmet(u, depth),
    }
}

fn unmet(u: &Unmet, depth: usize) -> String {
    let head = format!("needs {}", u.plain);
    let head = if depth > 0 {
        format!("({} {head})", u.bundle)
    } else {
        head
    };
    if u.tried.is_empty() {
        return match u.misses.as_slice() {
            [] => format!(
                "{head}, and no catalog this namespace can see has one (add a catalog that provides it)"
            ),
            misses => format!("{head}, and no bundle matches: {}", misses.join("; ")),
        };
    }
    if depth >= DEPTH {
        return format!("{head}, and none of its {} candidates fits", u.tried.len());
    }
    let mut parts: Vec<String> = u
        .tried
        .iter()
        .take(LISTED)
        .map(|(cand, r)| format!("{cand} {}", reason(r, depth + 1)))
        .collect();
    if u.tried.len() > LISTED {
        parts.push(format!("and {} more", u.tried.len() - LISTED));
    }
    format!(
        "{head}, and every candidate was rejected: {}",
        parts.join(", ")
    )
}

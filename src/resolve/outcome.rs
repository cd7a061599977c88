//! What the resolver decides for one Subscription (docs/resolution.md §4): the target bundle
//! and why it was chosen, its dependencies, or the refusal in plain words. The namespace's
//! decision (`decide`) and one Subscription's search (`search`) both speak in these values.

use crate::api::CatalogRef;
use crate::catalog::upgrade_graph::{EdgeKind, NoUpdate};

use super::explain::Refusal;
use super::solver::Chosen;
use super::version_request::Held;

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

/// One Subscription's outcome, or why it has none. Refusals are boxed on the way out: they are
/// large and the happy path should not pay for them.
pub(super) type Resolved = Result<Outcome, Box<Refusal>>;

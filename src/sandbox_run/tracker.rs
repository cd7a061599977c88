//! What `olm-rs sandbox` prints: one line per state change of the objects a user follows
//! (CatalogSource, Subscription, InstallPlan, CSV), and whether the Subscription has settled.
//! Pure: objects come in, lines and verdicts go out.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::api::{
    CatalogSource, ClusterServiceVersion, CsvPhase, InstallPlan, InstallPlanPhase, Subscription,
    SubscriptionState,
};

/// The kinds followed, in the order their columns read best.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    CatalogSource,
    Subscription,
    InstallPlan,
    Csv,
}

impl Kind {
    pub fn label(self) -> &'static str {
        match self {
            Kind::CatalogSource => "CatalogSource",
            Kind::Subscription => "Subscription",
            Kind::InstallPlan => "InstallPlan",
            Kind::Csv => "CSV",
        }
    }
}

/// One followed object as the sandbox sees it: a line is printed when `key` changes; `state`
/// and `detail` are what the line shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    pub kind: Kind,
    pub name: String,
    pub state: String,
    pub key: String,
    pub detail: String,
}

/// A printed line: a state change (or a deletion) of one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    pub kind: Kind,
    pub name: String,
    /// The new state, `deleted` once the object is gone.
    pub state: String,
    pub detail: String,
}

impl fmt::Display for Transition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:<13} {:<26} {:<16} {}",
            self.kind.label(),
            self.name,
            self.state,
            self.detail
        )
    }
}

/// The Subscription reached its channel head and nothing is left to do: its installed CSV
/// Succeeded and every CSV it replaced is gone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settled {
    pub installed_csv: String,
}

/// Last state of each followed object, plus what the settled check needs.
#[derive(Debug, Default)]
pub struct Tracker {
    last: BTreeMap<(Kind, String), String>,
    /// CSV name → phase, for CSVs that exist now.
    csv_phases: BTreeMap<String, String>,
    /// (state, installedCSV, currentCSV) of the followed Subscription.
    subscription: Option<(String, Option<String>, Option<String>)>,
    /// InstallPlans still being worked on (created, Planning or Installing): the run has not
    /// settled while one is (its `Complete` may come after the Subscription's state, when its
    /// status write raced another writer and was retried).
    plans_in_flight: BTreeSet<String>,
}

impl Tracker {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records an object; returns a line when its state differs from the last one seen.
    /// `raw` carries the fields the settled check needs (see [`Raw`]).
    pub fn observe(&mut self, observed: Observed, raw: Raw) -> Option<Transition> {
        match raw {
            Raw::Csv { phase } => {
                self.csv_phases.insert(observed.name.clone(), phase);
            }
            Raw::Subscription {
                state,
                installed,
                current,
            } => self.subscription = Some((state, installed, current)),
            Raw::Plan { in_flight } => {
                if in_flight {
                    self.plans_in_flight.insert(observed.name.clone());
                } else {
                    self.plans_in_flight.remove(&observed.name);
                }
            }
            Raw::Other => {}
        }
        let key = (observed.kind, observed.name.clone());
        if self.last.get(&key) == Some(&observed.key) {
            return None;
        }
        self.last.insert(key, observed.key.clone());
        Some(Transition {
            kind: observed.kind,
            name: observed.name,
            state: observed.state,
            detail: observed.detail,
        })
    }

    /// Records a deletion; returns a line unless the object was never seen.
    pub fn deleted(&mut self, kind: Kind, name: &str) -> Option<Transition> {
        if kind == Kind::Csv {
            self.csv_phases.remove(name);
        }
        if kind == Kind::Subscription {
            self.subscription = None;
        }
        if kind == Kind::InstallPlan {
            self.plans_in_flight.remove(name);
        }
        self.last.remove(&(kind, name.to_owned()))?;
        Some(Transition {
            kind,
            name: name.to_owned(),
            state: "deleted".to_owned(),
            detail: String::new(),
        })
    }

    /// `Some` once the Subscription is AtLatestKnown, its installed CSV is the current one and
    /// Succeeded, no other CSV is left in the namespace (replaced ones are deleted), and no plan
    /// is being created or executed (the next hop is planned once the last plan finished).
    pub fn settled(&self) -> Option<Settled> {
        let (state, installed, current) = self.subscription.as_ref()?;
        let installed = installed.as_ref()?;
        let at_head = state == SubscriptionState::AtLatestKnown.as_str()
            && current.as_ref() == Some(installed);
        let succeeded = self.csv_phases.get(installed).map(String::as_str)
            == Some(CsvPhase::Succeeded.as_str());
        let alone = self.csv_phases.len() == 1;
        let plans_done = self.plans_in_flight.is_empty();
        (at_head && succeeded && alone && plans_done).then(|| Settled {
            installed_csv: installed.clone(),
        })
    }
}

/// The fields of an object the settled check reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Raw {
    Csv {
        phase: String,
    },
    Subscription {
        state: String,
        installed: Option<String>,
        current: Option<String>,
    },
    Plan {
        in_flight: bool,
    },
    Other,
}

fn name_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}

/// A CSV: its phase, then reason and message.
pub fn csv(csv: &ClusterServiceVersion) -> (Observed, Raw) {
    let status = csv.status.as_ref();
    let phase = status
        .and_then(|s| s.phase.as_ref())
        .map(|p| p.as_str().to_owned())
        .unwrap_or_default();
    let reason = status
        .and_then(|s| s.reason.as_ref())
        .map(|r| r.as_str().to_owned())
        .unwrap_or_default();
    let message = status.and_then(|s| s.message.clone()).unwrap_or_default();
    let shown = if phase.is_empty() { "created" } else { &phase };
    (
        Observed {
            kind: Kind::Csv,
            name: name_of(&csv.metadata),
            state: shown.to_owned(),
            // The reason is part of the key: Pending/RequirementsUnknown → Pending/
            // AllRequirementsMet is a step a user wants to see; a new message alone is not.
            key: format!("{shown} {reason}"),
            detail: join(&[&reason, &message]),
        },
        Raw::Csv { phase },
    )
}

/// An InstallPlan: its phase, the CSVs it installs, and how to approve it when it waits.
pub fn install_plan(plan: &InstallPlan, namespace: &str) -> (Observed, Raw) {
    let name = name_of(&plan.metadata);
    let phase = plan
        .status
        .as_ref()
        .map(|s| s.phase.clone())
        .unwrap_or(InstallPlanPhase::None);
    let csvs = plan.spec.cluster_service_version_names.join(", ");
    let mut detail = csvs;
    if phase == InstallPlanPhase::RequiresApproval && !plan.spec.approved {
        detail.push_str(&format!(
            " — approve with: kubectl -n {namespace} patch installplan {name} --type merge \
             -p '{{\"spec\":{{\"approved\":true}}}}'"
        ));
    }
    if let Some(message) = plan.status.as_ref().and_then(|s| s.message.as_ref()) {
        detail = join(&[&detail, message]);
    }
    let in_flight = matches!(
        phase,
        InstallPlanPhase::None | InstallPlanPhase::Planning | InstallPlanPhase::Installing
    );
    let state = if phase == InstallPlanPhase::None {
        "created".to_owned()
    } else {
        phase.as_str().to_owned()
    };
    (
        Observed {
            kind: Kind::InstallPlan,
            name,
            key: state.clone(),
            state,
            detail,
        },
        Raw::Plan { in_flight },
    )
}

/// A Subscription: its state, then installed/current CSV and plan.
pub fn subscription(sub: &Subscription) -> (Observed, Raw) {
    let status = sub.status.as_ref();
    let state = status
        .map(|s| s.state().as_str().to_owned())
        .unwrap_or_default();
    let installed = status.and_then(|s| s.installed_csv.clone());
    let current = status.and_then(|s| s.current_csv.clone());
    let plan = status
        .and_then(|s| s.install_plan_ref.as_ref())
        .and_then(|r| r.name.clone());
    let part = |label: &str, v: &Option<String>| {
        v.as_ref()
            .map(|v| format!("{label} {v}"))
            .unwrap_or_default()
    };
    let detail = join(&[
        &part("installed", &installed),
        &part("current", &current),
        &part("plan", &plan),
    ]);
    let shown = if state.is_empty() { "created" } else { &state };
    (
        Observed {
            kind: Kind::Subscription,
            name: name_of(&sub.metadata),
            state: shown.to_owned(),
            // installed/current/plan are part of the key: UpgradePending towards the next CSV
            // is a new step even when the state word repeats.
            key: format!("{shown} {detail}"),
            detail,
        },
        Raw::Subscription {
            state,
            installed,
            current,
        },
    )
}

/// A CatalogSource: its connection state and the address it dials.
pub fn catalog_source(cs: &CatalogSource) -> (Observed, Raw) {
    let status = cs.status.as_ref();
    let conn = status.and_then(|s| s.connection_state.as_ref());
    let state = conn
        .map(|c| c.last_observed_state.as_str().to_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "created".to_owned());
    let address = conn.and_then(|c| c.address.clone()).unwrap_or_default();
    let message = status.and_then(|s| s.message.clone()).unwrap_or_default();
    let namespace = cs.metadata.namespace.clone().unwrap_or_default();
    (
        Observed {
            kind: Kind::CatalogSource,
            name: format!("{namespace}/{}", name_of(&cs.metadata)),
            key: state.clone(),
            state,
            detail: join(&[&address, &message]),
        },
        Raw::Other,
    )
}

fn join(parts: &[&str]) -> String {
    parts
        .iter()
        .filter(|p| !p.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
#[path = "tracker_tests.rs"]
mod tests;

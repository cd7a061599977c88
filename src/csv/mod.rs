//! The ClusterServiceVersion lifecycle as pure functions of observed state (docs/csv-phases.md).
//!
//! Nothing here talks to a cluster: the reconciler (`reconcile::cluster_service_version`) takes
//! a snapshot of what it sees ([`Observed`]), asks [`decide`] (or, for a CSV being deleted,
//! [`cleanup::finalize`]) what to write, and hands the writes to the one executor.
//!
//! Map of the module:
//! - [`gate`] — docs/csv-phases.md §2, the checks before the phase switch;
//! - [`phase`] — docs/csv-phases.md §3–§5, one handler per phase, and [`after_install`];
//! - [`outcome`] — what one sync decides, as data ([`CsvSyncOutcome`]); [`sync_effects`] — that
//!   outcome as writes and its endings, decided once (docs/csv-phases.md §1);
//! - [`requirements`], [`permissions`], [`rbac_eval`] — docs/csv-phases.md §6;
//! - [`install_strategy`], [`config_overrides`] — docs/csv-phases.md §7, docs/install-plans.md §4;
//! - [`health`], [`drift`] — docs/csv-phases.md §8 and §11 item 6;
//! - [`certs`] — docs/certificates.md: cert objects, CA injection, rotation and APIService checks;
//! - [`replacement`] — docs/csv-phases.md §9; [`cleanup`] — docs/csv-phases.md §10;
//! - [`operator_condition`] — the OperatorCondition, its RBAC and the upgrade gate it holds;
//! - [`permission_objects`] — re-creating the RBAC an InstallPlan made (Known pain #1).

pub mod certs;
pub mod cleanup;
pub mod config_overrides;
pub mod drift;
pub mod gate;
pub mod health;
pub mod identity;
pub mod install_strategy;
pub mod observed;
pub mod operator_condition;
pub mod outcome;
pub mod ownership;
pub mod permission_objects;
pub mod permissions;
pub mod phase;
pub mod rbac_eval;
pub mod replacement;
pub mod requirements;
pub mod strategy;
pub mod sync_effects;
pub mod writes;

#[cfg(test)]
pub(crate) mod fixtures;

pub use observed::{Discovery, DiscoveryFailed, Observed, Served, ServerVersion};
pub use outcome::{Action, CsvSyncOutcome, DeploymentInstall, Requeue};
pub use phase::{InstallFailure, after_install, after_install_with_certs, sync};
pub use sync_effects::{Ending, InstallFailed, SyncEffects, decide};

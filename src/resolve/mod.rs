//! Resolution (pure): what each Subscription of a namespace gets, and why not when it gets
//! nothing. docs/resolution.md §1–§4, §9, §8–§11.
//!
//! `decide` takes every Subscription of a namespace, the installed CSVs and the visible catalogs
//! and returns one decision per Subscription: its bundle with the dependencies it pulls in, solved
//! for the whole namespace on resolvo (model.rs, joint.rs), or a refusal in plain words
//! (solver.rs walks the candidates to say why; explain*.rs words it).

pub mod adoption;
pub mod candidates;
pub mod cel_rule;
mod channels;
pub mod decide;
pub mod explain;
pub mod explain_conflict;
pub mod input;
pub mod installed;
pub mod joint;
pub mod model;
pub mod outcome;
pub mod participant;
pub mod preview;
pub mod refusal_recheck;
pub mod requirement;
pub mod rollback;
mod search;
pub mod solver;
pub mod subscription;
pub mod version_request;

pub use decide::{decide, decide_alone, decide_one};
pub use explain::{CONSTRAINTS_NOT_SATISFIABLE, ERROR_PREVENTED_RESOLUTION, Refusal};
pub use input::{CatalogContent, CatalogInput, InstalledCsv, NamespaceInput, OperatorGroups};
pub use installed::installed_csv;
pub use outcome::{Decision, Dependency, Outcome, Target, Why};
pub use preview::{PathStep, Preview, preview};
pub use solver::Claims;

#[cfg(test)]
mod tests;

#[cfg(test)]
mod solver_tests;

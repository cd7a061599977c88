//! The ClusterServiceVersion lifecycle as pure functions of observed state (csv.md).
//!
//! Nothing here talks to a cluster: the reconciler (`reconcile::cluster_service_version`) takes
//! a snapshot of what it sees, asks this module what to do, and does it.

pub mod label_selector;
pub mod rbac_eval;

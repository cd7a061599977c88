//! Leader election on a `coordination.k8s.io` Lease, so that of several replicas exactly one
//! acts at a time (`olm-rs run --leader-elect`).
//!
//! `decision` holds the rules (pure: who may take or renew the Lease, when a leader must step
//! down, when it may write); `elector` reads and writes the Lease and runs the controller's
//! work while leading; `fence` refuses every write sent outside of that (docs/leader-election.md).
//! A standby replica serves its probes and reports ready: only the leader acts, but a rolling
//! update must be able to start the new replicas while the old leader still holds the Lease.

pub mod decision;
pub mod elector;
pub mod fence;

pub use decision::{Claim, Decision, LeaseConfig, LeaseConfigError, LeaseRecord, Observation};
pub use elector::{Attempt, LeaderElectionError, LeaderElector, LeaseLock, default_identity};
pub use fence::{Fence, Fenced};

/// The Lease olm-rs's replicas compete for.
pub const LEASE_NAME: &str = "olm-rs-controller";

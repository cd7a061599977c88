//! The key of the OperatorGroup side's queues: the shared [`crate::reconcile::keys`] one.

pub use crate::reconcile::keys::NamespacedName;

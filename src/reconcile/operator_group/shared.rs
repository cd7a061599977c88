//! What every loop of the OperatorGroup side shares: the context, the stores, the queues and
//! the options.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use crate::reconcile::Context;

pub use super::namespaced_name::NamespacedName;
use super::routes::Queues;
use super::stores::Stores;

/// How soon a sync whose write met a newer object (409) or a gone one (404) looks again, on
/// fresh data from the stores.
pub(super) const RACE_RETRY: Duration = Duration::from_millis(500);

/// Settings of the OperatorGroup side.
#[derive(Debug, Clone)]
pub struct OperatorGroupOptions {
    /// Namespaces that keep their copied CSVs when copying is disabled (OLM's
    /// `--protectedCopiedCSVNamespaces`).
    pub protected_copied_csv_namespaces: BTreeSet<String>,
    /// Concurrent writes of copies for one original; the API server's own limits
    /// (max-requests-inflight, APF) are the real bound, so this only needs to keep it busy.
    pub copy_write_concurrency: usize,
    /// Workers per queue.
    pub workers: usize,
    /// Everything is queued again this often, catching events lost while a watch reconnected.
    pub resync: Duration,
}

impl Default for OperatorGroupOptions {
    fn default() -> Self {
        Self {
            protected_copied_csv_namespaces: BTreeSet::new(),
            copy_write_concurrency: 32,
            workers: 4,
            resync: Duration::from_secs(300),
        }
    }
}

/// What every loop of this side shares.
pub struct Shared {
    pub ctx: Arc<Context>,
    pub stores: Stores,
    pub queues: Queues,
    pub options: OperatorGroupOptions,
}

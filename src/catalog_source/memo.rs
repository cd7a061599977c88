//! What the CatalogSource controller remembers of one catalog between syncs (docs/catalog.md
//! §1): plain values, read as part of each sync's observation and replaced by the value the
//! decision returns. Nothing here is kept anywhere else: the controller holds one [`Memo`] per
//! catalog and forgets it when the catalog is gone.

use std::time::{Duration, Instant};

use jiff::Timestamp;

use super::fallback::Fallback;
use super::in_process::Served;

/// How long a created registry pod may take to appear in the store before pods are decided
/// again regardless (a pod deleted meanwhile must not hold the catalog up for ever).
pub const CREATED_POD_GRACE: Duration = Duration::from_secs(30);

/// One catalog's memos.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Memo {
    /// The registry pod created last and not yet seen in the store.
    pub created_pod: Option<CreatedPod>,
    /// The settled registry pods the connection was last made for; `Some(vec![])` when pods
    /// were mixed since; `None` before the first record.
    pub serving_pods: Option<Vec<String>>,
    /// What was last loaded from a `configmap` catalog's ConfigMap.
    pub config_map: Option<LoadedConfigMap>,
    /// What an in-process image catalog serves (docs/catalog-images.md §3).
    pub served: Option<Served>,
    /// Since when its in-process check keeps failing.
    pub failing_since: Option<Timestamp>,
    /// Why an image catalog served in-process by default is served by its registry pod
    /// (docs/catalog-images.md §7).
    pub fallback: Option<Fallback>,
}

/// A registry pod this controller created. Its name is the API server's answer to the create
/// (pods are made from `generateName`); the time is monotonic, so the grace passes even under
/// a test's frozen clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatedPod {
    pub name: String,
    pub at: Instant,
}

/// The version of a catalog's ConfigMap loaded last, and why its content was refused, if it
/// was (the status message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedConfigMap {
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    pub refused: Option<String>,
}

impl Memo {
    /// Whether the pod created last is still missing from `seen` (pod names), for at most
    /// [`CREATED_POD_GRACE`] after `at`.
    pub fn awaiting_pod<'a>(&self, mut seen: impl Iterator<Item = &'a str>, now: Instant) -> bool {
        self.created_pod.as_ref().is_some_and(|c| {
            now.saturating_duration_since(c.at) < CREATED_POD_GRACE
                && !seen.any(|name| name == c.name)
        })
    }

    /// Records the answer to a registry pod's create: its name, to wait for in the store.
    pub fn pod_created(&mut self, name: String, at: Instant) {
        self.created_pod = Some(CreatedPod { name, at });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_created_pod_is_awaited_until_seen_or_the_grace_passed() {
        let now = Instant::now();
        let created = |age: u64| Memo {
            created_pod: Some(CreatedPod {
                name: "ops-abc".into(),
                at: now.checked_sub(Duration::from_secs(age)).unwrap_or(now),
            }),
            ..Memo::default()
        };
        let table: Vec<(&str, Memo, Vec<&str>, bool)> = vec![
            ("nothing created", Memo::default(), vec![], false),
            ("created, not seen", created(1), vec!["ops-old"], true),
            (
                "created, seen",
                created(1),
                vec!["ops-old", "ops-abc"],
                false,
            ),
            ("created long ago, not seen", created(31), vec![], false),
        ];
        for (what, memo, seen, awaiting) in table {
            assert_eq!(memo.awaiting_pod(seen.into_iter(), now), awaiting, "{what}");
        }
    }
}

//! One decision per sync of an image catalog served in-process by default, with the memos as
//! input (docs/catalog-images.md §3–§7).

use std::collections::BTreeMap;
use std::time::Instant;

use super::*;
use crate::catalog::CatalogIndex;
use crate::catalog_source::cache_update::CacheUpdate;
use crate::catalog_source::registry_objects::{RegistryPodOptions, registry_objects};
use crate::catalog_source::serving::ServingMode;
use crate::k8s::effects::Write;

const NOW: &str = "2026-01-01T01:00:00Z";
const IMAGE: &str = "quay.io/org/catalog:1";

fn t(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn catalog(annotations: serde_json::Value) -> CatalogSource {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "CatalogSource",
        "metadata": {"name": "ops", "namespace": "olm", "uid": "u1", "resourceVersion": "5",
            "creationTimestamp": "2026-01-01T00:00:00Z", "annotations": annotations},
        "spec": {"sourceType": "grpc", "image": IMAGE},
    }))
    .unwrap()
}

fn served(digest: &str) -> Served {
    Served {
        image: IMAGE.into(),
        digest: digest.into(),
        packages: 1,
        since: t("2026-01-01T00:30:00Z"),
    }
}

fn swapped(digest: &str) -> CheckSeen {
    CheckSeen {
        outcome: CheckOutcome::Swapped,
        served: Some(served(digest)),
        content: Some(Arc::new(CatalogIndex::default())),
        warnings: Vec::new(),
    }
}

fn failed(kind: &str) -> CheckSeen {
    CheckSeen {
        outcome: CheckOutcome::Failed {
            kind: kind.into(),
            message: format!("catalog image {IMAGE}: {kind}"),
            transient: true,
        },
        served: None,
        content: None,
        warnings: Vec::new(),
    }
}

/// A fallback made at 00:50 whose next try is at `retry_at`.
fn fell_back(retry_at: &str, cs: &CatalogSource) -> Fallback {
    Fallback {
        image: IMAGE.into(),
        kind: "Unreachable".into(),
        cause: "connection refused".into(),
        since: t("2026-01-01T00:50:00Z"),
        retry_at: t(retry_at),
        touched: fallback::fingerprint(cs),
    }
}

/// A registry pod's first sync: its ServiceAccount, Service and NetworkPolicy, then the pod.
fn pod_mode() -> Vec<&'static str> {
    vec![
        "apply ops",
        "apply ops",
        "apply ops-grpc-server",
        "create ops-",
    ]
}

struct Case {
    what: &'static str,
    annotations: serde_json::Value,
    memo: fn(&CatalogSource) -> Memo,
    check: Option<CheckSeen>,
    registry_seen: bool,
    /// Registry writes (verbs), then the leftovers and status writes of the outcome.
    registry: Vec<&'static str>,
    writes: Vec<&'static str>,
    link: Link,
    served: Option<&'static str>,
    failing: bool,
    fallback: bool,
    retire: Option<&'static str>,
    /// The condition `CatalogContentServed`'s reason.
    condition: Option<&'static str>,
    requeue_at_most: Duration,
}

fn verbs(writes: &[Write]) -> Vec<String> {
    writes
        .iter()
        .map(|w| format!("{} {}", w.verb(), w.key().name))
        .collect()
}

#[test]
fn one_decision_per_sync_with_the_memos_as_input() {
    let none = serde_json::json!({});
    let cases = vec![
        Case {
            what: "first load: served, remembered, ready",
            annotations: none.clone(),
            memo: |_| Memo::default(),
            check: Some(swapped("sha256:a")),
            registry_seen: false,
            registry: vec![],
            writes: vec!["status ops"],
            link: Link::Close,
            served: Some("sha256:a"),
            failing: false,
            fallback: false,
            retire: None,
            condition: Some("Serving"),
            requeue_at_most: pure::RESYNC,
        },
        Case {
            what: "a new digest: swapped, the old one retired",
            annotations: none.clone(),
            memo: |_| Memo {
                served: Some(served("sha256:a")),
                ..Memo::default()
            },
            check: Some(swapped("sha256:b")),
            registry_seen: false,
            registry: vec![],
            writes: vec!["status ops"],
            link: Link::Close,
            served: Some("sha256:b"),
            failing: false,
            fallback: false,
            retire: Some("sha256:a"),
            condition: Some("Serving"),
            requeue_at_most: pure::RESYNC,
        },
        Case {
            what: "unreachable: reported now, the registry pod takes over at the next sync",
            annotations: none.clone(),
            memo: |_| Memo::default(),
            check: Some(failed("Unreachable")),
            registry_seen: false,
            registry: vec![],
            writes: vec!["status ops"],
            link: Link::Close,
            served: None,
            failing: true,
            fallback: true,
            retire: None,
            condition: Some("Unreachable"),
            requeue_at_most: TAKE_OVER,
        },
        Case {
            what: "unreachable, annotated in-process: reported, never moved",
            annotations: serde_json::json!({SERVING_ANNOTATION: "in-process"}),
            memo: |_| Memo::default(),
            check: Some(failed("Unreachable")),
            registry_seen: false,
            registry: vec![],
            writes: vec!["status ops"],
            link: Link::Close,
            served: None,
            failing: true,
            fallback: false,
            retire: None,
            condition: Some("Unreachable"),
            requeue_at_most: pure::RETRY_TRANSIENT,
        },
        Case {
            what: "not found: the node would not find it either; no fallback",
            annotations: none.clone(),
            memo: |_| Memo::default(),
            check: Some(failed("NotFound")),
            registry_seen: false,
            registry: vec![],
            writes: vec!["status ops"],
            link: Link::Close,
            served: None,
            failing: true,
            fallback: false,
            retire: None,
            condition: Some("NotFound"),
            requeue_at_most: pure::RETRY_TRANSIENT,
        },
        Case {
            what: "fallen back, before the next try: the registry pod serves",
            annotations: none.clone(),
            memo: |cs| Memo {
                fallback: Some(fell_back("2026-01-01T01:05:00Z", cs)),
                ..Memo::default()
            },
            check: None,
            registry_seen: true,
            registry: pod_mode(),
            writes: vec!["status ops"],
            link: Link::Redial("ops.olm.svc:50051".into()),
            served: None,
            failing: false,
            fallback: true,
            retire: None,
            condition: Some("RegistryPod"),
            requeue_at_most: Duration::from_secs(5),
        },
        Case {
            what: "fallen back, the try still fails: the pod keeps serving",
            annotations: none.clone(),
            memo: |cs| Memo {
                fallback: Some(fell_back("2026-01-01T00:59:00Z", cs)),
                ..Memo::default()
            },
            check: Some(failed("TimedOut")),
            registry_seen: true,
            registry: pod_mode(),
            writes: vec!["status ops"],
            link: Link::Redial("ops.olm.svc:50051".into()),
            served: None,
            failing: false,
            fallback: true,
            retire: None,
            condition: Some("RegistryPod"),
            requeue_at_most: Duration::from_secs(5),
        },
        Case {
            what: "fallen back, the try succeeds: served in-process, the pod removed",
            annotations: none.clone(),
            memo: |cs| Memo {
                fallback: Some(fell_back("2026-01-01T00:59:00Z", cs)),
                ..Memo::default()
            },
            check: Some(swapped("sha256:a")),
            registry_seen: true,
            registry: vec![],
            writes: vec!["delete ops-old", "status ops"],
            link: Link::Close,
            served: Some("sha256:a"),
            failing: false,
            fallback: false,
            retire: None,
            condition: Some("Serving"),
            requeue_at_most: pure::RESYNC,
        },
    ];
    for case in cases {
        let cs = catalog(case.annotations.clone());
        let memo = (case.memo)(&cs);
        let objects =
            registry_objects(&cs, &BTreeMap::new(), None, &RegistryPodOptions::default()).unwrap();
        let found = RegistryObserved::default();
        let mut left = objects.pod.clone();
        left.metadata.name = Some("ops-old".into());
        // A catalog that fell back has its pod, owned by it, among the leftovers too: only
        // in-process serving removes it.
        let leftovers = RegistryObserved {
            pods: memo
                .fallback
                .iter()
                .map(|_| Arc::new(left.clone()))
                .collect(),
            ..RegistryObserved::default()
        };
        let overrides = BTreeMap::new();
        let seen = Observed {
            catalog: &cs,
            now: t(NOW),
            instant: Instant::now(),
            address_overrides: &overrides,
            serving_default: ServingMode::InProcess,
            fallback_retry: Duration::from_secs(300),
            connection: None,
            memo: &memo,
            source: SourceSeen::InProcess(InProcessSeen {
                check: case.check.clone(),
                registry: case.registry_seen.then_some(RegistrySeen {
                    objects: Ok(&objects),
                    found: &found,
                    network_policies: true,
                    digest: None,
                }),
                leftovers: &leftovers,
            }),
        };
        let decision = super::super::decide(&seen);
        let what = case.what;
        let registry = decision.registry.clone().into_writes();
        assert_eq!(verbs(&registry), case.registry, "{what}");
        assert_eq!(
            verbs(&decision.outcome.effects.writes),
            case.writes,
            "{what}"
        );
        assert_eq!(decision.outcome.link, case.link, "{what}");
        let digest = decision.memo.served.as_ref().map(|s| s.digest.as_str());
        assert_eq!(digest, case.served, "{what}");
        assert_eq!(
            decision.memo.failing_since.is_some(),
            case.failing,
            "{what}"
        );
        assert_eq!(decision.memo.fallback.is_some(), case.fallback, "{what}");
        assert_eq!(decision.retire.as_deref(), case.retire, "{what}");
        let requeue = decision.outcome.effects.requeue.unwrap();
        assert!(requeue <= case.requeue_at_most, "{what}: {requeue:?}");
        let status = decision
            .outcome
            .effects
            .writes
            .iter()
            .find_map(|w| match w {
                Write::Status { status, .. } => Some(status.to_json().unwrap()),
                _ => None,
            });
        let reason = status.as_ref().and_then(|s| {
            s["conditions"].as_array()?.iter().find_map(|c| {
                (c["type"] == pure::CONTENT_CONDITION)
                    .then(|| c["reason"].as_str().map(str::to_owned))
            })?
        });
        assert_eq!(reason.as_deref(), case.condition, "{what}");
        // A fallback's next try is set from now when a try failed, else kept.
        if let (Some(before), Some(after)) = (&memo.fallback, &decision.memo.fallback) {
            assert_eq!(after.since, before.since, "{what}: fell back since then");
            let retried = case.check.is_some();
            let expected = if retried {
                t("2026-01-01T01:05:00Z")
            } else {
                before.retry_at
            };
            assert_eq!(after.retry_at, expected, "{what}");
        }
        // Swapped content goes to the cache; a failure without content marks it unhealthy.
        let indexed = decision
            .outcome
            .cache
            .iter()
            .any(|u| matches!(u, CacheUpdate::Index(_)));
        let swapped_now = case
            .check
            .as_ref()
            .is_some_and(|c| c.outcome == CheckOutcome::Swapped);
        assert_eq!(indexed, swapped_now, "{what}");
    }
}

#[test]
fn what_to_observe_follows_from_the_memos() {
    let cs = catalog(serde_json::json!({}));
    let now = t(NOW);
    let table: Vec<(&str, Memo, ToObserve)> = vec![
        (
            "nothing served: check",
            Memo::default(),
            ToObserve {
                check: true,
                registry: false,
            },
        ),
        (
            "served, no poll: nothing to ask",
            Memo {
                served: Some(served("sha256:a")),
                ..Memo::default()
            },
            ToObserve {
                check: false,
                registry: false,
            },
        ),
        (
            "served but failing: check again",
            Memo {
                served: Some(served("sha256:a")),
                failing_since: Some(t("2026-01-01T00:40:00Z")),
                ..Memo::default()
            },
            ToObserve {
                check: true,
                registry: false,
            },
        ),
        (
            "fallen back: the registry only",
            Memo {
                fallback: Some(fell_back("2026-01-01T01:05:00Z", &cs)),
                ..Memo::default()
            },
            ToObserve {
                check: false,
                registry: true,
            },
        ),
        (
            "fallen back, try due: both",
            Memo {
                fallback: Some(fell_back("2026-01-01T00:59:00Z", &cs)),
                ..Memo::default()
            },
            ToObserve {
                check: true,
                registry: true,
            },
        ),
    ];
    for (what, memo, expected) in table {
        assert_eq!(to_observe(&cs, &memo, now), expected, "{what}");
    }
}

#[test]
fn a_fallback_whose_registry_was_not_observed_decides_nothing() {
    let cs = catalog(serde_json::json!({}));
    let memo = Memo {
        fallback: Some(fell_back("2026-01-01T01:05:00Z", &cs)),
        ..Memo::default()
    };
    let overrides = BTreeMap::new();
    let found = RegistryObserved::default();
    let seen = Observed {
        catalog: &cs,
        now: t(NOW),
        instant: Instant::now(),
        address_overrides: &overrides,
        serving_default: ServingMode::InProcess,
        fallback_retry: Duration::from_secs(300),
        connection: None,
        memo: &memo,
        source: SourceSeen::InProcess(InProcessSeen {
            check: None,
            registry: None,
            leftovers: &found,
        }),
    };
    let decision = super::super::decide(&seen);
    assert!(decision.registry.clone().into_writes().is_empty());
    assert!(decision.outcome.effects.writes.is_empty());
    assert_eq!(decision.outcome.link, Link::Leave);
    assert_eq!(decision.memo, memo);
    assert_eq!(decision.outcome.effects.requeue, Some(Duration::ZERO));
}

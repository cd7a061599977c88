use super::*;

fn t(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn served(image: &str, digest: &str, since: &str) -> Served {
    Served {
        image: image.into(),
        digest: digest.into(),
        packages: 3,
        since: t(since),
    }
}

fn observed<'a>(image: &'a str, served: Option<&'a Served>, now: &str) -> Observed<'a> {
    Observed {
        image,
        poll_interval: None,
        created: Some(t("2026-01-01T00:00:00Z")),
        last_poll: None,
        served,
        failing_since: None,
        now: t(now),
    }
}

#[test]
fn next_steps() {
    let s = served("r/c:1", "sha256:a", "2026-01-01T00:00:00Z");
    let pinned = served("r/c@sha256:a", "sha256:a", "2026-01-01T00:00:00Z");
    let ten = Some(Duration::from_secs(600));
    let cases: Vec<(&str, Observed<'_>, Step)> = vec![
        (
            "nothing served: check",
            observed("r/c:1", None, "2026-01-01T00:00:01Z"),
            Step::Check { poll: false },
        ),
        (
            "nothing served, polling: loading is not a poll",
            Observed {
                poll_interval: ten,
                ..observed("r/c:1", None, "2026-01-01T00:00:01Z")
            },
            Step::Check { poll: false },
        ),
        (
            "nothing served (a restart), a poll due: the check is the poll",
            Observed {
                poll_interval: ten,
                last_poll: Some(t("2026-01-01T00:00:00Z")),
                ..observed("r/c:1", None, "2026-01-01T00:20:00Z")
            },
            Step::Check { poll: true },
        ),
        (
            "polling, never polled: due an interval after creation",
            Observed {
                poll_interval: ten,
                ..observed("r/c:1", Some(&s), "2026-01-01T00:10:00Z")
            },
            Step::Check { poll: true },
        ),
        (
            "spec.image changed: check",
            observed("r/c:2", Some(&s), "2026-01-01T00:00:01Z"),
            Step::Check { poll: false },
        ),
        (
            "served, no polling: resync only",
            observed("r/c:1", Some(&s), "2026-01-01T05:00:00Z"),
            Step::Wait { requeue: RESYNC },
        ),
        (
            "polling, not due",
            Observed {
                poll_interval: ten,
                last_poll: Some(t("2026-01-01T00:00:00Z")),
                ..observed("r/c:1", Some(&s), "2026-01-01T00:04:00Z")
            },
            Step::Wait {
                requeue: Duration::from_secs(360),
            },
        ),
        (
            "polling, due",
            Observed {
                poll_interval: ten,
                last_poll: Some(t("2026-01-01T00:00:00Z")),
                ..observed("r/c:1", Some(&s), "2026-01-01T00:10:00Z")
            },
            Step::Check { poll: true },
        ),
        (
            "a digest reference is never polled",
            Observed {
                poll_interval: ten,
                last_poll: Some(t("2026-01-01T00:00:00Z")),
                ..observed("r/c@sha256:a", Some(&pinned), "2026-01-02T00:00:00Z")
            },
            Step::Wait { requeue: RESYNC },
        ),
        (
            "the last check failed: check again",
            Observed {
                failing_since: Some(t("2026-01-01T00:00:00Z")),
                ..observed("r/c:1", Some(&s), "2026-01-01T00:00:30Z")
            },
            Step::Check { poll: false },
        ),
    ];
    for (what, o, expected) in cases {
        assert_eq!(next_step(&o), expected, "{what}");
    }
}

#[test]
fn a_served_catalog_is_ready_with_its_digest() {
    let s = served("r/c:1", "sha256:a", "2026-01-01T00:00:01Z");
    let o = Observed {
        poll_interval: Some(Duration::from_secs(600)),
        ..observed("r/c:1", None, "2026-01-01T00:00:01Z")
    };
    let d = decide_status(
        &CatalogSourceStatus::default(),
        &o,
        Step::Check { poll: true },
        Some(&CheckOutcome::Swapped),
        Some(&s),
        Some(1),
    );
    let state = d.status.connection_state.as_ref().unwrap();
    assert_eq!(state.last_observed_state, ConnectionState::Ready);
    assert_eq!(state.last_connect, Some(Time(o.now)));
    assert_eq!(d.status.latest_image_registry_poll, Some(Time(o.now)));
    assert_eq!(d.status.reason, None);
    let c = &d.status.conditions.as_ref().unwrap()[0];
    assert_eq!(
        (c.type_.as_str(), c.status.as_str()),
        (CONTENT_CONDITION, "True")
    );
    assert!(c.message.contains("r/c:1@sha256:a"), "{}", c.message);
    assert_eq!(d.events.len(), 1);
    assert_eq!(d.requeue, Duration::from_secs(600));

    // The same again later: nothing changes, no event, the connect time is kept.
    let later = Observed {
        served: Some(&s),
        last_poll: Some(o.now),
        now: t("2026-01-01T00:10:00Z"),
        ..o
    };
    let again = decide_status(
        &d.status,
        &later,
        Step::Check { poll: true },
        Some(&CheckOutcome::Unchanged),
        Some(&s),
        Some(1),
    );
    assert_eq!(
        again.status.connection_state.as_ref().unwrap().last_connect,
        Some(Time(o.now))
    );
    assert_eq!(again.status.conditions, d.status.conditions);
    assert!(again.events.is_empty());
    assert_eq!(
        again.status.latest_image_registry_poll,
        Some(Time(later.now))
    );
}

#[test]
fn failures_are_explained_and_the_last_good_content_kept() {
    let s = served("r/c:1", "sha256:a", "2026-01-01T00:00:01Z");
    let o = observed("r/c:1", Some(&s), "2026-01-01T01:00:00Z");
    let failed = CheckOutcome::Failed {
        kind: "Unauthorized".into(),
        message: "image r/c:1: registry r refused access".into(),
        transient: false,
    };
    let d = decide_status(
        &CatalogSourceStatus::default(),
        &o,
        Step::Check { poll: false },
        Some(&failed),
        Some(&s),
        None,
    );
    assert_eq!(
        d.status.connection_state.unwrap().last_observed_state,
        ConnectionState::Ready
    );
    assert_eq!(
        d.status.reason,
        Some(CatalogSourceReason::RegistryServerError)
    );
    let message = d.status.message.unwrap();
    assert!(
        message.contains("refused access") && message.contains("still serving r/c:1@sha256:a"),
        "{message}"
    );
    let c = &d.status.conditions.unwrap()[0];
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        ("False", "Unauthorized")
    );
    assert_eq!(d.requeue, RETRY_LASTING);

    // Nothing ever served: not ready, retried soon when the cause may pass.
    let transient = CheckOutcome::Failed {
        kind: "Unreachable".into(),
        message: "image r/c:1: registry r cannot be reached".into(),
        transient: true,
    };
    let o = observed("r/c:1", None, "2026-01-01T01:00:00Z");
    let d = decide_status(
        &CatalogSourceStatus::default(),
        &o,
        Step::Check { poll: false },
        Some(&transient),
        None,
        None,
    );
    assert_eq!(
        d.status.connection_state.unwrap().last_observed_state,
        ConnectionState::TransientFailure
    );
    assert_eq!(d.requeue, RETRY_TRANSIENT);
}

#[test]
fn a_catalog_moved_from_a_pod_drops_the_registry_service() {
    let mut old = CatalogSourceStatus {
        registry_service: Some(Default::default()),
        ..Default::default()
    };
    old.connection_state = Some(GrpcConnectionState {
        address: Some("c.olm.svc:50051".into()),
        last_observed_state: ConnectionState::Ready,
        last_connect: Some(Time(t("2026-01-01T00:00:00Z"))),
    });
    let s = served("r/c:1", "sha256:a", "2026-01-01T01:00:00Z");
    let o = observed("r/c:1", None, "2026-01-01T01:00:00Z");
    let d = decide_status(
        &old,
        &o,
        Step::Check { poll: false },
        Some(&CheckOutcome::Swapped),
        Some(&s),
        None,
    );
    assert_eq!(d.status.registry_service, None);
    let state = d.status.connection_state.unwrap();
    assert_eq!(state.address, None);
    assert_eq!(state.last_connect, Some(Time(o.now)));
}

#[test]
fn effects_write_a_changed_status_once_and_delete_leftovers_first() {
    let mut cs: CatalogSource = serde_json::from_value(serde_json::json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
        "metadata": {"name": "c", "namespace": "olm", "resourceVersion": "7"},
        "spec": {"sourceType": "grpc", "image": "r/c:1"}
    }))
    .unwrap();
    let s = served("r/c:1", "sha256:a", "2026-01-01T00:00:01Z");
    let o = observed("r/c:1", None, "2026-01-01T00:00:01Z");
    let decision = decide_status(
        &CatalogSourceStatus::default(),
        &o,
        Step::Check { poll: false },
        Some(&CheckOutcome::Swapped),
        Some(&s),
        None,
    );
    let leftover = Write::delete(crate::k8s::write::ObjectKey::new::<
        k8s_openapi::api::core::v1::Pod,
    >(Some("olm"), "c-abcde"));
    let e = effects(&cs, decision.clone(), vec![leftover], None, Vec::new());
    let verbs: Vec<&str> = e
        .writes
        .iter()
        .map(|w| match w {
            Write::Delete { .. } => "delete",
            Write::Status { .. } => "status",
            _ => "other",
        })
        .collect();
    assert_eq!(verbs, ["delete", "status"]);
    let reasons: Vec<&str> = e.events.iter().map(|e| e.event.reason.as_str()).collect();
    assert_eq!(reasons, ["RegistryPodRemoved", "CatalogContentServed"]);
    assert_eq!(e.requeue, Some(RESYNC));

    // Observed as decided: nothing to write, nothing to say but the decision's own events.
    cs.status = Some(decision.status.clone());
    let again = Decision {
        events: Vec::new(),
        ..decision
    };
    let e = effects(&cs, again.clone(), Vec::new(), None, Vec::new());
    assert!(e.writes.is_empty() && e.events.is_empty());

    // An interval that does not parse is said, as OLM says it.
    let e = effects(
        &cs,
        again,
        Vec::new(),
        Some("bad interval".into()),
        Vec::new(),
    );
    assert_eq!(e.writes.len(), 1);
    assert_eq!(e.events[0].event.reason, "InvalidIntervalError");
}

#[test]
fn the_cache_serves_new_content_and_says_why_nothing_is_served() {
    let cs: CatalogSource = serde_json::from_value(serde_json::json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
        "metadata": {"name": "c", "namespace": "olm"},
        "spec": {"sourceType": "grpc", "image": "r/c:1"}
    }))
    .unwrap();
    let s = served("r/c:1", "sha256:a", "2026-01-01T00:00:01Z");
    let index = Arc::new(CatalogIndex::new(Default::default()));
    let failed = |kind: &str| CheckOutcome::Failed {
        kind: kind.to_owned(),
        message: "image r/c:1: refused".to_owned(),
        transient: false,
    };
    let shown = |updates: Vec<CacheUpdate>| -> Vec<String> {
        updates
            .into_iter()
            .map(|u| match u {
                CacheUpdate::Index(_) => "index".to_owned(),
                CacheUpdate::Ready => "ready".to_owned(),
                CacheUpdate::Unhealthy {
                    reason,
                    message,
                    drop_index,
                } => format!("{reason:?} {message} drop={drop_index}"),
            })
            .collect()
    };
    // (what, outcome, served after, content loaded, updates)
    type Case<'a> = (
        &'a str,
        Option<CheckOutcome>,
        Option<&'a Served>,
        bool,
        Vec<&'a str>,
    );
    let cases: [Case<'_>; 5] = [
        (
            "new content",
            Some(CheckOutcome::Swapped),
            Some(&s),
            true,
            vec!["index", "ready"],
        ),
        (
            "unchanged",
            Some(CheckOutcome::Unchanged),
            Some(&s),
            false,
            vec!["ready"],
        ),
        ("no check", None, Some(&s), false, vec!["ready"]),
        (
            "failed with earlier content: still served",
            Some(failed("Unauthorized")),
            Some(&s),
            false,
            vec!["ready"],
        ),
        (
            "not a catalog, nothing served",
            Some(failed("NotACatalog")),
            None,
            false,
            vec!["Invalid catalog olm/c: image r/c:1: refused drop=false"],
        ),
    ];
    for (what, outcome, served, loaded, expected) in cases {
        let content = loaded.then(|| Arc::clone(&index));
        let updates = cache_updates(&cs, outcome.as_ref(), served, content);
        assert_eq!(shown(updates), expected, "{what}");
    }
    let unreachable = cache_updates(&cs, Some(&failed("Unreachable")), None, None);
    assert!(matches!(
        unreachable.as_slice(),
        [CacheUpdate::Unhealthy {
            reason: Unhealthy::Unreachable,
            ..
        }]
    ));
}

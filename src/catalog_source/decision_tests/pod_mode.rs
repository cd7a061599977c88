use super::*;

/// A registry pod of the catalog: made for `digest`, Ready or not, terminating or not.
fn registry_pod(
    objects: &RegistryObjects,
    name: &str,
    created: &str,
    digest: &str,
    ready: bool,
    terminating: bool,
) -> Arc<Pod> {
    let mut pod = objects.pod.clone();
    let mut annotations = pod.metadata.annotations.clone().unwrap_or_default();
    annotations.insert(IMAGE_DIGEST_ANNOTATION.to_owned(), digest.to_owned());
    annotations.insert(
        crate::catalog_source::registry_objects::CREATED_AT_ANNOTATION.to_owned(),
        created.to_owned(),
    );
    let mut labels = pod.metadata.labels.clone().unwrap_or_default();
    labels.insert(
        POD_SPEC_HASH_LABEL.to_owned(),
        objects.pod_spec_hash.clone(),
    );
    pod.metadata = ObjectMeta {
        name: Some(name.to_owned()),
        resource_version: Some("1".to_owned()),
        annotations: Some(annotations),
        labels: Some(labels),
        deletion_timestamp: terminating.then(|| Time(t(NOW))),
        ..pod.metadata
    };
    pod.status = Some(PodStatus {
        conditions: Some(vec![PodCondition {
            type_: "Ready".into(),
            status: if ready { "True" } else { "False" }.into(),
            ..PodCondition::default()
        }]),
        ..PodStatus::default()
    });
    Arc::new(pod)
}

fn objects_of(cs: &CatalogSource) -> RegistryObjects {
    registry_objects(cs, &BTreeMap::new(), None, &RegistryPodOptions::default()).unwrap()
}

fn all_objects(objects: &RegistryObjects, pods: Vec<Arc<Pod>>) -> RegistryObserved {
    RegistryObserved {
        service_account: Some(Arc::new(objects.service_account.clone())),
        network_policy: Some(Arc::new(objects.network_policy.clone())),
        service: Some(Arc::new(objects.service.clone())),
        pods,
    }
}

fn verbs(writes: &[Write]) -> Vec<String> {
    writes
        .iter()
        .map(|w| {
            let verb = w.verb();
            format!("{verb} {}", w.key().name)
        })
        .collect()
}

struct PodCase {
    what: &'static str,
    pods: Vec<Arc<Pod>>,
    digest: Option<DigestSeen>,
    awaiting_pod: bool,
    serving_record: Option<Vec<String>>,
    registry: Vec<&'static str>,
    link: Link,
    serving_pods: Option<ServingPods>,
    requeue: Duration,
    events: Vec<&'static str>,
}

#[test]
fn pod_mode_rolls_pods_out_beside_the_serving_one_and_reconnects_only_when_settled() {
    // Polled at creation + 10 min would be due at 00:10; the last poll was at 00:55.
    let cs = image_catalog(serde_json::json!({"latestImageRegistryPoll": "2026-01-01T00:55:00Z"}));
    let objects = objects_of(&cs);
    let pod = |name, created, digest, ready, terminating| {
        registry_pod(&objects, name, created, digest, ready, terminating)
    };
    let old = || pod("ops-old", "2026-01-01T00:00:00Z", "sha256:a", true, false);
    let new_ready = || pod("ops-new", "2026-01-01T00:50:00Z", "sha256:b", true, false);
    let new_starting = || pod("ops-new", "2026-01-01T00:50:00Z", "sha256:b", false, false);
    let address = || "ops.olm.svc:50051".to_owned();
    let poll_wait = Duration::from_secs(5 * 60);
    let cases = vec![
        PodCase {
            what: "no pod: one is created, the connection dialled again (new content)",
            pods: vec![],
            digest: None,
            awaiting_pod: false,
            serving_record: None,
            registry: vec!["create ops-"],
            link: Link::Redial(address()),
            serving_pods: None,
            requeue: AFTER_RECREATE,
            events: vec![
                "RegistryPodCreated: created a registry pod for image quay.io/org/catalog:1",
            ],
        },
        PodCase {
            what: "a pod created is not in the store yet: pods left alone",
            pods: vec![],
            digest: None,
            awaiting_pod: true,
            serving_record: None,
            registry: vec![],
            link: Link::Ensure(address()),
            serving_pods: None,
            requeue: AWAITING_POD,
            events: vec![],
        },
        PodCase {
            what: "one settled pod, as recorded: nothing to do",
            pods: vec![old()],
            digest: None,
            awaiting_pod: false,
            serving_record: Some(vec!["ops-old".into()]),
            registry: vec![],
            link: Link::Ensure(address()),
            serving_pods: Some(ServingPods::Settled(vec!["ops-old".into()])),
            requeue: poll_wait,
            events: vec![],
        },
        PodCase {
            what: "a new digest: a pod beside the serving one",
            pods: vec![old()],
            digest: Some(DigestSeen {
                due: true,
                answer: DigestAnswer::Digest("sha256:b".into()),
            }),
            awaiting_pod: false,
            serving_record: Some(vec!["ops-old".into()]),
            registry: vec!["create ops-"],
            link: Link::Ensure(address()),
            serving_pods: None,
            requeue: ROLLOUT_RECHECK,
            events: vec![
                "CatalogImageUpdated: image quay.io/org/catalog:1 now points at sha256:b; starting a registry pod for it beside the serving one",
            ],
        },
        PodCase {
            what: "the new pod not Ready: both stay, no reconnect",
            pods: vec![old(), new_starting()],
            digest: None,
            awaiting_pod: false,
            serving_record: Some(vec!["ops-old".into()]),
            registry: vec![],
            link: Link::Ensure(address()),
            serving_pods: Some(ServingPods::Mixed),
            requeue: ROLLOUT_RECHECK,
            events: vec![],
        },
        PodCase {
            what: "the new pod Ready: the old one goes, still no reconnect",
            pods: vec![old(), new_ready()],
            digest: None,
            awaiting_pod: false,
            serving_record: Some(vec![]),
            registry: vec!["delete ops-old"],
            link: Link::Ensure(address()),
            serving_pods: Some(ServingPods::Mixed),
            requeue: poll_wait,
            events: vec![],
        },
        PodCase {
            what: "the old pod terminating: never reconnect while it exists",
            pods: vec![
                pod("ops-old", "2026-01-01T00:00:00Z", "sha256:a", true, true),
                new_ready(),
            ],
            digest: None,
            awaiting_pod: false,
            serving_record: Some(vec![]),
            registry: vec![],
            link: Link::Ensure(address()),
            serving_pods: Some(ServingPods::Mixed),
            requeue: poll_wait,
            events: vec![],
        },
        PodCase {
            what: "the old pod gone: settled on the new one, reconnect",
            pods: vec![new_ready()],
            digest: None,
            awaiting_pod: false,
            serving_record: Some(vec![]),
            registry: vec![],
            link: Link::Redial(address()),
            serving_pods: Some(ServingPods::Settled(vec!["ops-new".into()])),
            requeue: poll_wait,
            events: vec![],
        },
        PodCase {
            what: "the poll failed: the serving pod stays, a warning",
            pods: vec![old()],
            digest: Some(DigestSeen {
                due: true,
                answer: DigestAnswer::Failed(
                    "could not check catalog image for updates: unauthorized".into(),
                ),
            }),
            awaiting_pod: false,
            serving_record: Some(vec!["ops-old".into()]),
            registry: vec![],
            link: Link::Ensure(address()),
            serving_pods: Some(ServingPods::Settled(vec!["ops-old".into()])),
            requeue: Duration::from_secs(600),
            events: vec![
                "CatalogImagePollFailed: could not check catalog image for updates: unauthorized",
            ],
        },
    ];
    for case in cases {
        let found = all_objects(&objects, case.pods);
        let seen_registry = RegistrySeen {
            objects: Ok(&objects),
            found: &found,
            network_policies: true,
            digest: case.digest.clone(),
        };
        // The memos are part of the input: the pod created last, the pods last served.
        let instant = Instant::now();
        let memo = Memo {
            created_pod: case.awaiting_pod.then(|| CreatedPod {
                name: "ops-abc".into(),
                at: instant,
            }),
            serving_pods: case.serving_record.clone(),
            ..Memo::default()
        };
        let mut seen = observed_with(&cs, None, SourceSeen::Registry(seen_registry), &memo);
        seen.instant = instant;
        let decision = decide(&seen);
        let what = case.what;
        assert_eq!(
            verbs(&decision.registry.clone().into_writes()),
            case.registry,
            "{what}"
        );
        let outcome = &decision.outcome;
        assert_eq!(outcome.link, case.link, "{what}");
        let remembered = match case.serving_pods.clone() {
            Some(ServingPods::Settled(names)) => Some(names),
            Some(ServingPods::Mixed) => Some(Vec::new()),
            None => case.serving_record.clone(),
        };
        assert_eq!(decision.memo.serving_pods, remembered, "{what}");
        assert_eq!(
            decision.memo.created_pod.is_some(),
            case.awaiting_pod,
            "{what}: the created pod is awaited until the store shows it"
        );
        // A failed registry write keeps what only the write would make true.
        assert_eq!(
            decision.if_registry_fails.memo.serving_pods, case.serving_record,
            "{what}"
        );
        assert_eq!(outcome.effects.requeue, Some(case.requeue), "{what}");
        let events: Vec<String> = events(outcome)
            .into_iter()
            .filter(|e| !e.starts_with("RegistryReady"))
            .collect();
        assert_eq!(events, case.events, "{what}");
        let status = written_status(outcome).unwrap();
        assert_eq!(status["registryService"]["serviceName"], "ops", "{what}");
        let polled = case.digest.as_ref().is_some_and(|d| d.due);
        assert_eq!(
            status["latestImageRegistryPoll"],
            if polled { NOW } else { "2026-01-01T00:55:00Z" },
            "{what}"
        );
    }
}

#[test]
fn a_registry_that_cannot_be_written_marks_the_catalog() {
    let cs = image_catalog(serde_json::json!({}));
    let objects = objects_of(&cs);
    let found = all_objects(&objects, vec![]);
    let registry = RegistrySeen {
        objects: Ok(&objects),
        found: &found,
        network_policies: true,
        digest: None,
    };
    let decision = decide(&observed(&cs, None, SourceSeen::Registry(registry)));
    assert_eq!(
        verbs(&decision.registry.clone().into_writes()),
        vec!["create ops-"]
    );
    // Picked by the shell when the write is refused, with the refusal's text.
    let outcome = decision
        .if_registry_fails
        .outcome(&cs, &"pods \"ops-x\" is forbidden");
    assert_eq!(outcome.link, Link::Leave);
    let status = written_status(&outcome).unwrap();
    assert_eq!(status["reason"], "RegistryServerError");
    assert_eq!(
        status["message"],
        "couldn't ensure registry server - pods \"ops-x\" is forbidden"
    );
    assert!(matches!(
        &outcome.cache[0],
        CacheUpdate::Unhealthy { reason: Unhealthy::Unreachable, message, drop_index: false }
            if message == "catalog olm/ops: registry server not ensured: pods \"ops-x\" is forbidden"
    ));
    assert_eq!(outcome.effects.requeue, Some(RESYNC));
}

#[test]
fn an_unparsable_poll_interval_is_reported_and_the_default_used() {
    let cs = catalog(
        serde_json::json!({"sourceType": "grpc", "image": "quay.io/org/catalog:1",
            "updateStrategy": {"registryPoll": {"interval": "soon"}}}),
        serde_json::json!({}),
    );
    let objects = objects_of(&cs);
    let found = all_objects(&objects, vec![]);
    let registry = RegistrySeen {
        objects: Ok(&objects),
        found: &found,
        network_policies: true,
        digest: None,
    };
    let decision = decide(&observed(&cs, None, SourceSeen::Registry(registry)));
    let status = written_status(&decision.outcome).unwrap();
    assert_eq!(status["reason"], "InvalidIntervalError");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .starts_with("error parsing spec.updateStrategy.registryPoll.interval.")
    );
}

#[test]
fn what_to_observe_follows_the_serving_mode() {
    let image = |annotation: Option<&str>| {
        let mut cs = image_catalog(serde_json::json!({}));
        if let Some(value) = annotation {
            cs.metadata.annotations =
                Some([(SERVING_ANNOTATION.to_owned(), value.to_owned())].into());
        }
        cs
    };
    let (source, notes) = source_to_observe(&image(None), ServingMode::InProcess);
    assert!(source.is_none() && notes.is_empty());
    let (source, _) = source_to_observe(&image(Some("pod")), ServingMode::InProcess);
    assert!(matches!(source, Some(Ok(Source::Image(_)))));
    let (source, notes) = source_to_observe(&image(Some("sidecar")), ServingMode::Pod);
    assert!(matches!(source, Some(Ok(Source::Image(_)))));
    assert_eq!(notes.len(), 1);
    assert_eq!(notes[0].reason, "InvalidServingMode");
    let address = catalog(
        serde_json::json!({"sourceType": "grpc", "address": "reg:50051"}),
        serde_json::json!({}),
    );
    let (source, _) = source_to_observe(&address, ServingMode::InProcess);
    assert_eq!(source, Some(Ok(Source::Address("reg:50051".into()))));
}

#[test]
fn the_digest_is_asked_when_a_poll_is_due_or_no_pod_serves() {
    let cs = image_catalog(serde_json::json!({}));
    let objects = objects_of(&cs);
    let serving = [registry::pod_view(&registry_pod(
        &objects,
        "ops-a",
        "2026-01-01T00:00:00Z",
        "sha256:a",
        true,
        false,
    ))];
    let poll = |last: &str| {
        Some(Poll {
            interval: Duration::from_secs(600),
            last: Some(t(last)),
        })
    };
    let now = t(NOW);
    assert_eq!(digest_check(&cs, None, &serving, &objects, now), None);
    assert_eq!(
        digest_check(&cs, poll("2026-01-01T00:55:00Z"), &serving, &objects, now),
        None
    );
    assert_eq!(
        digest_check(&cs, poll("2026-01-01T00:50:00Z"), &serving, &objects, now),
        Some(true)
    );
    assert_eq!(
        digest_check(&cs, poll("2026-01-01T00:55:00Z"), &[], &objects, now),
        Some(false)
    );
}

#[test]
fn a_registry_pod_that_becomes_ready_while_the_connection_fails_is_dialled_at_once() {
    let cs = image_catalog(serde_json::json!({"latestImageRegistryPoll": "2026-01-01T00:55:00Z"}));
    let objects = objects_of(&cs);
    let pod = |ready| {
        registry_pod(
            &objects,
            "ops-a",
            "2026-01-01T00:50:00Z",
            "sha256:a",
            ready,
            false,
        )
    };
    let address = || "ops.olm.svc:50051".to_owned();
    let link = |state: ConnectionState| LinkView {
        address: address(),
        error: (state == ConnectionState::TransientFailure).then(|| "connection refused".into()),
        state,
        since: t(NOW),
        content_error: None,
    };
    // (what, the pod Ready, the pods last served, the connection's state, the link decided)
    let cases = [
        (
            "Ready for the first time, the connection backing off: dialled now",
            true,
            None,
            ConnectionState::TransientFailure,
            Link::Redial(address()),
        ),
        (
            "Ready for the first time, the connection READY (a restarted controller): kept",
            true,
            None,
            ConnectionState::Ready,
            Link::Ensure(address()),
        ),
        (
            "Ready as recorded, the connection failing: its own back-off, no redial loop",
            true,
            Some(vec!["ops-a".to_owned()]),
            ConnectionState::TransientFailure,
            Link::Ensure(address()),
        ),
        (
            "not Ready yet: nothing to dial",
            false,
            None,
            ConnectionState::TransientFailure,
            Link::Ensure(address()),
        ),
    ];
    for (what, ready, serving, state, expected) in cases {
        let found = all_objects(&objects, vec![pod(ready)]);
        let registry = RegistrySeen {
            objects: Ok(&objects),
            found: &found,
            network_policies: true,
            digest: None,
        };
        let memo = Memo {
            serving_pods: serving,
            ..Memo::default()
        };
        let connection = link(state);
        let decision = decide(&observed_with(
            &cs,
            Some(&connection),
            SourceSeen::Registry(registry),
            &memo,
        ));
        assert_eq!(decision.outcome.link, expected, "{what}");
    }
}

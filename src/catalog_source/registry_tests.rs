use super::registry_objects::{RegistryPodOptions, registry_objects};
use super::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

fn objects() -> RegistryObjects {
    let cs: CatalogSource = serde_json::from_value(serde_json::json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "CatalogSource",
        "metadata": {"name": "ops", "namespace": "olm", "uid": "u1"},
        "spec": {"sourceType": "grpc", "image": "quay.io/org/catalog:latest"},
    }))
    .unwrap();
    registry_objects(
        &cs,
        &std::collections::BTreeMap::new(),
        None,
        &RegistryPodOptions::default(),
    )
    .unwrap()
}

fn all_seen(objects: &RegistryObjects) -> RegistryObserved {
    RegistryObserved {
        service_account: Some(Arc::new(objects.service_account.clone())),
        network_policy: Some(Arc::new(objects.network_policy.clone())),
        service: Some(Arc::new(objects.service.clone())),
        pods: Vec::new(),
    }
}

fn kinds(writes: &[Write]) -> Vec<String> {
    writes
        .iter()
        .map(|w| {
            let verb = w.verb();
            format!("{verb} {}", w.key())
        })
        .collect()
}

#[test]
fn pod_mode_leftovers_are_deleted_when_served_in_process() {
    let objects = objects();
    assert!(
        decide_leftovers(&RegistryObserved {
            service_account: None,
            network_policy: None,
            service: None,
            pods: Vec::new(),
        })
        .is_empty()
    );
    let mut seen = all_seen(&objects);
    seen.pods.push(Arc::new(objects.pod.clone()));
    let writes = decide_leftovers(&seen);
    let verbs: Vec<String> = kinds(&writes);
    assert_eq!(writes.len(), 4, "{verbs:?}");
    assert!(verbs.iter().all(|v| v.starts_with("delete ")), "{verbs:?}");
}

/// A registry pod of the catalog as the store holds it.
fn found_pod(objects: &RegistryObjects, name: &str, version: &str, terminating: bool) -> Arc<Pod> {
    let mut pod = objects.pod.clone();
    pod.metadata = ObjectMeta {
        name: Some(name.to_owned()),
        resource_version: Some(version.to_owned()),
        deletion_timestamp: terminating.then_some(Time(jiff::Timestamp::UNIX_EPOCH)),
        ..pod.metadata
    };
    Arc::new(pod)
}

#[test]
fn registry_writes_follow_what_the_stores_hold() {
    let objects = objects();
    let now = jiff::Timestamp::from_second(1_700_000_000).unwrap();
    let create = PodPlan {
        create: Some(Some("sha256:abc".into())),
        recreating: true,
        ..PodPlan::default()
    };
    let mut stale_service = all_seen(&objects);
    let mut service = objects.service.clone();
    service.metadata.labels.get_or_insert_default().insert(
        crate::api::keys::SERVICE_SPEC_HASH_LABEL.to_owned(),
        "older".to_owned(),
    );
    stale_service.service = Some(Arc::new(service));
    let mut with_pods = all_seen(&objects);
    with_pods.pods = vec![
        found_pod(&objects, "ops-old1", "11", false),
        found_pod(&objects, "ops-old2", "12", false),
        found_pod(&objects, "ops-kept", "13", false),
        found_pod(&objects, "ops-going", "14", true),
    ];
    let keep_one = PodPlan {
        keep: vec!["ops-kept".into()],
        force: vec!["ops-old1".into()],
        ..PodPlan::default()
    };
    // (what, observed, pod plan, NetworkPolicies served, pods held, writes)
    type Case = (
        &'static str,
        RegistryObserved,
        PodPlan,
        bool,
        bool,
        Vec<&'static str>,
    );
    let cases: Vec<Case> = vec![
        (
            "a new catalog: every object, then its pod",
            RegistryObserved::default(),
            create.clone(),
            true,
            false,
            vec![
                "apply ServiceAccount olm/ops",
                "apply Service olm/ops",
                "apply NetworkPolicy olm/ops-grpc-server",
                "create Pod olm/ops-",
            ],
        ),
        (
            "no NetworkPolicy where the server serves none",
            RegistryObserved::default(),
            create.clone(),
            false,
            false,
            vec![
                "apply ServiceAccount olm/ops",
                "apply Service olm/ops",
                "create Pod olm/ops-",
            ],
        ),
        (
            "a pod created and not in the store yet: pods left alone",
            RegistryObserved::default(),
            create,
            true,
            true,
            vec![
                "apply ServiceAccount olm/ops",
                "apply Service olm/ops",
                "apply NetworkPolicy olm/ops-grpc-server",
            ],
        ),
        (
            "everything in place: nothing",
            all_seen(&objects),
            PodPlan::default(),
            true,
            false,
            vec![],
        ),
        (
            "a Service from an older spec is applied again; the account is never re-applied",
            stale_service,
            PodPlan::default(),
            true,
            false,
            vec!["apply Service olm/ops"],
        ),
        (
            "every live pod not kept goes; a terminating one is left to go",
            with_pods,
            keep_one,
            true,
            false,
            vec!["delete Pod olm/ops-old1", "delete Pod olm/ops-old2"],
        ),
    ];
    for (what, seen, plan, policies, held, expected) in cases {
        let writes = decide_registry(&objects, &seen, &plan, policies, held, now);
        assert_eq!(kinds(&writes.into_writes()), expected, "{what}");
    }
}

#[test]
fn a_new_pod_records_its_digest_and_creation_and_deletes_are_as_observed_with_their_grace() {
    let objects = objects();
    let now = jiff::Timestamp::from_second(1_700_000_000).unwrap();
    let plan = PodPlan {
        force: vec!["a".into()],
        create: Some(Some("sha256:abc".into())),
        ..PodPlan::default()
    };
    let mut seen = all_seen(&objects);
    seen.pods = vec![
        found_pod(&objects, "a", "7", false),
        found_pod(&objects, "b", "8", false),
    ];
    let writes = decide_registry(&objects, &seen, &plan, true, false, now).into_writes();
    let deletes: Vec<(Option<u32>, Option<&str>)> = writes
        .iter()
        .filter_map(|w| match w {
            Write::Delete { options, .. } => Some((
                options.grace_period_seconds,
                options.resource_version.as_deref(),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(deletes, [(Some(0), Some("7")), (Some(1), Some("8"))]);
    // The new pod first: the old ones go after it (and only once it is Ready, by the plan).
    let Some(Write::Create { object, .. }) = writes.first() else {
        panic!("a create first");
    };
    let pod = object.to_json().unwrap();
    assert_eq!(
        pod["metadata"]["annotations"][IMAGE_DIGEST_ANNOTATION],
        "sha256:abc"
    );
    assert_eq!(
        pod["metadata"]["annotations"][CREATED_AT_ANNOTATION],
        now.to_string()
    );
}

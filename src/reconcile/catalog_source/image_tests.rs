use super::*;
use crate::registry::pod::{RegistryPodOptions, registry_objects};
use pod_plan::PodPlan;

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

fn nothing_seen() -> RegistryObserved {
    RegistryObserved {
        service_account: None,
        network_policy: None,
        service: None,
        pods: Vec::new(),
    }
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
            let verb = match w {
                Write::Apply { .. } => "apply",
                Write::Create { .. } => "create",
                Write::Delete { .. } => "delete",
                Write::MergePatch { .. } => "patch",
                Write::Status { .. } => "status",
            };
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

/// The ServiceAccount store is the process's shared one, holding everyone's accounts: a
/// catalog's is only the one olm-rs labelled `olm.managed`.
#[test]
fn only_a_managed_service_account_is_the_registrys() {
    use crate::k8s::store::namespaced_store;
    use kube_runtime::watcher::Event;
    let cs: CatalogSource = serde_json::from_value(serde_json::json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
        "metadata": {"name": "ops", "namespace": "olm"},
        "spec": {"sourceType": "grpc", "image": "quay.io/org/catalog:latest"},
    }))
    .unwrap();
    let account = |managed: bool| {
        let mut sa = ServiceAccount::default();
        sa.metadata.namespace = Some("olm".into());
        sa.metadata.name = Some("ops".into());
        if managed {
            sa.metadata.labels =
                Some([(MANAGED_LABEL.to_owned(), MANAGED_LABEL_VALUE.to_owned())].into());
        }
        sa
    };
    let (service_accounts, mut writer) = namespaced_store();
    let stores = RegistryStores {
        namespaces: namespaced_store().0,
        service_accounts,
        network_policies: namespaced_store().0,
        services: namespaced_store().0,
        pods: namespaced_store().0,
    };
    writer.apply_owned(Event::Apply(account(false)));
    assert!(
        stores.observe(&cs).service_account.is_none(),
        "someone else's account of the same name"
    );
    writer.apply_owned(Event::Apply(account(true)));
    assert!(stores.observe(&cs).service_account.is_some());
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
    let replace = PodPlan {
        force_delete: vec!["ops-old1".into()],
        delete: vec!["ops-old2".into()],
        ..PodPlan::default()
    };
    let mut stale_service = all_seen(&objects);
    let mut service = objects.service.clone();
    service.metadata.labels.get_or_insert_default().insert(
        crate::api::keys::SERVICE_SPEC_HASH_LABEL.to_owned(),
        "older".to_owned(),
    );
    stale_service.service = Some(Arc::new(service));
    // (what, observed, pod plan, object writes, network policy written, pod writes)
    type Case = (
        &'static str,
        RegistryObserved,
        PodPlan,
        Vec<&'static str>,
        bool,
        Vec<&'static str>,
    );
    let cases: Vec<Case> = vec![
        (
            "a new catalog: every object, then its pod",
            nothing_seen(),
            create.clone(),
            vec!["apply ServiceAccount olm/ops", "apply Service olm/ops"],
            true,
            vec!["create Pod olm/ops-"],
        ),
        (
            "everything in place: nothing",
            all_seen(&objects),
            PodPlan::default(),
            vec![],
            false,
            vec![],
        ),
        (
            "a Service from an older spec is applied again; the account is never re-applied",
            stale_service,
            PodPlan::default(),
            vec!["apply Service olm/ops"],
            false,
            vec![],
        ),
        (
            "stale and disrupted pods go",
            all_seen(&objects),
            replace,
            vec![],
            false,
            vec!["delete Pod olm/ops-old1", "delete Pod olm/ops-old2"],
        ),
    ];
    for (what, seen, plan, objects_written, policy, pods) in cases {
        let writes = decide_registry(&objects, &seen, &plan, now);
        assert_eq!(kinds(&writes.objects), objects_written, "{what}");
        assert_eq!(writes.network_policy.is_some(), policy, "{what}");
        assert_eq!(kinds(&writes.pods), pods, "{what}");
    }
}

#[test]
fn a_new_pod_records_its_digest_and_creation_and_deletes_keep_their_grace() {
    let objects = objects();
    let now = jiff::Timestamp::from_second(1_700_000_000).unwrap();
    let plan = PodPlan {
        force_delete: vec!["a".into()],
        delete: vec!["b".into()],
        create: Some(Some("sha256:abc".into())),
        ..PodPlan::default()
    };
    let writes = decide_registry(&objects, &all_seen(&objects), &plan, now);
    let graces: Vec<Option<u32>> = writes
        .pods
        .iter()
        .filter_map(|w| match w {
            Write::Delete { options, .. } => Some(options.grace_period_seconds),
            _ => None,
        })
        .collect();
    assert_eq!(graces, [Some(0), Some(1)]);
    let Some(Write::Create { object, .. }) = writes.pods.last() else {
        panic!("a create last");
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

use super::*;

fn original(targets: Option<&str>, phase: CsvPhase, reason: CsvReason) -> ClusterServiceVersion {
    let mut csv: ClusterServiceVersion = serde_json::from_value(serde_json::json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {
            "name": "op.v1", "namespace": "ops", "uid": "orig-uid", "resourceVersion": "5",
            "labels": {"operators.coreos.com/op.ops": "", "olm.managed": "true", "team": "x"},
            "annotations": {
                "olm.operatorNamespace": "ops", "olm.operatorGroup": "og",
                "kubectl.kubernetes.io/last-applied-configuration": "{}",
                "alm-examples": "[]"
            },
            "finalizers": ["operators.coreos.com/csv-cleanup"]
        },
        "spec": {"displayName": "Op", "install": {"strategy": "deployment"}},
        "status": {"phase": phase.as_str(), "reason": reason.as_str(), "message": "all good"}
    }))
    .unwrap();
    if let Some(targets) = targets {
        csv.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(TARGET_NAMESPACES_ANNOTATION.into(), targets.into());
    }
    csv
}

fn succeeded(targets: &str) -> ClusterServiceVersion {
    original(Some(targets), CsvPhase::Succeeded, CsvReason::InstallSucceeded)
}

#[test]
fn projection_keeps_spec_and_filters_metadata() {
    let copy = copy_prototype(&succeeded(""));
    let value = serde_json::to_value(&copy).unwrap();
    assert_eq!(value["metadata"]["name"], "op.v1");
    assert!(value["metadata"].get("namespace").is_none());
    assert!(value["metadata"].get("uid").is_none());
    assert!(value["metadata"].get("resourceVersion").is_none());
    assert!(value["metadata"].get("finalizers").is_none());
    assert_eq!(
        value["metadata"]["labels"],
        serde_json::json!({"olm.copiedFrom": "ops", "olm.managed": "true", "team": "x"})
    );
    assert_eq!(
        value["metadata"]["annotations"],
        serde_json::json!({"alm-examples": "[]", "olm.operatorGroup": "og", "olm.operatorNamespace": "ops"})
    );
    assert_eq!(value["spec"]["displayName"], "Op");
    assert_eq!(value["status"]["phase"], "Succeeded");
    assert_eq!(value["status"]["reason"], "Copied");
    assert_eq!(
        value["status"]["message"],
        "The operator is running in ops but is managing this namespace"
    );
}

#[test]
fn hashes_ignore_server_metadata_but_see_content_and_status() {
    let proto = copy_prototype(&succeeded(""));
    let mut stored = proto.clone();
    stored.metadata.namespace = Some("t1".into());
    stored.metadata.uid = Some("u".into());
    stored.metadata.resource_version = Some("99".into());
    assert_eq!(copy_hashes(&stored), copy_hashes(&proto));

    let mut relabelled = stored.clone();
    relabelled.metadata.labels.as_mut().unwrap().insert("extra".into(), "1".into());
    let h = copy_hashes(&relabelled);
    assert_ne!(h.content, copy_hashes(&proto).content);
    assert_eq!(h.status, copy_hashes(&proto).status);

    let moved = copy_prototype(&original(Some(""), CsvPhase::Installing, CsvReason::InstallWaiting));
    assert_ne!(copy_hashes(&moved).status, copy_hashes(&proto).status);
    assert_eq!(copy_hashes(&moved).content, copy_hashes(&proto).content);
}

#[test]
fn uncopiable_reasons() {
    assert!(is_uncopiable(None));
    let s = |phase: CsvPhase, reason: CsvReason| ClusterServiceVersionStatus {
        phase: Some(phase),
        reason: Some(reason),
        ..Default::default()
    };
    assert!(is_uncopiable(Some(&s(CsvPhase::None, CsvReason::RequirementsUnknown))));
    assert!(is_uncopiable(Some(&s(CsvPhase::Failed, CsvReason::UnsupportedOperatorGroup))));
    assert!(is_uncopiable(Some(&s(CsvPhase::Failed, CsvReason::TooManyOperatorGroups))));
    assert!(!is_uncopiable(Some(&s(CsvPhase::Pending, CsvReason::RequirementsUnknown))));
    assert!(!is_uncopiable(Some(&s(CsvPhase::Failed, CsvReason::ComponentUnhealthy))));
}

fn record_in(ns: &str, of: &ClusterServiceVersion) -> CopyRecord {
    let mut copy = copy_prototype(of);
    copy.metadata.namespace = Some(ns.into());
    copy.metadata.uid = Some(format!("uid-{ns}"));
    copy.metadata.resource_version = Some("7".into());
    copy_record(&copy).unwrap()
}

fn plan(csv: &ClusterServiceVersion, copyable: bool, copies: &[CopyRecord], namespaces: &[&str], settings: &CopySettings) -> CopyPlan {
    let refs: Vec<&CopyRecord> = copies.iter().collect();
    let desired = copy_hashes(&copy_prototype(csv));
    plan_copies(
        Some(Original { csv, copyable, desired }),
        &refs,
        namespaces.iter().copied(),
        settings,
    )
}

fn created(plan: &CopyPlan) -> Vec<&str> {
    plan.writes
        .iter()
        .filter_map(|w| match w {
            CopyWrite::Create { namespace } => Some(namespace.as_str()),
            _ => None,
        })
        .collect()
}

#[test]
fn all_namespaces_copies_everywhere_but_home_and_skips_up_to_date() {
    let csv = succeeded("");
    let existing = [record_in("a", &csv)];
    let p = plan(&csv, true, &existing, &["ops", "a", "b", "c"], &CopySettings::default());
    assert_eq!(created(&p), ["b", "c"]);
    assert_eq!(p.up_to_date, 1);
    assert!(p.deletes.is_empty());
}

#[test]
fn stale_copies_are_updated_part_by_part() {
    let csv = succeeded("a");
    let older = original(Some("a"), CsvPhase::Installing, CsvReason::InstallWaiting);
    let p = plan(&csv, true, &[record_in("a", &older)], &["a"], &CopySettings::default());
    assert_eq!(
        p.writes,
        [CopyWrite::Update {
            namespace: "a".into(),
            resource_version: "7".into(),
            content: false,
            status: true
        }]
    );
}

#[test]
fn explicit_targets_copy_only_to_existing_targets_and_remove_others() {
    let csv = succeeded("a,gone,ops");
    let existing = [record_in("a", &csv), record_in("old", &csv)];
    let p = plan(&csv, true, &existing, &["ops", "a", "b", "old"], &CopySettings::default());
    assert!(created(&p).is_empty());
    assert_eq!(p.deletes.len(), 1);
    assert_eq!(p.deletes[0].namespace, "old");
    assert_eq!(p.deletes[0].reason, RemovalReason::NotATarget);
}

#[test]
fn uncopiable_original_keeps_copies_but_writes_nothing() {
    let csv = succeeded("");
    let stale = original(Some(""), CsvPhase::Installing, CsvReason::InstallWaiting);
    let p = plan(&csv, false, &[record_in("a", &stale)], &["a", "b"], &CopySettings::default());
    assert!(p.is_empty());
}

#[test]
fn conflicting_or_missing_originals_lose_all_copies() {
    let csv = original(Some(""), CsvPhase::Failed, CsvReason::InterOperatorGroupOwnerConflict);
    let copies = [record_in("a", &csv), record_in("b", &csv)];
    let p = plan(&csv, true, &copies, &["a", "b", "c"], &CopySettings::default());
    assert!(p.writes.is_empty());
    assert!(p.deletes.iter().all(|d| d.reason == RemovalReason::OriginalInConflict));
    assert_eq!(p.deletes.len(), 2);

    let refs: Vec<&CopyRecord> = copies.iter().collect();
    let gone = plan_copies(None, &refs, ["a"], &CopySettings::default());
    assert_eq!(gone.deletes.len(), 2);
    assert!(gone.deletes.iter().all(|d| d.reason == RemovalReason::OriginalGone));
}

#[test]
fn copies_without_operator_namespace_are_removed() {
    let csv = succeeded("");
    let mut bare = record_in("a", &csv);
    bare.has_operator_namespace = false;
    let p = plan(&csv, true, &[bare], &["a"], &CopySettings::default());
    assert_eq!(p.deletes[0].reason, RemovalReason::NoOperatorNamespace);
    // and it is recreated in the same pass
    assert_eq!(created(&p), ["a"]);
}

#[test]
fn disabling_removes_all_namespace_copies_except_protected() {
    let settings = CopySettings {
        disabled: true,
        protected_namespaces: BTreeSet::from(["keep".to_string()]),
    };
    let csv = succeeded("");
    let copies = [record_in("a", &csv), record_in("keep", &csv)];
    let p = plan(&csv, true, &copies, &["a", "keep", "new"], &settings);
    assert_eq!(p.deletes.len(), 1);
    assert_eq!(p.deletes[0].namespace, "a");
    assert_eq!(p.deletes[0].reason, RemovalReason::CopiesDisabled);
    assert!(p.writes.is_empty());
    assert_eq!(p.up_to_date, 1);

    // Explicit-target groups are not affected by the switch.
    let explicit = succeeded("a");
    let p = plan(&explicit, true, &[], &["a"], &settings);
    assert_eq!(created(&p), ["a"]);
}

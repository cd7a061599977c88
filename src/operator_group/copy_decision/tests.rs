//! Table tests of the copy decision: what the stores hold → the copies to write and delete, the
//! RBAC step and the disabled-copies warning.

use super::*;
use crate::api::{OperatorGroupSpec, OperatorGroupStatus};
use crate::operator_group::copied_csv::{CopyDelete, CopyWrite, RemovalReason, copy_record};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use std::collections::BTreeSet;

fn og(targets: &[&str]) -> Arc<OperatorGroup> {
    let mut og = OperatorGroup::new("og", OperatorGroupSpec::default());
    og.metadata.namespace = Some("ops".into());
    let mut status = OperatorGroupStatus::new(Time(jiff::Timestamp::UNIX_EPOCH));
    status.namespaces = Some(targets.iter().map(|s| s.to_string()).collect());
    og.status = Some(status);
    Arc::new(og)
}

/// A Succeeded member of `og(targets)` whose annotation says `annotation`.
fn original(annotation: &str) -> ClusterServiceVersion {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {
            "name": "op.v1", "namespace": "ops", "uid": "orig-uid", "resourceVersion": "5",
            "annotations": {
                "olm.operatorNamespace": "ops", "olm.operatorGroup": "og",
                "olm.targetNamespaces": annotation,
            },
        },
        "spec": {"displayName": "Op", "install": {"strategy": "deployment"}},
        "status": {"phase": "Succeeded", "reason": "InstallSucceeded"},
    }))
    .unwrap()
}

fn namespaces(names: &[&str]) -> Vec<Arc<PartialObjectMeta<Namespace>>> {
    names
        .iter()
        .map(|name| {
            let mut ns = PartialObjectMeta::<Namespace>::default();
            ns.metadata.name = Some(name.to_string());
            Arc::new(ns)
        })
        .collect()
}

fn terminating(name: &str) -> Arc<PartialObjectMeta<Namespace>> {
    let mut ns = PartialObjectMeta::<Namespace>::default();
    ns.metadata.name = Some(name.to_owned());
    ns.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
    Arc::new(ns)
}

/// The up-to-date copy of `of` in `ns`.
fn copy_in(ns: &str, of: &ClusterServiceVersion) -> CopyRecord {
    let mut copy = copy_prototype(of);
    copy.metadata.namespace = Some(ns.into());
    copy.metadata.uid = Some(format!("uid-{ns}"));
    copy.metadata.resource_version = Some("7".into());
    copy_record(&copy).unwrap()
}

fn create(ns: &str) -> CopyWrite {
    CopyWrite::Create {
        namespace: ns.into(),
    }
}

fn delete(ns: &str, reason: RemovalReason) -> CopyDelete {
    CopyDelete {
        namespace: ns.into(),
        name: "op.v1".into(),
        uid: format!("uid-{ns}"),
        reason,
    }
}

struct Case {
    name: &'static str,
    original: Option<ClusterServiceVersion>,
    groups: Vec<Arc<OperatorGroup>>,
    copies: Vec<CopyRecord>,
    namespaces: Vec<Arc<PartialObjectMeta<Namespace>>>,
    settings: CopySettings,
    writes: Vec<CopyWrite>,
    deletes: Vec<CopyDelete>,
    member_rbac: bool,
    warning: Option<bool>,
}

#[test]
fn copy_decisions() {
    let global = original("");
    let named = original("ops,team-a,team-b");
    let narrowed = original("ops,team-a");
    let mut edited = global.clone();
    edited.spec.display_name = "Op, renamed".into();
    let disabled = CopySettings {
        disabled: true,
        protected_namespaces: BTreeSet::from(["team-b".to_owned()]),
    };
    let cases = vec![
        Case {
            name: "a new namespace gets its copy; home and up-to-date ones are left alone",
            original: Some(global.clone()),
            groups: vec![og(&[""])],
            copies: vec![copy_in("team-a", &global)],
            namespaces: namespaces(&["ops", "team-a", "team-b"]),
            settings: CopySettings::default(),
            writes: vec![create("team-b")],
            deletes: vec![],
            member_rbac: true,
            warning: Some(false),
        },
        Case {
            name: "a namespace being deleted gets no copy",
            original: Some(global.clone()),
            groups: vec![og(&[""])],
            copies: vec![],
            namespaces: [namespaces(&["ops", "team-a"]), vec![terminating("team-b")]].concat(),
            settings: CopySettings::default(),
            writes: vec![create("team-a")],
            deletes: vec![],
            member_rbac: true,
            warning: Some(false),
        },
        Case {
            name: "a namespace dropped from the targets loses its copy",
            original: Some(narrowed.clone()),
            groups: vec![og(&["ops", "team-a"])],
            copies: vec![copy_in("team-a", &narrowed), copy_in("team-b", &named)],
            namespaces: namespaces(&["ops", "team-a", "team-b"]),
            settings: CopySettings::default(),
            writes: vec![],
            deletes: vec![delete("team-b", RemovalReason::NotATarget)],
            member_rbac: true,
            warning: Some(false),
        },
        Case {
            name: "a changed original updates each copy's content",
            original: Some(edited.clone()),
            groups: vec![og(&[""])],
            copies: vec![copy_in("team-a", &global)],
            namespaces: namespaces(&["ops", "team-a"]),
            settings: CopySettings::default(),
            writes: vec![CopyWrite::Update {
                namespace: "team-a".into(),
                resource_version: "7".into(),
                content: true,
                status: false,
            }],
            deletes: vec![],
            member_rbac: true,
            warning: Some(false),
        },
        Case {
            name: "disabled copies go except in protected namespaces, with a warning",
            original: Some(global.clone()),
            groups: vec![og(&[""])],
            copies: vec![copy_in("team-a", &global), copy_in("team-b", &global)],
            namespaces: namespaces(&["ops", "team-a", "team-b", "team-c"]),
            settings: disabled.clone(),
            writes: vec![],
            deletes: vec![delete("team-a", RemovalReason::CopiesDisabled)],
            member_rbac: true,
            warning: Some(true),
        },
        Case {
            name: "disabling spares operators with named targets",
            original: Some(named.clone()),
            groups: vec![og(&["ops", "team-a", "team-b"])],
            copies: vec![copy_in("team-a", &named)],
            namespaces: namespaces(&["ops", "team-a", "team-b"]),
            settings: disabled.clone(),
            writes: vec![create("team-b")],
            deletes: vec![],
            member_rbac: true,
            warning: Some(false),
        },
        Case {
            name: "a CSV that is no member of its group's targets copies nothing",
            original: Some(global.clone()),
            groups: vec![og(&["ops"])],
            copies: vec![],
            namespaces: namespaces(&["ops", "team-a"]),
            settings: CopySettings::default(),
            writes: vec![],
            deletes: vec![],
            member_rbac: false,
            warning: Some(false),
        },
        Case {
            name: "two groups: nothing is copied and no RBAC is lifted",
            original: Some(global.clone()),
            groups: vec![og(&[""]), og(&[""])],
            copies: vec![],
            namespaces: namespaces(&["ops", "team-a"]),
            settings: CopySettings::default(),
            writes: vec![],
            deletes: vec![],
            member_rbac: false,
            warning: Some(false),
        },
        Case {
            name: "a gone original takes its copies with it",
            original: None,
            groups: vec![og(&[""])],
            copies: vec![copy_in("team-a", &global)],
            namespaces: namespaces(&["ops", "team-a"]),
            settings: CopySettings::default(),
            writes: vec![],
            deletes: vec![delete("team-a", RemovalReason::OriginalGone)],
            member_rbac: false,
            warning: None,
        },
    ];
    for case in cases {
        let decision = decide_copies(&CopyObserved {
            original: case.original.as_ref(),
            groups_in_namespace: &case.groups,
            copies: &case.copies,
            namespaces: &case.namespaces,
            settings: &case.settings,
        });
        let name = case.name;
        assert_eq!(decision.plan.writes, case.writes, "{name}: writes");
        assert_eq!(decision.plan.deletes, case.deletes, "{name}: deletes");
        assert_eq!(decision.member_rbac, case.member_rbac, "{name}: RBAC");
        assert_eq!(
            decision.copies_disabled_warning, case.warning,
            "{name}: warning"
        );
        assert_eq!(
            decision.desired,
            case.original
                .as_ref()
                .map(|o| copy_hashes(&copy_prototype(o))),
            "{name}: desired hashes"
        );
    }
}

#[test]
fn the_fan_out_deletes_first_then_writes_the_one_prototype() {
    let global = original("");
    let groups = vec![og(&[""])];
    let narrowed = original("ops,team-a");
    let narrowed_groups = vec![og(&["ops", "team-a"])];
    let nothing = decide_copies(&CopyObserved {
        original: Some(&global),
        groups_in_namespace: &groups,
        copies: &[copy_in("team-a", &global)],
        namespaces: &namespaces(&["ops", "team-a"]),
        settings: &CopySettings::default(),
    });
    assert_eq!(
        nothing.fan_out(),
        None,
        "copies up to date: nothing to write"
    );

    let decision = decide_copies(&CopyObserved {
        original: Some(&narrowed),
        groups_in_namespace: &narrowed_groups,
        copies: &[copy_in("team-b", &narrowed)],
        namespaces: &namespaces(&["ops", "team-a", "team-b"]),
        settings: &CopySettings::default(),
    });
    let fan_out = decision.fan_out().expect("a delete and a create");
    assert_eq!(fan_out.name, "op.v1");
    assert_eq!(fan_out.resource.kind, "ClusterServiceVersion");
    assert!(
        matches!(&fan_out.writes[..], [
            FanOutWrite::Delete { namespace: d, uid, .. },
            FanOutWrite::Create { namespace: c },
        ] if d == "team-b" && uid == "uid-team-b" && c == "team-a"),
        "{:?}",
        fan_out.writes
    );
    let prototype = fan_out.prototype.unwrap().to_json().unwrap();
    assert_eq!(prototype["metadata"]["namespace"], serde_json::Value::Null);
    assert_eq!(
        fan_out.status.unwrap().to_json().unwrap(),
        prototype["status"],
        "the status subresource is the prototype's status"
    );
}

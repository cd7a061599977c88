//! Table tests of the member RBAC decision: what the stores hold → where the CSV's Roles and
//! RoleBindings go, and the per-API roles.

use super::*;
use crate::operator_group::copied_csv::{copy_prototype, copy_record};
use k8s_openapi::api::rbac::v1::{PolicyRule, RoleRef};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

fn csv(targets: &str, phase: &str) -> ClusterServiceVersion {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {"name": "op.v1", "namespace": "ops", "uid": "csv-uid",
                     "annotations": {"olm.targetNamespaces": targets}},
        "spec": {"displayName": "Op", "install": {"strategy": "deployment"},
                 "customresourcedefinitions": {"owned": [
                     {"name": "demos.example.com", "kind": "Demo", "version": "v1"},
                     {"name": "others.example.com", "kind": "Other", "version": "v1"}]}},
        "status": {"phase": phase},
    }))
    .unwrap()
}

/// A Role (and its binding) of `owner_name` in `ops`, with an ownerReference to `owner_uid`
/// when given.
fn sources(owner_name: &str, owner_uid: Option<&str>) -> (Arc<Role>, Arc<RoleBinding>) {
    let owner = CsvOwner {
        namespace: "ops".into(),
        name: owner_name.into(),
        uid: owner_uid.unwrap_or("other").into(),
    };
    let meta = ObjectMeta {
        name: Some(format!("{owner_name}-role")),
        namespace: Some("ops".into()),
        labels: Some(owner.labels()),
        owner_references: owner_uid.map(|_| vec![owner.owner_reference()]),
        ..Default::default()
    };
    let role = Role {
        metadata: meta.clone(),
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["configmaps".into()]),
            verbs: vec!["get".into()],
            ..Default::default()
        }]),
    };
    let binding = RoleBinding {
        metadata: meta,
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "Role".into(),
            name: format!("{owner_name}-role"),
        },
        subjects: None,
    };
    (Arc::new(role), Arc::new(binding))
}

fn copy_in(ns: &str, uid: &str, of: &ClusterServiceVersion) -> CopyRecord {
    let mut copy = copy_prototype(of);
    copy.metadata.namespace = Some(ns.into());
    copy.metadata.uid = Some(uid.into());
    copy_record(&copy).unwrap()
}

fn decide(
    csv: &ClusterServiceVersion,
    owned: &[(Arc<Role>, Arc<RoleBinding>)],
    copies: &[CopyRecord],
    crds: &[&str],
) -> MemberRbac {
    let roles: Vec<_> = owned.iter().map(|(r, _)| r.clone()).collect();
    let bindings: Vec<_> = owned.iter().map(|(_, b)| b.clone()).collect();
    let crd_uid = |name: &str| crds.contains(&name).then(|| format!("uid-{name}"));
    let none = |_: &str| None;
    let no_role = |_: &str| None;
    decide_member_rbac(&MemberRbacObserved {
        csv,
        roles: &roles,
        bindings: &bindings,
        copies,
        crd_uid: &crd_uid,
        api_service_uid: &none,
        cluster_role: &no_role,
    })
}

fn applies_of(writes: &[Write]) -> Vec<String> {
    writes.iter().map(|w| w.key().to_string()).collect()
}

#[test]
fn member_rbac_decisions() {
    let global = csv("", "Installing");
    let named = csv("ops,team-a,team-b", "Installing");
    let own = csv("ops", "Succeeded");
    let mine = sources("op.v1", Some("csv-uid"));
    let labels_only = sources("op.v1", None);
    let foreign = sources("other.v1", Some("other-uid"));

    // All namespaces: the CSV's Roles and bindings by owner labels, lifted; others' ignored.
    let lifted = decide(&global, &[mine.clone(), foreign.clone()], &[], &[]);
    let MemberRbacScope::Lifted(writes) = &lifted.scope else {
        panic!("lifted: {:?}", lifted.scope);
    };
    assert_eq!(
        applies_of(writes),
        ["ClusterRole op.v1-role", "ClusterRoleBinding op.v1-role"]
    );
    assert_eq!(
        writes[0],
        Write::apply(lifted_cluster_role(&mine.0), Ownership::Force)
    );
    assert_eq!(lifted.api_roles, None, "not Succeeded: no per-API roles");
    let relabelled = decide(&global, std::slice::from_ref(&labels_only), &[], &[]);
    assert_eq!(
        relabelled.sources, lifted.sources,
        "lifting looks at labels only, so the sources are the same"
    );

    // Named targets: copied next to each copy that has a uid, only what the CSV owns by
    // ownerReference too.
    let copies = [
        copy_in("team-a", "copy-a", &named),
        copy_in("team-b", "", &named),
    ];
    let copied = decide(&named, &[mine.clone(), labels_only.clone()], &copies, &[]);
    let MemberRbacScope::Copied(per_copy) = &copied.scope else {
        panic!("copied: {:?}", copied.scope);
    };
    assert_eq!(per_copy.len(), 1, "the copy without a uid waits");
    let ((ns, uid), writes) = &per_copy[0];
    assert_eq!((ns.as_str(), uid.as_str()), ("team-a", "copy-a"));
    assert_eq!(
        applies_of(writes),
        ["Role team-a/op.v1-role", "RoleBinding team-a/op.v1-role"]
    );
    let changed = {
        let mut role = (*mine.0).clone();
        role.rules = None;
        decide(&named, &[(Arc::new(role), mine.1.clone())], &copies, &[])
    };
    assert_ne!(
        changed.sources, copied.sources,
        "a changed source is written again"
    );

    // Own namespace only: nothing outside it; Succeeded: the per-API roles of what exists.
    let own_ns = decide(
        &own,
        std::slice::from_ref(&mine),
        &[],
        &["demos.example.com"],
    );
    assert_eq!(own_ns.scope, MemberRbacScope::OwnNamespace);
    let api = own_ns.api_roles.expect("Succeeded");
    assert!(!api.complete, "others.example.com is not installed yet");
    assert!(
        applies_of(&api.writes)
            .iter()
            .all(|k| k.starts_with("ClusterRole demos.example.com-v1-")),
        "{:?}",
        applies_of(&api.writes)
    );
    assert_eq!(api.writes.len(), 4, "admin, edit, view, crdview");
    let all_there = decide(&own, &[], &[], &["demos.example.com", "others.example.com"])
        .api_roles
        .expect("Succeeded");
    assert!(all_there.complete);
    assert_eq!(all_there.writes.len(), 8);
    assert_eq!(all_there.hash, api.hash, "the hash is of the descriptions");
}

/// After a move from OLM: the per-API ClusterRoles OLM made (its owner references spell the
/// CRD's kind in lower case) are taken as they are; a role whose rules differ is rewritten.
#[test]
fn per_api_roles_olm_made_are_left_alone() {
    let own = csv("ops", "Succeeded");
    let wanted = decide(&own, &[], &[], &["demos.example.com"])
        .api_roles
        .expect("Succeeded");
    let as_olm_made: Vec<Arc<ClusterRole>> = wanted
        .writes
        .iter()
        .map(|w| {
            let Write::Apply { object, .. } = w else {
                panic!("an apply: {w:?}")
            };
            let mut role: ClusterRole = serde_json::from_value(object.to_json().unwrap()).unwrap();
            for owner in role.metadata.owner_references.iter_mut().flatten() {
                owner.kind = owner.kind.to_lowercase();
            }
            Arc::new(role)
        })
        .collect();
    let decide_with = |live: &[Arc<ClusterRole>]| {
        let crd_uid = |name: &str| (name == "demos.example.com").then(|| format!("uid-{name}"));
        let none = |_: &str| None;
        let cluster_role = |name: &str| {
            live.iter()
                .find(|r| r.metadata.name.as_deref() == Some(name))
                .cloned()
        };
        decide_member_rbac(&MemberRbacObserved {
            csv: &own,
            roles: &[],
            bindings: &[],
            copies: &[],
            crd_uid: &crd_uid,
            api_service_uid: &none,
            cluster_role: &cluster_role,
        })
        .api_roles
        .expect("Succeeded")
    };
    assert_eq!(decide_with(&as_olm_made).writes, Vec::<Write>::new());

    let mut changed = as_olm_made.clone();
    let mut role = (*changed[0]).clone();
    role.rules.as_mut().unwrap()[0].verbs = vec!["get".into()];
    changed[0] = Arc::new(role);
    assert_eq!(decide_with(&changed).writes.len(), 1);
}

use k8s_openapi::api::rbac::v1::AggregationRule;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use super::*;

fn rule(verbs: &[&str], groups: &[&str], resources: &[&str], names: &[&str]) -> PolicyRule {
    let list =
        |items: &[&str]| (!items.is_empty()).then(|| items.iter().map(|s| s.to_string()).collect());
    PolicyRule {
        verbs: verbs.iter().map(|s| s.to_string()).collect(),
        api_groups: list(groups),
        resources: list(resources),
        resource_names: list(names),
        non_resource_urls: None,
    }
}

fn url_rule(verbs: &[&str], urls: &[&str]) -> PolicyRule {
    PolicyRule {
        verbs: verbs.iter().map(|s| s.to_string()).collect(),
        non_resource_urls: Some(urls.iter().map(|s| s.to_string()).collect()),
        ..Default::default()
    }
}

fn meta(ns: Option<&str>, name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: ns.map(Into::into),
        ..Default::default()
    }
}

fn role(ns: &str, name: &str, rules: Vec<PolicyRule>) -> Role {
    Role {
        metadata: meta(Some(ns), name),
        rules: Some(rules),
    }
}

fn cluster_role(name: &str, rules: Vec<PolicyRule>) -> ClusterRole {
    ClusterRole {
        metadata: meta(None, name),
        rules: Some(rules),
        aggregation_rule: None,
    }
}

fn sa_subject(ns: Option<&str>, name: &str) -> Subject {
    Subject {
        kind: "ServiceAccount".into(),
        name: name.into(),
        namespace: ns.map(Into::into),
        api_group: None,
    }
}

fn role_ref(kind: &str, name: &str) -> RoleRef {
    RoleRef {
        api_group: RBAC_GROUP.into(),
        kind: kind.into(),
        name: name.into(),
    }
}

fn binding(ns: &str, name: &str, to: RoleRef, subjects: Vec<Subject>) -> RoleBinding {
    RoleBinding {
        metadata: meta(Some(ns), name),
        role_ref: to,
        subjects: Some(subjects),
    }
}

fn cluster_binding(name: &str, to: &str, subjects: Vec<Subject>) -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: meta(None, name),
        role_ref: role_ref("ClusterRole", to),
        subjects: Some(subjects),
    }
}

fn sa() -> ServiceAccountUser {
    ServiceAccountUser::new("demo", "op")
}

/// One Role bound to the SA in `demo` granting `granted`; is `wanted` satisfied?
fn namespaced(granted: PolicyRule, wanted: &PolicyRule) -> Option<Request> {
    let roles = [role("demo", "r", vec![granted])];
    let bindings = [binding(
        "demo",
        "rb",
        role_ref("Role", "r"),
        vec![sa_subject(Some("demo"), "op")],
    )];
    let index = RbacIndex::new(&roles, &bindings, [], []);
    index
        .grants_for(&sa(), Scope::Namespace("demo"))
        .first_denied(wanted)
}

#[test]
fn resource_rule_matching_follows_the_api_server() {
    let pods_get = rule(&["get"], &[""], &["pods"], &[]);
    // (granted, wanted, satisfied)
    let cases = [
        (
            rule(&["get"], &[""], &["pods"], &[]),
            pods_get.clone(),
            true,
        ),
        (rule(&["*"], &["*"], &["*"], &[]), pods_get.clone(), true),
        (
            rule(&["list"], &[""], &["pods"], &[]),
            pods_get.clone(),
            false,
        ),
        (
            rule(&["get"], &["apps"], &["pods"], &[]),
            pods_get.clone(),
            false,
        ),
        // A grant limited to names does not cover "any name".
        (
            rule(&["get"], &[""], &["pods"], &["p1"]),
            pods_get.clone(),
            false,
        ),
        (
            rule(&["get"], &[""], &["pods"], &["p1", "p2"]),
            rule(&["get"], &[""], &["pods"], &["p2"]),
            true,
        ),
        // Subresources: exact, `*/sub`, and `*`; `pods` alone does not cover `pods/log`.
        (
            rule(&["get"], &[""], &["pods/log"], &[]),
            rule(&["get"], &[""], &["pods/log"], &[]),
            true,
        ),
        (
            rule(&["get"], &[""], &["*/log"], &[]),
            rule(&["get"], &[""], &["pods/log"], &[]),
            true,
        ),
        (
            rule(&["get"], &[""], &["pods"], &[]),
            rule(&["get"], &[""], &["pods/log"], &[]),
            false,
        ),
        (
            rule(&["get"], &[""], &["*/log"], &[]),
            rule(&["get"], &[""], &["pods"], &[]),
            false,
        ),
        // Wildcards in the wanted rule are literal: they need a wildcard grant.
        (
            rule(&["get", "list"], &[""], &["pods"], &[]),
            rule(&["*"], &[""], &["pods"], &[]),
            false,
        ),
        // No apiGroups in the wanted rule means the core group.
        (
            rule(&["get"], &[""], &["configmaps"], &[]),
            rule(&["get"], &[], &["configmaps"], &[]),
            true,
        ),
    ];
    for (i, (granted, wanted, satisfied)) in cases.into_iter().enumerate() {
        assert_eq!(
            namespaced(granted, &wanted).is_none(),
            satisfied,
            "case {i}: {wanted:?}"
        );
    }
}

#[test]
fn the_first_denied_request_names_what_is_missing() {
    let denied = namespaced(
        rule(&["get", "list"], &["apps"], &["deployments"], &[]),
        &rule(&["get", "list", "watch"], &["apps"], &["deployments"], &[]),
    )
    .unwrap();
    assert_eq!(
        denied.to_string(),
        "cannot watch resource \"deployments\" in API group \"apps\""
    );
}

#[test]
fn non_resource_urls_need_a_cluster_role_binding() {
    let wanted = url_rule(&["get"], &["/metrics"]);
    let cluster_roles = [cluster_role(
        "metrics",
        vec![url_rule(&["get"], &["/metr*"])],
    )];
    let via_rb = [binding(
        "demo",
        "rb",
        role_ref("ClusterRole", "metrics"),
        vec![sa_subject(None, "op")],
    )];
    let index = RbacIndex::new([], &via_rb, &cluster_roles, []);
    assert!(
        index
            .grants_for(&sa(), Scope::Namespace("demo"))
            .first_denied(&wanted)
            .is_some()
    );

    let via_crb = [cluster_binding(
        "crb",
        "metrics",
        vec![sa_subject(Some("demo"), "op")],
    )];
    let index = RbacIndex::new([], [], &cluster_roles, &via_crb);
    assert_eq!(
        index
            .grants_for(&sa(), Scope::Cluster)
            .first_denied(&wanted),
        None
    );
    assert!(
        index
            .grants_for(&sa(), Scope::Cluster)
            .first_denied(&url_rule(&["get"], &["/healthz"]))
            .is_some()
    );
}

#[test]
fn role_bindings_do_not_count_cluster_wide_and_cluster_roles_work_through_them() {
    let wanted = rule(&["get"], &[""], &["secrets"], &[]);
    let cluster_roles = [cluster_role("reader", vec![wanted.clone()])];
    let bindings = [binding(
        "demo",
        "rb",
        role_ref("ClusterRole", "reader"),
        vec![sa_subject(None, "op")],
    )];
    let index = RbacIndex::new([], &bindings, &cluster_roles, []);
    assert_eq!(
        index
            .grants_for(&sa(), Scope::Namespace("demo"))
            .first_denied(&wanted),
        None
    );
    assert!(
        index
            .grants_for(&sa(), Scope::Cluster)
            .first_denied(&wanted)
            .is_some()
    );
    // Another namespace's binding grants nothing here.
    assert!(
        index
            .grants_for(&sa(), Scope::Namespace("other"))
            .first_denied(&wanted)
            .is_some()
    );
}

#[test]
fn subjects_match_by_service_account_user_name_and_groups() {
    let wanted = rule(&["get"], &[""], &["pods"], &[]);
    let cluster_roles = [cluster_role("reader", vec![wanted.clone()])];
    let subjects = [
        (sa_subject(Some("demo"), "op"), true),
        (sa_subject(Some("other"), "op"), false),
        (sa_subject(Some("demo"), "someone-else"), false),
        (
            Subject {
                kind: "User".into(),
                name: "system:serviceaccount:demo:op".into(),
                ..Default::default()
            },
            true,
        ),
        (
            Subject {
                kind: "Group".into(),
                name: "system:serviceaccounts:demo".into(),
                ..Default::default()
            },
            true,
        ),
        (
            Subject {
                kind: "Group".into(),
                name: "system:serviceaccounts:other".into(),
                ..Default::default()
            },
            false,
        ),
    ];
    for (subject, allowed) in subjects {
        let crbs = [cluster_binding("crb", "reader", vec![subject.clone()])];
        let index = RbacIndex::new([], [], &cluster_roles, &crbs);
        assert_eq!(
            index
                .grants_for(&sa(), Scope::Cluster)
                .first_denied(&wanted)
                .is_none(),
            allowed,
            "{subject:?}"
        );
    }
}

#[test]
fn aggregated_cluster_roles_include_the_selected_roles_rules() {
    let wanted = rule(&["list"], &["example.com"], &["demos"], &[]);
    let mut part = cluster_role("demos-view", vec![wanted.clone()]);
    part.metadata.labels = Some([("aggregate-to-x".to_string(), "true".to_string())].into());
    let aggregate = ClusterRole {
        metadata: meta(None, "x"),
        rules: None,
        aggregation_rule: Some(AggregationRule {
            cluster_role_selectors: Some(vec![LabelSelector {
                match_labels: Some([("aggregate-to-x".to_string(), "true".to_string())].into()),
                ..Default::default()
            }]),
        }),
    };
    let roles = [part, aggregate];
    let crbs = [cluster_binding(
        "crb",
        "x",
        vec![sa_subject(Some("demo"), "op")],
    )];
    let index = RbacIndex::new([], [], &roles, &crbs);
    assert_eq!(
        index
            .grants_for(&sa(), Scope::Cluster)
            .first_denied(&wanted),
        None
    );
}

#[test]
fn a_missing_role_grants_nothing() {
    let bindings = [binding(
        "demo",
        "rb",
        role_ref("Role", "gone"),
        vec![sa_subject(None, "op")],
    )];
    let index = RbacIndex::new([], &bindings, [], []);
    assert!(
        index
            .grants_for(&sa(), Scope::Namespace("demo"))
            .first_denied(&rule(&["get"], &[""], &["pods"], &[]))
            .is_some()
    );
}

#[test]
fn requests_expand_the_cross_product_once() {
    let reqs = requests_for(&rule(
        &["get", "list", "get"],
        &["", "apps"],
        &["pods"],
        &[],
    ));
    assert_eq!(reqs.len(), 4);
    let urls = requests_for(&url_rule(&["get"], &["/a", "/b"]));
    assert_eq!(
        urls,
        vec![
            Request::NonResource {
                verb: "get".into(),
                path: "/a".into()
            },
            Request::NonResource {
                verb: "get".into(),
                path: "/b".into()
            },
        ]
    );
}

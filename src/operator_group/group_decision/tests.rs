//! Table tests of the group sync decision: each case is what the stores hold and the effects
//! (writes, events, requeue) and problem the decision must return.

use super::*;
use crate::api::keys::TARGET_NAMESPACES_ANNOTATION;
use crate::api::{ConditionStatus, OperatorGroupStatus, meta_condition};
use crate::k8s::effects::EventOn;
use k8s_openapi::api::rbac::v1::AggregationRule;

fn now() -> Time {
    Time(jiff::Timestamp::from_second(1_000).unwrap())
}

fn earlier() -> Time {
    Time(jiff::Timestamp::from_second(10).unwrap())
}

fn group(spec: serde_json::Value) -> OperatorGroup {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "operators.coreos.com/v1",
        "kind": "OperatorGroup",
        "metadata": {"name": "og", "namespace": "ops", "uid": "og-uid", "resourceVersion": "10"},
        "spec": spec,
    }))
    .unwrap()
}

/// `group` as a previous sync left it: its status says `targets`, written at `earlier()`.
fn settled(mut og: OperatorGroup, targets: &[&str]) -> OperatorGroup {
    let mut status = OperatorGroupStatus::new(earlier());
    status.namespaces = Some(targets.iter().map(|t| t.to_string()).collect());
    og.status = Some(status);
    og
}

fn namespace(name: &str, labels: &[(&str, &str)]) -> Arc<PartialObjectMeta<Namespace>> {
    let mut ns = PartialObjectMeta::<Namespace>::default();
    ns.metadata.name = Some(name.to_owned());
    ns.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    Arc::new(ns)
}

fn account(managed: bool) -> ServiceAccountSeen {
    ServiceAccountSeen {
        namespace: "ops".into(),
        name: "scoped".into(),
        uid: "sa-uid".into(),
        resource_version: "3".into(),
        managed,
    }
}

/// A CSV in `ops` at resourceVersion 7 owning the CRD `demos.example.com` when `owns_crd`.
fn member(annotations: &[(&str, &str)], phase: &str, owns_crd: bool) -> Arc<ClusterServiceVersion> {
    let owned = if owns_crd {
        serde_json::json!([{"name": "demos.example.com", "kind": "Demo", "version": "v1"}])
    } else {
        serde_json::json!([])
    };
    let annotations: serde_json::Map<String, serde_json::Value> = annotations
        .iter()
        .map(|(k, v)| (k.to_string(), serde_json::Value::from(*v)))
        .collect();
    Arc::new(
        serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "ClusterServiceVersion",
            "metadata": {"name": "demo.v1", "namespace": "ops", "resourceVersion": "7",
                         "annotations": annotations},
            "spec": {"displayName": "Demo", "install": {"strategy": "deployment"},
                     "customresourcedefinitions": {"owned": owned}},
            "status": {"phase": phase},
        }))
        .unwrap(),
    )
}

fn annotated(targets: &str) -> Vec<(&'static str, String)> {
    vec![
        ("olm.operatorNamespace", "ops".into()),
        ("olm.operatorGroup", "og".into()),
        (TARGET_NAMESPACES_ANNOTATION, targets.into()),
    ]
}

fn status_write(og: &OperatorGroup, targets: Option<&[&str]>, last_updated: Time) -> Write {
    let mut status = OperatorGroupStatus::new(last_updated);
    status.namespaces = targets.map(|t| t.iter().map(|s| s.to_string()).collect());
    Write::status(og, status).unwrap()
}

fn annotate(targets: &str) -> Write {
    Write::MergePatch {
        key: ObjectKey::new::<ClusterServiceVersion>(Some("ops"), "demo.v1"),
        patch: Body::new(serde_json::json!({"metadata": {"annotations": {
            "olm.operatorNamespace": "ops",
            "olm.operatorGroup": "og",
            "olm.targetNamespaces": targets,
        }}})),
        resource_version: Some("7".into()),
    }
}

fn role_applies(apis: &str) -> Vec<Write> {
    operator_group_cluster_roles("ops", "og", &parse_provided_apis(apis))
        .into_iter()
        .map(|r| Write::apply(r, Ownership::Force))
        .collect()
}

fn existing_roles(apis: &str) -> Vec<Arc<ClusterRole>> {
    operator_group_cluster_roles("ops", "og", &parse_provided_apis(apis))
        .into_iter()
        .map(Arc::new)
        .collect()
}

/// What a case observes besides the group.
struct World {
    groups: Vec<String>,
    namespaces: Vec<Arc<PartialObjectMeta<Namespace>>>,
    account: Option<ServiceAccountSeen>,
    csvs: Vec<Arc<ClusterServiceVersion>>,
    roles: Vec<Arc<ClusterRole>>,
}

impl Default for World {
    fn default() -> Self {
        Self {
            groups: vec!["og".into()],
            namespaces: vec![
                namespace("ops", &[]),
                namespace("team-a", &[("team", "a")]),
                namespace("team-b", &[("team", "b")]),
            ],
            account: None,
            csvs: vec![],
            roles: existing_roles(""),
        }
    }
}

fn decide(og: &OperatorGroup, world: &World) -> GroupDecision {
    let now = now();
    decide_group_sync(&GroupObserved {
        group: og,
        groups_in_namespace: &world.groups,
        namespaces: &world.namespaces,
        service_account: world.account.as_ref(),
        csvs: &world.csvs,
        roles: &world.roles,
        now: &now,
    })
}

fn effects(writes: Vec<Write>) -> Effects {
    Effects {
        writes,
        ..Effects::default()
    }
}

fn ok(effects: Effects) -> GroupDecision {
    GroupDecision {
        effects,
        problem: None,
    }
}

#[test]
fn group_sync_decisions() {
    let all = group(serde_json::json!({}));
    let explicit = group(serde_json::json!({"targetNamespaces": ["team-b", "team-a"]}));
    let selector = group(serde_json::json!({"selector": {"matchLabels": {"team": "a"}}}));
    let bad_targets = group(serde_json::json!({"targetNamespaces": ["team-a", ""]}));
    let with_account = group(serde_json::json!({"serviceAccountName": "scoped"}));
    let labelled = account(true);
    let mut pruned_group = settled(all.clone(), &[""]);
    pruned_group.metadata.annotations = Some(BTreeMap::from([(
        PROVIDED_APIS_ANNOTATION.to_owned(),
        "Demo.v1.example.com,Gone.v1.example.com".to_owned(),
    )]));
    let mut static_group = pruned_group.clone();
    static_group.spec.static_provided_apis = Some(true);
    let mut fresh_pruned = pruned_group.clone();
    fresh_pruned.status = None;
    let two_groups = || World {
        groups: vec!["og".into(), "other".into()],
        csvs: vec![member(&[], "Succeeded", false)],
        ..World::default()
    };
    let one_member = |phase| World {
        csvs: vec![member(
            &annotated("")
                .iter()
                .map(|(k, v)| (*k, v.as_str()))
                .collect::<Vec<_>>(),
            phase,
            true,
        )],
        roles: existing_roles("Demo.v1.example.com"),
        ..World::default()
    };

    let cases: Vec<(&str, OperatorGroup, World, GroupDecision)> = vec![
        (
            "all namespaces: status, member annotations and the three roles",
            all.clone(),
            World {
                csvs: vec![member(&[], "Succeeded", false)],
                roles: vec![],
                ..World::default()
            },
            ok(effects(
                [
                    vec![status_write(&all, Some(&[""]), now()), annotate("")],
                    role_applies(""),
                ]
                .concat(),
            )),
        ),
        (
            "explicit targets are written sorted and annotate in that order",
            explicit.clone(),
            World {
                csvs: vec![member(&[], "Succeeded", false)],
                ..World::default()
            },
            ok(effects(vec![
                status_write(&explicit, Some(&["team-a", "team-b"]), now()),
                annotate("team-a,team-b"),
            ])),
        ),
        (
            "a selector picks the labelled namespaces",
            selector.clone(),
            World::default(),
            ok(effects(vec![status_write(
                &selector,
                Some(&["team-a"]),
                now(),
            )])),
        ),
        (
            "a settled group with annotated members and matching roles does nothing",
            settled(all.clone(), &[""]),
            World {
                csvs: vec![member(
                    &[
                        ("olm.operatorNamespace", "ops"),
                        ("olm.operatorGroup", "og"),
                        (TARGET_NAMESPACES_ANNOTATION, ""),
                    ],
                    "Succeeded",
                    false,
                )],
                ..World::default()
            },
            ok(Effects::default()),
        ),
        (
            "targets that cannot be computed: status, a Warning event, nothing else",
            bad_targets.clone(),
            World {
                csvs: vec![member(&[], "Succeeded", false)],
                roles: vec![],
                ..World::default()
            },
            GroupDecision {
                effects: Effects {
                    writes: vec![status_write(&bad_targets, None, now())],
                    events: vec![EventOn {
                        regarding: crate::k8s::effects::reference_of(&bad_targets),
                        event: ObjectEvent::warning(
                            INVALID_TARGETS_EVENT,
                            TargetError::NamespaceAllInTargets(vec![
                                "team-a".into(),
                                String::new(),
                            ])
                            .to_string(),
                        ),
                    }],
                    requeue: None,
                },
                problem: Some(GroupProblem::Targets(TargetError::NamespaceAllInTargets(
                    vec!["team-a".into(), String::new()],
                ))),
            },
        ),
        (
            "a missing service account is a condition; targets and roles go on",
            with_account.clone(),
            World::default(),
            GroupDecision {
                effects: effects(vec![{
                    let mut status = OperatorGroupStatus::new(now());
                    status.namespaces = Some(vec![String::new()]);
                    status.conditions = Some(vec![meta_condition(
                        "OperatorGroupServiceAccount",
                        ConditionStatus::True,
                        "ServiceAccountNotFound",
                        "ServiceAccount scoped not found",
                        None,
                        &now(),
                    )]);
                    Write::status(&with_account, status).unwrap()
                }]),
                problem: Some(GroupProblem::ServiceAccountMissing("scoped".into())),
            },
        ),
        (
            "an unlabelled service account is labelled first, the status waits for it",
            with_account.clone(),
            World {
                account: Some(account(false)),
                ..World::default()
            },
            ok(Effects {
                writes: vec![Write::MergePatch {
                    key: ObjectKey::new::<ServiceAccount>(Some("ops"), "scoped"),
                    patch: Body::new(
                        serde_json::json!({"metadata": {"labels": {"olm.managed": "true"}}}),
                    ),
                    resource_version: None,
                }],
                requeue: Some(LOOK_AGAIN),
                ..Effects::default()
            }),
        ),
        (
            "a labelled service account is recorded by reference",
            with_account.clone(),
            World {
                account: Some(labelled.clone()),
                ..World::default()
            },
            ok(effects(vec![{
                let mut status = OperatorGroupStatus::new(now());
                status.namespaces = Some(vec![String::new()]);
                status.service_account_ref = Some(ObjectReference {
                    kind: Some("ServiceAccount".into()),
                    api_version: Some("v1".into()),
                    namespace: Some("ops".into()),
                    name: Some("scoped".into()),
                    uid: Some("sa-uid".into()),
                    resource_version: Some("3".into()),
                    ..Default::default()
                });
                Write::status(&with_account, status).unwrap()
            }])),
        ),
        (
            "two groups in a namespace: the condition, no member annotations",
            all.clone(),
            two_groups(),
            ok(effects(vec![{
                let mut status = OperatorGroupStatus::new(now());
                status.namespaces = Some(vec![String::new()]);
                status.conditions = Some(vec![meta_condition(
                    "MultipleOperatorGroup",
                    ConditionStatus::True,
                    "MultipleOperatorGroupsFound",
                    "Multiple OperatorGroup found in the same namespace: og, other",
                    None,
                    &now(),
                )]);
                Write::status(&all, status).unwrap()
            }])),
        ),
        (
            "a member's API aggregates into the roles",
            settled(all.clone(), &[""]),
            World {
                csvs: vec![member(&[], "Succeeded", true)],
                ..World::default()
            },
            ok(effects(
                [vec![annotate("")], role_applies("Demo.v1.example.com")].concat(),
            )),
        ),
        (
            "roles without APIs lose the aggregation rule an earlier manager set",
            settled(all.clone(), &[""]),
            World {
                roles: existing_roles("Old.v1.example.com"),
                ..World::default()
            },
            ok(effects(
                role_applies("")
                    .into_iter()
                    .flat_map(|apply| {
                        let key = apply.key().clone();
                        [
                            apply,
                            Write::MergePatch {
                                key,
                                patch: Body::new(serde_json::json!({"aggregationRule": null})),
                                resource_version: None,
                            },
                        ]
                    })
                    .collect(),
            )),
        ),
        (
            "an API no member provides is pruned from olm.providedAPIs, guarded",
            pruned_group.clone(),
            one_member("Succeeded"),
            ok(effects(
                [
                    role_applies("Demo.v1.example.com,Gone.v1.example.com"),
                    vec![Write::MergePatch {
                        key: ObjectKey::new::<OperatorGroup>(Some("ops"), "og"),
                        patch: Body::new(serde_json::json!({"metadata": {"annotations": {
                            "olm.providedAPIs": "Demo.v1.example.com"
                        }}})),
                        resource_version: Some("10".into()),
                    }],
                ]
                .concat(),
            )),
        ),
        (
            "a static group keeps its provided APIs",
            static_group.clone(),
            one_member("Succeeded"),
            ok(effects(role_applies(
                "Demo.v1.example.com,Gone.v1.example.com",
            ))),
        ),
        (
            "a pending provider holds the prune back",
            pruned_group.clone(),
            World {
                csvs: vec![{
                    let mut csv = (*member(&[], "Pending", true)).clone();
                    csv.spec.custom_resource_definitions = serde_json::from_value(serde_json::json!(
                        {"owned": [{"name": "news.example.com", "kind": "New", "version": "v1"}]}
                    ))
                    .unwrap();
                    csv.metadata.annotations = Some(
                        annotated("")
                            .into_iter()
                            .map(|(k, v)| (k.to_owned(), v))
                            .collect(),
                    );
                    Arc::new(csv)
                }],
                ..World::default()
            },
            ok(effects(role_applies(
                "Demo.v1.example.com,Gone.v1.example.com,New.v1.example.com",
            ))),
        ),
        (
            "after a status write the prune waits for the next sync",
            fresh_pruned.clone(),
            one_member("Succeeded"),
            ok(Effects {
                writes: [
                    vec![status_write(&fresh_pruned, Some(&[""]), now())],
                    role_applies("Demo.v1.example.com,Gone.v1.example.com"),
                ]
                .concat(),
                requeue: Some(LOOK_AGAIN),
                ..Effects::default()
            }),
        ),
    ];
    for (name, og, world, want) in cases {
        assert_eq!(decide(&og, &world), want, "{name}");
    }
}

#[test]
fn a_deleted_group_loses_only_its_own_roles_as_observed() {
    let mine: Vec<Arc<ClusterRole>> = existing_roles("")
        .into_iter()
        .enumerate()
        .map(|(i, role)| {
            let mut role = (*role).clone();
            role.metadata.resource_version = Some(format!("{}", 20 + i));
            role.aggregation_rule = Some(AggregationRule::default());
            Arc::new(role)
        })
        .collect();
    let mut foreign = (*mine[0]).clone();
    foreign.metadata.name = Some("olm.og.other.admin-x".into());
    foreign
        .metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert("olm.owner".into(), "other".into());
    let roles: Vec<Arc<ClusterRole>> = mine.iter().cloned().chain([Arc::new(foreign)]).collect();
    type Case<'a> = (&'a str, &'a [Arc<ClusterRole>], Vec<Write>);
    let cases: Vec<Case> = vec![
        (
            "owned roles are deleted at the version seen, others stay",
            &roles,
            mine.iter()
                .map(|r| Write::delete_observed(r.as_ref()))
                .collect(),
        ),
        ("nothing owned, nothing to do", &roles[3..], vec![]),
    ];
    for (name, roles, writes) in cases {
        assert_eq!(
            decide_deleted_group("ops", "og", roles),
            effects(writes),
            "{name}"
        );
    }
    assert!(
        mine.iter().all(|r| r
            .metadata
            .name
            .as_ref()
            .is_some_and(|n| n.starts_with("olm.og.og."))),
        "the names are the group's own"
    );
    assert_eq!(
        group_role_names("ops", "og").to_vec(),
        mine.iter()
            .map(|r| r.metadata.name.clone().unwrap_or_default())
            .collect::<Vec<_>>()
    );
}

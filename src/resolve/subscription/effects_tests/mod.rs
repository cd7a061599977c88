//! `decide_effects` as a table: an observed namespace in, the writes, events and requeue out.
//! A tiny in-memory "server" applies the writes the way the API server would (versions bump,
//! creates get a uid), so a case can start from the state earlier decisions left.

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;

use super::*;
use crate::api::CatalogRef;
use crate::api::{Approval, InstallPlanPhase, InstallPlanStatus};
use crate::k8s::write::DeleteOptions;
use crate::plan::{RESOLUTION_LABEL, install_plan_name};
use crate::resolve::NamespaceInput;
use crate::resolve::input::{CatalogContent, CatalogInput, InstalledCsv, OperatorGroups};
use crate::resolve::subscription::RollbackInput;
use crate::resolve::subscription::tests::{catalog, installed_csv, sub};

const NS_UID: &str = "ns-uid";

mod cluster;
use cluster::Cluster;

/// One line per write: `verb Kind ns/name [@version]`.
fn writes(effects: &Effects) -> Vec<String> {
    effects
        .writes
        .iter()
        .map(|w| match w {
            Write::Status {
                key,
                resource_version,
                ..
            } => format!("status {key} @{resource_version}"),
            Write::StatusAfter { key, .. } => format!("status {key} @answered"),
            Write::Create { key, .. } | Write::CreateIfAbsent { key, .. } => {
                format!("create {key}")
            }
            Write::Delete {
                key,
                options: DeleteOptions {
                    resource_version, ..
                },
            } => match resource_version {
                Some(rv) => format!("delete {key} @{rv}"),
                None => format!("delete {key}"),
            },
            Write::Apply { key, .. } => format!("apply {key}"),
            Write::MergePatch { key, .. } => format!("patch {key}"),
        })
        .collect()
}

/// One line per event: `Type Reason on Kind/name`.
fn events(effects: &Effects) -> Vec<String> {
    effects
        .events
        .iter()
        .map(|e| {
            format!(
                "{:?} {} on {}/{}",
                e.event.type_,
                e.event.reason,
                e.regarding.kind.as_deref().unwrap_or_default(),
                e.regarding.name.as_deref().unwrap_or_default()
            )
        })
        .collect()
}

fn key_of(decision: &NamespaceDecision) -> String {
    match &decision.subscriptions[0].plan {
        Some(PlanChoice::Create(name)) => name.clone(),
        other => panic!("a plan is created: {other:?}"),
    }
}

/// Decides and applies until nothing is left to do; returns the plans created, in order.
fn settle(cluster: &mut Cluster) -> Vec<String> {
    let mut created = Vec::new();
    for _ in 0..10 {
        let decision = cluster.decide();
        if decision
            .subscriptions
            .iter()
            .all(|s| s.effects.writes.is_empty())
            && decision.garbage.writes.is_empty()
        {
            return created;
        }
        if let Some(PlanChoice::Create(name)) = &decision.subscriptions[0].plan {
            created.push(name.clone());
        }
        cluster.apply(&decision);
    }
    panic!("the decisions did not settle");
}

/// Completes plan `name` and installs its CSV.
fn complete(cluster: &mut Cluster, name: &str, csv: &str, version: &str) {
    let plan = cluster
        .plans
        .iter_mut()
        .find(|p| p.metadata.name.as_deref() == Some(name))
        .unwrap();
    plan.status.as_mut().unwrap().phase = InstallPlanPhase::Complete;
    cluster.installed.push(installed_csv(csv, version));
}

struct Case {
    name: &'static str,
    /// The namespace before the decision.
    given: fn() -> Cluster,
    /// Writes of the first Subscription's effects (`{plan}` is the name of the plan it creates).
    writes: &'static [&'static str],
    events: &'static [&'static str],
    garbage: &'static [&'static str],
    requeue: Option<Duration>,
}

fn fresh() -> Cluster {
    Cluster::new(vec![sub("etcd", None, Some("etcd.v1"))])
}

fn fresh_manual() -> Cluster {
    Cluster::new(vec![sub("etcd", Some(Approval::Manual), Some("etcd.v1"))])
}

/// etcd.v1 installed from its plan; the decision after sees the upgrade.
fn installed_v1() -> Cluster {
    let mut c = fresh();
    let created = settle(&mut c);
    complete(&mut c, &created[0], "etcd.v1", "1.0.0");
    c
}

/// Manual: the first plan for etcd.v1 waits for approval.
fn manual_waiting() -> Cluster {
    let mut c = fresh_manual();
    settle(&mut c);
    c
}

/// The waiting Manual plan, and the Subscription switched to Automatic since.
fn manual_switched_to_automatic() -> Cluster {
    let mut c = manual_waiting();
    c.subs[0].spec.install_plan_approval = Some(Approval::Automatic);
    c
}

/// A plan created before a crash, which cut the sync short right after the create: the
/// Subscription never recorded it, its status is lost.
fn crashed_after_create() -> Cluster {
    let mut c = fresh();
    let decision = c.decide();
    for write in &decision.subscriptions[0].effects.writes {
        assert!(c.perform(write), "refused: {write:?}");
        if let Write::Create { .. } = write {
            break;
        }
    }
    assert!(c.plans[0].status.is_none());
    c
}

fn catalog_unreadable() -> Cluster {
    let mut c = fresh();
    c.catalog_readable = false;
    c
}

/// At the head (etcd.v3 installed hop by hop, three plans), plus seven old plans of an older
/// controller (no generation) nobody references.
fn old_plans() -> Cluster {
    let mut c = at_head();
    for i in 0..7 {
        let mut plan = InstallPlan::new(
            &format!("install-old{i}"),
            crate::api::InstallPlanSpec {
                source: None,
                source_namespace: None,
                cluster_service_version_names: vec!["x".into()],
                approval: Approval::Automatic,
                approved: true,
                generation: None,
            },
        );
        plan.metadata.namespace = Some("ns".into());
        plan.metadata.resource_version = Some(c.bump());
        plan.status = Some(InstallPlanStatus {
            phase: InstallPlanPhase::Complete,
            ..InstallPlanStatus::default()
        });
        c.plans.push(plan);
    }
    c
}

/// etcd.v1, then v2, then v3 installed, each from its plan.
fn at_head() -> Cluster {
    let mut c = installed_v1();
    for (csv, version) in [("etcd.v2", "2.0.0"), ("etcd.v3", "3.0.0")] {
        let created = settle(&mut c);
        assert_eq!(created.len(), 1);
        complete(&mut c, &created[0], csv, version);
    }
    assert!(settle(&mut c).is_empty());
    assert_eq!(c.status().installed_csv.as_deref(), Some("etcd.v3"));
    c
}

#[test]
fn decisions_table() {
    let cases = [
        Case {
            name: "fresh install: the status (the fence), the plan, its status, the reference",
            given: fresh,
            writes: &[
                "status Subscription ns/etcd @1",
                "create InstallPlan ns/{plan}",
                "status InstallPlan ns/{plan} @answered",
                "status Subscription ns/etcd @answered",
            ],
            events: &["Normal InstallPlanCreated on Subscription/etcd"],
            garbage: &[],
            requeue: None,
        },
        Case {
            name: "the plan created before a crash is adopted: its lost status, then the reference",
            given: crashed_after_create,
            writes: &[
                "status InstallPlan ns/{plan} @3",
                "status Subscription ns/etcd @2",
            ],
            events: &[],
            garbage: &[],
            requeue: None,
        },
        Case {
            name: "upgrade: installed etcd.v1, the plan for etcd.v2",
            given: installed_v1,
            writes: &[
                "status Subscription ns/etcd @5",
                "create InstallPlan ns/{plan}",
                "status InstallPlan ns/{plan} @answered",
                "status Subscription ns/etcd @answered",
            ],
            events: &["Normal InstallPlanCreated on Subscription/etcd"],
            garbage: &[],
            requeue: None,
        },
        Case {
            name: "manual approval pending: nothing to do",
            given: manual_waiting,
            writes: &[],
            events: &[],
            garbage: &[],
            requeue: None,
        },
        Case {
            name: "superseded: deleted as observed, released, replaced under the next name",
            given: manual_switched_to_automatic,
            writes: &[
                "delete InstallPlan ns/{superseded} @4",
                "status Subscription ns/etcd @5",
                "create InstallPlan ns/{plan}",
                "status InstallPlan ns/{plan} @answered",
                "status Subscription ns/etcd @answered",
            ],
            events: &[
                "Normal InstallPlanSuperseded on Subscription/etcd",
                "Normal InstallPlanCreated on Subscription/etcd",
            ],
            garbage: &[],
            requeue: None,
        },
        Case {
            name: "resolution failure: on the Subscription and the Namespace, look again soon",
            given: catalog_unreadable,
            writes: &["status Subscription ns/etcd @1"],
            events: &[
                "Warning ResolutionFailed on Subscription/etcd",
                "Warning ResolutionFailed on Namespace/ns",
            ],
            garbage: &[],
            requeue: Some(RETRY_SOON),
        },
        Case {
            name: "GC: the oldest unreferenced plans beyond five, each deleted as observed",
            given: old_plans,
            writes: &[],
            events: &[],
            garbage: &[
                "delete InstallPlan ns/install-old0 @15",
                "delete InstallPlan ns/install-old1 @16",
                "delete InstallPlan ns/install-old2 @17",
                "delete InstallPlan ns/install-old3 @18",
                "delete InstallPlan ns/install-old4 @19",
            ],
            requeue: None,
        },
        Case {
            name: "at the head: nothing to do",
            given: at_head,
            writes: &[],
            events: &[],
            garbage: &[],
            requeue: None,
        },
    ];
    for case in cases {
        let cluster = (case.given)();
        let decision = cluster.decide();
        let one = &decision.subscriptions[0];
        let plan = match &one.plan {
            Some(PlanChoice::Create(n) | PlanChoice::Adopt(n)) => n.clone(),
            None => String::new(),
        };
        let superseded = one.superseded.clone().unwrap_or_default();
        let expand = |lines: &[&str]| -> Vec<String> {
            lines
                .iter()
                .map(|l| {
                    l.replace("{plan}", &plan)
                        .replace("{superseded}", &superseded)
                })
                .collect()
        };
        assert_eq!(writes(&one.effects), expand(case.writes), "{}", case.name);
        assert_eq!(events(&one.effects), expand(case.events), "{}", case.name);
        assert_eq!(
            writes(&decision.garbage),
            expand(case.garbage),
            "{}",
            case.name
        );
        assert_eq!(decision.requeue(), case.requeue, "{}", case.name);
    }
}

#[test]
fn one_decision_creates_the_plan_and_attaches_it() {
    let mut c = fresh();
    let first = c.decide();
    let name = key_of(&first);
    let effects = &first.subscriptions[0].effects;
    let Some(Write::Create { object, .. }) = effects
        .writes
        .iter()
        .find(|w| matches!(w, Write::Create { .. }))
    else {
        panic!("a create");
    };
    let plan: InstallPlan = serde_json::from_value(object.to_json().unwrap()).unwrap();
    let key = plan.metadata.labels.as_ref().unwrap()[RESOLUTION_LABEL].clone();
    assert_eq!(name, install_plan_name(&key, 0));
    assert_eq!(c.decide(), first, "the same observation, the same decision");
    // The attachment is in the same value: the plan's first status after its create, and the
    // Subscription's reference, whose uid and resourceVersion the answers fill in.
    let Some(Write::StatusAfter { key, status, fills }) = effects.writes.last() else {
        panic!("the reference last: {:?}", effects.writes);
    };
    assert_eq!(key.to_string(), "Subscription ns/etcd");
    let said = status.to_json().unwrap();
    assert_eq!(said["installPlanRef"]["name"], name.as_str());
    assert_eq!(said["currentCSV"], "etcd.v1");
    assert_eq!(said["state"], "UpgradePending");
    let filled: Vec<(String, Answered, &str)> = fills
        .iter()
        .map(|f| (f.from.to_string(), f.field, f.at))
        .collect();
    let plan_key = format!("InstallPlan ns/{name}");
    assert_eq!(
        filled,
        [
            (plan_key.clone(), Answered::Uid, "/installPlanRef/uid"),
            (
                plan_key.clone(),
                Answered::ResourceVersion,
                "/installPlanRef/resourceVersion"
            ),
            (plan_key, Answered::Uid, "/installplan/uuid"),
        ]
    );
    assert_eq!(
        first.subscriptions[0].decided.status,
        Some(serde_json::from_value(said).unwrap()),
        "the metrics see the attached status"
    );

    c.apply(&first);
    let st = c.status();
    let reference = st.install_plan_ref.as_ref().unwrap();
    assert_eq!(reference.name.as_deref(), Some(name.as_str()));
    assert_eq!(
        reference.uid.as_deref(),
        Some(format!("uid-{name}").as_str())
    );
    assert_eq!(
        reference.resource_version, c.plans[0].metadata.resource_version,
        "the plan as its first status left it"
    );
    assert_eq!(
        st.install_plan.as_ref().unwrap().uuid,
        format!("uid-{name}")
    );
    assert_eq!(st.current_csv.as_deref(), Some("etcd.v1"));
    assert!(
        c.plans[0].status.as_ref().unwrap().plan.is_some(),
        "the plan's steps are written"
    );
    assert!(
        c.decide()
            .subscriptions
            .iter()
            .all(|s| s.effects.writes.is_empty()),
        "settled: the next decision writes nothing (the catalog health's reason settled too)"
    );
}

#[test]
fn a_sync_cut_short_after_the_plan_status_adopts_the_plan_and_makes_no_other() {
    let mut c = fresh();
    let decision = c.decide();
    let name = key_of(&decision);
    let writes = &decision.subscriptions[0].effects.writes;
    // Everything but the reference: killed before the last write.
    for write in &writes[..writes.len() - 1] {
        assert!(c.perform(write), "refused: {write:?}");
    }
    let next = c.decide();
    assert_eq!(
        next.subscriptions[0].plan,
        Some(PlanChoice::Adopt(name.clone()))
    );
    assert_eq!(
        writes_of(&next),
        ["status Subscription ns/etcd @2"],
        "the plan's status stands; only the reference is written"
    );
    c.apply(&next);
    assert_eq!(
        c.status()
            .install_plan_ref
            .as_ref()
            .and_then(|r| r.name.as_deref()),
        Some(name.as_str())
    );
    assert!(settle(&mut c).is_empty());
    assert_eq!(c.plans.len(), 1, "no second plan");
}

fn writes_of(decision: &NamespaceDecision) -> Vec<String> {
    writes(&decision.subscriptions[0].effects)
}

#[test]
fn a_stale_store_never_makes_a_second_plan() {
    let mut c = fresh();
    let decision = c.decide();
    let name = key_of(&decision);
    let mut server = c.clone();
    server.apply(&decision);
    // The store has not seen the plan nor the status: the same decision again, whose create
    // the server refuses (the name is the resolution's).
    let again = c.decide();
    assert_eq!(key_of(&again), name);
    let refused = again.subscriptions[0]
        .effects
        .writes
        .iter()
        .any(|w| !server.clone().perform(w));
    assert!(refused, "the stale copy's writes are refused");
    // The store saw the status but not the plan: no new name either.
    c.subs = server.subs.clone();
    let create = c.decide().subscriptions[0]
        .effects
        .writes
        .iter()
        .find_map(|w| match w {
            Write::Create { key, .. } => Some(key.name.clone()),
            _ => None,
        });
    assert_eq!(create, Some(name));
}

#[test]
fn a_deleted_plans_name_is_not_taken_again() {
    let mut c = manual_waiting();
    let first = c.plans[0].metadata.name.clone().unwrap();
    c.plans.clear();
    c.gone.push(first.clone());
    let decision = c.decide();
    let one = &decision.subscriptions[0];
    let second = key_of(&decision);
    assert_ne!(second, first);
    assert_eq!(
        events(&one.effects),
        [
            "Warning InstallPlanMissing on Subscription/etcd",
            "Normal InstallPlanCreated on Subscription/etcd"
        ]
    );
}

#[test]
fn the_namespace_hears_of_each_failure_once_and_a_subscription_never_read_is_not_written() {
    let mut c = Cluster::new(vec![sub("a", None, None), sub("b", None, None)]);
    c.catalog_readable = false;
    let decision = c.decide();
    let failures = |kind: &str| -> Vec<String> {
        decision
            .subscriptions
            .iter()
            .flat_map(|s| &s.effects.events)
            .filter(|e| e.regarding.kind.as_deref() == Some(kind))
            .filter(|e| e.event.reason == RESOLUTION_FAILED_EVENT)
            .map(|e| e.event.message.clone())
            .collect()
    };
    let mut distinct = failures("Subscription");
    assert_eq!(distinct.len(), 2);
    distinct.dedup();
    assert_eq!(failures("Namespace"), distinct, "each message once");
    let regarding = decision.subscriptions[0]
        .effects
        .events
        .iter()
        .find(|e| e.regarding.kind.as_deref() == Some("Namespace"))
        .unwrap();
    assert_eq!(regarding.regarding.uid.as_deref(), Some(NS_UID));

    let mut unread = fresh();
    unread.subs[0].metadata.resource_version = None;
    let decision = unread.decide();
    assert!(decision.subscriptions[0].effects.is_empty());
    assert_eq!(decision.subscriptions[0].plan, None);
}

#[test]
fn a_deleted_csv_of_a_live_subscription_is_installed_again_by_a_new_plan() {
    use crate::api::SubscriptionState;
    // No startingCSV: the head, etcd.v3, in one plan.
    let mut c = Cluster::new(vec![sub("etcd", None, None)]);
    let first = settle(&mut c);
    assert_eq!(first.len(), 1);
    complete(&mut c, &first[0], "etcd.v3", "3.0.0");
    assert!(settle(&mut c).is_empty());
    assert_eq!(c.status().state(), SubscriptionState::AtLatestKnown);

    // Someone deletes the CSV (OLM's way out of a wedged install).
    c.installed.clear();
    let decision = c.decide();
    let second = key_of(&decision);
    assert_ne!(
        second, first[0],
        "the completed plan that made the deleted CSV is not taken again"
    );
    let effects = &decision.subscriptions[0].effects;
    assert_eq!(
        events(effects),
        [
            "Warning InstalledCSVDeleted on Subscription/etcd",
            "Normal InstallPlanCreated on Subscription/etcd"
        ]
    );
    c.apply(&decision);
    // Created and attached at once: nothing more to do (no other plan is made).
    assert!(settle(&mut c).is_empty());
    let st = c.status();
    assert_eq!(
        (
            st.state(),
            st.current_csv.as_deref(),
            st.installed_csv.as_deref()
        ),
        (SubscriptionState::UpgradePending, Some("etcd.v3"), None)
    );
    assert_eq!(
        st.install_plan_ref.as_ref().and_then(|r| r.name.as_deref()),
        Some(second.as_str())
    );

    // The new plan makes the CSV again: installed, and nothing more to do.
    complete(&mut c, &second, "etcd.v3", "3.0.0");
    assert!(settle(&mut c).is_empty());
    assert_eq!(
        (c.status().state(), c.status().installed_csv.as_deref()),
        (SubscriptionState::AtLatestKnown, Some("etcd.v3"))
    );
}

#[test]
fn a_csv_missing_while_its_plan_still_works_is_left_to_the_plan() {
    // etcd.v1 installed; the upgrade plan to etcd.v2 is created and runs (not Complete).
    let mut c = installed_v1();
    let created = settle(&mut c);
    assert_eq!(created.len(), 1);
    // Its CSV is not there yet, and the old one went: the Subscription waits on its plan.
    c.installed.clear();
    let decision = c.decide();
    assert!(decision.subscriptions[0].plan.is_none(), "no second plan");
    assert!(
        !events(&decision.subscriptions[0].effects)
            .iter()
            .any(|e| e.contains("InstalledCSVDeleted")),
        "an upgrade under way is not a deleted CSV"
    );
}

mod rollback_write {
    use super::*;

    #[test]
    fn the_mark_is_merged_unguarded_and_the_failed_csv_deleted_as_judged() {
        let sub = crate::resolve::subscription::tests::sub("etcd", None, None);
        let writes = rollback_writes(
            &sub,
            &RollbackWrites {
                mark: Some("2.0.0".into()),
                delete_failed: Some(("etcd.v2".into(), Some("41".into()))),
            },
            "ns",
        );
        let [mark, delete] = writes.as_slice() else {
            panic!("two writes: {writes:?}");
        };
        let Write::MergePatch {
            key,
            patch,
            resource_version,
        } = mark
        else {
            panic!("a merge patch: {mark:?}");
        };
        assert_eq!((key.name.as_str(), resource_version), ("etcd", &None));
        assert_eq!(
            patch.to_json().expect("json"),
            serde_json::json!({"metadata": {"annotations": {"olm-rs.io/failed-upgrade": "2.0.0"}}})
        );
        let Write::Delete { key, options } = delete else {
            panic!("a delete: {delete:?}");
        };
        assert_eq!(
            (
                key.resource.kind.as_str(),
                key.name.as_str(),
                key.namespace.as_deref()
            ),
            ("ClusterServiceVersion", "etcd.v2", Some("ns"))
        );
        assert_eq!(options.resource_version.as_deref(), Some("41"));
        assert!(rollback_writes(&sub, &RollbackWrites::default(), "ns").is_empty());
    }
}

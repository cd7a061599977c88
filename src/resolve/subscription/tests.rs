//! The namespace sync over hand-built catalogs, plans and CSVs.

use std::sync::Arc;

use jiff::Timestamp;
use serde_json::{Value, json};

use super::*;
use crate::api::{Approval, InstallPlanPhase, SubscriptionSpec};
use crate::catalog::CatalogIndex;
use crate::catalog::model::{Bundle, Channel, ChannelEntry, DeclarativeConfig, Package, Property};
use crate::resolve::input::{CatalogContent, CatalogInput, InstalledCsv, OperatorGroups};

/// One ready catalog `olm/cat` holding `index`, and the namespace's one OperatorGroup `og`:
/// the set-up of the dependency and co-upgrade tables.
pub(super) fn one_catalog_and_group(index: CatalogIndex) -> (Vec<CatalogInput>, OperatorGroups) {
    let catalogs = vec![CatalogInput {
        key: CatalogRef::new("olm", "cat"),
        priority: 0,
        uid: None,
        content: CatalogContent::Ready(Arc::new(index)),
        healthy: true,
    }];
    let groups = OperatorGroups {
        names: vec!["og".into()],
        exclude_global_catalogs: false,
    };
    (catalogs, groups)
}

fn csv(name: &str) -> Value {
    json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
           "metadata": {"name": name}, "spec": {"install": {"strategy": "deployment", "spec": {"deployments": []}}}})
}

fn bundle(name: &str, version: &str, inline: bool) -> Bundle {
    let objects = if inline {
        vec![serde_json::value::to_raw_value(&csv(name)).unwrap()]
    } else {
        vec![]
    };
    Bundle {
        package: "etcd".into(),
        name: name.into(),
        image: format!("quay.io/test/{name}"),
        properties: vec![
            Property::from_value(
                "olm.package",
                &json!({"packageName": "etcd", "version": version}),
            )
            .unwrap(),
        ],
        objects,
        ..Bundle::default()
    }
}

pub(super) fn catalog(inline: bool) -> CatalogIndex {
    CatalogIndex::new(catalog_config(inline))
}

fn catalog_config(inline: bool) -> DeclarativeConfig {
    let entry = |name: &str, replaces: Option<&str>| ChannelEntry {
        name: name.into(),
        replaces: replaces.map(Into::into),
        ..ChannelEntry::default()
    };
    DeclarativeConfig {
        packages: vec![Package {
            name: "etcd".into(),
            default_channel: Some("stable".into()),
            ..Package::default()
        }],
        channels: vec![Channel {
            package: "etcd".into(),
            name: "stable".into(),
            entries: vec![
                entry("etcd.v1", None),
                entry("etcd.v2", Some("etcd.v1")),
                entry("etcd.v3", Some("etcd.v2")),
            ],
            ..Channel::default()
        }],
        bundles: vec![
            bundle("etcd.v1", "1.0.0", inline),
            bundle("etcd.v2", "2.0.0", inline),
            bundle("etcd.v3", "3.0.0", inline),
        ],
        ..DeclarativeConfig::default()
    }
}

pub(super) fn sub(name: &str, approval: Option<Approval>, starting: Option<&str>) -> Subscription {
    let mut s = Subscription::new(
        name,
        SubscriptionSpec {
            source: "cat".into(),
            source_namespace: "olm".into(),
            name: "etcd".into(),
            channel: Some("stable".into()),
            starting_csv: starting.map(Into::into),
            install_plan_approval: approval,
            config: None,
        },
    );
    s.metadata.namespace = Some("ns".into());
    s.metadata.uid = Some(format!("uid-{name}"));
    s
}

struct World {
    catalogs: Vec<CatalogInput>,
    installed: Vec<InstalledCsv>,
    groups: OperatorGroups,
    plans: Vec<InstallPlan>,
    crds: Vec<ClusterCrd>,
    rollback: RollbackInput,
}

impl World {
    fn new(inline: bool) -> World {
        World {
            catalogs: vec![CatalogInput {
                key: CatalogRef::new("olm", "cat"),
                priority: 0,
                uid: Some("cat-uid".into()),
                content: CatalogContent::Ready(Arc::new(catalog(inline))),
                healthy: true,
            }],
            installed: vec![],
            groups: OperatorGroups {
                names: vec!["og".into()],
                exclude_global_catalogs: false,
            },
            plans: vec![],
            crds: vec![],
            rollback: RollbackInput::default(),
        }
    }

    fn sync(&self, subs: &[Subscription]) -> Vec<SubscriptionUpdate> {
        decide_namespace(&NamespaceState {
            input: NamespaceInput {
                namespace: "ns",
                subscriptions: subs,
                installed: &self.installed,
                catalogs: &self.catalogs,
                operator_groups: &self.groups,
                global_catalog_namespace: "olm",
            },
            plans: &self.plans,
            crds: &self.crds,
            rollback: &self.rollback,
            now: Timestamp::from_second(1_000).unwrap(),
        })
    }

    /// Creates the requested plan as the shell would and records it on the Subscription.
    fn ensure(&mut self, sub: &mut Subscription, update: &SubscriptionUpdate, name: &str) {
        let request = update.plan.as_ref().expect("a plan was requested");
        let mut plan = request.draft.install_plan(name);
        plan.metadata.uid = Some(format!("uid-{name}"));
        plan.status = Some(request.draft.initial_status());
        let mut status = update.status.clone();
        attach_plan(
            &mut status,
            &plan,
            &request.target.bundle,
            &Time(Timestamp::from_second(1_000).unwrap()),
        );
        sub.status = Some(status);
        self.plans.push(plan);
    }

    fn install(&mut self, name: &str, version: &str) {
        self.installed.push(installed_csv(name, version));
    }
}

/// CSV `name` of the etcd package at `version`, `Succeeded` (also the effects tables').
pub(super) fn installed_csv(name: &str, version: &str) -> InstalledCsv {
    InstalledCsv {
        name: name.into(),
        version: crate::catalog::semver_range::parse_tolerant(version).ok(),
        package: Some("etcd".into()),
        provided: vec![],
        phase: "Succeeded".into(),
        properties: Vec::new(),
    }
}

fn condition(
    status: &SubscriptionStatus,
    kind: SubscriptionConditionType,
) -> Option<&SubscriptionCondition> {
    status.conditions.iter().flatten().find(|c| c.type_ == kind)
}

#[test]
fn automatic_fresh_install_then_hop_by_hop_to_the_head() {
    let mut w = World::new(true);
    let mut s = sub("etcd", None, Some("etcd.v1"));
    let u = w.sync(std::slice::from_ref(&s)).remove(0);
    let request = u.plan.as_ref().unwrap();
    assert_eq!(request.target.bundle, "etcd.v1");
    assert_eq!(request.draft.approval, Approval::Automatic);
    assert_eq!(request.draft.generation, 1);
    let health = condition(
        &u.status,
        SubscriptionConditionType::CatalogSourcesUnhealthy,
    )
    .unwrap();
    assert_eq!(
        (health.status.as_str(), health.reason.as_deref()),
        ("False", Some("CatalogSourcesAdded"))
    );
    w.ensure(&mut s, &u, "install-aaaaa");
    let st = s.status.as_ref().unwrap();
    assert_eq!(st.state(), SubscriptionState::UpgradePending);
    assert_eq!(st.current_csv.as_deref(), Some("etcd.v1"));
    assert_eq!(
        condition(st, SubscriptionConditionType::InstallPlanPending)
            .unwrap()
            .reason
            .as_deref(),
        Some("Installing")
    );

    // While the plan runs, the Subscription waits on it.
    let u = w.sync(std::slice::from_ref(&s)).remove(0);
    assert!(u.plan.is_none());

    // The plan created the CSV: AtLatestKnown, then the next hop in the same pass.
    w.plans[0].status.as_mut().unwrap().phase = InstallPlanPhase::Complete;
    w.install("etcd.v1", "1.0.0");
    let u = w.sync(std::slice::from_ref(&s)).remove(0);
    assert_eq!(u.status.installed_csv.as_deref(), Some("etcd.v1"));
    let request = u.plan.as_ref().unwrap();
    assert_eq!(
        (
            request.target.bundle.as_str(),
            request.target.replaces.as_deref()
        ),
        ("etcd.v2", Some("etcd.v1"))
    );
    assert_eq!(request.draft.generation, 2);
    assert!(condition(&u.status, SubscriptionConditionType::InstallPlanPending).is_none());
}

/// Issue 36: a plan's CSVs appear one by one, its dependency Subscriptions last. A Subscription
/// whose CSV is there while its plan still installs must not resolve on that half-installed
/// namespace: it would plan the dependency a second time, next to the one on its way.
#[test]
fn a_csv_that_appears_while_its_plan_still_installs_waits_for_the_plan() {
    let mut w = World::new(true);
    let mut s = sub("etcd", None, Some("etcd.v1"));
    let u = w.sync(std::slice::from_ref(&s)).remove(0);
    w.ensure(&mut s, &u, "install-aaaaa");
    w.install("etcd.v1", "1.0.0");
    let u = w.sync(std::slice::from_ref(&s)).remove(0);
    assert_eq!(u.status.state(), SubscriptionState::AtLatestKnown);
    assert_eq!(u.status.installed_csv.as_deref(), Some("etcd.v1"));
    assert!(
        u.plan.is_none(),
        "the next hop waits until install-aaaaa is done"
    );

    s.status = Some(u.status);
    w.plans[0].status.as_mut().unwrap().phase = InstallPlanPhase::Complete;
    let u = w.sync(std::slice::from_ref(&s)).remove(0);
    assert_eq!(u.plan.as_ref().unwrap().target.bundle, "etcd.v2");
}

#[test]
fn manual_plans_serve_only_their_own_subscription() {
    let w = World::new(true);
    let mut other = sub("other", None, None);
    other.spec.name = "etcd".into();
    let manual = sub("manual", Some(Approval::Manual), None);
    let updates = w.sync(&[manual]);
    let draft = &updates[0].plan.as_ref().unwrap().draft;
    assert_eq!(draft.approval, Approval::Manual);
    assert_eq!(draft.subscriptions.len(), 1);
    assert_eq!(draft.subscriptions[0].name, "manual");
    assert!(!draft.install_plan("install-x").spec.approved);
}

#[test]
fn awaiting_approval_is_pending_and_a_deleted_pending_plan_is_replaced() {
    let mut w = World::new(true);
    let mut s = sub("etcd", Some(Approval::Manual), None);
    let u = w.sync(std::slice::from_ref(&s)).remove(0);
    w.ensure(&mut s, &u, "install-bbbbb");
    let u = w.sync(std::slice::from_ref(&s)).remove(0);
    assert!(u.plan.is_none(), "gated while the plan awaits approval");
    let pending = condition(&u.status, SubscriptionConditionType::InstallPlanPending).unwrap();
    assert_eq!(pending.reason.as_deref(), Some("RequiresApproval"));

    w.plans.clear();
    let u = w.sync(std::slice::from_ref(&s)).remove(0);
    assert!(u.status.install_plan_ref.is_none());
    assert_eq!(
        u.plan.as_ref().unwrap().target.bundle,
        "etcd.v3",
        "a new plan replaces the deleted one"
    );
    assert_eq!(u.notes[0].reason, "InstallPlanMissing");
}

#[test]
fn an_image_only_bundle_is_planned_with_a_lookup_and_its_pull_shows_on_the_subscription() {
    use crate::api::{BundleLookupConditionType, install_plan::bundle_lookup_reason};
    let mut w = World::new(false);
    let mut s = sub("etcd", None, Some("etcd.v1"));
    let u = w.sync(std::slice::from_ref(&s)).remove(0);
    let draft = &u.plan.as_ref().expect("a plan with a bundle lookup").draft;
    assert!(
        draft.steps.is_empty(),
        "no steps before the image is pulled"
    );
    let lookup = &draft.lookups[0];
    assert_eq!(
        (lookup.path.as_str(), lookup.identifier.as_str()),
        ("quay.io/test/etcd.v1", "etcd.v1")
    );
    assert_eq!(
        draft.install_plan("x").spec.cluster_service_version_names,
        ["etcd.v1"]
    );
    w.ensure(&mut s, &u, "install-aaaaa");
    let unpacking = condition(
        s.status.as_ref().unwrap(),
        SubscriptionConditionType::BundleUnpacking,
    )
    .expect("BundleUnpacking while the image is pulled");
    assert_eq!(unpacking.reason.as_deref(), Some("UnpackingInProgress"));
    assert_eq!(
        unpacking.message.as_deref(),
        Some("bundle image quay.io/test/etcd.v1 not yet pulled.")
    );

    // The pull fails: BundleUnpackFailed in plain words, once, with an event.
    let lookups = w.plans[0]
        .status
        .as_mut()
        .unwrap()
        .bundle_lookups
        .as_mut()
        .unwrap();
    crate::plan::image_bundle::set_lookup_condition(
        &mut lookups[0],
        BundleLookupConditionType::BundleLookupFailed,
        bundle_lookup_reason::IMAGE_NOT_FOUND,
        "image quay.io/test/etcd.v1 was not found in its registry (manifest unknown)",
        &Time(Timestamp::from_second(1_010).unwrap()),
    );
    let u = w.sync(std::slice::from_ref(&s)).remove(0);
    assert!(u.plan.is_none(), "waits on its plan");
    let failed = condition(&u.status, SubscriptionConditionType::BundleUnpackFailed).unwrap();
    assert_eq!(failed.reason.as_deref(), Some("BundleUnpackFailed"));
    assert!(
        failed.message.as_deref().unwrap().starts_with(
            "Bundle unpacking failed - ImageNotFound: image quay.io/test/etcd.v1 was not found in its registry (manifest unknown). The pull is tried again"
        ),
        "{failed:?}"
    );
    assert!(condition(&u.status, SubscriptionConditionType::BundleUnpacking).is_none());
    assert_eq!(u.notes.len(), 1);
    assert_eq!(u.notes[0].reason, "BundleUnpackFailed");
    s.status = Some(u.status.clone());
    let again = w.sync(std::slice::from_ref(&s)).remove(0);
    assert!(!again.changed && again.notes.is_empty(), "reported once");

    // Pulled: the lookup is gone, so are both conditions.
    w.plans[0].status.as_mut().unwrap().bundle_lookups = None;
    let u = w.sync(std::slice::from_ref(&s)).remove(0);
    assert!(condition(&u.status, SubscriptionConditionType::BundleUnpackFailed).is_none());
    assert!(condition(&u.status, SubscriptionConditionType::BundleUnpacking).is_none());
}

#[test]
fn refusals_are_conditions_written_once() {
    let mut w = World::new(true);
    w.groups.names.clear();
    let mut s = sub("etcd", None, None);
    let u = w.sync(std::slice::from_ref(&s)).remove(0);
    let c = condition(&u.status, SubscriptionConditionType::ResolutionFailed).unwrap();
    assert_eq!(c.reason.as_deref(), Some("ErrorPreventedResolution"));
    assert_eq!(u.notes.len(), 1);
    s.status = Some(u.status);
    let u = w.sync(std::slice::from_ref(&s)).remove(0);
    assert!(u.notes.is_empty());
    // health reason moves from CatalogSourcesAdded to AllCatalogSourcesHealthy once
    assert!(u.changed);
    s.status = Some(u.status);
    let u = w.sync(std::slice::from_ref(&s)).remove(0);
    assert!(!u.changed, "an unchanged world rewrites nothing");
}

#[test]
fn a_complete_plan_deleted_later_is_reported_missing() {
    let mut w = World::new(true);
    let mut s = sub("etcd", None, None);
    let u = w.sync(std::slice::from_ref(&s)).remove(0);
    w.ensure(&mut s, &u, "install-ccccc");
    w.install("etcd.v3", "3.0.0");
    w.plans.clear();
    let u = w.sync(std::slice::from_ref(&s)).remove(0);
    // The plan vanished before its CSV was observed: the CSV it created is picked up anyway.
    assert_eq!(u.status.state(), SubscriptionState::AtLatestKnown);
    assert_eq!(u.status.installed_csv.as_deref(), Some("etcd.v3"));
    assert!(u.plan.is_none());
    // Once installed, a deleted plan is only reported.
    let mut st = u.status.clone();
    st.current_csv = Some("etcd.v3".into());
    st.installed_csv = Some("etcd.v3".into());
    st.state = Some(SubscriptionState::AtLatestKnown);
    st.install_plan_ref = Some(k8s_openapi::api::core::v1::ObjectReference {
        name: Some("install-ccccc".into()),
        ..Default::default()
    });
    s.status = Some(st);
    let u = w.sync(std::slice::from_ref(&s)).remove(0);
    let c = condition(&u.status, SubscriptionConditionType::InstallPlanMissing).unwrap();
    assert_eq!(c.reason.as_deref(), Some("ReferencedInstallPlanNotFound"));
    assert!(u.plan.is_none());
}

#[test]
fn operator_group_problems_reach_subscriptions_that_wait_on_a_plan() {
    let mut w = World::new(true);
    let mut s = sub("etcd", Some(Approval::Manual), None);
    let u = w.sync(std::slice::from_ref(&s)).remove(0);
    w.ensure(&mut s, &u, "install-ddddd");
    w.groups.names.push("second".into());
    let u = w.sync(std::slice::from_ref(&s)).remove(0);
    let c = condition(&u.status, SubscriptionConditionType::ResolutionFailed)
        .expect("reported while waiting");
    assert!(
        c.message
            .as_deref()
            .unwrap()
            .contains("2 OperatorGroups (og, second)"),
        "{c:?}"
    );
    assert!(u.plan.is_none());
    s.status = Some(u.status);
    w.groups.names.pop();
    let u = w.sync(std::slice::from_ref(&s)).remove(0);
    assert!(
        condition(&u.status, SubscriptionConditionType::ResolutionFailed).is_none(),
        "cleared once fixed"
    );
}

#[test]
fn a_waiting_plan_is_superseded_only_when_the_answer_changes() {
    let mut w = World::new(true);
    let mut s = sub("etcd", Some(Approval::Manual), Some("etcd.v1"));
    let u = w.sync(std::slice::from_ref(&s)).remove(0);
    w.ensure(&mut s, &u, "install-eeeee");
    // Same spec: waiting, nothing superseded.
    let u = w.sync(std::slice::from_ref(&s)).remove(0);
    assert!(u.superseded.is_none() && u.plan.is_none());

    // A new startingCSV: the waiting plan for etcd.v1 is superseded by one for etcd.v2.
    s.spec.starting_csv = Some("etcd.v2".into());
    let u = w.sync(std::slice::from_ref(&s)).remove(0);
    let superseded = u.superseded.as_ref().expect("superseded");
    assert_eq!(superseded.name, "install-eeeee");
    assert_eq!(u.plan.as_ref().unwrap().target.bundle, "etcd.v2");
    assert!(u.status.install_plan_ref.is_none(), "released");
    assert_eq!(u.notes[0].reason, "InstallPlanSuperseded");

    // An approved plan is never superseded, whatever the spec says now.
    w.plans[0].spec.approved = true;
    let u = w.sync(std::slice::from_ref(&s)).remove(0);
    assert!(u.superseded.is_none() && u.plan.is_none());
}

#[test]
fn a_deleted_pending_plan_stays_reported_until_a_plan_is_attached() {
    let mut w = World::new(true);
    let mut s = sub("etcd", Some(Approval::Manual), None);
    let u = w.sync(std::slice::from_ref(&s)).remove(0);
    w.ensure(&mut s, &u, "install-fffff");
    w.plans.clear();
    w.catalogs.clear();
    let u = w.sync(std::slice::from_ref(&s)).remove(0);
    assert!(u.plan.is_none());
    let c = condition(&u.status, SubscriptionConditionType::InstallPlanMissing).unwrap();
    assert_eq!(c.reason.as_deref(), Some("ReferencedInstallPlanNotFound"));
    s.status = Some(u.status);
    let u = w.sync(std::slice::from_ref(&s)).remove(0);
    assert!(condition(&u.status, SubscriptionConditionType::InstallPlanMissing).is_some());
    s.status = Some(u.status);
    let fresh = World::new(true);
    w.catalogs = fresh.catalogs;
    let u = w.sync(std::slice::from_ref(&s)).remove(0);
    assert!(u.plan.is_some());
    w.ensure(&mut s, &u, "install-ggggg");
    let st = s.status.as_ref().unwrap();
    assert!(condition(st, SubscriptionConditionType::InstallPlanMissing).is_none());
}

fn with_annotations(mut s: Subscription, annotations: &[(&str, &str)]) -> Subscription {
    s.metadata.annotations = Some(
        annotations
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    );
    s
}

fn installed_sub(csv: &str, annotations: &[(&str, &str)]) -> Subscription {
    let mut s = with_annotations(sub("etcd", None, None), annotations);
    let mut status = SubscriptionStatus::new(Time(Timestamp::from_second(1).unwrap()));
    status.installed_csv = Some(csv.into());
    status.current_csv = Some(csv.into());
    status.state = Some(SubscriptionState::AtLatestKnown);
    s.status = Some(status);
    s
}

#[test]
fn a_range_holds_below_the_head_with_a_condition_and_widening_upgrades() {
    use crate::resolve::version_request::VERSION_ANNOTATION;
    let mut w = World::new(true);
    w.install("etcd.v2", "2.0.0");
    let s = installed_sub("etcd.v2", &[(VERSION_ANNOTATION, "<3.0.0")]);
    let u = w.sync(std::slice::from_ref(&s)).remove(0);
    assert!(u.plan.is_none(), "held: no plan");
    assert_eq!(u.status.state(), SubscriptionState::AtLatestKnown);
    let held = condition(&u.status, SubscriptionConditionType::VersionHeld).expect("VersionHeld");
    assert_eq!(
        (held.status.as_str(), held.reason.as_deref()),
        ("True", Some("NewerVersionOutsideRange"))
    );
    let message = held.message.as_deref().unwrap_or_default();
    assert!(
        message.contains("etcd.v3 (version 3.0.0) is available but outside the range"),
        "{message}"
    );
    assert_eq!(u.notes.len(), 1, "{:?}", u.notes);

    // Written once: the next sync with that status changes nothing.
    let mut again = s.clone();
    again.status = Some(u.status.clone());
    let u2 = w.sync(std::slice::from_ref(&again)).remove(0);
    assert!(u2.notes.is_empty(), "{:?}", u2.notes);
    // (the catalog health reason moves from CatalogSourcesAdded once)
    again.status = Some(u2.status.clone());
    let u2 = w.sync(std::slice::from_ref(&again)).remove(0);
    assert!(
        !u2.changed && u2.plan.is_none(),
        "an unchanged world rewrites nothing"
    );

    // Widened: the upgrade is planned and the condition goes.
    let widened = with_annotations(again, &[(VERSION_ANNOTATION, "<4.0.0")]);
    let u3 = w.sync(std::slice::from_ref(&widened)).remove(0);
    assert_eq!(
        u3.plan.as_ref().map(|p| p.target.bundle.as_str()),
        Some("etcd.v3")
    );
    assert!(condition(&u3.status, SubscriptionConditionType::VersionHeld).is_none());
}

#[test]
fn a_malformed_range_is_a_condition_and_nothing_else() {
    use crate::resolve::version_request::VERSION_ANNOTATION;
    let mut w = World::new(true);
    w.install("etcd.v2", "2.0.0");
    let s = installed_sub("etcd.v2", &[(VERSION_ANNOTATION, "=>2.0.0")]);
    let u = w.sync(std::slice::from_ref(&s)).remove(0);
    assert!(u.plan.is_none());
    let failed = condition(&u.status, SubscriptionConditionType::ResolutionFailed).expect("failed");
    let message = failed.message.as_deref().unwrap_or_default();
    assert!(
        message.contains(
            "annotation olm-rs.io/version \"=>2.0.0\" is not a version range: Could not parse Range"
        ),
        "{message}"
    );
}

/// The catalog with `etcd.v1` owning CRD `gears.example.com` at `v1alpha1` only.
fn catalog_with_old_crd() -> CatalogIndex {
    let old_csv = json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": "etcd.v1"},
        "spec": {"install": {"strategy": "deployment", "spec": {"deployments": []}},
                 "customresourcedefinitions": {"owned": [{"name": "gears.example.com", "version": "v1alpha1", "kind": "Gear"}]}}});
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gears.example.com"},
        "spec": {"group": "example.com", "names": {"kind": "Gear", "plural": "gears"}, "scope": "Namespaced",
                 "versions": [{"name": "v1alpha1", "served": true, "storage": true}]}});
    let mut config = catalog_config(true);
    for b in &mut config.bundles {
        if b.name == "etcd.v1" {
            b.objects = vec![
                serde_json::value::to_raw_value(&old_csv).unwrap(),
                serde_json::value::to_raw_value(&crd).unwrap(),
            ];
        }
    }
    CatalogIndex::new(config)
}

#[test]
fn a_downgrade_on_request_is_planned_unless_a_crd_version_would_be_lost() {
    use crate::resolve::version_request::{ALLOW_DOWNGRADE_ANNOTATION, VERSION_ANNOTATION};
    let mut w = World::new(true);
    w.catalogs[0].content = CatalogContent::Ready(Arc::new(catalog_with_old_crd()));
    w.install("etcd.v2", "2.0.0");
    let cluster = |served: &[&str], stored: &[&str]| ClusterCrd {
        name: "gears.example.com".into(),
        group: "example.com".into(),
        kind: "Gear".into(),
        served: served.iter().map(|s| (*s).to_owned()).collect(),
        stored: stored.iter().map(|s| (*s).to_owned()).collect(),
    };
    let narrowed = installed_sub("etcd.v2", &[(VERSION_ANNOTATION, "<2.0.0")]);
    let downgrade = with_annotations(
        narrowed.clone(),
        &[
            (VERSION_ANNOTATION, "<2.0.0"),
            (ALLOW_DOWNGRADE_ANNOTATION, "true"),
        ],
    );

    // Narrowed without asking: held, never downgraded.
    w.crds = vec![cluster(&["v1alpha1", "v1"], &["v1alpha1"])];
    let u = w.sync(std::slice::from_ref(&narrowed)).remove(0);
    assert!(u.plan.is_none());
    let held = condition(&u.status, SubscriptionConditionType::VersionHeld).expect("held");
    assert_eq!(held.reason.as_deref(), Some("InstalledVersionOutsideRange"));
    assert!(
        held.message
            .as_deref()
            .unwrap_or_default()
            .contains("set olm-rs.io/allow-downgrade: \"true\" to install etcd.v1")
    );

    // (served, stored, refused with)
    let table: &[(&[&str], &[&str], Option<&str>)] = &[
        (&["v1alpha1", "v1"], &["v1alpha1"], None),
        (
            &["v1"],
            &["v1"],
            Some(
                "it owns CRD gears.example.com at version v1alpha1, which the cluster's CRD no longer serves",
            ),
        ),
        (
            &["v1alpha1", "v1"],
            &["v1alpha1", "v1"],
            Some(
                "its CRD gears.example.com has no version v1, which is still in the cluster CRD's status.storedVersions",
            ),
        ),
    ];
    for (served, stored, refused) in table {
        w.crds = vec![cluster(served, stored)];
        let u = w.sync(std::slice::from_ref(&downgrade)).remove(0);
        let held = condition(&u.status, SubscriptionConditionType::VersionHeld);
        match refused {
            None => {
                let request = u.plan.as_ref().expect("a downgrade plan");
                assert_eq!(
                    (
                        request.target.bundle.as_str(),
                        request.target.replaces.as_deref()
                    ),
                    ("etcd.v1", Some("etcd.v2"))
                );
                assert!(held.is_none());
            }
            Some(words) => {
                assert!(u.plan.is_none(), "{served:?} {stored:?}");
                let held = held.expect("refused");
                assert_eq!(held.reason.as_deref(), Some("DowngradeRefused"));
                let message = held.message.as_deref().unwrap_or_default();
                assert!(message.contains(words), "{message}");
                assert!(
                    u.notes.iter().any(|n| n.reason == "DowngradeRefused"),
                    "{:?}",
                    u.notes
                );
            }
        }
    }
}

#[path = "rollback_tests.rs"]
mod rollback_tests;

//! Table tests of the stages of a pass (docs/install-plans.md §7.3, §7.4, §10).

use std::collections::HashMap;

use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

use super::*;
use crate::api::StepResource;
use crate::k8s::effects::Write;
use crate::plan::alongside::{AlongsideCsv, AlongsideFacts};
use crate::plan::crd_safety::CrdUpdateError;
use crate::plan::execution::{CheckedPlan, check_plan};
use crate::plan::object::split_api_version;

const NS: &str = "operators";
const CSV: &str = "widget.v1";

fn step(api_version: &str, kind: &str, name: &str, manifest: Value) -> Step {
    let (group, version) = split_api_version(api_version);
    Step {
        resolving: CSV.into(),
        resource: StepResource {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
            name: name.into(),
            manifest: Some(manifest.to_string()),
            ..StepResource::default()
        },
        optional: None,
        status: StepStatus::Unknown,
    }
}

fn crd_manifest(versions: &[&str]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|v| json!({"name": v, "served": true, "storage": true}))
        .collect();
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "widgets.example.com"},
           "spec": {"group": "example.com", "scope": "Namespaced",
                    "names": {"kind": "Widget", "plural": "widgets"},
                    "versions": versions}})
}

/// A plan as OLM lists it: the CSV, the CRD, a ConfigMap.
fn steps() -> Vec<Step> {
    vec![
        step(
            "operators.coreos.com/v1alpha1",
            "ClusterServiceVersion",
            CSV,
            json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
                   "metadata": {"name": CSV}, "spec": {}}),
        ),
        step(
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            "widgets.example.com",
            crd_manifest(&["v1"]),
        ),
        step(
            "v1",
            "ConfigMap",
            "widget-config",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "widget-config"}}),
        ),
    ]
}

const CSV_STEP: usize = 0;
const CRD_STEP: usize = 1;
const CONFIG_STEP: usize = 2;

fn checked(steps: &mut [Step]) -> CheckedPlan {
    check_plan(steps).expect("a good plan")
}

fn api(group: &str, version: &str, kind: &str, plural: &str) -> StepApi {
    StepApi {
        resource: ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(group, version, kind),
            plural,
        ),
        scope: Scope::Namespaced,
    }
}

fn apis() -> HashMap<usize, StepApi> {
    HashMap::from([
        (
            CSV_STEP,
            api(
                "operators.coreos.com",
                "v1alpha1",
                "ClusterServiceVersion",
                "clusterserviceversions",
            ),
        ),
        (CONFIG_STEP, api("", "v1", "ConfigMap", "configmaps")),
    ])
}

fn scoped() -> ExecuteAs {
    ExecuteAs::ServiceAccount {
        namespace: NS.into(),
        name: "installer".into(),
    }
}

fn live_crd(conditions: &[(&str, &str)]) -> Value {
    let mut crd = crd_manifest(&["v1"]);
    crd["metadata"]["uid"] = "crd-uid".into();
    crd["metadata"]["resourceVersion"] = "7".into();
    crd["status"] = json!({
        "storedVersions": ["v1"],
        "conditions": conditions.iter()
            .map(|(t, s)| json!({"type": t, "status": s}))
            .collect::<Vec<_>>(),
    });
    crd
}

/// One line per write: `verb Kind name`, for the order of a stage.
fn lines(stage: &Stage) -> Vec<String> {
    stage
        .writes
        .iter()
        .map(|w| format!("{} {}", w.write.verb(), w.write.key()))
        .collect()
}

fn body(write: &StepWrite) -> Value {
    match &write.write {
        Write::Apply { object, .. } | Write::CreateIfAbsent { object, .. } => {
            object.to_json().unwrap()
        }
        other => panic!("a step object is applied or created: {other:?}"),
    }
}

#[test]
fn crds_come_first_then_csvs_then_the_rest_each_skipping_steps_already_done() {
    // (statuses of the CSV, CRD and ConfigMap steps) → (CRDs to write, CRDs awaited, CSVs, rest)
    type Row = ([StepStatus; 3], [&'static [usize]; 4]);
    let cases: [Row; 4] = [
        (
            [
                StepStatus::Unknown,
                StepStatus::Unknown,
                StepStatus::Unknown,
            ],
            [&[CRD_STEP], &[], &[CSV_STEP], &[CONFIG_STEP]],
        ),
        (
            [
                StepStatus::Unknown,
                StepStatus::WaitingForApi,
                StepStatus::Unknown,
            ],
            [&[], &[CRD_STEP], &[CSV_STEP], &[CONFIG_STEP]],
        ),
        (
            [
                StepStatus::Created,
                StepStatus::Created,
                StepStatus::Unknown,
            ],
            [&[], &[], &[], &[CONFIG_STEP]],
        ),
        (
            [
                StepStatus::Present,
                StepStatus::Present,
                StepStatus::Created,
            ],
            [&[], &[], &[], &[]],
        ),
    ];
    for (statuses, [writing, awaited, csvs, rest]) in cases {
        let mut steps = steps();
        for (s, status) in steps.iter_mut().zip(statuses.clone()) {
            s.status = status;
        }
        let plan = checked(&mut steps);
        assert_eq!(crds_to_write(&plan, &steps), writing, "{statuses:?}");
        assert_eq!(crds_awaited(&plan, &steps), awaited, "{statuses:?}");
        assert_eq!(csv_steps(&plan, &steps), csvs, "{statuses:?}");
        assert_eq!(other_steps(&plan, &steps), rest, "{statuses:?}");
    }
}

#[test]
fn an_absent_crd_is_created_and_awaited_an_existing_one_is_applied_keeping_annotations() {
    let mut steps = steps();
    let plan = checked(&mut steps);
    let ctx = PassContext {
        namespace: NS,
        identity: &scoped(),
    };
    let absent = crd_writes(&plan, ctx, &[CRD_STEP], &Observed::new(), &HashMap::new());
    // CRDs are olm-rs's to write even when the plan runs as an account.
    assert_eq!(absent.acting, ExecuteAs::Controller);
    assert_eq!(
        lines(&absent),
        ["create CustomResourceDefinition widgets.example.com"]
    );
    assert!(matches!(
        absent.writes[0].write,
        Write::CreateIfAbsent { .. }
    ));
    assert_eq!(
        absent.writes[0].records,
        Records::Status(StepStatus::WaitingForApi)
    );

    let mut existing = live_crd(&[("Established", "True")]);
    let other = crate::olm_hash::installed_alongside_annotation_key("elsewhere", "gadget.v1");
    let gone = crate::olm_hash::installed_alongside_annotation_key("elsewhere", "gone.v1");
    existing["metadata"]["annotations"] =
        json!({other.clone(): "elsewhere/gadget.v1", gone.clone(): "elsewhere/gone.v1"});
    let live = Observed::from([(CRD_STEP, existing)]);
    let facts = HashMap::from([(
        CRD_STEP,
        AlongsideFacts {
            existing: [AlongsideCsv::new("elsewhere", "gadget.v1")].into(),
            ..AlongsideFacts::default()
        },
    )]);
    let update = crd_writes(&plan, ctx, &[CRD_STEP], &live, &facts);
    let [apply, annotate] = &update.writes[..] else {
        panic!("an apply, then a merge patch: {:?}", lines(&update));
    };
    assert_eq!(
        (apply.write.verb(), apply.action, &apply.records),
        ("apply", "updating", &Records::Nothing)
    );
    let written = body(apply);
    assert!(
        written["metadata"]["annotations"]
            .as_object()
            .is_none_or(|a| !a
                .keys()
                .any(|k| k.starts_with("operatorframework.io/installed-alongside-"))),
        "the apply names no installed-alongside annotation, so it can remove none: {written}"
    );
    assert!(written.get("status").is_none(), "the status is not written");
    assert_eq!(
        (annotate.write.verb(), annotate.action, &annotate.records),
        ("patch", "annotating", &Records::Status(StepStatus::Present)),
        "the step is Present once its annotations are written"
    );
    let Write::MergePatch {
        patch,
        resource_version,
        ..
    } = &annotate.write
    else {
        unreachable!()
    };
    assert_eq!(resource_version, &None);
    let own = crate::olm_hash::installed_alongside_annotation_key(NS, CSV);
    assert_eq!(
        patch.to_json().unwrap(),
        json!({"metadata": {"annotations": {
            own: format!("{NS}/{CSV}"),
            other: "elsewhere/gadget.v1",
            gone: null,
        }}}),
        "the plan's CSV and a CSV that exists are named, a CSV gone is removed"
    );
}

#[test]
fn later_steps_wait_until_every_crd_is_established() {
    let established_crd = live_crd(&[("Established", "True"), ("NamesAccepted", "True")]);
    // (the CRD as observed, whether the pass waits, the step's status once seen)
    let cases: [(Option<Value>, bool, Option<StepStatus>); 4] = [
        (None, true, None),
        (Some(live_crd(&[])), true, None),
        (
            Some(live_crd(&[
                ("Established", "True"),
                ("NamesAccepted", "False"),
            ])),
            true,
            None,
        ),
        (Some(established_crd), false, Some(StepStatus::Created)),
    ];
    for (crd, waits, status) in cases {
        let live: Observed = crd.into_iter().map(|c| (CRD_STEP, c)).collect();
        let awaited = awaited_crds(&[CRD_STEP], &[], &live);
        assert_eq!(awaited.waiting, waits, "{live:?}");
        let settled: Vec<_> = status.into_iter().map(|s| (CRD_STEP, s)).collect();
        assert_eq!(awaited.stage.settled, settled, "{live:?}");
        assert!(awaited.stage.writes.is_empty(), "no CRD created this pass");
    }
    // A CRD this pass created gets its reader role, owned by the CRD as read now.
    let live = Observed::from([(CRD_STEP, live_crd(&[]))]);
    let awaited = awaited_crds(&[CRD_STEP], &[CRD_STEP], &live);
    assert_eq!(
        lines(&awaited.stage),
        ["apply ClusterRole olm-rs-crd-reader-widgets.example.com"]
    );
    let role = match &awaited.stage.writes[0].write {
        Write::Apply { object, .. } => object.to_json().unwrap(),
        other => panic!("{other:?}"),
    };
    assert_eq!(role["metadata"]["ownerReferences"][0]["uid"], "crd-uid");
    assert_eq!(awaited.stage.acting, ExecuteAs::Controller);
}

#[test]
fn objects_are_owned_by_the_csv_observed_after_it_was_written() {
    let mut steps = steps();
    let plan = checked(&mut steps);
    let identity = scoped();
    let ctx = PassContext {
        namespace: NS,
        identity: &identity,
    };
    let apis = apis();
    assert_eq!(owners_needed(&plan, &[CONFIG_STEP], &apis), [CSV]);
    assert!(
        owners_needed(&plan, &[CSV_STEP], &apis).is_empty(),
        "a CSV is owned by nobody"
    );
    // The CSV not there (yet, or any more): nothing of the stage is written.
    let refused = object_writes(
        &plan,
        ctx,
        &[CONFIG_STEP],
        &apis,
        &Observed::new(),
        &HashMap::new(),
    );
    assert_eq!(
        refused,
        Err(PassError::OwnerMissing {
            namespace: NS.into(),
            csv: CSV.into()
        })
    );
    let owners = HashMap::from([(CSV.to_owned(), "csv-uid".to_owned())]);
    let stage = object_writes(&plan, ctx, &[CONFIG_STEP], &apis, &Observed::new(), &owners)
        .expect("the CSV exists");
    assert_eq!(
        stage.acting, identity,
        "steps are written as the plan's identity"
    );
    assert_eq!(lines(&stage), ["apply ConfigMap operators/widget-config"]);
    let written = body(&stage.writes[0]);
    assert_eq!(written["metadata"]["namespace"], NS);
    assert_eq!(written["metadata"]["ownerReferences"][0]["uid"], "csv-uid");
    assert_eq!(written["metadata"]["ownerReferences"][0]["name"], CSV);
    assert_eq!(
        stage.writes[0].records,
        Records::Status(StepStatus::Created)
    );
    // Found under its name: converged, and recorded Present.
    let live = Observed::from([(CONFIG_STEP, json!({"metadata": {"name": "widget-config"}}))]);
    let stage = object_writes(&plan, ctx, &[CONFIG_STEP], &apis, &live, &owners).unwrap();
    assert_eq!(
        (stage.writes[0].action, &stage.writes[0].records),
        ("updating", &Records::Status(StepStatus::Present))
    );
}

#[test]
fn a_csv_is_created_if_absent_and_left_as_it_is_when_present() {
    let mut steps = steps();
    let plan = checked(&mut steps);
    let ctx = PassContext {
        namespace: NS,
        identity: &ExecuteAs::Controller,
    };
    let none = HashMap::new();
    let stage = object_writes(&plan, ctx, &[CSV_STEP], &apis(), &Observed::new(), &none).unwrap();
    assert_eq!(stage.acting, ExecuteAs::Controller);
    assert!(matches!(
        stage.writes[0].write,
        Write::CreateIfAbsent { .. }
    ));
    assert_eq!(stage.writes[0].records, Records::CreatedOrPresent);
    let live = Observed::from([(CSV_STEP, json!({"metadata": {"name": CSV}}))]);
    let stage = object_writes(&plan, ctx, &[CSV_STEP], &apis(), &live, &none).unwrap();
    assert!(stage.writes.is_empty(), "an existing CSV is not written");
    assert_eq!(stage.settled, [(CSV_STEP, StepStatus::Present)]);
}

#[test]
fn an_unsafe_crd_update_is_refused_before_anything_is_written() {
    let mut steps = steps();
    let plan = checked(&mut steps);
    let mut stored_v1alpha1 = live_crd(&[]);
    stored_v1alpha1["status"]["storedVersions"] = json!(["v1alpha1", "v1"]);
    let live = Observed::from([(CRD_STEP, stored_v1alpha1)]);
    let refused = check_crd_updates(&plan, &live, &[CRD_STEP], &HashMap::new());
    let expected = PassError::CrdUpdate(CrdUpdateError::DropsStoredVersion {
        crd: "widgets.example.com".into(),
        version: "v1alpha1".into(),
    });
    assert_eq!(refused, Err(expected.clone()));
    let PassOutcome::StepFailed { message, failure } = PassOutcome::from(expected) else {
        panic!("a refused update fails the pass");
    };
    assert_eq!(failure, StepFailure::Retryable);
    assert!(
        message.starts_with("risk of data loss updating"),
        "{message}"
    );
    // The same CRD, its stored version kept: safe; an absent CRD needs no check.
    let live = Observed::from([(CRD_STEP, live_crd(&[]))]);
    assert_eq!(
        check_crd_updates(&plan, &live, &[CRD_STEP], &HashMap::new()),
        Ok(vec![])
    );
    assert_eq!(
        check_crd_updates(&plan, &Observed::new(), &[CRD_STEP], &HashMap::new()),
        Ok(vec![])
    );
}

#[test]
fn a_scoped_account_is_asked_for_every_write_but_the_crds() {
    let mut steps = steps();
    let plan = checked(&mut steps);
    let asked: Vec<String> = scoped_questions(&plan, &steps, &apis(), NS)
        .iter()
        .map(|q| format!("{} {}.{}", q.verb, q.plural, q.group))
        .collect();
    assert_eq!(
        asked,
        [
            "create clusterserviceversions.operators.coreos.com",
            "create configmaps.",
            "patch configmaps.",
        ]
    );
    steps[CSV_STEP].status = StepStatus::Created;
    assert_eq!(
        scoped_questions(&plan, &steps, &apis(), NS).len(),
        2,
        "a step already written is not asked for"
    );
}

#[test]
fn a_crd_that_lost_its_csvs_annotation_gets_it_back_and_a_gone_one_fails() {
    let mut steps = steps();
    let plan = checked(&mut steps);
    let ctx = PassContext {
        namespace: NS,
        identity: &scoped(),
    };
    let bare = live_crd(&[]);
    let stage = alongside_repairs(&plan, ctx, &Observed::from([(CRD_STEP, bare)])).unwrap();
    assert_eq!(stage.acting, ExecuteAs::Controller);
    let Write::MergePatch {
        resource_version, ..
    } = &stage.writes[0].write
    else {
        panic!("a merge patch of the one annotation: {stage:?}");
    };
    assert_eq!(resource_version.as_deref(), Some("7"));
    let mut kept = live_crd(&[]);
    kept["metadata"]["annotations"] = json!({
        crate::olm_hash::installed_alongside_annotation_key(NS, CSV): format!("{NS}/{CSV}")
    });
    let stage = alongside_repairs(&plan, ctx, &Observed::from([(CRD_STEP, kept)])).unwrap();
    assert!(stage.writes.is_empty());
    assert_eq!(
        alongside_repairs(&plan, ctx, &Observed::new()),
        Err(PassError::CrdGone {
            name: "widgets.example.com".into()
        })
    );
}

#[test]
fn crds_and_olm_rs_own_objects_are_written_as_olm_rs_every_other_step_as_the_plan_identity() {
    let mut steps = steps();
    let plan = checked(&mut steps);
    let owners = HashMap::from([(CSV.to_owned(), "csv-uid".to_owned())]);
    let crd = Observed::from([(CRD_STEP, live_crd(&[]))]);
    for identity in [ExecuteAs::Controller, scoped()] {
        let ctx = PassContext {
            namespace: NS,
            identity: &identity,
        };
        let stages = [
            ("reader roles", reader_roles(&crd, &[CRD_STEP])),
            (
                "CRDs",
                crd_writes(&plan, ctx, &[CRD_STEP], &Observed::new(), &HashMap::new()),
            ),
            (
                "awaited CRDs",
                awaited_crds(&[CRD_STEP], &[CRD_STEP], &crd).stage,
            ),
            (
                "CSVs",
                object_writes(&plan, ctx, &[CSV_STEP], &apis(), &Observed::new(), &owners).unwrap(),
            ),
            (
                "the rest",
                object_writes(
                    &plan,
                    ctx,
                    &[CONFIG_STEP],
                    &apis(),
                    &Observed::new(),
                    &owners,
                )
                .unwrap(),
            ),
            ("repairs", alongside_repairs(&plan, ctx, &crd).unwrap()),
        ];
        for (name, stage) in stages {
            assert!(!stage.writes.is_empty(), "{name} writes");
            let expected = match name {
                "CSVs" | "the rest" => identity.clone(),
                _ => ExecuteAs::Controller,
            };
            assert_eq!(stage.acting, expected, "{name} as {identity:?}");
        }
    }
}

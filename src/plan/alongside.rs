//! The installed-alongside annotations an InstallPlan puts on the CRDs it applies
//! (docs/install-plans.md §7.3, docs/csv-phases.md §6.2): which of them a CRD update keeps,
//! and whether an applied CRD carries the one of the CSV the plan installs.
//!
//! A CRD is applied before the CSV it comes with exists (CRDs are a plan's first steps). So
//! "the CSV still exists" cannot be the whole rule for keeping an annotation: another plan's
//! update that reads the CSVs in that gap would drop the annotation of a CSV about to be
//! created, and that CSV would then wait forever on its own CRD (docs/reliability.md §3).
//! An annotation is kept while its CSV exists *or* an InstallPlan that is neither Complete
//! nor Failed will create it; CSVs of every namespace count, not only the plan's.

use std::collections::BTreeSet;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{Map, Value, json};

use crate::api::InstallPlanPhase;
use crate::api::keys::INSTALLED_ALONGSIDE_ANNOTATION_PREFIX;
use crate::k8s::effects::{Body, Write};
use crate::k8s::write::{ObjectKey, Ownership};
use crate::olm_hash::installed_alongside_annotation_key;

/// A CSV an installed-alongside annotation names (its value is `<namespace>/<name>`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct AlongsideCsv {
    pub namespace: String,
    pub name: String,
}

impl AlongsideCsv {
    pub fn new(namespace: &str, name: &str) -> Self {
        Self {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }
}

/// What a CRD update observed of the CSVs the live CRD's annotations name. The shell reads
/// the InstallPlans (`coming`) *before* the CSVs (`existing`): a plan seen Complete created
/// its CSV before that read, so the later read of the CSVs finds it; a plan seen installing
/// counts itself. Either way no CSV falls between the two reads.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct AlongsideFacts {
    /// CSVs that exist and are not copies (`olm.copiedFrom`).
    pub existing: BTreeSet<AlongsideCsv>,
    /// CSVs named by an InstallPlan that has not finished (see [`plan_still_installs`]).
    pub coming: BTreeSet<AlongsideCsv>,
}

impl AlongsideFacts {
    /// Whether the annotation naming `csv` stays on the CRD.
    pub fn keeps(&self, csv: &AlongsideCsv) -> bool {
        self.existing.contains(csv) || self.coming.contains(csv)
    }
}

/// Whether a plan in `phase` may still create the CSVs it names: every phase but Complete
/// and Failed (a plan waiting for approval, planning or installing).
pub fn plan_still_installs(phase: &InstallPlanPhase) -> bool {
    !matches!(phase, InstallPlanPhase::Complete | InstallPlanPhase::Failed)
}

/// The CSVs named by the installed-alongside annotations of `crd`, sorted, without duplicates.
pub fn alongside_csvs(crd: &Value) -> Vec<AlongsideCsv> {
    let mut out: Vec<AlongsideCsv> = annotations(crd)
        .into_iter()
        .flatten()
        .filter(|(key, _)| key.starts_with(INSTALLED_ALONGSIDE_ANNOTATION_PREFIX))
        .filter_map(|(_, value)| value.as_str()?.split_once('/'))
        .map(|(ns, name)| AlongsideCsv::new(ns, name))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Whether `crd` carries the installed-alongside annotation of CSV `csv` of `namespace`, key
/// and value both (what the CSV's requirement check looks for, docs/csv-phases.md §6.2).
pub fn carries_alongside(crd: &Value, namespace: &str, csv: &str) -> bool {
    let key = installed_alongside_annotation_key(namespace, csv);
    annotations(crd)
        .and_then(|a| a.get(&key))
        .and_then(Value::as_str)
        .is_some_and(|v| v == format!("{namespace}/{csv}"))
}

/// The write that gives `crd` back the installed-alongside annotation of CSV `csv` of
/// `namespace`, or `None` when it carries it: a merge patch of that one annotation, only at
/// the CRD's resourceVersion (a CRD changed meanwhile is looked at again, not overwritten).
/// It is not a server-side apply: an apply of the annotation alone under olm-rs's field
/// manager would remove the spec olm-rs applied.
pub fn alongside_repair(crd: &Value, namespace: &str, csv: &str) -> Option<Write> {
    if carries_alongside(crd, namespace, csv) {
        return None;
    }
    let name = crd.pointer("/metadata/name").and_then(Value::as_str)?;
    let key = installed_alongside_annotation_key(namespace, csv);
    Some(Write::MergePatch {
        key: ObjectKey::new::<CustomResourceDefinition>(None, name),
        patch: Body::new(json!({"metadata": {"annotations": {key: format!("{namespace}/{csv}")}}})),
        resource_version: crd
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .map(str::to_owned),
    })
}

/// Takes the installed-alongside annotations out of `desired`, the body of a CRD update's
/// server-side apply: the annotations are written by [`alongside_update`]'s merge patch
/// instead. An apply under olm-rs's one field manager removes whatever that manager applied
/// before and now leaves out, so an apply decided on an older copy of the CRD, landing after
/// another plan added its CSV's annotation, would remove that annotation (docs/reliability.md
/// §3.7). A merge patch owns what it changes under its own entry, which no apply removes.
/// Returns the annotations taken out.
pub fn take_installed_alongside(desired: &mut Value) -> Map<String, Value> {
    let Some(annotations) = desired
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    else {
        return Map::new();
    };
    let keys: Vec<String> = annotations
        .keys()
        .filter(|k| k.starts_with(INSTALLED_ALONGSIDE_ANNOTATION_PREFIX))
        .cloned()
        .collect();
    keys.into_iter()
        .filter_map(|k| annotations.remove_entry(&k))
        .collect()
}

/// The merge patch of a CRD update's installed-alongside annotations: `own` (the plan's CSV,
/// as taken from the desired CRD), every annotation of the `live` CRD that `facts` keeps
/// (written again: one an earlier olm-rs applied is removed by the apply that comes first, see
/// [`take_installed_alongside`]) and `null` — removal — for every other: its CSV is gone and
/// no unfinished plan will create it (OLM keeps only CSVs that exist). Annotations added to the
/// CRD after `live` was read are neither named nor removed.
pub fn alongside_update(live: &Value, own: Map<String, Value>, facts: &AlongsideFacts) -> Value {
    let mut patch = own;
    for (key, value) in annotations(live).into_iter().flatten() {
        if !key.starts_with(INSTALLED_ALONGSIDE_ANNOTATION_PREFIX) || patch.contains_key(key) {
            continue;
        }
        let kept = value
            .as_str()
            .and_then(|v| v.split_once('/'))
            .is_some_and(|(ns, name)| facts.keeps(&AlongsideCsv::new(ns, name)));
        let written = if kept { value.clone() } else { Value::Null };
        patch.insert(key.clone(), written);
    }
    json!({"metadata": {"annotations": patch}})
}

/// The two writes of an update of an existing CRD to `desired` (docs/install-plans.md §7.3):
/// the server-side apply without installed-alongside annotations, then the merge patch of
/// them ([`alongside_update`] over the `live` copy, keeping what `facts` keeps).
pub fn crd_update_writes(
    key: ObjectKey,
    mut desired: Value,
    live: &Value,
    facts: &AlongsideFacts,
) -> [Write; 2] {
    let own = take_installed_alongside(&mut desired);
    [
        Write::Apply {
            key: key.clone(),
            object: Body::new(desired),
            ownership: Ownership::Force,
        },
        Write::MergePatch {
            key,
            patch: Body::new(alongside_update(live, own, facts)),
            resource_version: None,
        },
    ]
}

fn annotations(object: &Value) -> Option<&Map<String, Value>> {
    object
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn annotated(csvs: &[(&str, &str)]) -> Value {
        let mut annotations = Map::new();
        for (ns, name) in csvs {
            annotations.insert(
                installed_alongside_annotation_key(ns, name),
                format!("{ns}/{name}").into(),
            );
        }
        annotations.insert("unrelated".into(), "x".into());
        json!({"metadata": {"name": "demos.example.com", "annotations": annotations}})
    }

    fn set(csvs: &[(&str, &str)]) -> BTreeSet<AlongsideCsv> {
        csvs.iter()
            .map(|(ns, n)| AlongsideCsv::new(ns, n))
            .collect()
    }

    /// The update of the CRD by the plan of `installing` (namespace `demo`), over a live CRD
    /// annotated for `live`, knowing `facts`: the CSVs named afterwards, the patch applied to
    /// the live CRD's annotations.
    fn update(live: &[(&str, &str)], installing: &str, facts: &AlongsideFacts) -> Vec<String> {
        let mut desired = annotated(&[("demo", installing)]);
        let own = take_installed_alongside(&mut desired);
        assert_eq!(
            desired["metadata"]["annotations"],
            json!({"unrelated": "x"}),
            "the apply carries no installed-alongside annotation"
        );
        let mut after = annotated(live);
        let patch = alongside_update(&after, own, facts);
        json_patch::merge(&mut after, &patch);
        alongside_csvs(&after)
            .into_iter()
            .map(|c| format!("{}/{}", c.namespace, c.name))
            .collect()
    }

    #[test]
    fn a_crd_update_keeps_what_it_must_and_drops_only_csvs_gone_for_good() {
        let chain = [
            ("demo", "demo-operator.v0.1.0"),
            ("demo", "demo-operator.v0.2.0"),
            ("demo", "demo-operator.v0.3.0"),
        ];
        struct Case {
            what: &'static str,
            existing: &'static [(&'static str, &'static str)],
            coming: &'static [(&'static str, &'static str)],
            want: &'static [&'static str],
        }
        let cases = [
            Case {
                // The stall of docs/reliability.md §3: v0.2.0's plan runs again (its Complete
                // was lost) after v0.3.0's plan applied the CRD and before it created v0.3.0.
                // Deciding by existing CSVs alone dropped v0.3.0, which then waited forever.
                what: "a CSV whose plan is still installing is kept",
                existing: &[
                    ("demo", "demo-operator.v0.1.0"),
                    ("demo", "demo-operator.v0.2.0"),
                ],
                coming: &[("demo", "demo-operator.v0.3.0")],
                want: &[
                    "demo/demo-operator.v0.1.0",
                    "demo/demo-operator.v0.2.0",
                    "demo/demo-operator.v0.3.0",
                ],
            },
            Case {
                what: "a CSV gone, its plan finished, is dropped",
                existing: &[
                    ("demo", "demo-operator.v0.2.0"),
                    ("demo", "demo-operator.v0.3.0"),
                ],
                coming: &[],
                want: &["demo/demo-operator.v0.2.0", "demo/demo-operator.v0.3.0"],
            },
            Case {
                what: "nothing known: only the plan's own CSV",
                existing: &[],
                coming: &[],
                want: &["demo/demo-operator.v0.2.0"],
            },
        ];
        for case in cases {
            let facts = AlongsideFacts {
                existing: set(case.existing),
                coming: set(case.coming),
            };
            assert_eq!(
                update(&chain, "demo-operator.v0.2.0", &facts),
                case.want,
                "{}",
                case.what
            );
        }
    }

    #[test]
    fn a_crd_update_keeps_the_csvs_of_other_namespaces() {
        // The same operator installed in two namespaces shares the CRD; an update from one
        // namespace once kept only its own namespace's annotations.
        let live = [
            ("team-a", "demo-operator.v0.1.0"),
            ("demo", "demo-operator.v0.1.0"),
        ];
        let facts = AlongsideFacts {
            existing: set(&live),
            coming: BTreeSet::new(),
        };
        assert_eq!(
            update(&live, "demo-operator.v0.2.0", &facts),
            [
                "demo/demo-operator.v0.1.0",
                "demo/demo-operator.v0.2.0",
                "team-a/demo-operator.v0.1.0"
            ]
        );
    }

    #[test]
    fn plans_that_may_still_create_their_csvs() {
        use InstallPlanPhase as P;
        for (phase, still) in [
            (P::None, true),
            (P::Planning, true),
            (P::RequiresApproval, true),
            (P::Installing, true),
            (P::Complete, false),
            (P::Failed, false),
        ] {
            assert_eq!(plan_still_installs(&phase), still, "{phase:?}");
        }
    }

    #[test]
    fn a_crd_carries_a_csv_only_with_its_key_and_value() {
        let crd = annotated(&[("demo", "demo-operator.v0.2.0")]);
        assert!(carries_alongside(&crd, "demo", "demo-operator.v0.2.0"));
        assert!(!carries_alongside(&crd, "demo", "demo-operator.v0.3.0"));
        assert!(!carries_alongside(&crd, "other", "demo-operator.v0.2.0"));
        let mut wrong_value = crd.clone();
        let key = installed_alongside_annotation_key("demo", "demo-operator.v0.2.0");
        wrong_value["metadata"]["annotations"][key.as_str()] = "demo/someone-else".into();
        assert!(!carries_alongside(
            &wrong_value,
            "demo",
            "demo-operator.v0.2.0"
        ));
        assert!(!carries_alongside(&json!({"metadata": {}}), "demo", "x"));
    }

    #[test]
    fn a_crd_that_lost_the_plans_annotation_gets_that_annotation_alone_back() {
        let mut crd = annotated(&[("demo", "demo-operator.v0.2.0")]);
        crd["metadata"]["resourceVersion"] = "42".into();
        assert_eq!(alongside_repair(&crd, "demo", "demo-operator.v0.2.0"), None);
        let Some(Write::MergePatch {
            key,
            patch,
            resource_version,
        }) = alongside_repair(&crd, "demo", "demo-operator.v0.3.0")
        else {
            panic!("a merge patch");
        };
        assert_eq!(key.name, "demos.example.com");
        assert_eq!(key.namespace, None);
        assert_eq!(resource_version.as_deref(), Some("42"));
        let want = installed_alongside_annotation_key("demo", "demo-operator.v0.3.0");
        assert_eq!(
            patch.to_json().unwrap(),
            json!({"metadata": {"annotations": {want: "demo/demo-operator.v0.3.0"}}}),
            "nothing but the annotation"
        );
    }
}

use std::collections::BTreeSet;

use super::*;
use crate::csv::fixtures::{csv, labels, og};

fn key(text: &str) -> ApiKey {
    parse_annotation(text)
        .into_iter()
        .next()
        .expect("one entry")
}

fn with_apis(mut group: OperatorGroup, text: &str) -> OperatorGroup {
    group.metadata.annotations = Some(labels(&[(PROVIDED_APIS_ANNOTATION, text)]));
    group
}

#[test]
fn annotation_round_trip_strips_spaces_sorts_and_skips_malformed_entries() {
    let parsed = parse_annotation(" B.v1.b.io, A.v1beta2.a.example.com ,bad,Also.bad");
    assert_eq!(parsed.len(), 2);
    assert_eq!(
        format_annotation(&parsed),
        "A.v1beta2.a.example.com,B.v1.b.io"
    );
    assert_eq!(key("K.v1.x.y.z").group, "x.y.z");
}

#[test]
fn provided_apis_come_from_owned_crds_and_apiservices() {
    let c = csv("a.v1");
    let apis = provided_apis(&c).unwrap();
    assert_eq!(format_annotation(&apis), "Demo.v1.example.com");
    let mut bad = csv("a.v1");
    bad.spec
        .custom_resource_definitions
        .as_mut()
        .unwrap()
        .owned
        .as_mut()
        .unwrap()[0]
        .name = "nodot".into();
    assert_eq!(provided_apis(&bad), Err(BadCrdName("nodot".into())));
}

#[test]
fn decision_table_of_operatorgroup_md_6_2() {
    let apis: BTreeSet<ApiKey> = [key("Demo.v1.example.com")].into();
    let mine = og("og", "demo", &["demo"]);
    let listed = with_apis(og("og", "demo", &["demo"]), "Demo.v1.example.com");
    let elsewhere = with_apis(og("other", "far", &["far"]), "Demo.v1.example.com");
    let global = with_apis(og("global", "operators", &[""]), "Demo.v1.example.com");
    let overlapping = with_apis(og("other", "x", &["demo"]), "Demo.v1.example.com");

    assert_eq!(
        reconcile_provided_apis(&apis, &mine, &[&mine, &elsewhere]),
        ProvidedApiDecision::Add {
            annotation: "Demo.v1.example.com".into()
        }
    );
    assert_eq!(
        reconcile_provided_apis(&apis, &listed, &[&listed, &elsewhere]),
        ProvidedApiDecision::Continue
    );
    assert_eq!(
        reconcile_provided_apis(&apis, &listed, &[&global]),
        ProvidedApiDecision::Remove {
            annotation: String::new()
        }
    );
    assert_eq!(
        reconcile_provided_apis(&apis, &mine, &[&overlapping]),
        ProvidedApiDecision::Conflict {
            apis: vec![key("Demo.v1.example.com")],
            groups: vec!["x/other".into()]
        }
    );
    // A group selecting nothing still covers its own namespace.
    let empty_here = with_apis(og("other", "demo2", &[]), "Demo.v1.example.com");
    assert_eq!(
        reconcile_provided_apis(&apis, &listed, &[&empty_here]),
        ProvidedApiDecision::Continue
    );
}

use serde_json::json;

use super::*;

fn prop(t: &str, v: Value) -> Property {
    Property::from_value(t, &v).unwrap()
}

fn candidate_props(package: &str, version: &str) -> Vec<Property> {
    vec![
        prop(PACKAGE, json!({"packageName": package, "version": version})),
        prop(
            GVK,
            json!({"group": "rabbitmq.com", "kind": "RabbitmqCluster", "version": "v1beta1"}),
        ),
        prop(LABEL, json!({"label": "certified"})),
        prop("certified", json!(true)),
    ]
}

fn matches(req: &Requirement, package: &str, version: &str) -> bool {
    let props = candidate_props(package, version);
    let v = parse_strict(version).ok();
    req.predicate.matches(&CandidateView {
        package,
        version: v.as_ref(),
        properties: &props,
    })
}

fn one(t: &str, v: Value) -> Result<Requirement, RequirementError> {
    requirements("b.v1", &[prop(t, v)]).map(|mut r| r.remove(0))
}

#[test]
fn gvk_package_and_label_requirements_match_like_olm() {
    let gvk = one(
        GVK_REQUIRED,
        json!({"group": "rabbitmq.com", "kind": "RabbitmqCluster", "version": "v1beta1"}),
    )
    .unwrap();
    assert!(matches(&gvk, "rabbitmq-cluster-operator", "2.1.0"));
    assert_eq!(
        gvk.olm_text(),
        "providing an API with group: rabbitmq.com, version: v1beta1, kind: RabbitmqCluster"
    );
    assert_eq!(
        gvk.plain(),
        "an operator providing RabbitmqCluster (rabbitmq.com/v1beta1)"
    );
    let pkg = one(
        PACKAGE_REQUIRED,
        json!({"packageName": "rabbitmq-cluster-operator", "versionRange": ">2.0.0"}),
    )
    .unwrap();
    assert!(matches(&pkg, "rabbitmq-cluster-operator", "2.1.0"));
    assert!(!matches(&pkg, "rabbitmq-cluster-operator", "1.9.0"));
    assert!(!matches(&pkg, "other", "3.0.0"));
    assert_eq!(
        pkg.olm_text(),
        "with package: rabbitmq-cluster-operator and with version in range: >2.0.0"
    );
    let label = one(LABEL_REQUIRED, json!({"label": "certified"})).unwrap();
    assert!(matches(&label, "x", "1.0.0"));
    let other = one(LABEL_REQUIRED, json!({"label": "beta"})).unwrap();
    assert!(!matches(&other, "x", "1.0.0"));
    assert!(
        requirements("b", &[prop("olm.maxOpenShiftVersion", json!("4.9"))])
            .unwrap()
            .is_empty()
    );
}

#[test]
fn compound_constraints_and_cel_with_semver_compare() {
    let any = one(
        CONSTRAINT,
        json!({"failureMessage": "needs rabbit", "any": {"constraints": [
            {"package": {"packageName": "nope", "versionRange": ">0.0.0"}},
            {"gvk": {"group": "rabbitmq.com", "kind": "RabbitmqCluster", "version": "v1beta1"}}
        ]}}),
    )
    .unwrap();
    assert!(matches(&any, "r", "1.0.0"));
    assert_eq!(any.failure_message.as_deref(), Some("needs rabbit"));
    let all = one(
        CONSTRAINT,
        json!({"all": {"constraints": [
            {"package": {"packageName": "r", "versionRange": ">=1.0.0"}},
            {"cel": {"rule": "properties.exists(p, p.type == \"certified\")"}}
        ]}}),
    )
    .unwrap();
    assert!(matches(&all, "r", "1.0.0"));
    assert!(!matches(&all, "r", "0.9.0"));
    let not = one(
        CONSTRAINT,
        json!({"not": {"constraints": [{"package": {"packageName": "r", "versionRange": "<2.0.0"}}]}}),
    )
    .unwrap();
    assert!(!matches(&not, "r", "1.0.0"));
    assert!(matches(&not, "r", "2.0.0"));
    assert_eq!(
        not.olm_text(),
        "not with package: r and with version in range: <2.0.0"
    );
    let semver = one(
        CONSTRAINT,
        json!({"failureMessage": "too old", "cel": {"rule":
            "properties.exists(p, p.type == \"olm.package\" && semver_compare(p.value.version, \"1.5.0\") >= 0)"}}),
    )
    .unwrap();
    assert!(matches(&semver, "r", "1.5.0"));
    assert!(!matches(&semver, "r", "1.4.9"));
    assert_eq!(
        semver.olm_text(),
        "with constraint: \"properties.exists(p, p.type == \\\"olm.package\\\" && semver_compare(p.value.version, \\\"1.5.0\\\") >= 0)\" and message: \"too old\""
    );
}

#[test]
fn a_cel_runtime_error_means_no_match() {
    // Not every candidate has a property with a `missing` key: the lookup fails at run time.
    let rule = one(
        CONSTRAINT,
        json!({"cel": {"rule": "properties.exists(p, p.value.missing == 1)"}}),
    )
    .unwrap();
    assert!(!matches(&rule, "r", "1.0.0"));
    let bad_version = one(
        CONSTRAINT,
        json!({"cel": {"rule": "semver_compare(\"not-a-version\", \"1.0.0\") == 0"}}),
    )
    .unwrap();
    assert!(!matches(&bad_version, "r", "1.0.0"));
}

#[test]
fn strict_parsing_names_bundle_property_and_error() {
    let err = one(
        CONSTRAINT,
        json!({"gvk": {"group": "g", "kind": "K", "version": "v1"}, "colour": 1}),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "bundle b.v1: property olm.constraint (#0) cannot be used: parse olm.constraint: json: unknown field \"colour\""
    );
    let err = one(CONSTRAINT, json!({"failureMessage": "x"})).unwrap_err();
    assert!(
        err.reason.to_string().ends_with("constraint is empty"),
        "{err}"
    );
    let err = one(
        CONSTRAINT,
        json!({"cel": {"rule": "properties.exists(p, "}}),
    )
    .unwrap_err();
    assert!(err.reason.to_string().contains("does not compile"), "{err}");
    let err = one(CONSTRAINT, json!({"cel": {"rule": "1 + 2"}})).unwrap_err();
    assert!(err.reason.to_string().contains("not a boolean"), "{err}");
    let err = one(
        PACKAGE_REQUIRED,
        json!({"packageName": "p", "versionRange": "~1.0"}),
    )
    .unwrap_err();
    assert!(
        err.reason.to_string().contains("versionRange \"~1.0\""),
        "{err}"
    );
    let huge = "x".repeat(MAX_CONSTRAINT_BYTES);
    let err = one(
        CONSTRAINT,
        json!({"failureMessage": huge, "gvk": {"group": "g", "kind": "K", "version": "v1"}}),
    )
    .unwrap_err();
    assert!(
        err.reason
            .to_string()
            .contains("more than the 131072 allowed"),
        "{err}"
    );
    let err = one(
        CONSTRAINT,
        json!({"gvk": {"group": "g", "kind": "K", "version": "v1"}, "package": {"packageName": "p", "versionRange": ">0.0.0"}}),
    )
    .unwrap_err();
    assert!(err.reason.to_string().contains("exactly one"), "{err}");
}

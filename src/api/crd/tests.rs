use kube::CustomResourceExt;
use serde_json::{Value, json};

use super::*;
use crate::api::{CatalogSource, ClusterServiceVersion, InstallPlan, Subscription};

fn schema_of(crd: &CustomResourceDefinition, version: &str) -> Value {
    let v = crd
        .spec
        .versions
        .iter()
        .find(|v| v.name == version)
        .expect("version exists");
    serde_json::to_value(
        v.schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref()),
    )
    .unwrap()
}

/// Walks a JSON pointer made of property names (`spec/install/strategy`).
fn prop<'a>(schema: &'a Value, path: &str) -> &'a Value {
    path.split('/').fold(schema, |node, name| match name {
        "[]" => &node["items"],
        name => &node["properties"][name],
    })
}

#[test]
fn every_generated_schema_is_structural() {
    for crd in all().unwrap() {
        for version in &crd.spec.versions {
            let schema = schema_of(&crd, &version.name);
            let problems = structural::check(&schema);
            assert!(
                problems.is_empty(),
                "{} {} is not structural:\n{}",
                crd.metadata.name.as_deref().unwrap_or_default(),
                version.name,
                problems
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("\n")
            );
        }
    }
}

/// (kind, short names, scope, [(version, served, storage)])
type KindSummary = (
    String,
    Option<Vec<String>>,
    String,
    Vec<(String, bool, bool)>,
);

#[test]
fn crd_level_facts_are_olms() {
    let crds = all().unwrap();
    let names: Vec<_> = crds
        .iter()
        .map(|c| c.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "catalogsources.operators.coreos.com",
            "clusterserviceversions.operators.coreos.com",
            "installplans.operators.coreos.com",
            "olmconfigs.operators.coreos.com",
            "operatorconditions.operators.coreos.com",
            "operatorgroups.operators.coreos.com",
            "operators.operators.coreos.com",
            "subscriptions.operators.coreos.com",
        ]
    );
    let facts: Vec<KindSummary> = crds
        .iter()
        .map(|c| {
            assert_eq!(c.spec.group, "operators.coreos.com");
            assert_eq!(c.spec.names.categories, Some(vec!["olm".to_string()]));
            assert_eq!(
                c.spec.names.list_kind,
                Some(format!("{}List", c.spec.names.kind))
            );
            for v in &c.spec.versions {
                assert!(
                    v.subresources.as_ref().unwrap().status.is_some(),
                    "status subresource"
                );
            }
            (
                c.spec.names.kind.clone(),
                c.spec.names.short_names.clone(),
                c.spec.scope.clone(),
                c.spec
                    .versions
                    .iter()
                    .map(|v| (v.name.clone(), v.served, v.storage))
                    .collect(),
            )
        })
        .collect();
    let s = |v: &[&str]| Some(v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    let version = |n: &str, storage: bool| (n.to_string(), true, storage);
    assert_eq!(
        facts,
        vec![
            (
                "CatalogSource".into(),
                s(&["catsrc"]),
                "Namespaced".into(),
                vec![version("v1alpha1", true)]
            ),
            (
                "ClusterServiceVersion".into(),
                s(&["csv", "csvs"]),
                "Namespaced".into(),
                vec![version("v1alpha1", true)]
            ),
            (
                "InstallPlan".into(),
                s(&["ip"]),
                "Namespaced".into(),
                vec![version("v1alpha1", true)]
            ),
            (
                "OLMConfig".into(),
                None,
                "Cluster".into(),
                vec![version("v1", true)]
            ),
            (
                "OperatorCondition".into(),
                s(&["condition"]),
                "Namespaced".into(),
                vec![version("v1", false), version("v2", true)]
            ),
            (
                "OperatorGroup".into(),
                s(&["og"]),
                "Namespaced".into(),
                vec![version("v1", true), version("v1alpha2", false)]
            ),
            (
                "Operator".into(),
                None,
                "Cluster".into(),
                vec![version("v1", true)]
            ),
            (
                "Subscription".into(),
                s(&["sub", "subs"]),
                "Namespaced".into(),
                vec![version("v1alpha1", true)]
            ),
        ]
    );
}

#[test]
fn printer_columns_are_olms() {
    let columns = |crd: CustomResourceDefinition| -> Vec<(String, String, String)> {
        crd.spec.versions[0]
            .additional_printer_columns
            .clone()
            .unwrap_or_default()
            .into_iter()
            .map(|c| (c.name, c.type_, c.json_path))
            .collect()
    };
    let col = |n: &str, t: &str, p: &str| (n.to_string(), t.to_string(), p.to_string());
    assert_eq!(
        columns(cluster_service_version().unwrap()),
        vec![
            col("Display", "string", ".spec.displayName"),
            col("Version", "string", ".spec.version"),
            col("Release", "string", ".spec.release"),
            col("Replaces", "string", ".spec.replaces"),
            col("Phase", "string", ".status.phase"),
        ]
    );
    assert_eq!(
        columns(catalog_source().unwrap()),
        vec![
            col("Display", "string", ".spec.displayName"),
            col("Type", "string", ".spec.sourceType"),
            col("Publisher", "string", ".spec.publisher"),
            col("Age", "date", ".metadata.creationTimestamp"),
        ]
    );
    assert_eq!(
        columns(subscription().unwrap()),
        vec![
            col("Package", "string", ".spec.name"),
            col("Source", "string", ".spec.source"),
            col("Channel", "string", ".spec.channel")
        ]
    );
    assert_eq!(
        columns(install_plan().unwrap()),
        vec![
            col("CSV", "string", ".spec.clusterServiceVersionNames[0]"),
            col("Approval", "string", ".spec.approval"),
            col("Approved", "boolean", ".spec.approved"),
        ]
    );
    assert!(columns(operator_group().unwrap()).is_empty());
    assert!(columns(olm_config().unwrap()).is_empty());
    // OLM's Operator CRD has none either: `kubectl get operators` shows NAME and AGE.
    assert!(columns(operator().unwrap()).is_empty());
    let conditions = operator_condition().unwrap();
    assert!(
        conditions
            .spec
            .versions
            .iter()
            .all(|v| v.additional_printer_columns.is_none())
    );
}

#[test]
fn operator_condition_versions_differ_as_in_olm() {
    let v2 = schema_of(&operator_condition().unwrap(), "v2");
    let v1 = schema_of(&operator_condition().unwrap(), "v1");
    for field in ["serviceAccounts", "deployments", "overrides"] {
        assert!(
            prop(&v1, &format!("spec/{field}")).is_object(),
            "v1 {field}"
        );
        assert!(
            prop(&v2, &format!("spec/{field}")).is_object(),
            "v2 {field}"
        );
    }
    assert!(prop(&v2, "spec/conditions").is_object());
    assert!(v1["properties"]["spec"]["properties"]["conditions"].is_null());
    for conditions in ["spec/overrides", "spec/conditions", "status/conditions"] {
        assert_eq!(
            prop(&v2, conditions)["items"]["required"],
            json!(["lastTransitionTime", "message", "reason", "status", "type"]),
            "{conditions}"
        );
    }
    assert_eq!(
        schema_of(&operator_condition().unwrap(), "v2")["required"],
        json!(["metadata"])
    );
}

#[test]
fn derive_attributes_agree_with_the_crd_table() {
    // The derived kinds carry names and columns twice (kube::Resource needs them); keep them equal.
    let pairs = [
        (
            ClusterServiceVersion::crd(),
            cluster_service_version().unwrap(),
        ),
        (Subscription::crd(), subscription().unwrap()),
        (InstallPlan::crd(), install_plan().unwrap()),
        (CatalogSource::crd(), catalog_source().unwrap()),
    ];
    for (derived, ours) in pairs {
        assert_eq!(derived.metadata.name, ours.metadata.name);
        assert_eq!(derived.spec.names.short_names, ours.spec.names.short_names);
        assert_eq!(derived.spec.names.singular, ours.spec.names.singular);
        assert_eq!(
            derived.spec.versions[0].additional_printer_columns,
            ours.spec.versions[0].additional_printer_columns
        );
    }
}

#[test]
fn top_level_required_lists_are_olms() {
    let required = |crd: CustomResourceDefinition| {
        schema_of(&crd, &crd.spec.versions[0].name.clone())["required"].clone()
    };
    assert_eq!(
        required(cluster_service_version().unwrap()),
        json!(["metadata", "spec"])
    );
    assert_eq!(
        required(subscription().unwrap()),
        json!(["metadata", "spec"])
    );
    assert_eq!(
        required(install_plan().unwrap()),
        json!(["metadata", "spec"])
    );
    assert_eq!(
        required(catalog_source().unwrap()),
        json!(["metadata", "spec"])
    );
    assert_eq!(required(operator_group().unwrap()), json!(["metadata"]));
    assert_eq!(required(olm_config().unwrap()), json!(["metadata"]));
}

#[test]
fn csv_schema_details() {
    let schema = schema_of(&cluster_service_version().unwrap(), "v1alpha1");
    let spec = prop(&schema, "spec");
    let mut req: Vec<_> = spec["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    req.sort();
    assert_eq!(req, ["displayName", "install"]);
    let deployment = prop(spec, "install/spec/deployments/[]");
    assert!(
        deployment["properties"]["label"].is_object(),
        "singular `label`"
    );
    let template_meta = prop(deployment, "spec/template/metadata");
    assert_eq!(template_meta["type"], "object");
    assert_eq!(template_meta["x-kubernetes-preserve-unknown-fields"], true);
    assert!(template_meta.get("properties").is_none());
    let release = prop(spec, "release");
    assert_eq!(release["maxLength"], 20);
    assert_eq!(
        release["x-kubernetes-validations"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let webhook = prop(spec, "webhookdefinitions/[]");
    assert_eq!(webhook["properties"]["containerPort"]["default"], 443);
    assert_eq!(
        webhook["properties"]["type"]["enum"],
        json!([
            "ValidatingAdmissionWebhook",
            "MutatingAdmissionWebhook",
            "ConversionWebhook"
        ])
    );
    let descriptor = prop(
        spec,
        "customresourcedefinitions/owned/[]/specDescriptors/[]",
    );
    assert_eq!(
        descriptor["properties"]["value"],
        json!({"type": "string", "format": "byte", "description": descriptor["properties"]["value"]["description"]})
    );
    assert!(descriptor["properties"]["x-descriptors"].is_object());
    let selector = prop(spec, "selector");
    assert_eq!(selector["x-kubernetes-map-type"], "atomic");
    let resources = prop(
        deployment,
        "spec/template/spec/containers/[]/resources/limits",
    );
    assert_eq!(
        resources["additionalProperties"]["x-kubernetes-int-or-string"],
        true
    );
    assert_eq!(
        resources["additionalProperties"]["pattern"],
        QUANTITY_PATTERN
    );
}

#[test]
fn operator_group_versions_differ_as_in_olm() {
    let crd = operator_group().unwrap();
    let v1 = schema_of(&crd, "v1");
    let v1alpha2 = schema_of(&crd, "v1alpha2");
    assert_eq!(
        prop(&v1, "spec")["default"],
        json!({"upgradeStrategy": "Default"})
    );
    assert_eq!(
        prop(&v1, "spec/upgradeStrategy")["enum"],
        json!(["Default", "TechPreviewUnsafeFailForward"])
    );
    assert_eq!(
        prop(&v1, "spec/targetNamespaces")["x-kubernetes-list-type"],
        "set"
    );
    assert_eq!(
        prop(&v1, "status/namespaces")["x-kubernetes-list-type"],
        "set"
    );
    assert!(prop(&v1, "status/conditions").is_object());
    assert_eq!(prop(&v1, "status")["required"], json!(["lastUpdated"]));
    assert!(prop(&v1alpha2, "spec/upgradeStrategy").is_null());
    assert!(prop(&v1alpha2, "status/conditions").is_null());
    assert!(prop(&v1alpha2, "spec").get("default").is_none());
    assert!(
        prop(&v1alpha2, "spec/targetNamespaces")
            .get("x-kubernetes-list-type")
            .is_none()
    );
}

#[test]
fn catalog_side_schema_details() {
    let sub = schema_of(&subscription().unwrap(), "v1alpha1");
    assert_eq!(
        prop(&sub, "spec")["required"],
        json!(["source", "sourceNamespace", "name"])
    );
    assert!(prop(&sub, "spec/startingCSV").is_object());
    assert_eq!(prop(&sub, "status")["required"], json!(["lastUpdated"]));
    assert!(
        prop(&sub, "status/installPlanRef").is_object()
            && prop(&sub, "status/installedCSV").is_object()
    );

    let ip = schema_of(&install_plan().unwrap(), "v1alpha1");
    assert_eq!(
        prop(&ip, "spec")["required"],
        json!(["clusterServiceVersionNames", "approval", "approved"])
    );
    assert_eq!(
        prop(&ip, "status")["required"],
        json!(["phase", "catalogSources"])
    );

    let cs = schema_of(&catalog_source().unwrap(), "v1alpha1");
    assert_eq!(prop(&cs, "spec")["required"], json!(["sourceType"]));
    assert_eq!(
        prop(&cs, "spec/grpcPodConfig/securityContextConfig")["enum"],
        json!(["legacy", "restricted"])
    );
    assert_eq!(
        prop(&cs, "spec/grpcPodConfig/memoryTarget")["x-kubernetes-int-or-string"],
        true
    );
    assert_eq!(
        prop(&cs, "status/conditions")["x-kubernetes-list-type"],
        "map"
    );

    let config = schema_of(&olm_config().unwrap(), "v1");
    assert!(prop(&config, "spec/features/packageServerSyncInterval")["pattern"].is_string());
    assert_eq!(
        prop(&config, "spec/features/disableCopiedCSVs")["type"],
        "boolean"
    );
}

#[test]
fn yaml_stream_and_kustomization_list_every_crd() {
    let crds = all().unwrap();
    let stream = to_yaml_stream(&crds).unwrap();
    let docs: Vec<Value> = serde_yaml_ng::Deserializer::from_str(&stream)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect();
    assert_eq!(docs.len(), 8);
    assert!(
        docs.iter().all(|d| d["kind"] == "CustomResourceDefinition"
            && d["apiVersion"] == "apiextensions.k8s.io/v1")
    );
    let kustomization = kustomization(&crds);
    for crd in &crds {
        assert!(kustomization.contains(&format!("- {}\n", file_name(crd))));
    }
}

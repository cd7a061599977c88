use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

fn catalog(spec: serde_json::Value) -> CatalogSource {
    let mut cs: CatalogSource = serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "CatalogSource",
        "metadata": {
            "name": "my.catalog",
            "namespace": "olm",
            "uid": "uid-1",
            "annotations": {"team": "blue"}
        },
        "spec": spec,
    }))
    .unwrap();
    cs.metadata.namespace = Some("olm".into());
    cs
}

fn build(cs: &CatalogSource) -> RegistryObjects {
    registry_objects(cs, &BTreeMap::new(), None, &RegistryPodOptions::default()).unwrap()
}

fn value(obj: &impl serde::Serialize) -> serde_json::Value {
    serde_json::to_value(obj).unwrap()
}

#[test]
fn image_catalog_pod_matches_olm() {
    let objects = build(&catalog(json!({
        "sourceType": "grpc",
        "image": "quay.io/org/catalog:latest",
        "secrets": ["pull", ""]
    })));
    let pod = value(&objects.pod);
    assert_eq!(pod["metadata"]["generateName"], "my.catalog-");
    assert_eq!(
        pod["metadata"]["labels"],
        json!({
            "olm.catalogSource": "my.catalog",
            "olm.managed": "true",
            "olm.pod-spec-hash": objects.pod_spec_hash,
        })
    );
    assert_eq!(
        pod["metadata"]["annotations"],
        json!({"team": "blue", "cluster-autoscaler.kubernetes.io/safe-to-evict": "true"})
    );
    assert_eq!(
        pod["metadata"]["ownerReferences"],
        json!([{
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "CatalogSource",
            "name": "my.catalog",
            "uid": "uid-1",
            "controller": true,
            "blockOwnerDeletion": false
        }])
    );
    let spec = &pod["spec"];
    assert_eq!(spec["serviceAccountName"], "my.catalog");
    assert_eq!(spec["nodeSelector"], json!({"kubernetes.io/os": "linux"}));
    assert_eq!(spec["imagePullSecrets"], json!([{"name": "pull"}]));
    assert!(spec.get("securityContext").is_none());
    let c = &spec["containers"][0];
    assert_eq!(
        *c,
        json!({
            "image": "quay.io/org/catalog:latest",
            "imagePullPolicy": "Always",
            "livenessProbe": {"grpc": {"port": 50051}, "initialDelaySeconds": 10, "timeoutSeconds": 5},
            "name": "registry-server",
            "ports": [{"containerPort": 50051, "name": "grpc"}],
            "readinessProbe": {"grpc": {"port": 50051}, "initialDelaySeconds": 5, "timeoutSeconds": 5},
            "resources": {"requests": {"cpu": "10m", "memory": "50Mi"}},
            "securityContext": {"readOnlyRootFilesystem": false},
            "startupProbe": {"failureThreshold": 15, "grpc": {"port": 50051}, "periodSeconds": 10, "timeoutSeconds": 5},
            "terminationMessagePolicy": "FallbackToLogsOnError"
        })
    );
}

#[test]
fn service_account_service_and_network_policy() {
    let objects = build(&catalog(json!({
        "sourceType": "grpc",
        "image": "quay.io/org/catalog@sha256:aaaa",
        "secrets": ["pull"]
    })));
    let sa = value(&objects.service_account);
    assert_eq!(sa["metadata"]["name"], "my.catalog");
    assert_eq!(sa["metadata"]["labels"], json!({"olm.managed": "true"}));
    assert_eq!(sa["imagePullSecrets"], json!([{"name": "pull"}]));
    assert_eq!(sa["metadata"]["ownerReferences"][0]["controller"], true);
    assert_eq!(
        sa["metadata"]["ownerReferences"][0]["blockOwnerDeletion"],
        true
    );

    let svc = value(&objects.service);
    assert_eq!(svc["metadata"]["name"], "my-catalog");
    assert_eq!(
        svc["metadata"]["labels"],
        json!({"olm.managed": "true", "olm.service-spec-hash": objects.service_spec_hash})
    );
    assert_eq!(
        svc["spec"],
        json!({
            "ports": [{"name": "grpc", "port": 50051, "targetPort": 50051}],
            "selector": {"olm.catalogSource": "my.catalog", "olm.managed": "true"}
        })
    );
    assert_eq!(svc["metadata"]["ownerReferences"][0]["controller"], false);

    let np = value(&objects.network_policy);
    assert_eq!(np["metadata"]["name"], "my.catalog-grpc-server");
    assert_eq!(
        np["spec"],
        json!({
            "ingress": [{"ports": [{"port": 50051, "protocol": "TCP"}]}],
            "podSelector": {"matchLabels": {"olm.catalogSource": "my.catalog", "olm.managed": "true"}},
            "policyTypes": ["Ingress", "Egress"]
        })
    );
    // A digest-pinned image never changes: no need to pull it again.
    assert_eq!(
        value(&objects.pod)["spec"]["containers"][0]["imagePullPolicy"],
        "IfNotPresent"
    );
    assert_eq!(
        service_address("my.catalog", "olm"),
        "my-catalog.olm.svc:50051"
    );
}

#[test]
fn security_context_config_table() {
    let restricted_ns = BTreeMap::from([(
        POD_SECURITY_ENFORCE_LABEL.to_owned(),
        "restricted".to_owned(),
    )]);
    let baseline_ns =
        BTreeMap::from([(POD_SECURITY_ENFORCE_LABEL.to_owned(), "baseline".to_owned())]);
    let with_uid = RegistryPodOptions {
        workload_user_id: Some(1001),
        ..RegistryPodOptions::default()
    };
    // (securityContextConfig, namespace labels, options, expect restricted, expect runAsUser)
    type Case<'a> = (
        Option<&'a str>,
        &'a BTreeMap<String, String>,
        &'a RegistryPodOptions,
        bool,
        bool,
    );
    let cases: [Case; 6] = [
        (
            None,
            &BTreeMap::new(),
            &RegistryPodOptions::default(),
            false,
            false,
        ),
        (
            None,
            &baseline_ns,
            &RegistryPodOptions::default(),
            false,
            false,
        ),
        (
            None,
            &restricted_ns,
            &RegistryPodOptions::default(),
            true,
            false,
        ),
        (Some("legacy"), &restricted_ns, &with_uid, false, false),
        (
            Some("restricted"),
            &BTreeMap::new(),
            &RegistryPodOptions::default(),
            true,
            false,
        ),
        (Some("restricted"), &BTreeMap::new(), &with_uid, true, true),
    ];
    for (config, ns, options, restricted, run_as) in cases {
        let mut spec = json!({"sourceType": "grpc", "image": "quay.io/o/c:1"});
        if let Some(c) = config {
            spec["grpcPodConfig"] = json!({"securityContextConfig": c});
        }
        let objects = registry_objects(&catalog(spec), ns, None, options).unwrap();
        let pod = value(&objects.pod);
        let label = format!("{config:?} {ns:?} uid={:?}", options.workload_user_id);
        if restricted {
            let mut expected = json!({"seccompProfile": {"type": "RuntimeDefault"}});
            if run_as {
                expected["runAsUser"] = json!(1001);
                expected["runAsNonRoot"] = json!(true);
            }
            assert_eq!(pod["spec"]["securityContext"], expected, "{label}");
            assert_eq!(
                pod["spec"]["containers"][0]["securityContext"],
                json!({
                    "allowPrivilegeEscalation": false,
                    "capabilities": {"drop": ["ALL"]},
                    "readOnlyRootFilesystem": false
                }),
                "{label}"
            );
        } else {
            assert!(pod["spec"].get("securityContext").is_none(), "{label}");
            assert_eq!(
                pod["spec"]["containers"][0]["securityContext"],
                json!({"readOnlyRootFilesystem": false}),
                "{label}"
            );
        }
    }
}

#[test]
fn grpc_pod_config_overrides() {
    let mut cs = catalog(json!({
        "sourceType": "grpc",
        "image": "quay.io/o/c:1",
        "grpcPodConfig": {
            "nodeSelector": {"disk": "ssd"},
            "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
            "priorityClassName": "low",
            "memoryTarget": "512Mi",
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}
        }
    }));
    let spec = value(&build(&cs).pod)["spec"].clone();
    assert_eq!(spec["nodeSelector"], json!({"disk": "ssd"}));
    assert_eq!(
        spec["tolerations"],
        json!([{"effect": "NoSchedule", "key": "dedicated", "operator": "Exists"}])
    );
    assert_eq!(spec["priorityClassName"], "low");
    assert_eq!(
        spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
            [0]["matchExpressions"][0]["key"],
        "zone"
    );
    let c = &spec["containers"][0];
    assert_eq!(
        c["resources"]["requests"],
        json!({"cpu": "10m", "memory": "512Mi"})
    );
    assert_eq!(c["env"], json!([{"name": "GOMEMLIMIT", "value": "512MiB"}]));

    cs.metadata
        .annotations
        .get_or_insert_default()
        .insert(CATALOG_PRIORITY_CLASS_ANNOTATION.into(), "high".into());
    assert_eq!(value(&build(&cs).pod)["spec"]["priorityClassName"], "high");

    cs.spec.grpc_pod_config.as_mut().unwrap().memory_target = Some(Quantity("lots".into()));
    let err = registry_objects(&cs, &BTreeMap::new(), None, &RegistryPodOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("olm/my.catalog") && err.contains("memoryTarget") && err.contains("lots"),
        "{err}"
    );
}

#[test]
fn extract_content_serves_with_opm() {
    let objects = build(&catalog(json!({
        "sourceType": "grpc",
        "image": "quay.io/o/c:1",
        "grpcPodConfig": {"extractContent": {"catalogDir": "/configs"}}
    })));
    let spec = value(&objects.pod)["spec"].clone();
    assert_eq!(
        spec["volumes"],
        json!([
            {"emptyDir": {}, "name": "utilities"},
            {"emptyDir": {}, "name": "catalog-content"},
            {"emptyDir": {}, "name": "tmpdir"}
        ])
    );
    assert_eq!(spec["initContainers"][0]["name"], "extract-utilities");
    assert_eq!(
        spec["initContainers"][0]["command"],
        json!(["cp", "/bin/copy-content", "/utilities/copy-content"])
    );
    assert_eq!(spec["initContainers"][1]["image"], "quay.io/o/c:1");
    assert_eq!(
        spec["initContainers"][1]["args"],
        json!([
            "--catalog.from=/configs",
            "--catalog.to=/extracted-catalog/catalog"
        ])
    );
    let c = &spec["containers"][0];
    assert_eq!(c["image"], "quay.io/operator-framework/opm:latest");
    assert_eq!(c["command"], json!(["/bin/opm"]));
    assert_eq!(c["args"], json!(["serve", "/extracted-catalog/catalog"]));
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(
        c["volumeMounts"][1],
        json!({"mountPath": "/tmp/", "name": "tmpdir"})
    );

    let cached = build(&catalog(json!({
        "sourceType": "grpc",
        "image": "quay.io/o/c:1",
        "grpcPodConfig": {"extractContent": {"catalogDir": "/configs", "cacheDir": "/tmp/cache"}}
    })));
    let spec = value(&cached.pod)["spec"].clone();
    assert_eq!(spec["volumes"].as_array().unwrap().len(), 2);
    assert_eq!(
        spec["initContainers"][1]["args"],
        json!([
            "--catalog.from=/configs",
            "--catalog.to=/extracted-catalog/catalog",
            "--cache.from=/tmp/cache",
            "--cache.to=/extracted-catalog/cache"
        ])
    );
    assert_eq!(
        spec["containers"][0]["args"],
        json!([
            "serve",
            "/extracted-catalog/catalog",
            "--cache-dir=/extracted-catalog/cache"
        ])
    );
}

#[test]
fn pod_spec_hash_follows_the_spec_only() {
    let base = json!({"sourceType": "grpc", "image": "quay.io/o/c:1"});
    let a = build(&catalog(base.clone()));
    assert_eq!(a.pod_spec_hash, build(&catalog(base.clone())).pod_spec_hash);
    assert_eq!(a.pod_spec_hash.len(), 20);

    let mut annotated = catalog(base);
    annotated
        .metadata
        .annotations
        .get_or_insert_default()
        .insert("note".into(), "x".into());
    assert_eq!(a.pod_spec_hash, build(&annotated).pod_spec_hash);

    let other_image = build(&catalog(
        json!({"sourceType": "grpc", "image": "quay.io/o/c:2"}),
    ));
    assert_ne!(a.pod_spec_hash, other_image.pod_spec_hash);
    assert_eq!(a.service_spec_hash, other_image.service_spec_hash);
}

#[test]
fn pull_secrets_come_from_the_live_service_account() {
    let cs = catalog(json!({"sourceType": "grpc", "image": "quay.io/o/c:1", "secrets": ["a"]}));
    let live = [
        LocalObjectReference { name: "a".into() },
        LocalObjectReference {
            name: "dockercfg-x".into(),
        },
    ];
    let objects = registry_objects(
        &cs,
        &BTreeMap::new(),
        Some(&live),
        &RegistryPodOptions::default(),
    )
    .unwrap();
    assert_eq!(
        value(&objects.pod)["spec"]["imagePullSecrets"],
        json!([{"name": "a"}, {"name": "dockercfg-x"}])
    );
}

#[test]
fn incomplete_catalogs_are_errors_not_panics() {
    let mut cs = catalog(json!({"sourceType": "grpc", "address": "x:1"}));
    let err =
        registry_objects(&cs, &BTreeMap::new(), None, &RegistryPodOptions::default()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "CatalogSource olm/my.catalog: spec.image is empty"
    );
    cs.spec.image = Some("quay.io/o/c:1".into());
    cs.metadata.uid = None;
    let err =
        registry_objects(&cs, &BTreeMap::new(), None, &RegistryPodOptions::default()).unwrap_err();
    assert!(err.to_string().contains("metadata.uid"));
}

#[test]
fn go_mem_limit_uses_the_largest_exact_binary_unit() {
    assert_eq!(go_mem_limit("512Mi").unwrap(), "512MiB");
    assert_eq!(go_mem_limit("1Gi").unwrap(), "1GiB");
    assert_eq!(go_mem_limit("1024Mi").unwrap(), "1GiB");
    assert_eq!(go_mem_limit("1.5Gi").unwrap(), "1536MiB");
    assert_eq!(go_mem_limit("1G").unwrap(), "1000000000B");
    assert_eq!(go_mem_limit("100").unwrap(), "100B");
    assert_eq!(
        go_mem_limit("lots").unwrap_err().to_string(),
        "\"lots\" is not a memory quantity (e.g. 512Mi, 1Gi, 500M)"
    );
}

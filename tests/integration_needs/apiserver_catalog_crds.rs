//! Real-world CRDs: the newest bundle of every package in the shared community catalog is
//! loaded into the sandbox. Every `apiextensions.k8s.io/v1` CRD must be accepted and
//! Established, and the `alm-examples` of the CSVs must be creatable with the fields their
//! schema declares intact (pruning keeps what it should).

use crate::apiserver_common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::common::shared_dir;
use apiserver_common::eventually;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use olm_rs::sandbox::{ApiServer, ApiServerOptions};
use serde_json::Value;

/// The newest version directory of each package (by semver where the names parse).
fn newest_bundles() -> Vec<PathBuf> {
    let root = shared_dir().join("data/catalogs/community-operators-prod/operators");
    let mut out = Vec::new();
    for pkg in std::fs::read_dir(&root).unwrap().flatten() {
        let mut versions: Vec<PathBuf> = std::fs::read_dir(pkg.path())
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.join("manifests").is_dir())
            .collect();
        versions.sort_by_key(|p| {
            let name = p
                .file_name()
                .unwrap()
                .to_string_lossy()
                .trim_start_matches('v')
                .to_string();
            (semver::Version::parse(&name).ok(), name)
        });
        out.extend(versions.pop());
    }
    out.sort();
    out
}

fn manifests(bundle: &Path) -> Vec<Value> {
    let mut docs = Vec::new();
    for f in std::fs::read_dir(bundle.join("manifests"))
        .unwrap()
        .flatten()
    {
        let text = std::fs::read_to_string(f.path()).unwrap();
        for doc in serde_yaml_ng::Deserializer::from_str(&text) {
            if let Ok(v) = <Value as serde::Deserialize>::deserialize(doc)
                && v.is_object()
            {
                docs.push(v);
            }
        }
    }
    docs
}

fn crd_api(client: kube::Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition");
    Api::all_with(
        client,
        &ApiResource::from_gvk_with_plural(&gvk, "customresourcedefinitions"),
    )
}

async fn catalog_crds_are_established_and_their_examples_keep_declared_fields() {
    let server = ApiServer::with_options(ApiServerOptions {
        simulate_workloads: false,
        ..Default::default()
    });
    let client = server.client();
    let crds = crd_api(client.clone());
    let bundles = newest_bundles();
    assert!(bundles.len() >= 80, "{} bundles", bundles.len());

    // plural and scope per (group, kind), and the storage schema's spec properties
    let mut served: BTreeMap<(String, String), (String, bool, Vec<String>)> = BTreeMap::new();
    let mut examples: Vec<Value> = Vec::new();
    let mut loaded = 0;
    let parsed: Vec<(PathBuf, Vec<Value>)> =
        bundles.iter().map(|b| (b.clone(), manifests(b))).collect();
    for (bundle, docs) in &parsed {
        for doc in docs.clone() {
            match (doc["apiVersion"].as_str(), doc["kind"].as_str()) {
                (Some("apiextensions.k8s.io/v1"), Some("CustomResourceDefinition")) => {
                    let obj: DynamicObject = serde_json::from_value(doc.clone()).unwrap();
                    match crds.create(&PostParams::default(), &obj).await {
                        Ok(_) => loaded += 1,
                        Err(kube::Error::Api(s)) if s.code == 409 => continue,
                        Err(e) => panic!(
                            "{}: CRD {:?} rejected: {e}",
                            bundle.display(),
                            obj.metadata.name
                        ),
                    }
                    let spec = &doc["spec"];
                    let storage = spec["versions"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .find(|v| v["storage"] == true)
                        .unwrap();
                    let props: Vec<String> = storage
                        .pointer("/schema/openAPIV3Schema/properties/spec/properties")
                        .and_then(Value::as_object)
                        .map(|m| m.keys().cloned().collect())
                        .unwrap_or_default();
                    served.insert(
                        (
                            spec["group"].as_str().unwrap().into(),
                            spec["names"]["kind"].as_str().unwrap().into(),
                        ),
                        (
                            spec["names"]["plural"].as_str().unwrap().into(),
                            spec["scope"] == "Namespaced",
                            props,
                        ),
                    );
                }
                (_, Some("ClusterServiceVersion")) => {
                    if let Some(raw) = doc
                        .pointer("/metadata/annotations/alm-examples")
                        .and_then(Value::as_str)
                        && let Ok(Value::Array(list)) = serde_json::from_str::<Value>(raw)
                    {
                        examples.extend(list);
                    }
                }
                _ => {}
            }
        }
    }
    assert!(loaded > 100, "only {loaded} CRDs loaded");
    let names: Vec<String> = crds
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|c| c.metadata.name.unwrap())
        .collect();
    for name in &names {
        eventually(&format!("{name} Established"), || async {
            let crd = crds.get(name).await.ok()?;
            let conds = crd.data.pointer("/status/conditions")?.as_array()?.clone();
            conds
                .iter()
                .any(|c| c["type"] == "Established" && c["status"] == "True")
                .then_some(())
        })
        .await;
    }
    let (mut created, mut checked_fields) = (0, 0);
    for ex in examples {
        let (Some(api_version), Some(kind)) = (ex["apiVersion"].as_str(), ex["kind"].as_str())
        else {
            continue;
        };
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let Some((plural, namespaced, props)) = served.get(&(group.to_string(), kind.to_string()))
        else {
            continue;
        };
        let ar =
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
        let api: Api<DynamicObject> = if *namespaced {
            Api::namespaced_with(client.clone(), "default", &ar)
        } else {
            Api::all_with(client.clone(), &ar)
        };
        let mut obj: DynamicObject = match serde_json::from_value(ex.clone()) {
            Ok(o) => o,
            Err(_) => continue,
        };
        obj.metadata.namespace = None;
        if obj.metadata.name.is_none() {
            continue;
        }
        let stored = match api.create(&PostParams::default(), &obj).await {
            Ok(s) => s,
            // Examples with names the API server rejects, or repeated across bundles.
            Err(kube::Error::Api(s)) if s.code == 422 || s.code == 409 => continue,
            Err(kube::Error::Api(s)) if s.code == 404 && !version.is_empty() => continue, // unserved version
            Err(e) => panic!("{kind} example rejected: {e}"),
        };
        created += 1;
        if let Some(spec) = ex["spec"].as_object() {
            // `null` values of non-nullable fields are dropped by the real server too.
            let present = spec
                .iter()
                .filter(|(k, v)| !v.is_null() && props.contains(k));
            for (key, _) in present {
                assert!(
                    stored.data["spec"].get(key).is_some(),
                    "{kind}: declared spec.{key} was pruned"
                );
                checked_fields += 1;
            }
        }
    }
    assert!(
        created > 50 && checked_fields > 100,
        "created {created}, checked {checked_fields} fields"
    );
}

crate::trials! {
    current catalog_crds_are_established_and_their_examples_keep_declared_fields,
}

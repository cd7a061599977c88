//! The object a step writes, made from its manifest at execution time
//! (docs/install-plans.md §7.3): `olm.managed=true` on everything, namespaced objects
//! forced into the plan namespace and owned by the CSV, cluster-scoped ones tied to it by
//! `olm.owner*` labels, CRDs marked with the CSV they were installed alongside.

use serde_json::{Map, Value, json};

use super::kinds::{Scope, StepKind};
use super::rbac::owner_labels;
use crate::olm_hash::installed_alongside_annotation_key;

pub const MANAGED_LABEL: &str = "olm.managed";
pub const CSV_API_VERSION: &str = "operators.coreos.com/v1alpha1";

/// The CSV that owns what a plan creates for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerCsv {
    pub name: String,
    pub uid: String,
}

/// OLM's non-blocking, non-controller owner reference to a CSV.
pub fn csv_owner_reference(csv: &OwnerCsv) -> Value {
    json!({
        "apiVersion": CSV_API_VERSION,
        "kind": "ClusterServiceVersion",
        "name": csv.name,
        "uid": csv.uid,
        "controller": false,
        "blockOwnerDeletion": false,
    })
}

/// The object to write for a step of kind `kind` with `scope` in plan namespace `namespace`.
/// `owner` is the CSV the step resolves for, once it exists (namespaced objects other than
/// CRDs, CSVs and Subscriptions need it). Server-managed metadata is dropped so the object can
/// be applied as is.
pub fn prepare_object(
    kind: StepKind,
    scope: Scope,
    manifest: &Value,
    namespace: &str,
    resolving: &str,
    owner: Option<&OwnerCsv>,
) -> Value {
    let mut object = manifest.clone();
    let Some(map) = object.as_object_mut() else {
        return object;
    };
    let metadata = map
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !metadata.is_object() {
        *metadata = Value::Object(Map::new());
    }
    let Some(metadata) = metadata.as_object_mut() else {
        return object;
    };
    for server_field in [
        "resourceVersion",
        "uid",
        "creationTimestamp",
        "generation",
        "managedFields",
        "selfLink",
    ] {
        metadata.remove(server_field);
    }
    let labels = sub_map(metadata, "labels");
    labels.insert(MANAGED_LABEL.into(), "true".into());
    match scope {
        Scope::Namespaced => {
            metadata.insert("namespace".into(), namespace.into());
        }
        Scope::Cluster => {
            metadata.remove("namespace");
        }
    }
    match kind {
        StepKind::CustomResourceDefinition => {
            let annotations = sub_map(metadata, "annotations");
            annotations.insert(
                installed_alongside_annotation_key(namespace, resolving),
                format!("{namespace}/{resolving}").into(),
            );
        }
        StepKind::ClusterServiceVersion | StepKind::Subscription => {}
        _ if scope == Scope::Namespaced => {
            if let Some(owner) = owner {
                let refs = metadata
                    .entry("ownerReferences")
                    .or_insert_with(|| Value::Array(Vec::new()));
                if !refs.is_array() {
                    *refs = Value::Array(Vec::new());
                }
                if let Some(refs) = refs.as_array_mut() {
                    refs.retain(|r| {
                        r.get("uid")
                            .and_then(Value::as_str)
                            .is_some_and(|u| !u.is_empty())
                    });
                    if !refs.iter().any(|r| r["uid"] == owner.uid.as_str()) {
                        refs.push(csv_owner_reference(owner));
                    }
                }
            }
        }
        _ => {
            let labels = sub_map(metadata, "labels");
            for (key, value) in owner_labels(resolving, namespace) {
                labels.insert(key, value);
            }
        }
    }
    object
}

/// Owner references of a live object merged with the desired ones (ServiceAccounts keep every
/// owner: several CSVs may share one, docs/install-plans.md §7.3).
pub fn merge_owner_references(live: Option<&Value>, desired: &mut Value) {
    let Some(live_refs) = live
        .and_then(|l| l.pointer("/metadata/ownerReferences"))
        .and_then(Value::as_array)
    else {
        return;
    };
    let Some(metadata) = desired.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let refs = metadata
        .entry("ownerReferences")
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Some(refs) = refs.as_array_mut() {
        for live_ref in live_refs.iter().rev() {
            if !refs.iter().any(|r| r.get("uid") == live_ref.get("uid")) {
                refs.insert(0, live_ref.clone());
            }
        }
    }
}

fn sub_map<'a>(parent: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let entry = parent
        .entry(key)
        .or_insert_with(|| Value::Object(Map::new()));
    if !entry.is_object() {
        *entry = Value::Object(Map::new());
    }
    match entry {
        Value::Object(map) => map,
        // Just replaced by an object above.
        _ => unreachable!("entry was made an object"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner() -> OwnerCsv {
        OwnerCsv {
            name: "op.v1".into(),
            uid: "u-1".into(),
        }
    }

    #[test]
    fn namespaced_objects_are_moved_labelled_and_owned() {
        let manifest = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "elsewhere", "resourceVersion": "9"}});
        let out = prepare_object(
            StepKind::ConfigMap,
            Scope::Namespaced,
            &manifest,
            "ns",
            "op.v1",
            Some(&owner()),
        );
        assert_eq!(out["metadata"]["namespace"], "ns");
        assert_eq!(out["metadata"]["labels"]["olm.managed"], "true");
        assert_eq!(out["metadata"]["ownerReferences"][0]["uid"], "u-1");
        assert_eq!(
            out["metadata"]["ownerReferences"][0]["blockOwnerDeletion"],
            false
        );
        assert!(out["metadata"].get("resourceVersion").is_none());
    }

    #[test]
    fn cluster_objects_get_owner_labels_and_crds_the_alongside_annotation() {
        let pc = json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000});
        let kind = StepKind::of("PriorityClass").unwrap();
        let out = prepare_object(kind, Scope::Cluster, &pc, "ns", "op.v1", Some(&owner()));
        assert_eq!(out["metadata"]["labels"]["olm.owner"], "op.v1");
        assert_eq!(out["metadata"]["labels"]["olm.owner.namespace"], "ns");
        assert!(out["metadata"].get("ownerReferences").is_none());
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "w.example.com"}});
        let out = prepare_object(
            StepKind::CustomResourceDefinition,
            Scope::Cluster,
            &crd,
            "ns",
            "op.v1",
            None,
        );
        let key = installed_alongside_annotation_key("ns", "op.v1");
        assert_eq!(out["metadata"]["annotations"][key.as_str()], "ns/op.v1");
    }

    #[test]
    fn service_accounts_keep_every_owner() {
        let live = json!({"metadata": {"ownerReferences": [{"uid": "u-0", "name": "op.v0"}]}});
        let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "op"}});
        let mut desired = prepare_object(
            StepKind::ServiceAccount,
            Scope::Namespaced,
            &sa,
            "ns",
            "op.v1",
            Some(&owner()),
        );
        merge_owner_references(Some(&live), &mut desired);
        let uids: Vec<&str> = desired["metadata"]["ownerReferences"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["uid"].as_str().unwrap())
            .collect();
        assert_eq!(uids, ["u-0", "u-1"]);
    }
}

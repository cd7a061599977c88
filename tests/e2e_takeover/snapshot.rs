//! What the cluster holds of the operators, taken before and after a controller changes hands,
//! and the differences between two such pictures: an object recreated (another uid), gone, new,
//! or with other content (metadata, spec, data — status, `resourceVersion` and `managedFields`
//! aside), a Deployment with another generation or template, a pod restarted.

use std::collections::BTreeMap;

use kube::api::{Api, DynamicObject, ListParams};
use kube::core::ApiResource;
use olm_rs::json_diff;
use serde_json::Value;

use crate::cluster::{self, core};

/// One object as compared: its uid, resourceVersion, phase (CSVs, InstallPlans) and content.
#[derive(Debug, Clone)]
pub struct Seen {
    pub uid: String,
    pub resource_version: String,
    pub phase: String,
    /// Restart counts of a pod's containers.
    pub restarts: i64,
    pub content: Value,
    /// The status, apart: written by controllers, compared only to say what a write changed.
    pub status: Value,
}

/// `kind namespace/name` → what was seen.
pub type Snapshot = BTreeMap<String, Seen>;

/// The kinds compared: namespaced ones in `namespaces` (and in `kube-system` when labelled
/// `olm.managed` or `olm.owner`), cluster-scoped ones when OLM labels them as its own
/// (`olm.owner`) or they are the operators' CRDs.
fn kinds() -> Vec<(ApiResource, bool)> {
    let rbac = |kind: &str, plural: &str| core("rbac.authorization.k8s.io", "v1", kind, plural);
    vec![
        (cluster::deployments(), true),
        (core("apps", "v1", "ReplicaSet", "replicasets"), true),
        (core("", "v1", "Pod", "pods"), true),
        (core("", "v1", "Secret", "secrets"), true),
        (core("", "v1", "Service", "services"), true),
        (core("", "v1", "ServiceAccount", "serviceaccounts"), true),
        (rbac("Role", "roles"), true),
        (rbac("RoleBinding", "rolebindings"), true),
        (cluster::csvs(), true),
        (cluster::install_plans(), true),
        (cluster::subscriptions(), true),
        (cluster::operator_groups(), true),
        (
            cluster::olm("v2", "OperatorCondition", "operatorconditions"),
            true,
        ),
        (rbac("ClusterRole", "clusterroles"), false),
        (rbac("ClusterRoleBinding", "clusterrolebindings"), false),
        (
            core(
                "admissionregistration.k8s.io",
                "v1",
                "ValidatingWebhookConfiguration",
                "validatingwebhookconfigurations",
            ),
            false,
        ),
        (
            core(
                "admissionregistration.k8s.io",
                "v1",
                "MutatingWebhookConfiguration",
                "mutatingwebhookconfigurations",
            ),
            false,
        ),
        (
            core("apiregistration.k8s.io", "v1", "APIService", "apiservices"),
            false,
        ),
        (
            core(
                "apiextensions.k8s.io",
                "v1",
                "CustomResourceDefinition",
                "customresourcedefinitions",
            ),
            false,
        ),
    ]
}

/// CRDs the test's operators own.
const CRDS: [&str; 3] = [
    "widgets.e2e.olm-rs.dev",
    "gadgets.testop.olm-rs.dev",
    "gizmos.own.testop.olm-rs.dev",
];

/// Takes the picture: every object of [`kinds`] in `namespaces`, and OLM's cluster-scoped ones.
pub async fn take(client: &kube::Client, namespaces: &[&str]) -> anyhow::Result<Snapshot> {
    let mut out = Snapshot::new();
    for (resource, namespaced) in kinds() {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        let list = api.list(&ListParams::default()).await?;
        for object in list.items {
            let ns = object.metadata.namespace.clone().unwrap_or_default();
            let name = object.metadata.name.clone().unwrap_or_default();
            let labelled = |key: &str| {
                object
                    .metadata
                    .labels
                    .as_ref()
                    .is_some_and(|l| l.contains_key(key))
            };
            let owned_by_olm = labelled("olm.owner");
            // What OLM makes in kube-system: copied CSVs, and the auth-reader RoleBinding of
            // each aggregated API's CSV, which OLM labels `olm.managed` only (olm-rs adds the
            // owner labels, docs/certificates.md §3.5).
            let keep = if namespaced {
                namespaces.contains(&ns.as_str())
                    || (ns == "kube-system" && (owned_by_olm || labelled("olm.managed")))
            } else if resource.kind == "CustomResourceDefinition" {
                CRDS.contains(&name.as_str())
            } else {
                owned_by_olm || (resource.kind == "APIService" && name.contains("testop"))
            };
            if !keep {
                continue;
            }
            let key = if ns.is_empty() {
                format!("{} {name}", resource.kind)
            } else {
                format!("{} {ns}/{name}", resource.kind)
            };
            out.insert(key, seen(&resource.kind, object));
        }
    }
    Ok(out)
}

fn seen(kind: &str, object: DynamicObject) -> Seen {
    let uid = object.metadata.uid.clone().unwrap_or_default();
    let resource_version = object.metadata.resource_version.clone().unwrap_or_default();
    let mut value = serde_json::to_value(&object).unwrap_or_default();
    let phase = value["status"]["phase"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let restarts = value["status"]["containerStatuses"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["restartCount"].as_i64())
        .sum();
    let mut status = Value::Null;
    if let Some(object) = value.as_object_mut() {
        status = object.remove("status").unwrap_or_default();
        if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("resourceVersion");
            meta.remove("managedFields");
        }
    }
    // An aggregated ClusterRole's selectors are a set: OLM lists them in Go's map order, which
    // changes from one run to the next, and the rules follow them (kube-controller-manager
    // fills them in). Compared in a fixed order.
    if kind == "ClusterRole" && value["aggregationRule"].is_object() {
        for pointer in ["/aggregationRule/clusterRoleSelectors", "/rules"] {
            if let Some(items) = value.pointer_mut(pointer).and_then(Value::as_array_mut) {
                items.sort_by_key(Value::to_string);
            }
        }
    }
    // A pod's content is what its controller gave it; its restarts are counted apart.
    if kind == "Pod"
        && let Some(meta) = value["metadata"].as_object_mut()
    {
        meta.remove("annotations");
    }
    Seen {
        uid,
        resource_version,
        phase,
        restarts,
        content: value,
        status,
    }
}

/// What differs between `before` and `after`, one line each; a change of the object `key` at a
/// JSON pointer for which `known(key, path)` holds is left out (a difference documented as
/// expected).
pub fn differences(
    before: &Snapshot,
    after: &Snapshot,
    known: impl Fn(&str, &str) -> bool,
) -> Vec<String> {
    let mut out = Vec::new();
    for (key, old) in before {
        let Some(new) = after.get(key) else {
            out.push(format!("{key}: gone"));
            continue;
        };
        if old.uid != new.uid {
            out.push(format!("{key}: recreated (uid {} → {})", old.uid, new.uid));
            continue;
        }
        if old.restarts != new.restarts {
            out.push(format!(
                "{key}: containers restarted ({} → {} restarts)",
                old.restarts, new.restarts
            ));
        }
        if old.phase != new.phase {
            out.push(format!("{key}: phase {} → {}", old.phase, new.phase));
        }
        let mut paths = Vec::new();
        json_diff::paths_under("", &old.content, &new.content, &mut paths);
        paths.retain(|p| !known(key, p.split(": ").next().unwrap_or_default()));
        if !paths.is_empty() {
            out.push(format!("{key}: content changed: {}", paths.join("; ")));
        }
    }
    for key in after.keys() {
        if !before.contains_key(key) {
            out.push(format!("{key}: new"));
        }
    }
    out
}

/// Objects whose resourceVersion moved (written, whether or not the content changed), each
/// with what changed in it, status included (empty: only managed fields, or nothing at all).
pub fn rewritten(before: &Snapshot, after: &Snapshot) -> Vec<(String, Vec<String>)> {
    before
        .iter()
        .filter_map(|(key, old)| {
            let new = after.get(key)?;
            if new.uid != old.uid || new.resource_version == old.resource_version {
                return None;
            }
            let mut paths = Vec::new();
            json_diff::paths_under("", &old.content, &new.content, &mut paths);
            json_diff::paths_under("/status", &old.status, &new.status, &mut paths);
            Some((key.clone(), paths))
        })
        .collect()
}

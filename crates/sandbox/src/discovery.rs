//! Discovery documents: `/api`, `/apis`, `/apis/{group}`, the per-version resource lists, the
//! aggregated (`apidiscovery.k8s.io/v2`) form kubectl prefers, and `/version`.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use super::resources::{ResourceInfo, version_priority};

const VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// Served versions per group, groups in first-served order, versions by Kubernetes priority.
fn groups(resources: &[Arc<ResourceInfo>]) -> Vec<(String, Vec<String>)> {
    let mut order: Vec<String> = Vec::new();
    let mut versions: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in resources {
        if !order.contains(&r.group) {
            order.push(r.group.clone());
        }
        let vs = versions.entry(r.group.clone()).or_default();
        if !vs.contains(&r.version) {
            vs.push(r.version.clone());
        }
    }
    order
        .into_iter()
        .map(|g| {
            let mut vs = versions.remove(&g).unwrap_or_default();
            vs.sort_by(|a, b| version_priority(a, b));
            (g, vs)
        })
        .collect()
}

fn group_json(name: &str, versions: &[String]) -> Value {
    let gv = |v: &String| json!({"groupVersion": format!("{name}/{v}"), "version": v});
    json!({
        "name": name,
        "versions": versions.iter().map(gv).collect::<Vec<_>>(),
        "preferredVersion": versions.first().map(gv).unwrap_or(Value::Null),
    })
}

/// `/api`
pub fn core_versions() -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:6443"}],
    })
}

/// `/apis`
pub fn group_list(resources: &[Arc<ResourceInfo>]) -> Value {
    let groups: Vec<Value> = groups(resources)
        .iter()
        .filter(|(g, _)| !g.is_empty())
        .map(|(g, vs)| group_json(g, vs))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/{group}`; `None` when the group is not served.
pub fn group(resources: &[Arc<ResourceInfo>], name: &str) -> Option<Value> {
    let (_, vs) = groups(resources)
        .into_iter()
        .find(|(g, _)| g == name && !g.is_empty())?;
    let mut doc = group_json(name, &vs);
    doc["kind"] = json!("APIGroup");
    doc["apiVersion"] = json!("v1");
    Some(doc)
}

fn resource_json(r: &ResourceInfo) -> Vec<Value> {
    let mut main = json!({
        "name": r.plural,
        "singularName": r.singular,
        "namespaced": r.namespaced,
        "kind": r.kind,
        "verbs": VERBS,
    });
    if !r.short_names.is_empty() {
        main["shortNames"] = json!(r.short_names);
    }
    if !r.categories.is_empty() {
        main["categories"] = json!(r.categories);
    }
    let mut out = vec![main];
    if r.status_subresource {
        out.push(json!({
            "name": format!("{}/status", r.plural),
            "singularName": "",
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": ["get", "patch", "update"],
        }));
    }
    if r.group.is_empty() && r.kind == "Namespace" {
        out.push(json!({
            "name": "namespaces/finalize", "singularName": "", "namespaced": false,
            "kind": "Namespace", "verbs": ["update"],
        }));
    }
    out
}

/// `/api/v1`, `/apis/{group}/{version}`; `None` when nothing is served there.
pub fn resource_list(resources: &[Arc<ResourceInfo>], group: &str, version: &str) -> Option<Value> {
    let served: Vec<&Arc<ResourceInfo>> = resources
        .iter()
        .filter(|r| r.group == group && r.version == version)
        .collect();
    if served.is_empty() {
        return None;
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": served.iter().flat_map(|r| resource_json(r)).collect::<Vec<_>>(),
    }))
}

pub const AGGREGATED_CONTENT_TYPE: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// Aggregated discovery for `/api` (`core == true`) or `/apis`.
pub fn aggregated(resources: &[Arc<ResourceInfo>], core: bool) -> Value {
    let items: Vec<Value> = groups(resources)
        .into_iter()
        .filter(|(g, _)| g.is_empty() == core)
        .map(|(g, vs)| {
            let versions: Vec<Value> = vs
                .iter()
                .map(|v| {
                    let res: Vec<Value> = resources
                        .iter()
                        .filter(|r| r.group == g && &r.version == v)
                        .map(|r| aggregated_resource(r))
                        .collect();
                    json!({"version": v, "resources": res, "freshness": "Current"})
                })
                .collect();
            json!({"metadata": {"name": g, "creationTimestamp": null}, "versions": versions})
        })
        .collect();
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items,
    })
}

fn aggregated_resource(r: &ResourceInfo) -> Value {
    let gvk = json!({"group": r.group, "version": r.version, "kind": r.kind});
    let mut out = json!({
        "resource": r.plural,
        "responseKind": gvk,
        "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": r.singular,
        "verbs": VERBS,
    });
    if !r.short_names.is_empty() {
        out["shortNames"] = json!(r.short_names);
    }
    if !r.categories.is_empty() {
        out["categories"] = json!(r.categories);
    }
    if r.status_subresource {
        out["subresources"] = json!([{"subresource": "status", "responseKind": gvk, "verbs": ["get", "patch", "update"]}]);
    }
    out
}

/// `/version` for the configured `gitVersion` (`v1.33.0` → major 1, minor 33).
pub fn version(git_version: &str) -> Value {
    let mut parts = git_version.trim_start_matches('v').split('.');
    let major = parts.next().unwrap_or_default();
    let minor = parts.next().unwrap_or_default();
    json!({
        "major": major,
        "minor": minor,
        "gitVersion": git_version,
        "gitCommit": "olm-rs-sandbox",
        "gitTreeState": "clean",
        "buildDate": "1970-01-01T00:00:00Z",
        "goVersion": "n/a (olm-rs sandbox)",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::builtins;

    #[test]
    fn core_and_group_documents() {
        let all = builtins();
        let core = resource_list(&all, "", "v1").unwrap();
        let names: Vec<_> = core["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert!(names.contains(&"namespaces/status") && names.contains(&"configmaps"));
        let apps = group(&all, "apps").unwrap();
        assert_eq!(apps["preferredVersion"]["groupVersion"], "apps/v1");
        assert!(group(&all, "").is_none());
        let list = group_list(&all);
        assert!(
            list["groups"]
                .as_array()
                .unwrap()
                .iter()
                .all(|g| g["name"] != "")
        );
        assert!(resource_list(&all, "apps", "v2").is_none());
    }

    #[test]
    fn version_document_splits_git_version() {
        let v = version("v1.31.2");
        assert_eq!(
            (v["major"].as_str(), v["minor"].as_str()),
            (Some("1"), Some("31"))
        );
    }

    #[test]
    fn aggregated_discovery_separates_core() {
        let all = builtins();
        let core = aggregated(&all, true);
        assert_eq!(core["items"].as_array().unwrap().len(), 1);
        let apis = aggregated(&all, false);
        assert!(
            apis["items"]
                .as_array()
                .unwrap()
                .iter()
                .any(|g| g["metadata"]["name"] == "apps")
        );
    }
}

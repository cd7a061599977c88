//! Discovery documents of `packages.operators.coreos.com/v1`: what the aggregator and kubectl
//! read to learn that `packagemanifests` exist and what they allow (get and list; no watch,
//! as OLM's package server).

use serde_json::{Value, json};

use crate::package_manifest::types::{GROUP, KIND, RESOURCE, VERSION};

fn group_version() -> String {
    format!("{GROUP}/{VERSION}")
}

pub fn group() -> Value {
    json!({
        "kind": "APIGroup", "apiVersion": "v1", "name": GROUP,
        "versions": [{"groupVersion": group_version(), "version": VERSION}],
        "preferredVersion": {"groupVersion": group_version(), "version": VERSION},
    })
}

pub fn group_list() -> Value {
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [group()]})
}

pub fn resource_list() -> Value {
    json!({
        "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version(),
        "resources": [
            {"name": RESOURCE, "singularName": "packagemanifest", "namespaced": true, "kind": KIND,
             "verbs": ["get", "list"], "categories": ["olm"]},
            {"name": format!("{RESOURCE}/icon"), "singularName": "", "namespaced": true, "kind": KIND,
             "verbs": ["get"]},
        ],
    })
}

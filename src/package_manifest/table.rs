//! The `Table` form of PackageManifests (what `kubectl get packagemanifests` prints):
//! NAME, CATALOG (the CatalogSource's display name) and AGE, as OLM's package server prints
//! them (docs/packagemanifests.md §6).

use jiff::Timestamp;
use serde_json::{Value, json};

use super::types::PackageManifest;
pub use kube_table::{IncludeObject, human_duration};

fn column(name: &str, format: &str, description: &str) -> Value {
    json!({"name": name, "type": "string", "format": format, "description": description, "priority": 0})
}

/// A `meta.k8s.io/v1` Table of `items` at time `now`.
pub fn table(items: &[PackageManifest], include: IncludeObject, now: Timestamp) -> Value {
    let rows: Vec<Value> = items.iter().map(|m| row(m, include, now)).collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {},
        "columnDefinitions": [
            column("Name", "name", "Name is the name of the package"),
            column("Catalog", "", "Catalog is the display name of the CatalogSource the package comes from"),
            column("Age", "", "CreationTimestamp of the CatalogSource the package comes from"),
        ],
        "rows": rows,
    })
}

fn row(m: &PackageManifest, include: IncludeObject, now: Timestamp) -> Value {
    let age = m
        .metadata
        .creation_timestamp
        .as_deref()
        .and_then(|t| t.parse::<Timestamp>().ok())
        .map(|t| human_duration(now.as_second() - t.as_second()))
        .unwrap_or_else(|| "<unknown>".into());
    let mut row = json!({
        "cells": [m.metadata.name, m.status.catalog_source_display_name, age],
    });
    let object = match include {
        IncludeObject::None => None,
        IncludeObject::Metadata => Some(json!({
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": m.metadata,
        })),
        IncludeObject::Object => serde_json::to_value(m).ok(),
    };
    if let Some(object) = object {
        row["object"] = object;
    }
    row
}

//! The `Table` form of PackageManifests (what `kubectl get packagemanifests` prints):
//! NAME, CATALOG (the CatalogSource's display name) and AGE, as OLM's package server prints
//! them (docs/packagemanifests.md §6).

use jiff::Timestamp;
use serde_json::{Value, json};

use super::types::PackageManifest;

/// The `includeObject` query parameter of a Table request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncludeObject {
    None,
    Metadata,
    Object,
}

impl IncludeObject {
    pub fn parse(s: Option<&str>) -> IncludeObject {
        match s {
            Some("None") => IncludeObject::None,
            Some("Object") => IncludeObject::Object,
            _ => IncludeObject::Metadata,
        }
    }
}

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

/// kubectl's short ages (`90s`, `5m`, `3d4h`), as `kubectl get` prints them.
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 120 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{dy}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_like_kubectl() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(150), "2m30s");
        assert_eq!(human_duration(3 * 3600 + 60), "3h1m");
        assert_eq!(human_duration(3 * 86400), "3d");
    }
}

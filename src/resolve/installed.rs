//! Installed CSVs as resolution sees them (docs/resolution.md §3), read from the CSV object
//! without requiring it to fit olm-rs's typed model: a CSV someone else wrote must never stop
//! resolution of the namespace.

use serde_json::Value;

use crate::api::keys::{COPIED_FROM_LABEL, PROPERTIES_ANNOTATION};
use crate::catalog::model::Property;
use crate::catalog::properties::{GVK, GVK_REQUIRED, GvkValue, PACKAGE};
use crate::catalog::semver_range::parse_tolerant;

use super::input::InstalledCsv;

/// The installed CSV described by `csv` (a whole CSV object), or `None` for a copied CSV (an
/// all-namespaces operator's copy is not installed in this namespace).
pub fn installed_csv(csv: &Value) -> Option<InstalledCsv> {
    let name = csv.pointer("/metadata/name")?.as_str()?.to_owned();
    let copied = csv
        .pointer(&format!(
            "/metadata/labels/{}",
            COPIED_FROM_LABEL.replace('/', "~1")
        ))
        .is_some()
        || csv.pointer("/status/reason").and_then(Value::as_str) == Some("Copied");
    if copied {
        return None;
    }
    let version = csv
        .pointer("/spec/version")
        .and_then(Value::as_str)
        .and_then(|v| parse_tolerant(v).ok());
    let properties: Option<Vec<Value>> = csv
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(PROPERTIES_ANNOTATION))
        .and_then(Value::as_str)
        .and_then(|text| serde_json::from_str::<Value>(text).ok())
        .and_then(|v| v.get("properties").and_then(Value::as_array).cloned());
    let package = properties.iter().flatten().find_map(|p| {
        (p.get("type").and_then(Value::as_str) == Some(PACKAGE))
            .then(|| {
                p.pointer("/value/packageName")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            })
            .flatten()
    });
    let provided = match &properties {
        Some(list) => list
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str) == Some(GVK))
            .filter_map(|p| gvk(p.get("value")?))
            .collect(),
        None => owned_apis(csv),
    };
    let properties = match &properties {
        Some(list) => list
            .iter()
            .filter_map(|p| {
                let type_ = p.get("type")?.as_str()?;
                Property::from_value(type_, p.get("value").unwrap_or(&Value::Null)).ok()
            })
            .collect(),
        None => synthesised_properties(&provided, csv),
    };
    Some(InstalledCsv {
        name,
        version,
        package,
        provided,
        properties,
        phase: csv
            .pointer("/status/phase")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
    })
}

fn gvk(value: &Value) -> Option<GvkValue> {
    let s = |k: &str| value.get(k).and_then(Value::as_str).map(str::to_owned);
    Some(GvkValue {
        group: s("group").unwrap_or_default(),
        kind: s("kind")?,
        version: s("version")?,
    })
}

/// `olm.gvk` for what the CSV provides and `olm.gvk.required` for the CRDs and APIServices it
/// lists as required (a CSV without the properties annotation, docs/resolution.md §3).
fn synthesised_properties(provided: &[GvkValue], csv: &Value) -> Vec<Property> {
    let provided = provided.iter().map(|g| (GVK, g.clone()));
    let required = apis(csv, "required").into_iter().map(|g| (GVK_REQUIRED, g));
    provided
        .chain(required)
        .filter_map(|(t, g)| Property::from_value(t, &g).ok())
        .collect()
}

/// Owned CRDs (`<plural>.<group>` names) and owned APIServices.
fn owned_apis(csv: &Value) -> Vec<GvkValue> {
    apis(csv, "owned")
}

/// The CRDs and APIServices of one list (`owned` or `required`) of the CSV.
fn apis(csv: &Value, which: &str) -> Vec<GvkValue> {
    let list = |path: &str| {
        csv.pointer(path)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let mut out = Vec::new();
    for crd in list(&format!("/spec/customresourcedefinitions/{which}")) {
        let group = crd
            .get("name")
            .and_then(Value::as_str)
            .and_then(|n| n.split_once('.'))
            .map(|(_, g)| g.to_owned())
            .unwrap_or_default();
        if let (Some(kind), Some(version)) = (
            crd.get("kind").and_then(Value::as_str),
            crd.get("version").and_then(Value::as_str),
        ) {
            out.push(GvkValue {
                group,
                kind: kind.to_owned(),
                version: version.to_owned(),
            });
        }
    }
    for api in list(&format!("/spec/apiservicedefinitions/{which}")) {
        if let Some(g) = gvk(&api) {
            out.push(g);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_package_and_apis_from_properties_or_owned_crds() {
        let with_props = json!({
            "metadata": {"name": "etcd.v1", "annotations": {PROPERTIES_ANNOTATION:
                r#"{"properties":[{"type":"olm.package","value":{"packageName":"etcd","version":"1.0.0"}},{"type":"olm.gvk","value":{"group":"etcd.io","kind":"EtcdCluster","version":"v1"}}]}"#}},
            "spec": {"version": "v1.0.0"},
            "status": {"phase": "Succeeded"}
        });
        let csv = installed_csv(&with_props).unwrap();
        assert_eq!(csv.package.as_deref(), Some("etcd"));
        assert_eq!(csv.version.unwrap().to_string(), "1.0.0");
        assert_eq!(csv.provided[0].kind, "EtcdCluster");
        assert_eq!(csv.phase, "Succeeded");
        let hand_made = json!({
            "metadata": {"name": "x.v1"},
            "spec": {"customresourcedefinitions": {"owned": [{"name": "widgets.example.com", "kind": "Widget", "version": "v1"}]}}
        });
        let csv = installed_csv(&hand_made).unwrap();
        assert_eq!(csv.package, None);
        assert_eq!(
            csv.provided,
            vec![GvkValue {
                group: "example.com".into(),
                kind: "Widget".into(),
                version: "v1".into()
            }]
        );
        let copied = json!({"metadata": {"name": "x.v1", "labels": {"olm.copiedFrom": "ops"}}});
        assert_eq!(installed_csv(&copied), None);
    }
}

//! Who a CSV is: its name, namespace and the owner labels and reference OLM puts on
//! everything it makes for the CSV.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use crate::api::keys::{
    MANAGED_LABEL, MANAGED_LABEL_VALUE, OWNER_KIND_LABEL, OWNER_LABEL, OWNER_NAMESPACE_LABEL,
};
use crate::api::{ClusterServiceVersion, V1ALPHA1};

/// Kind name used in owner labels and references.
pub const CSV_KIND: &str = "ClusterServiceVersion";

pub fn name(csv: &ClusterServiceVersion) -> &str {
    csv.metadata.name.as_deref().unwrap_or_default()
}

pub fn namespace(csv: &ClusterServiceVersion) -> &str {
    csv.metadata.namespace.as_deref().unwrap_or_default()
}

pub fn annotation<'a>(csv: &'a ClusterServiceVersion, key: &str) -> Option<&'a str> {
    csv.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

pub fn label<'a>(csv: &'a ClusterServiceVersion, key: &str) -> Option<&'a str> {
    csv.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .map(String::as_str)
}

/// `spec.replaces`, ignoring a CSV that names itself (docs/csv-phases.md §9).
pub fn replaces(csv: &ClusterServiceVersion) -> Option<&str> {
    csv.spec
        .replaces
        .as_deref()
        .filter(|r| !r.is_empty() && *r != name(csv))
}

/// `olm.owner`, `olm.owner.namespace`, `olm.owner.kind`.
pub fn owner_labels(csv: &ClusterServiceVersion) -> BTreeMap<String, String> {
    BTreeMap::from([
        (OWNER_LABEL.to_owned(), name(csv).to_owned()),
        (OWNER_NAMESPACE_LABEL.to_owned(), namespace(csv).to_owned()),
        (OWNER_KIND_LABEL.to_owned(), CSV_KIND.to_owned()),
    ])
}

/// Owner labels plus `olm.managed: "true"`.
pub fn managed_owner_labels(csv: &ClusterServiceVersion) -> BTreeMap<String, String> {
    let mut labels = owner_labels(csv);
    labels.insert(MANAGED_LABEL.to_owned(), MANAGED_LABEL_VALUE.to_owned());
    labels
}

/// Whether `labels` carry this CSV's owner labels.
pub fn has_owner_labels(
    csv: &ClusterServiceVersion,
    labels: Option<&BTreeMap<String, String>>,
) -> bool {
    let Some(labels) = labels else {
        return false;
    };
    owner_labels(csv)
        .iter()
        .all(|(k, v)| labels.get(k) == Some(v))
}

/// The non-controlling, non-blocking reference OLM puts on objects it makes for a CSV.
pub fn owner_reference(csv: &ClusterServiceVersion) -> OwnerReference {
    OwnerReference {
        api_version: V1ALPHA1.to_owned(),
        kind: CSV_KIND.to_owned(),
        name: name(csv).to_owned(),
        uid: csv.metadata.uid.clone().unwrap_or_default(),
        controller: Some(false),
        block_owner_deletion: Some(false),
    }
}

/// Whether `refs` include this CSV (by uid, or by name when either side has no uid yet).
pub fn is_owned_by(csv: &ClusterServiceVersion, refs: Option<&Vec<OwnerReference>>) -> bool {
    refs.into_iter().flatten().any(|r| {
        r.kind == CSV_KIND
            && match csv.metadata.uid.as_deref() {
                Some(uid) if !uid.is_empty() && !r.uid.is_empty() => r.uid == uid,
                _ => r.name == name(csv),
            }
    })
}

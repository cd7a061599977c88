//! Provided APIs and the OperatorGroup `olm.providedAPIs` annotation, from the CSV sync's side
//! (operatorgroup.md §6.1–§6.2): may this CSV provide its APIs in its group's namespaces?

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::api::keys::PROVIDED_APIS_ANNOTATION;
use crate::api::{ClusterServiceVersion, OperatorGroup};

/// One API as OLM keys it: `Kind.version.group`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ApiKey {
    pub kind: String,
    pub version: String,
    pub group: String,
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.kind, self.version, self.group)
    }
}

/// An owned CRD whose name has no dot: OLM aborts the sync (csv.md §2 step 4).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("CRD name {0:?} has no dot, cannot split it into plural and group")]
pub struct BadCrdName(pub String);

/// The APIs a CSV provides: one per owned CRD (group from the CRD name) and per owned
/// APIService.
pub fn provided_apis(csv: &ClusterServiceVersion) -> Result<BTreeSet<ApiKey>, BadCrdName> {
    let mut apis = BTreeSet::new();
    let crds = csv.spec.custom_resource_definitions.as_ref();
    for crd in crds.and_then(|c| c.owned.as_deref()).unwrap_or_default() {
        let (_, group) = crd
            .plural_and_group()
            .ok_or_else(|| BadCrdName(crd.name.clone()))?;
        apis.insert(ApiKey {
            kind: crd.kind.clone(),
            version: crd.version.clone(),
            group: group.to_owned(),
        });
    }
    let api_services = csv.spec.api_service_definitions.as_ref();
    for desc in api_services
        .and_then(|a| a.owned.as_deref())
        .unwrap_or_default()
    {
        apis.insert(ApiKey {
            kind: desc.kind.clone(),
            version: desc.version.clone(),
            group: desc.group.clone(),
        });
    }
    Ok(apis)
}

/// Required CRD names must also contain a dot; checked with the provided ones.
pub fn check_required_crd_names(csv: &ClusterServiceVersion) -> Result<(), BadCrdName> {
    let crds = csv.spec.custom_resource_definitions.as_ref();
    for crd in crds.and_then(|c| c.required.as_deref()).unwrap_or_default() {
        crd.plural_and_group()
            .ok_or_else(|| BadCrdName(crd.name.clone()))?;
    }
    Ok(())
}

/// Parses `olm.providedAPIs`: comma-separated, spaces stripped, each entry split at its first
/// two dots; malformed entries are ignored.
pub fn parse_annotation(text: &str) -> BTreeSet<ApiKey> {
    text.split(',')
        .filter_map(|entry| {
            let entry: String = entry.chars().filter(|c| !c.is_whitespace()).collect();
            let (kind, rest) = entry.split_once('.')?;
            let (version, group) = rest.split_once('.')?;
            (!kind.is_empty() && !version.is_empty() && !group.is_empty()).then(|| ApiKey {
                kind: kind.to_owned(),
                version: version.to_owned(),
                group: group.to_owned(),
            })
        })
        .collect()
}

/// The annotation text: entries sorted, joined with `,`.
pub fn format_annotation(apis: &BTreeSet<ApiKey>) -> String {
    let mut entries: Vec<String> = apis.iter().map(ApiKey::to_string).collect();
    entries.sort();
    entries.join(",")
}

fn group_annotation(group: &OperatorGroup) -> Option<&str> {
    group
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(PROVIDED_APIS_ANNOTATION))
        .map(String::as_str)
}

/// Namespaces a group covers for intersection: its targets plus its own namespace, or "all".
#[derive(Clone, Debug, PartialEq, Eq)]
enum Coverage {
    All,
    Some(BTreeSet<String>),
}

fn coverage(group: &OperatorGroup) -> Coverage {
    let targets = group
        .status
        .as_ref()
        .and_then(|s| s.namespaces.clone())
        .unwrap_or_default();
    if targets.iter().any(String::is_empty) {
        return Coverage::All;
    }
    let mut set: BTreeSet<String> = targets.into_iter().collect();
    if let Some(ns) = &group.metadata.namespace {
        set.insert(ns.clone());
    }
    Coverage::Some(set)
}

fn intersects(a: &Coverage, b: &Coverage) -> bool {
    match (a, b) {
        (Coverage::All, Coverage::All) => true,
        (Coverage::All, Coverage::Some(s)) | (Coverage::Some(s), Coverage::All) => !s.is_empty(),
        (Coverage::Some(x), Coverage::Some(y)) => !x.is_disjoint(y),
    }
}

/// What the CSV sync must do about its group's provided APIs (operatorgroup.md §6.2 table).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProvidedApiDecision {
    /// All APIs already listed, nobody intersecting provides them: go on.
    Continue,
    /// Write this annotation value on the group, requeue the CSV, end the sync.
    Add { annotation: String },
    /// Write this annotation value (the CSV's APIs removed), requeue, end the sync.
    Remove { annotation: String },
    /// An intersecting group provides some of the APIs.
    Conflict {
        apis: Vec<ApiKey>,
        groups: Vec<String>,
    },
}

/// Decides per operatorgroup.md §6.2. `all_groups` may include `group` itself (skipped).
pub fn reconcile_provided_apis(
    apis: &BTreeSet<ApiKey>,
    group: &OperatorGroup,
    all_groups: &[&OperatorGroup],
) -> ProvidedApiDecision {
    let current = group_annotation(group)
        .map(parse_annotation)
        .unwrap_or_default();
    let mine = coverage(group);
    let same = |other: &OperatorGroup| {
        other.metadata.name == group.metadata.name
            && other.metadata.namespace == group.metadata.namespace
    };
    // API → the intersecting groups that provide it.
    let mut claimed: BTreeMap<ApiKey, Vec<String>> = BTreeMap::new();
    for other in all_groups.iter().filter(|o| !same(o)) {
        if !intersects(&mine, &coverage(other)) {
            continue;
        }
        let Some(text) = group_annotation(other) else {
            continue;
        };
        let who = format!(
            "{}/{}",
            other.metadata.namespace.as_deref().unwrap_or_default(),
            other.metadata.name.as_deref().unwrap_or_default()
        );
        for api in parse_annotation(text).intersection(apis) {
            claimed.entry(api.clone()).or_default().push(who.clone());
        }
    }
    let all_listed = apis.is_subset(&current);
    match (all_listed, claimed.is_empty()) {
        (true, true) => ProvidedApiDecision::Continue,
        (false, true) => {
            let union: BTreeSet<ApiKey> = current.union(apis).cloned().collect();
            let annotation = format_annotation(&union);
            // OLM continues when the text would not change (e.g. a malformed entry it ignores).
            if annotation == current_annotation(group) {
                ProvidedApiDecision::Continue
            } else {
                ProvidedApiDecision::Add { annotation }
            }
        }
        (true, false) => {
            let rest: BTreeSet<ApiKey> = current.difference(apis).cloned().collect();
            ProvidedApiDecision::Remove {
                annotation: format_annotation(&rest),
            }
        }
        (false, false) => {
            let mut groups: Vec<String> = claimed.values().flatten().cloned().collect();
            groups.sort();
            groups.dedup();
            ProvidedApiDecision::Conflict {
                apis: claimed.into_keys().collect(),
                groups,
            }
        }
    }
}

/// The group's current annotation text (absent = empty).
pub fn current_annotation(group: &OperatorGroup) -> &str {
    group_annotation(group).unwrap_or_default()
}

#[cfg(test)]
mod tests;

//! The `olm.providedAPIs` annotation (docs/operator-groups.md §6.1), the APIs a CSV provides, and the
//! pruning rule of the OperatorGroup sync (docs/operator-groups.md §6.3).

use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::fmt;

use crate::api::{ClusterServiceVersion, CsvPhase};

/// One API as OLM keys it: `Kind.version.group`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ApiKey {
    pub kind: String,
    pub version: String,
    pub group: String,
}

impl ApiKey {
    pub fn new(kind: &str, version: &str, group: &str) -> Self {
        Self {
            kind: kind.to_owned(),
            version: version.to_owned(),
            group: group.to_owned(),
        }
    }

    /// Parses one annotation entry: split at the first two dots (Kind, version, rest = group).
    /// `None` for an entry with fewer than two dots.
    pub fn parse(entry: &str) -> Option<Self> {
        let mut parts = entry.splitn(3, '.');
        let (kind, version, group) = (parts.next()?, parts.next()?, parts.next()?);
        Some(Self::new(kind, version, group))
    }

    fn text_bytes(&self) -> impl Iterator<Item = u8> + '_ {
        self.kind
            .bytes()
            .chain(std::iter::once(b'.'))
            .chain(self.version.bytes())
            .chain(std::iter::once(b'.'))
            .chain(self.group.bytes())
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.kind, self.version, self.group)
    }
}

/// Ordered by the text `Kind.version.group`, which is how OLM sorts the annotation (a field-wise
/// order would differ, e.g. for `A-b` vs `A`).
impl Ord for ApiKey {
    fn cmp(&self, other: &Self) -> Ordering {
        self.text_bytes().cmp(other.text_bytes())
    }
}

impl PartialOrd for ApiKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// A set of APIs, iterated in annotation order.
pub type ApiSet = BTreeSet<ApiKey>;

/// Reads `olm.providedAPIs`: spaces are stripped, entries split on `,`, malformed entries
/// ignored.
pub fn parse_provided_apis(value: &str) -> ApiSet {
    let compact: String = value.chars().filter(|c| *c != ' ').collect();
    compact.split(',').filter_map(ApiKey::parse).collect()
}

/// Writes `olm.providedAPIs`: sorted, comma-separated, no spaces.
pub fn format_provided_apis(apis: &ApiSet) -> String {
    apis.iter()
        .map(ApiKey::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// A CSV whose owned CRD name has no dot: OLM cannot derive its group and aborts the sync.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "CSV {namespace}/{csv}: spec.customresourcedefinitions.{list}: CRD name {crd:?} has no group (expected <plural>.<group>)"
)]
pub struct CrdNameWithoutGroup {
    pub namespace: String,
    pub csv: String,
    /// `owned` or `required`.
    pub list: &'static str,
    pub crd: String,
}

/// The APIs a CSV provides (docs/operator-groups.md §6.1): one per owned CRD (`kind`, `version`, group = name after
/// the first dot) and one per owned APIService (`kind`, `version`, `group`).
pub fn csv_provided_apis(csv: &ClusterServiceVersion) -> Result<ApiSet, CrdNameWithoutGroup> {
    let mut apis = ApiSet::new();
    let owned_crds = csv
        .spec
        .custom_resource_definitions
        .as_ref()
        .and_then(|defs| defs.owned.as_deref())
        .unwrap_or_default();
    for crd in owned_crds {
        let Some((_, group)) = crd.plural_and_group() else {
            return Err(CrdNameWithoutGroup {
                namespace: csv.metadata.namespace.clone().unwrap_or_default(),
                csv: csv.metadata.name.clone().unwrap_or_default(),
                list: "owned",
                crd: crd.name.clone(),
            });
        };
        apis.insert(ApiKey::new(&crd.kind, &crd.version, group));
    }
    let owned_services = csv
        .spec
        .api_service_definitions
        .as_ref()
        .and_then(|defs| defs.owned.as_deref())
        .unwrap_or_default();
    for service in owned_services {
        apis.insert(ApiKey::new(&service.kind, &service.version, &service.group));
    }
    Ok(apis)
}

/// What the pruning step needs to know about one non-copied CSV in the group's namespace.
#[derive(Debug, Clone)]
pub struct ProviderState {
    pub apis: ApiSet,
    pub phase: CsvPhase,
    pub deleting: bool,
}

/// docs/operator-groups.md §6.3: the new annotation value, or `None` when nothing is to be written. Pruning waits
/// while a CSV that provides an API missing from the annotation is still `None`/`Pending`
/// (it is about to add it); it only ever removes entries no CSV provides any more.
pub fn prune_provided_apis(annotation: &ApiSet, providers: &[ProviderState]) -> Option<ApiSet> {
    let about_to_add = providers.iter().any(|p| {
        !p.deleting
            && matches!(p.phase, CsvPhase::None | CsvPhase::Pending)
            && !p.apis.is_subset(annotation)
    });
    if about_to_add {
        return None;
    }
    let provided: ApiSet = providers
        .iter()
        .flat_map(|p| p.apis.iter().cloned())
        .collect();
    let kept: ApiSet = annotation.intersection(&provided).cloned().collect();
    (kept.len() < annotation.len()).then_some(kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(entries: &[&str]) -> ApiSet {
        entries.iter().filter_map(|e| ApiKey::parse(e)).collect()
    }

    #[test]
    fn parse_strips_spaces_ignores_malformed_and_format_sorts() {
        let apis = parse_provided_apis(
            "EtcdCluster.v1beta2.etcd.database.coreos.com, EtcdBackup.v1beta2.etcd.database.coreos.com,bad,also.bad,",
        );
        assert_eq!(apis.len(), 2);
        assert_eq!(
            format_provided_apis(&apis),
            "EtcdBackup.v1beta2.etcd.database.coreos.com,EtcdCluster.v1beta2.etcd.database.coreos.com"
        );
        let first = apis.iter().next().unwrap();
        assert_eq!(first.kind, "EtcdBackup");
        assert_eq!(first.version, "v1beta2");
        assert_eq!(first.group, "etcd.database.coreos.com");
        assert!(parse_provided_apis("").is_empty());
    }

    #[test]
    fn order_is_the_order_of_the_text() {
        // '-' (0x2d) sorts before '.' (0x2e): "A-b.v1.g" < "A.v1.g" as text.
        let apis = set(&["A.v1.g", "A-b.v1.g"]);
        assert_eq!(format_provided_apis(&apis), "A-b.v1.g,A.v1.g");
    }

    fn provider(apis: &[&str], phase: CsvPhase) -> ProviderState {
        ProviderState {
            apis: set(apis),
            phase,
            deleting: false,
        }
    }

    #[test]
    fn prune_removes_apis_nobody_provides() {
        let annotation = set(&["A.v1.g", "B.v1.g"]);
        let providers = [provider(&["A.v1.g"], CsvPhase::Succeeded)];
        assert_eq!(
            prune_provided_apis(&annotation, &providers),
            Some(set(&["A.v1.g"]))
        );
        // Nothing to remove: no write.
        assert_eq!(prune_provided_apis(&set(&["A.v1.g"]), &providers), None);
        // No providers at all: everything goes.
        assert_eq!(prune_provided_apis(&annotation, &[]), Some(ApiSet::new()));
    }

    #[test]
    fn prune_waits_for_a_pending_csv_about_to_add_apis() {
        let annotation = set(&["A.v1.g", "Old.v1.g"]);
        let pending = provider(&["A.v1.g", "C.v1.g"], CsvPhase::Pending);
        assert_eq!(
            prune_provided_apis(&annotation, std::slice::from_ref(&pending)),
            None
        );
        let deleting = ProviderState {
            deleting: true,
            ..pending
        };
        assert_eq!(
            prune_provided_apis(&annotation, &[deleting]),
            Some(set(&["A.v1.g"]))
        );
        // A Failed CSV does not hold pruning back.
        let failed = provider(&["A.v1.g", "C.v1.g"], CsvPhase::Failed);
        assert_eq!(
            prune_provided_apis(&annotation, &[failed]),
            Some(set(&["A.v1.g"]))
        );
    }
}

//! OperatorGroup aggregated ClusterRole names and labels (docs/operator-groups.md §9.1) and the other
//! FNV-keyed metadata (docs/api-types.md §5–§6).

use super::{fnv1a_hex, sha224_base62, truncate_bytes};

/// The three aggregated roles every OperatorGroup gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OgRoleSuffix {
    Admin,
    Edit,
    View,
}

impl OgRoleSuffix {
    pub const ALL: [OgRoleSuffix; 3] =
        [OgRoleSuffix::Admin, OgRoleSuffix::Edit, OgRoleSuffix::View];

    pub fn as_str(self) -> &'static str {
        match self {
            OgRoleSuffix::Admin => "admin",
            OgRoleSuffix::Edit => "edit",
            OgRoleSuffix::View => "view",
        }
    }
}

/// Longest Kubernetes object name; with the 9 fixed characters `olm.og.`, `.`, `-` this leaves
/// 244 for the group name, suffix and hash (§9.1).
const NAME_LIMIT: usize = 253;
const FIXED_CHARS: usize = 9;

/// `olm.og.<N>.<suffix>-<h>`: h = base 62 SHA-224 of `<ns>/<og-name>/<suffix>` (full name);
/// N = the group name cut so the whole name is at most 253 characters.
pub fn og_cluster_role_name(og_namespace: &str, og_name: &str, suffix: OgRoleSuffix) -> String {
    let suffix = suffix.as_str();
    let hash = sha224_base62(format!("{og_namespace}/{og_name}/{suffix}").as_bytes());
    let room = NAME_LIMIT - FIXED_CHARS - suffix.len() - hash.len();
    let name = truncate_bytes(og_name, room);
    format!("olm.og.{name}.{suffix}-{hash}")
}

/// FNV-1a hex of `Kind.version.group`: the API key of aggregation labels and `olm.api.*`.
pub fn api_hash(kind: &str, version: &str, group: &str) -> String {
    fnv1a_hex(&format!("{kind}.{version}.{group}"))
}

/// `olm.opgroup.permissions/aggregate-to-<api-hash>-<suffix>` (value `"true"`).
pub fn aggregate_label_key(kind: &str, version: &str, group: &str, suffix: OgRoleSuffix) -> String {
    format!(
        "olm.opgroup.permissions/aggregate-to-{}-{}",
        api_hash(kind, version, group),
        suffix.as_str()
    )
}

/// `olm.api.<api-hash>` (value `provided` or `required`; OLM v0.31.0 never writes it, §6 note).
pub fn api_label_key(kind: &str, version: &str, group: &str) -> String {
    format!("olm.api.{}", api_hash(kind, version, group))
}

/// The group of an owned CRD as OLM takes it: the CRD name after its first dot.
pub fn crd_group(crd_name: &str) -> &str {
    crd_name.split_once('.').map_or("", |(_, group)| group)
}

/// `operatorframework.io/installed-alongside-<fnv of "<ns>/<csv>">` (value `<ns>/<csv>`).
pub fn installed_alongside_annotation_key(namespace: &str, csv_name: &str) -> String {
    format!(
        "operatorframework.io/installed-alongside-{}",
        fnv1a_hex(&format!("{namespace}/{csv_name}"))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worked_names_from_real_olm() {
        // docs/operator-groups.md §9.1 / docs/api-types.md §6.4
        let names: Vec<String> = OgRoleSuffix::ALL
            .iter()
            .map(|s| og_cluster_role_name("demo", "demo-og", *s))
            .collect();
        assert_eq!(
            names,
            [
                "olm.og.demo-og.admin-86yceVG1OUIPZEmmehd1WTzivsPEB9JIfZpQA8",
                "olm.og.demo-og.edit-iX86eZdG8qXQYdgBi3na9RrzZm37VFBCTOw5O",
                "olm.og.demo-og.view-3wJrIlYFBawzBy3isgQNbb5ExNdP1h7ZcoWrnk",
            ]
        );
    }

    #[test]
    fn long_group_names_are_cut_to_exactly_253_characters() {
        let og = "g".repeat(300);
        for suffix in OgRoleSuffix::ALL {
            let name = og_cluster_role_name("ns", &og, suffix);
            assert_eq!(name.len(), 253, "{name}");
            // The hash still covers the full name, so two long names sharing a prefix differ.
            let other = og_cluster_role_name("ns", &format!("{og}x"), suffix);
            assert_ne!(name, other);
            assert_eq!(name.len(), other.len());
        }
        // Around the limit: kept whole while it fits, cut to exactly 253 once it does not.
        for n in 198..=206 {
            let og = "g".repeat(n);
            let hash = sha224_base62(format!("ns/{og}/view").as_bytes());
            let name = og_cluster_role_name("ns", &og, OgRoleSuffix::View);
            if n <= 240 - hash.len() {
                assert_eq!(name, format!("olm.og.{og}.view-{hash}"));
            } else {
                assert_eq!(name.len(), 253);
            }
        }
    }

    #[test]
    fn label_and_annotation_keys() {
        assert_eq!(
            api_hash("Demo", "v1alpha1", crd_group("demos.example.com")),
            "7f1c1bed79b097e1"
        );
        assert_eq!(
            aggregate_label_key("Demo", "v1alpha1", "example.com", OgRoleSuffix::Edit),
            "olm.opgroup.permissions/aggregate-to-7f1c1bed79b097e1-edit"
        );
        assert_eq!(
            api_label_key("Demo", "v1alpha1", "example.com"),
            "olm.api.7f1c1bed79b097e1"
        );
        assert_eq!(
            installed_alongside_annotation_key("demo", "demo-operator.v0.3.0"),
            "operatorframework.io/installed-alongside-6c4a32a7ecb91cf8"
        );
        assert_eq!(
            installed_alongside_annotation_key("demo", "demo-operator.v0.3.1"),
            "operatorframework.io/installed-alongside-6c4a33a7ecb91eab"
        );
        assert_eq!(crd_group("nodot"), "");
    }
}

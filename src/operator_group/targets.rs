//! Target namespace selection (docs/operator-groups.md §1) and its encodings: `status.namespaces`
//! (`[""]` = all namespaces) and the `olm.targetNamespaces` annotation (sorted, comma-joined,
//! `""` = all namespaces).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::label_selector::{self, InvalidSelector};

/// The namespaces an OperatorGroup's members watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetNamespaces {
    /// Every namespace, present and future (`status.namespaces: [""]`).
    All,
    /// Exactly these namespaces; may be empty when a selector matches nothing.
    Named(BTreeSet<String>),
}

/// Why a group's targets cannot be computed; the group's status is left untouched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    /// OLM's exact message; the list is printed the way Go prints a string slice.
    #[error("TargetNamespaces cannot contain NamespaceAll: [{}]", .0.join(" "))]
    NamespaceAllInTargets(Vec<String>),
    #[error("spec.selector: {0}")]
    InvalidSelector(#[from] InvalidSelector),
}

/// A target list that mixes `""` (all namespaces) with named namespaces.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("NamespaceAll found together with {0} other namespace(s)")]
pub struct NamespaceAllAmongOthers(pub usize);

/// Computes a group's targets from its spec and the namespaces that exist (§1):
/// `targetNamespaces` wins (not checked for existence; `""` is an error); otherwise an absent
/// or empty selector means all namespaces, and a non-empty one selects existing namespaces by
/// label.
pub fn select_targets<'a>(
    target_namespaces: Option<&[String]>,
    selector: Option<&LabelSelector>,
    namespaces: impl IntoIterator<Item = (&'a str, Option<&'a BTreeMap<String, String>>)>,
) -> Result<TargetNamespaces, TargetError> {
    if let Some(names) = target_namespaces.filter(|names| !names.is_empty()) {
        if names.iter().any(String::is_empty) {
            return Err(TargetError::NamespaceAllInTargets(names.to_vec()));
        }
        return Ok(TargetNamespaces::Named(names.iter().cloned().collect()));
    }
    let Some(selector) = selector.filter(|s| !label_selector::is_empty(s)) else {
        return Ok(TargetNamespaces::All);
    };
    let selector = label_selector::parse(selector)?;
    let empty = BTreeMap::new();
    let matched = namespaces
        .into_iter()
        .filter(|(_, labels)| selector.matches(labels.unwrap_or(&empty)))
        .map(|(name, _)| name.to_owned())
        .collect();
    Ok(TargetNamespaces::Named(matched))
}

impl TargetNamespaces {
    /// Reads a list in the `status.namespaces` / annotation form: `[""]` is all namespaces.
    pub fn from_names<S: AsRef<str>>(
        names: impl IntoIterator<Item = S>,
    ) -> Result<Self, NamespaceAllAmongOthers> {
        let mut set = BTreeSet::new();
        let mut all = false;
        for name in names {
            match name.as_ref() {
                "" => all = true,
                name => {
                    set.insert(name.to_owned());
                }
            }
        }
        match (all, set.len()) {
            (true, 0) => Ok(Self::All),
            (true, others) => Err(NamespaceAllAmongOthers(others)),
            (false, _) => Ok(Self::Named(set)),
        }
    }

    /// Reads `status.namespaces`; an absent list is the empty selection.
    pub fn from_status(namespaces: Option<&[String]>) -> Result<Self, NamespaceAllAmongOthers> {
        Self::from_names(namespaces.unwrap_or_default())
    }

    /// Reads an `olm.targetNamespaces` value: split on `,` (so `""` is all namespaces).
    pub fn from_annotation(value: &str) -> Result<Self, NamespaceAllAmongOthers> {
        Self::from_names(value.split(','))
    }

    pub fn is_all(&self) -> bool {
        matches!(self, Self::All)
    }

    /// True when no namespace is selected.
    pub fn is_empty(&self) -> bool {
        matches!(self, Self::Named(set) if set.is_empty())
    }

    /// Whether `namespace` is watched.
    pub fn contains(&self, namespace: &str) -> bool {
        match self {
            Self::All => true,
            Self::Named(set) => set.contains(namespace),
        }
    }

    /// True for a group that targets exactly its own namespace (OwnNamespace): such groups
    /// copy nothing (docs/operator-groups.md §10, docs/operator-groups.md §9.2).
    pub fn is_only(&self, namespace: &str) -> bool {
        matches!(self, Self::Named(set) if set.len() == 1 && set.contains(namespace))
    }

    /// `status.namespaces`: sorted names, `[""]` for all.
    pub fn to_status(&self) -> Vec<String> {
        match self {
            Self::All => vec![String::new()],
            Self::Named(set) => set.iter().cloned().collect(),
        }
    }

    /// `olm.targetNamespaces`: sorted and comma-joined, `""` for all (§1.1).
    pub fn to_annotation(&self) -> String {
        match self {
            Self::All => String::new(),
            Self::Named(set) => set.iter().map(String::as_str).collect::<Vec<_>>().join(","),
        }
    }

    /// The namespaces a group covers for intersection checks (§6.2): its targets plus its own
    /// namespace, unless it targets all namespaces.
    pub fn scope(&self, own_namespace: &str) -> TargetNamespaces {
        match self {
            Self::All => Self::All,
            Self::Named(set) => {
                let mut set = set.clone();
                set.insert(own_namespace.to_owned());
                Self::Named(set)
            }
        }
    }

    /// Whether two target sets share a namespace; all-namespaces overlaps every non-empty set.
    pub fn overlaps(&self, other: &TargetNamespaces) -> bool {
        match (self, other) {
            (Self::All, Self::All) => true,
            (Self::All, Self::Named(set)) | (Self::Named(set), Self::All) => !set.is_empty(),
            (Self::Named(a), Self::Named(b)) => a.intersection(b).next().is_some(),
        }
    }
}

/// Whether two groups (their targets and own namespaces) intersect (docs/operator-groups.md §6.2).
pub fn groups_intersect(
    a: &TargetNamespaces,
    a_namespace: &str,
    b: &TargetNamespaces,
    b_namespace: &str,
) -> bool {
    a.scope(a_namespace).overlaps(&b.scope(b_namespace))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn named(list: &[&str]) -> TargetNamespaces {
        TargetNamespaces::Named(list.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn explicit_targets_win_over_selector_and_are_deduplicated() {
        let selector = LabelSelector {
            match_labels: Some(labels(&[("team", "a")])),
            ..Default::default()
        };
        let ns = [("x", None)];
        let targets = select_targets(Some(&names(&["b", "a", "b"])), Some(&selector), ns).unwrap();
        assert_eq!(targets, named(&["a", "b"]));
        assert_eq!(targets.to_status(), names(&["a", "b"]));
        assert_eq!(targets.to_annotation(), "a,b");
    }

    #[test]
    fn namespace_all_in_explicit_targets_is_olms_error() {
        let err = select_targets(Some(&names(&["a", ""])), None, []).unwrap_err();
        assert_eq!(
            err.to_string(),
            "TargetNamespaces cannot contain NamespaceAll: [a ]"
        );
    }

    #[test]
    fn no_spec_or_empty_selector_is_all_namespaces() {
        assert_eq!(
            select_targets(None, None, []).unwrap(),
            TargetNamespaces::All
        );
        let empty = LabelSelector::default();
        let targets = select_targets(Some(&[]), Some(&empty), []).unwrap();
        assert_eq!(targets, TargetNamespaces::All);
        assert_eq!(targets.to_status(), names(&[""]));
        assert_eq!(targets.to_annotation(), "");
    }

    #[test]
    fn selector_picks_matching_existing_namespaces() {
        let a = labels(&[("team", "a")]);
        let b = labels(&[("team", "b")]);
        let selector = LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "team".into(),
                operator: "In".into(),
                values: Some(names(&["a"])),
            }]),
            ..Default::default()
        };
        let ns = [("ns-a", Some(&a)), ("ns-b", Some(&b)), ("bare", None)];
        assert_eq!(
            select_targets(None, Some(&selector), ns).unwrap(),
            named(&["ns-a"])
        );
        let none = LabelSelector {
            match_labels: Some(labels(&[("team", "z")])),
            ..Default::default()
        };
        let targets = select_targets(None, Some(&none), ns).unwrap();
        assert!(targets.is_empty());
        assert!(targets.to_status().is_empty());
    }

    #[test]
    fn invalid_selector_fails_the_sync() {
        let bad = LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "team".into(),
                operator: "Near".into(),
                values: None,
            }]),
            ..Default::default()
        };
        assert!(matches!(
            select_targets(None, Some(&bad), []),
            Err(TargetError::InvalidSelector(_))
        ));
    }

    #[test]
    fn annotation_round_trip_and_mixed_all_is_rejected() {
        assert_eq!(
            TargetNamespaces::from_annotation("").unwrap(),
            TargetNamespaces::All
        );
        assert_eq!(
            TargetNamespaces::from_annotation("b,a")
                .unwrap()
                .to_annotation(),
            "a,b"
        );
        assert_eq!(
            TargetNamespaces::from_names(["", "a"]),
            Err(NamespaceAllAmongOthers(1))
        );
        assert!(TargetNamespaces::from_status(None).unwrap().is_empty());
    }

    #[test]
    fn own_namespace_only_groups_are_recognised() {
        assert!(named(&["op"]).is_only("op"));
        assert!(!named(&["op", "x"]).is_only("op"));
        assert!(!TargetNamespaces::All.is_only("op"));
    }

    #[test]
    fn intersection_includes_own_namespace_and_all_overlaps_non_empty() {
        // G targets {a} from namespace g; H targets {b} from namespace a: H's own namespace
        // is one of G's targets.
        assert!(groups_intersect(&named(&["a"]), "g", &named(&["b"]), "a"));
        assert!(!groups_intersect(&named(&["a"]), "g", &named(&["b"]), "h"));
        assert!(groups_intersect(
            &TargetNamespaces::All,
            "g",
            &named(&[]),
            "h"
        ));
        assert!(!TargetNamespaces::All.overlaps(&named(&[])));
        assert!(TargetNamespaces::All.overlaps(&TargetNamespaces::All));
    }
}

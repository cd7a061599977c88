//! `metav1.LabelSelector` evaluation with the API server's validation rules.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::core::{Selector, SelectorExt};

/// A selector the API server would reject; OLM fails the group's sync with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("matchExpressions[{index}] (key {key:?}): {problem}")]
pub struct InvalidSelector {
    pub index: usize,
    pub key: String,
    pub problem: String,
}

/// A parsed selector, ready to match label maps.
#[derive(Debug, Clone)]
pub struct NamespaceSelector(Selector);

impl NamespaceSelector {
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.matches(labels)
    }
}

/// True when the selector has no requirement at all (`{}`), which selects everything.
pub fn is_empty(selector: &LabelSelector) -> bool {
    selector.match_labels.as_ref().is_none_or(BTreeMap::is_empty)
        && selector.match_expressions.as_ref().is_none_or(Vec::is_empty)
}

/// Validates like `metav1.LabelSelectorAsSelector`: `In`/`NotIn` need values,
/// `Exists`/`DoesNotExist` take none, other operators are unknown.
pub fn parse(selector: &LabelSelector) -> Result<NamespaceSelector, InvalidSelector> {
    for (index, req) in selector.match_expressions.iter().flatten().enumerate() {
        let values = req.values.as_deref().unwrap_or_default();
        let problem = match req.operator.as_str() {
            "In" | "NotIn" if values.is_empty() => {
                Some(format!("operator {} requires one or more values", req.operator))
            }
            "Exists" | "DoesNotExist" if !values.is_empty() => Some(format!(
                "operator {} takes no values",
                req.operator
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => None,
            other => Some(format!("{other:?} is not a valid label selector operator")),
        };
        if let Some(problem) = problem {
            return Err(InvalidSelector {
                index,
                key: req.key.clone(),
                problem,
            });
        }
    }
    Selector::try_from(selector.clone())
        .map(NamespaceSelector)
        .map_err(|err| InvalidSelector {
            index: 0,
            key: String::new(),
            problem: err.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    fn req(key: &str, op: &str, values: Option<&[&str]>) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: values.map(|v| v.iter().map(|s| s.to_string()).collect()),
        }
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn expressions_and_labels_are_anded() {
        let selector = LabelSelector {
            match_labels: Some(labels(&[("env", "prod")])),
            match_expressions: Some(vec![
                req("team", "NotIn", Some(&["b"])),
                req("tier", "Exists", None),
                req("legacy", "DoesNotExist", None),
            ]),
        };
        let parsed = parse(&selector).unwrap();
        assert!(parsed.matches(&labels(&[("env", "prod"), ("tier", "1"), ("team", "a")])));
        assert!(parsed.matches(&labels(&[("env", "prod"), ("tier", "1")])));
        assert!(!parsed.matches(&labels(&[("env", "prod"), ("tier", "1"), ("team", "b")])));
        assert!(!parsed.matches(&labels(&[("env", "prod")])));
        assert!(!parsed.matches(&labels(&[("env", "prod"), ("tier", "1"), ("legacy", "")])));
    }

    #[test]
    fn invalid_requirements_are_rejected_with_their_position() {
        let cases = [
            req("a", "In", Some(&[])),
            req("a", "NotIn", None),
            req("a", "Exists", Some(&["x"])),
            req("a", "Gt", Some(&["1"])),
        ];
        for case in cases {
            let selector = LabelSelector {
                match_expressions: Some(vec![req("ok", "Exists", None), case.clone()]),
                ..Default::default()
            };
            let err = parse(&selector).unwrap_err();
            assert_eq!(err.index, 1, "{case:?}");
            assert_eq!(err.key, "a");
        }
    }

    #[test]
    fn empty_means_no_requirement() {
        assert!(is_empty(&LabelSelector::default()));
        assert!(is_empty(&LabelSelector {
            match_labels: Some(BTreeMap::new()),
            match_expressions: Some(vec![]),
        }));
        assert!(!is_empty(&LabelSelector {
            match_labels: Some(labels(&[("a", "b")])),
            ..Default::default()
        }));
    }
}

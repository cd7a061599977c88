//! Label selector matching (`matchLabels` and `matchExpressions`), as the API server and the
//! ClusterRole aggregation controller evaluate it.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// Whether `labels` satisfy `selector`. An empty selector matches everything; an expression with
/// an unknown operator matches nothing (the API server rejects such selectors, so nothing would
/// be selected by them either).
pub fn selector_matches(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let labels_ok = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(key, value)| labels.get(key) == Some(value));
    let expressions_ok = selector.match_expressions.iter().flatten().all(|expr| {
        let values = expr.values.as_deref().unwrap_or_default();
        let current = labels.get(&expr.key);
        match expr.operator.as_str() {
            "In" => current.is_some_and(|v| values.contains(v)),
            "NotIn" => current.is_none_or(|v| !values.contains(v)),
            "Exists" => current.is_some(),
            "DoesNotExist" => current.is_none(),
            _ => false,
        }
    });
    labels_ok && expressions_ok
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

    fn expr(key: &str, op: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: Some(values.iter().map(|v| v.to_string()).collect()),
        }
    }

    #[test]
    fn match_labels_and_expressions_combine_with_and() {
        let sel = LabelSelector {
            match_labels: Some(labels(&[("a", "1")])),
            match_expressions: Some(vec![
                expr("b", "In", &["x", "y"]),
                expr("c", "DoesNotExist", &[]),
            ]),
        };
        assert!(selector_matches(&sel, &labels(&[("a", "1"), ("b", "y")])));
        assert!(!selector_matches(&sel, &labels(&[("a", "1"), ("b", "z")])));
        assert!(!selector_matches(&sel, &labels(&[("a", "2"), ("b", "x")])));
        assert!(!selector_matches(
            &sel,
            &labels(&[("a", "1"), ("b", "x"), ("c", "")])
        ));
    }

    #[test]
    fn not_in_accepts_a_missing_key_and_unknown_operators_match_nothing() {
        let not_in = LabelSelector {
            match_expressions: Some(vec![expr("tier", "NotIn", &["db"])]),
            ..Default::default()
        };
        assert!(selector_matches(&not_in, &labels(&[])));
        assert!(!selector_matches(&not_in, &labels(&[("tier", "db")])));
        let bogus = LabelSelector {
            match_expressions: Some(vec![expr("tier", "Near", &["db"])]),
            ..Default::default()
        };
        assert!(!selector_matches(&bogus, &labels(&[("tier", "db")])));
        assert!(selector_matches(&LabelSelector::default(), &labels(&[])));
    }
}

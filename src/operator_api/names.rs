//! Operator names and their component label (docs/operator-api.md §1).

use std::collections::BTreeMap;

use crate::api::keys::COMPONENT_LABEL_PREFIX;

/// Longest name part of a label key.
const LABEL_NAME_MAX: usize = 63;

/// The Operator of a package installed in `namespace`: `<package>.<namespace>`.
pub fn operator_name(package: &str, namespace: &str) -> String {
    if namespace.is_empty() {
        package.to_owned()
    } else {
        format!("{package}.{namespace}")
    }
}

/// The component label key of the Operator `name`: `operators.coreos.com/<name>`, the name
/// cut to 63 characters and stripped of trailing `.`, `_` and `-` (a label name must end
/// with an alphanumeric); `None` when nothing is left.
pub fn component_label_key(name: &str) -> Option<String> {
    let mut cut = name;
    if cut.len() > LABEL_NAME_MAX {
        // Operator names are DNS subdomains (ASCII): byte 63 is a character boundary.
        cut = cut.get(..LABEL_NAME_MAX)?;
        cut = cut.trim_end_matches(['.', '_', '-']);
    }
    (!cut.is_empty()).then(|| format!("{COMPONENT_LABEL_PREFIX}{cut}"))
}

/// The Operators an object's labels name (every `operators.coreos.com/<name>` key).
pub fn operator_names(labels: Option<&BTreeMap<String, String>>) -> Vec<String> {
    labels
        .into_iter()
        .flatten()
        .filter_map(|(k, _)| k.strip_prefix(COMPONENT_LABEL_PREFIX))
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_keys_are_olms() {
        assert_eq!(operator_name("etcd", "demo"), "etcd.demo");
        assert_eq!(operator_name("etcd", ""), "etcd");
        assert_eq!(
            component_label_key("etcd.demo").as_deref(),
            Some("operators.coreos.com/etcd.demo")
        );
        // 60 characters of package, a dot, a namespace: cut at 63, the trailing dot dropped.
        let long = format!("{}.{}", "p".repeat(62), "ns");
        assert_eq!(
            component_label_key(&long),
            Some(format!("operators.coreos.com/{}", "p".repeat(62)))
        );
        let dashes = format!("{}-.-x", "a".repeat(60));
        assert_eq!(
            component_label_key(&dashes),
            Some(format!("operators.coreos.com/{}", "a".repeat(60)))
        );
        assert_eq!(component_label_key(""), None);
    }

    #[test]
    fn operator_names_come_from_component_labels_only() {
        let labels: BTreeMap<String, String> = [
            ("operators.coreos.com/etcd.demo", ""),
            ("olm.managed", "true"),
            ("operators.coreos.com/", ""),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        assert_eq!(operator_names(Some(&labels)), ["etcd.demo"]);
        assert!(operator_names(None).is_empty());
    }
}

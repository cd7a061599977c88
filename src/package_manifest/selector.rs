//! Label and field selectors of a PackageManifest list, as the API server's query parameters
//! spell them. Labels: the `label-selector` crate (`k=v`, `k!=v`, `k`, `!k`, `k in (a,b)`, …).
//! Fields: only `metadata.name=` (docs/packagemanifests.md §4).

/// A field selector OLM's package server would refuse, with its words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// OLM's package server accepts only `metadata.name` (its wording).
    #[error("field label not supported: {0}")]
    FieldNotSupported(String),
    #[error("invalid field selector: {0}")]
    Field(String),
}

/// Label selectors are read by the workspace's one parser, as the API server reads them.
pub use label_selector::LabelSelector;

/// The name a field selector asks for (`None`: any). Anything but `metadata.name=` (or `==`)
/// is refused as OLM refuses it.
pub fn name_from_field_selector(text: &str) -> Result<Option<String>, SelectorError> {
    let mut name = None;
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (field, value) = match part.split_once("!=") {
            Some((field, _)) => {
                return Err(SelectorError::FieldNotSupported(field.trim().to_owned()));
            }
            None => part
                .split_once("==")
                .or_else(|| part.split_once('='))
                .ok_or_else(|| SelectorError::Field(part.to_owned()))?,
        };
        if field.trim() != "metadata.name" {
            return Err(SelectorError::FieldNotSupported(field.trim().to_owned()));
        }
        name = Some(value.trim().to_owned());
    }
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::collections::BTreeMap;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn label_selectors_match_as_the_api_server_does() {
        let l = labels(&[("catalog", "demo"), ("provider", "Acme")]);
        let cases = [
            ("", true),
            ("catalog=demo", true),
            ("catalog==demo", true),
            ("catalog=other", false),
            ("catalog!=other", true),
            ("catalog", true),
            ("!catalog", false),
            ("!missing", true),
            ("catalog in (a,demo)", true),
            ("catalog notin (a,demo)", false),
            ("missing notin (a)", true),
            ("catalog=demo,provider=Acme", true),
            ("catalog=demo,provider=Other", false),
        ];
        for (text, want) in cases {
            let selector = LabelSelector::parse(text).unwrap();
            assert_eq!(selector.matches_map(&l), want, "{text}");
        }
        assert!(LabelSelector::parse("bad key=v").is_err());
        assert!(LabelSelector::parse("k in a,b").is_err());
    }

    #[test]
    fn only_metadata_name_is_a_field_selector() {
        assert_eq!(name_from_field_selector("").unwrap(), None);
        assert_eq!(
            name_from_field_selector("metadata.name=etcd").unwrap(),
            Some("etcd".into())
        );
        assert_eq!(
            name_from_field_selector("metadata.name==etcd").unwrap(),
            Some("etcd".into())
        );
        let err = name_from_field_selector("status.catalogSource=demo").unwrap_err();
        assert_eq!(
            err.to_string(),
            "field label not supported: status.catalogSource"
        );
        assert!(name_from_field_selector("metadata.name!=x").is_err());
    }
}

//! Label and field selectors of a PackageManifest list, as the API server's query parameters
//! spell them. Labels: `k=v`, `k==v`, `k!=v`, `k`, `!k`, `k in (a,b)`, `k notin (a,b)`,
//! comma-separated. Fields: only `metadata.name=` (docs/packagemanifests.md §4).

use std::collections::BTreeMap;

/// A selector OLM's package server would refuse, with its words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error("unable to parse requirement: {0}")]
    Label(String),
    /// OLM's package server accepts only `metadata.name` (its wording).
    #[error("field label not supported: {0}")]
    FieldNotSupported(String),
    #[error("invalid field selector: {0}")]
    Field(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    Exists(String),
    NotExists(String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

/// A parsed label selector; the empty one matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector(Vec<Requirement>);

impl LabelSelector {
    pub fn parse(text: &str) -> Result<LabelSelector, SelectorError> {
        let mut out = Vec::new();
        for part in split_top_level(text) {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            out.push(requirement(part)?);
        }
        Ok(LabelSelector(out))
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|r| match r {
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::NotEquals(k, v) => labels.get(k) != Some(v),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::NotExists(k) => !labels.contains_key(k),
            Requirement::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
        })
    }
}

/// Splits on commas outside parentheses.
fn split_top_level(text: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

fn key(k: &str, whole: &str) -> Result<String, SelectorError> {
    let k = k.trim();
    let valid = !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    if valid {
        Ok(k.to_owned())
    } else {
        Err(SelectorError::Label(whole.to_owned()))
    }
}

fn set(values: &str, whole: &str) -> Result<Vec<String>, SelectorError> {
    let inner = values
        .trim()
        .strip_prefix('(')
        .and_then(|v| v.strip_suffix(')'))
        .ok_or_else(|| SelectorError::Label(whole.to_owned()))?;
    Ok(inner.split(',').map(|v| v.trim().to_owned()).collect())
}

fn requirement(part: &str) -> Result<Requirement, SelectorError> {
    if let Some(k) = part.strip_prefix('!') {
        return Ok(Requirement::NotExists(key(k, part)?));
    }
    if let Some((k, v)) = part.split_once("!=") {
        return Ok(Requirement::NotEquals(key(k, part)?, v.trim().to_owned()));
    }
    if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
        return Ok(Requirement::Equals(key(k, part)?, v.trim().to_owned()));
    }
    if let Some((k, v)) = part.split_once(" notin ") {
        return Ok(Requirement::NotIn(key(k, part)?, set(v, part)?));
    }
    if let Some((k, v)) = part.split_once(" in ") {
        return Ok(Requirement::In(key(k, part)?, set(v, part)?));
    }
    Ok(Requirement::Exists(key(part, part)?))
}

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
            assert_eq!(selector.matches(&l), want, "{text}");
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

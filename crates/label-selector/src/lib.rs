//! Label selectors in their string form, the way the API server reads a `labelSelector` query
//! parameter: equality-based (`k=v`, `k==v`, `k!=v`), set-based (`k in (a,b)`, `k notin (a,b)`,
//! `k`, `!k`) and the numeric `k>n`, `k<n`, comma-separated, all of them required. The embedded
//! API server and the PackageManifest API read selectors with this one parser, so both refuse
//! and match the same selectors the same way.

/// A selector the API server refuses (400), in its words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error("unable to parse requirement: {requirement:?}")]
    Requirement { requirement: String },
    #[error("unable to parse requirement: {requirement:?}: expected ( values )")]
    ValueSet { requirement: String },
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Exists(String),
    NotExists(String),
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    GreaterThan(String, i64),
    LessThan(String, i64),
}

/// A parsed selector; the empty selector matches everything.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelSelector(Vec<Requirement>);

impl LabelSelector {
    /// Parses `text`; an empty (or blank) text is the empty selector, an empty requirement
    /// between commas is refused.
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        if text.trim().is_empty() {
            return Ok(Self::default());
        }
        split_top_level(text)
            .into_iter()
            .map(requirement)
            .collect::<Result<_, _>>()
            .map(LabelSelector)
    }

    /// Whether labels, read through `label` (a key to its value, `None` when absent), meet
    /// every requirement.
    pub fn matches<'a>(&self, label: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.0.iter().all(|req| match req {
            Requirement::Exists(k) => label(k).is_some(),
            Requirement::NotExists(k) => label(k).is_none(),
            Requirement::Equals(k, v) => label(k) == Some(v.as_str()),
            Requirement::NotEquals(k, v) => label(k) != Some(v.as_str()),
            Requirement::In(k, vs) => label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            Requirement::NotIn(k, vs) => label(k).is_none_or(|l| vs.iter().all(|v| v != l)),
            Requirement::GreaterThan(k, n) => number(label(k)).is_some_and(|l| l > *n),
            Requirement::LessThan(k, n) => number(label(k)).is_some_and(|l| l < *n),
        })
    }

    /// Whether `labels` meet every requirement.
    pub fn matches_map(&self, labels: &std::collections::BTreeMap<String, String>) -> bool {
        self.matches(|k| labels.get(k).map(String::as_str))
    }
}

fn number(label: Option<&str>) -> Option<i64> {
    label.and_then(|l| l.parse().ok())
}

/// Splits on commas that are not inside `( … )`.
fn split_top_level(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

fn value_set(rest: &str, requirement: &str) -> Result<Vec<String>, SelectorError> {
    let inner = rest
        .trim()
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| SelectorError::ValueSet {
            requirement: requirement.to_owned(),
        })?;
    Ok(inner
        .split(',')
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
        .collect())
}

fn requirement(text: &str) -> Result<Requirement, SelectorError> {
    let r = text.trim();
    let bad = || SelectorError::Requirement {
        requirement: r.to_owned(),
    };
    if let Some(key) = r.strip_prefix('!') {
        let key = key.trim();
        return valid_key(key)
            .then(|| Requirement::NotExists(key.into()))
            .ok_or_else(bad);
    }
    for op in ["!=", "==", "=", ">", "<"] {
        if let Some((k, v)) = r.split_once(op) {
            let (k, v) = (k.trim(), v.trim());
            if !valid_key(k) {
                return Err(bad());
            }
            return Ok(match op {
                "!=" => Requirement::NotEquals(k.into(), v.into()),
                "==" | "=" => Requirement::Equals(k.into(), v.into()),
                ">" => Requirement::GreaterThan(k.into(), v.parse().map_err(|_| bad())?),
                _ => Requirement::LessThan(k.into(), v.parse().map_err(|_| bad())?),
            });
        }
    }
    let mut words = r.splitn(2, char::is_whitespace);
    let key = words.next().unwrap_or_default();
    let rest = words.next().unwrap_or_default().trim_start();
    if !valid_key(key) {
        return Err(bad());
    }
    if rest.is_empty() {
        return Ok(Requirement::Exists(key.into()));
    }
    if let Some(set) = rest.strip_prefix("notin") {
        return Ok(Requirement::NotIn(key.into(), value_set(set, r)?));
    }
    if let Some(set) = rest.strip_prefix("in") {
        return Ok(Requirement::In(key.into(), value_set(set, r)?));
    }
    Err(bad())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn equality_set_and_numeric_requirements_match_as_the_api_server_does() {
        let l = labels(&[("app", "web"), ("tier", "front"), ("n", "5")]);
        let cases = [
            ("", true),
            ("app=web", true),
            ("app==web,tier=front", true),
            ("app=other", false),
            ("app!=web", false),
            ("app!=other", true),
            ("app in (web, db)", true),
            ("app notin (web)", false),
            ("missing notin (x)", true),
            ("app", true),
            ("!app", false),
            ("!missing", true),
            ("app in (db),tier", false),
            ("n>3,n<6", true),
            ("n>5", false),
        ];
        for (text, want) in cases {
            let selector = LabelSelector::parse(text).unwrap();
            assert_eq!(selector.matches_map(&l), want, "{text}");
        }
    }

    #[test]
    fn bad_selectors_are_refused_in_the_api_servers_words() {
        for text in [
            "app in web",
            "=x",
            "a b c",
            "n>x",
            "bad key=v",
            "a=b,",
            "k in a,b",
        ] {
            assert!(LabelSelector::parse(text).is_err(), "{text}");
        }
        assert_eq!(
            LabelSelector::parse("app in web").unwrap_err().to_string(),
            "unable to parse requirement: \"app in web\": expected ( values )"
        );
        assert_eq!(
            LabelSelector::parse("a b c").unwrap_err().to_string(),
            "unable to parse requirement: \"a b c\""
        );
    }
}

//! blang/semver v4 ranges (`skipRange`, `olm.package.required` `versionRange`).
//!
//! docs/catalog.md §9.3. The grammar is blang's, not npm's or Cargo's: whitespace is AND,
//! `||` is OR, the comparators are `< <= > >= = == ! !=` (or none), and trailing `x` parts are
//! wildcards. The parser below follows blang's string-rewriting algorithm step by step, quirks
//! included, because catalogs in the wild were validated against it:
//! - a space directly after `<`, `>` or `=` is glued to the version (`>= 1.0.0` works, `! 1.0.0`
//!   does not);
//! - a one-character term is dropped silently;
//! - any term containing the letter `x` is rewritten as a wildcard, which breaks pre-releases such
//!   as `1.0.0-x86` when they carry an operator other than `>=`/`<`.

use std::fmt;

use semver::Version;

use super::version::{VersionError, compare, parse_strict};

/// Why a range string is not a blang range; texts are blang's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RangeError {
    #[error("First element in range is '||'")]
    LeadingOr,
    #[error("Last element in range is '||'")]
    TrailingOr,
    #[error("Could not get version from string: {0:?}")]
    NoVersion(String),
    #[error("Could not parse Range {term:?}: Could not parse comparator {op:?} in {joined:?}")]
    BadComparator {
        term: String,
        op: String,
        joined: String,
    },
    #[error(
        "Could not parse Range {term:?}: Could not parse version {version:?} in {joined:?}: {source}"
    )]
    BadVersion {
        term: String,
        version: String,
        joined: String,
        source: VersionError,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
}

impl Op {
    fn parse(s: &str) -> Option<Op> {
        Some(match s {
            "" | "=" | "==" => Op::Eq,
            "!" | "!=" => Op::Ne,
            ">" => Op::Gt,
            ">=" => Op::Ge,
            "<" => Op::Lt,
            "<=" => Op::Le,
            _ => return None,
        })
    }

    fn holds(self, v: &Version, bound: &Version) -> bool {
        let ord = compare(v, bound);
        match self {
            Op::Eq => ord.is_eq(),
            Op::Ne => ord.is_ne(),
            Op::Gt => ord.is_gt(),
            Op::Ge => ord.is_ge(),
            Op::Lt => ord.is_lt(),
            Op::Le => ord.is_le(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Comparator {
    op: Op,
    bound: Version,
}

/// A parsed range: OR of AND-groups of comparators. Displays as the text it was parsed from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionRange {
    text: String,
    any_of: Vec<Vec<Comparator>>,
}

impl VersionRange {
    pub fn parse(text: &str) -> Result<VersionRange, RangeError> {
        let terms = split_and_trim(text);
        let groups = split_or(&terms)?;
        let mut any_of = Vec::with_capacity(groups.len());
        for group in groups {
            let mut all_of = Vec::new();
            for term in expand_wildcards(group)? {
                let (op, version) = split_comparator(&term)?;
                let joined = format!("{op}{version}");
                let Some(parsed_op) = Op::parse(op) else {
                    return Err(RangeError::BadComparator {
                        term: term.clone(),
                        op: op.to_string(),
                        joined,
                    });
                };
                let bound = parse_strict(version).map_err(|source| RangeError::BadVersion {
                    term: term.clone(),
                    version: version.to_string(),
                    joined,
                    source,
                })?;
                all_of.push(Comparator {
                    op: parsed_op,
                    bound,
                });
            }
            any_of.push(all_of);
        }
        Ok(VersionRange {
            text: text.to_string(),
            any_of,
        })
    }

    /// Whether `v` satisfies the range (pre-releases are not excluded; build metadata ignored).
    pub fn contains(&self, v: &Version) -> bool {
        self.any_of
            .iter()
            .any(|all| all.iter().all(|c| c.op.holds(v, &c.bound)))
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for VersionRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::str::FromStr for VersionRange {
    type Err = RangeError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        VersionRange::parse(s)
    }
}

/// blang `splitAndTrim`: split on spaces except right after `>`, `<`, `=`; drop one-character
/// terms (an off-by-one in blang that catalogs now depend on); remove inner spaces.
fn split_and_trim(s: &str) -> Vec<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::new();
    let mut last = 0usize;
    let mut last_char = 0u8;
    for (i, &b) in bytes.iter().enumerate() {
        if b == b' ' && !matches!(last_char, b'>' | b'<' | b'=') {
            if last + 1 < i {
                out.push(&s[last..i]);
            }
            last = i + 1;
        } else if b != b' ' {
            last_char = b;
        }
    }
    if last + 1 < bytes.len() {
        out.push(&s[last..]);
    }
    out.into_iter().map(|t| t.replace(' ', "")).collect()
}

fn split_or(terms: &[String]) -> Result<Vec<&[String]>, RangeError> {
    let mut groups = Vec::new();
    let mut last = 0;
    for (i, term) in terms.iter().enumerate() {
        if term == "||" {
            if i == 0 {
                return Err(RangeError::LeadingOr);
            }
            groups.push(&terms[last..i]);
            last = i + 1;
        }
    }
    if last == terms.len() {
        return Err(RangeError::TrailingOr);
    }
    groups.push(&terms[last..]);
    Ok(groups)
}

/// blang `splitComparatorVersion`: the operator is everything before the first digit.
fn split_comparator(term: &str) -> Result<(&str, &str), RangeError> {
    let Some(i) = term.find(|c: char| c.is_ascii_digit()) else {
        return Err(RangeError::NoVersion(term.to_string()));
    };
    Ok((term[..i].trim(), &term[i..]))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Wildcard {
    None,
    Major,
    Minor,
    Patch,
}

fn wildcard_type(version: &str) -> Wildcard {
    let parts: Vec<&str> = version.split('.').collect();
    if parts.last() != Some(&"x") {
        return Wildcard::None;
    }
    match parts.len() {
        1 => Wildcard::Major,
        2 => Wildcard::Minor,
        3 => Wildcard::Patch,
        _ => Wildcard::None,
    }
}

fn flatten_wildcard(version: &str) -> String {
    let v = version.replacen(".x.x", ".x", 1).replacen(".x", ".0", 1);
    if v.split('.').count() == 2 {
        format!("{v}.0")
    } else {
        v
    }
}

/// Increments part `index` (Go `strconv.Atoi` + 1); `None` where blang's ignored error would
/// leave an empty version (which then fails to parse, as in blang).
fn increment(version: &str, index: usize) -> Option<String> {
    let mut parts: Vec<String> = version.split('.').map(str::to_string).collect();
    let n: i64 = parts.get(index)?.parse().ok()?;
    parts[index] = (n + 1).to_string();
    Some(parts.join("."))
}

/// blang `expandWildcardVersion`, term by term.
fn expand_wildcards(group: &[String]) -> Result<Vec<String>, RangeError> {
    let mut out = Vec::with_capacity(group.len() + 1);
    for term in group {
        let (op, version) = split_comparator(term)?;
        if !term.contains('x') {
            out.push(term.clone());
            continue;
        }
        let kind = wildcard_type(version);
        let flat = flatten_wildcard(version);
        let (result_op, bump) = match op {
            ">" => (">=", true),
            ">=" => (">=", false),
            "<" => ("<", false),
            "<=" => ("<", true),
            "" | "=" | "==" => {
                out.push(format!(">={flat}"));
                ("<", true)
            }
            "!=" | "!" => {
                out.push(format!("<{flat}"));
                (">=", true)
            }
            _ => ("", false),
        };
        let result_version = if bump {
            match kind {
                Wildcard::Patch => increment(&flat, 1).unwrap_or_default(),
                Wildcard::Minor => increment(&flat, 0).unwrap_or_default(),
                Wildcard::None | Wildcard::Major => String::new(),
            }
        } else {
            flat
        };
        out.push(format!("{result_op}{result_version}"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::semver_range::parse_strict;

    fn matches(range: &str, version: &str) -> bool {
        VersionRange::parse(range)
            .unwrap_or_else(|e| panic!("{range}: {e}"))
            .contains(&parse_strict(version).unwrap())
    }

    #[test]
    fn table_of_ranges() {
        let cases: &[(&str, &str, bool)] = &[
            (">=1.0.0 <2.0.0", "1.5.0", true),
            (">=1.0.0 <2.0.0", "2.0.0", false),
            (">=1.0.0 <2.0.0", "0.9.9", false),
            ("<1.0.0", "1.0.0-rc.1", true),
            (
                ">=0.1.0-1556661347 <0.1.0-1556661832",
                "0.1.0-1556661500",
                true,
            ),
            ("1.2.3", "1.2.3", true),
            ("=1.2.3", "1.2.3+build", true),
            ("==1.2.3", "1.2.4", false),
            ("!1.2.3", "1.2.3", false),
            ("!=1.2.3", "1.2.4", true),
            ("> 1.0.0", "1.0.1", true),
            ("<= 1.0.0", "1.0.0", true),
            ("<1.0.0 || >=3.0.0", "3.1.0", true),
            ("<1.0.0 || >=3.0.0", "2.0.0", false),
            (">1.0.0 <2.0.0 || >3.0.0 !4.2.1", "4.2.1", false),
            (">1.0.0 <2.0.0 || >3.0.0 !4.2.1", "1.9.9", true),
            (">=2.1.x", "2.1.0", true),
            (">=2.1.x", "2.0.9", false),
            ("<=1.2.x", "1.2.99", true),
            ("<=1.2.x", "1.3.0", false),
            (">1.2.x", "1.3.0", true),
            (">1.2.x", "1.2.9", false),
            ("<1.2.x", "1.1.9", true),
            ("<1.2.x", "1.2.0", false),
            ("1.2.x", "1.2.7", true),
            ("1.2.x", "1.3.0", false),
            ("1.x", "1.9.0", true),
            ("1.x", "2.0.0", false),
            ("1.x.x", "1.0.0", true),
            (">=1.x", "1.0.0", true),
            ("<=1.x", "1.99.0", true),
            ("<=1.x", "2.0.0", false),
            // blang bug kept: `!=1.2.x` becomes `<1.2.0 >=1.3.0`, which nothing satisfies.
            ("!=1.2.x", "1.0.0", false),
            ("!=1.2.x", "2.0.0", false),
            (">=4.4.0 <4.6.2", "4.6.1", true),
        ];
        for &(range, version, expected) in cases {
            assert_eq!(matches(range, version), expected, "{range} ∋ {version}");
        }
    }

    #[test]
    fn rejects_what_blang_rejects() {
        let cases: &[(&str, &str)] = &[
            ("", "Last element in range is '||'"),
            ("|| 1.0.0", "First element in range is '||'"),
            ("1.0.0 ||", "Last element in range is '||'"),
            (
                "~1.0.0",
                "Could not parse Range \"~1.0.0\": Could not parse comparator \"~\" in \"~1.0.0\"",
            ),
            (
                "^1.0.0",
                "Could not parse Range \"^1.0.0\": Could not parse comparator \"^\" in \"^1.0.0\"",
            ),
            (
                ">=1.0",
                "Could not parse Range \">=1.0\": Could not parse version \"1.0\" in \">=1.0\": No Major.Minor.Patch elements found",
            ),
            ("abc", "Could not get version from string: \"abc\""),
            (
                ">=v1.0.0",
                "Could not parse Range \">=v1.0.0\": Could not parse comparator \">=v\" in \">=v1.0.0\"",
            ),
        ];
        for &(range, message) in cases {
            let err = VersionRange::parse(range).expect_err(range);
            assert_eq!(err.to_string(), message, "{range}");
        }
    }

    #[test]
    fn quirks_are_kept() {
        // One-character terms vanish.
        assert!(matches(">=1.0.0 x", "1.0.0"));
        // `~` on a wildcard silently becomes equality with the flattened version.
        assert!(matches("~1.2.x", "1.2.0"));
        assert!(!matches("~1.2.x", "1.2.1"));
        // A pre-release containing `x` cannot be used with `=`.
        assert!(VersionRange::parse("1.0.0-x86").is_err());
        assert!(matches(">=1.0.0-x86", "1.0.0-x86"));
        // Hyphen ranges are not ranges: `-` is dropped and the rest is `=1.0.0 =2.0.0`.
        assert!(!matches("1.0.0 - 2.0.0", "1.0.0"));
        assert!(!matches("1.0.0 - 2.0.0", "1.5.0"));
    }

    #[test]
    fn displays_source_text() {
        let r = VersionRange::parse(">=1.0.0  <2.0.0").unwrap();
        assert_eq!(r.to_string(), ">=1.0.0  <2.0.0");
    }
}

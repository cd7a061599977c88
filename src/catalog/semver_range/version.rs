//! Version parsing as blang/semver v4 does it (docs/catalog.md §9.3).
//!
//! The `semver` crate holds the parsed value, but its parser is not used: OLM parses catalog
//! versions with blang's rules and error texts (`opm validate` prints them, docs/catalog.md
//! §7 C14), and the resolver parses installed versions *tolerantly* (leading `v`, missing
//! parts, leading zeros; docs/resolution.md §2).

use std::cmp::Ordering;

use semver::{BuildMetadata, Prerelease, Version};

/// Why a version string is not a semantic version; texts are blang/semver's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionError {
    #[error("Version string empty")]
    Empty,
    #[error("No Major.Minor.Patch elements found")]
    MissingParts,
    #[error("Invalid character(s) found in {part} number {value:?}")]
    InvalidNumber { part: &'static str, value: String },
    #[error("{part} number must not contain leading zeroes {value:?}")]
    LeadingZeroes { part: &'static str, value: String },
    #[error("strconv.ParseUint: parsing {0:?}: invalid syntax")]
    EmptyNumber(String),
    #[error("strconv.ParseUint: parsing {0:?}: value out of range")]
    OutOfRange(String),
    #[error("Prerelease is empty")]
    EmptyPrerelease,
    #[error("Numeric PreRelease version must not contain leading zeroes {0:?}")]
    PrereleaseLeadingZeroes(String),
    #[error("Invalid character(s) found in prerelease {0:?}")]
    InvalidPrerelease(String),
    #[error("Build meta data is empty")]
    EmptyBuild,
    #[error("Invalid character(s) found in build meta data {0:?}")]
    InvalidBuild(String),
    #[error("Short version cannot contain PreRelease/Build meta data")]
    ShortWithMetadata,
}

fn is_alphanum(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

fn parse_number(
    value: &str,
    part: &'static str,
    capitalised: &'static str,
) -> Result<u64, VersionError> {
    if !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(VersionError::InvalidNumber {
            part,
            value: value.to_string(),
        });
    }
    if value.len() > 1 && value.starts_with('0') {
        return Err(VersionError::LeadingZeroes {
            part: capitalised,
            value: value.to_string(),
        });
    }
    if value.is_empty() {
        return Err(VersionError::EmptyNumber(value.to_string()));
    }
    value
        .parse::<u64>()
        .map_err(|_| VersionError::OutOfRange(value.to_string()))
}

/// Strict semver 2.0 as blang's `Parse`: `MAJOR.MINOR.PATCH[-pre][+build]`, no leading `v`.
pub fn parse_strict(s: &str) -> Result<Version, VersionError> {
    if s.is_empty() {
        return Err(VersionError::Empty);
    }
    let mut parts = s.splitn(3, '.');
    let (Some(major), Some(minor), Some(rest)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(VersionError::MissingParts);
    };
    let major = parse_number(major, "major", "Major")?;
    let minor = parse_number(minor, "minor", "Minor")?;
    let (rest, build) = match rest.split_once('+') {
        Some((r, b)) => (r, Some(b)),
        None => (rest, None),
    };
    let (patch, pre) = match rest.split_once('-') {
        Some((p, pre)) => (p, Some(pre)),
        None => (rest, None),
    };
    let patch = parse_number(patch, "patch", "Patch")?;
    let mut version = Version::new(major, minor, patch);
    if let Some(pre) = pre {
        for ident in pre.split('.') {
            if ident.is_empty() {
                return Err(VersionError::EmptyPrerelease);
            }
            if ident.bytes().all(|b| b.is_ascii_digit()) {
                if ident.len() > 1 && ident.starts_with('0') {
                    return Err(VersionError::PrereleaseLeadingZeroes(ident.to_string()));
                }
                if ident.parse::<u64>().is_err() {
                    return Err(VersionError::OutOfRange(ident.to_string()));
                }
            } else if !is_alphanum(ident) {
                return Err(VersionError::InvalidPrerelease(ident.to_string()));
            }
        }
        version.pre =
            Prerelease::new(pre).map_err(|_| VersionError::InvalidPrerelease(pre.to_string()))?;
    }
    if let Some(build) = build {
        for ident in build.split('.') {
            if ident.is_empty() {
                return Err(VersionError::EmptyBuild);
            }
            if !is_alphanum(ident) {
                return Err(VersionError::InvalidBuild(ident.to_string()));
            }
        }
        version.build =
            BuildMetadata::new(build).map_err(|_| VersionError::InvalidBuild(build.to_string()))?;
    }
    Ok(version)
}

/// blang's `ParseTolerant`: trims spaces, drops one leading `v`, strips leading zeros of the
/// first three dot-separated parts and fills a missing minor/patch with `0`.
pub fn parse_tolerant(s: &str) -> Result<Version, VersionError> {
    let s = s.trim();
    let s = s.strip_prefix('v').unwrap_or(s);
    let mut parts: Vec<String> = s.splitn(3, '.').map(str::to_string).collect();
    for part in &mut parts {
        if part.len() > 1 {
            let trimmed = part.trim_start_matches('0');
            *part = if trimmed.is_empty() || !trimmed.as_bytes()[0].is_ascii_digit() {
                format!("0{trimmed}")
            } else {
                trimmed.to_string()
            };
        }
    }
    if parts.len() < 3 {
        if parts
            .last()
            .is_some_and(|p| p.contains('+') || p.contains('-'))
        {
            return Err(VersionError::ShortWithMetadata);
        }
        while parts.len() < 3 {
            parts.push("0".to_string());
        }
    }
    parse_strict(&parts.join("."))
}

/// Semver precedence: build metadata is ignored (unlike `Ord for semver::Version`).
pub fn compare(a: &Version, b: &Version) -> Ordering {
    (a.major, a.minor, a.patch)
        .cmp(&(b.major, b.minor, b.patch))
        .then_with(|| a.pre.cmp(&b.pre))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_accepts_semver_and_keeps_build() {
        let v = parse_strict("1.2.3-rc.1+build.007").unwrap();
        assert_eq!(v.to_string(), "1.2.3-rc.1+build.007");
        assert_eq!(parse_strict("0.0.0").unwrap(), Version::new(0, 0, 0));
    }

    #[test]
    fn strict_rejects_with_blang_messages() {
        let cases = [
            ("", "Version string empty"),
            ("1.2", "No Major.Minor.Patch elements found"),
            (
                "v1.2.3",
                "Invalid character(s) found in major number \"v1\"",
            ),
            (
                "01.2.3",
                "Major number must not contain leading zeroes \"01\"",
            ),
            (
                "1.2.03",
                "Patch number must not contain leading zeroes \"03\"",
            ),
            ("1..3", "strconv.ParseUint: parsing \"\": invalid syntax"),
            ("1.2.3-", "Prerelease is empty"),
            (
                "1.2.3-01",
                "Numeric PreRelease version must not contain leading zeroes \"01\"",
            ),
            (
                "1.2.3-a_b",
                "Invalid character(s) found in prerelease \"a_b\"",
            ),
            ("1.2.3+", "Build meta data is empty"),
            (
                "1.2.3+a b",
                "Invalid character(s) found in build meta data \"a b\"",
            ),
            (
                "99999999999999999999.0.0",
                "strconv.ParseUint: parsing \"99999999999999999999\": value out of range",
            ),
        ];
        for (input, message) in cases {
            assert_eq!(
                parse_strict(input).unwrap_err().to_string(),
                message,
                "{input}"
            );
        }
    }

    #[test]
    fn tolerant_fills_and_trims() {
        let cases = [
            ("v1.2.3", "1.2.3"),
            ("1.2", "1.2.0"),
            ("1", "1.0.0"),
            (" 1.02.003 ", "1.2.3"),
            ("v4.6.0-rc.1", "4.6.0-rc.1"),
            ("1.0.00", "1.0.0"),
        ];
        for (input, expected) in cases {
            assert_eq!(
                parse_tolerant(input).unwrap().to_string(),
                expected,
                "{input}"
            );
        }
        assert_eq!(
            parse_tolerant("1.2-rc").unwrap_err(),
            VersionError::ShortWithMetadata
        );
        assert!(parse_tolerant("").is_err());
    }

    #[test]
    fn precedence_follows_semver_and_ignores_build() {
        let ordered = [
            "1.0.0-alpha",
            "1.0.0-alpha.1",
            "1.0.0-alpha.beta",
            "1.0.0-beta",
            "1.0.0-beta.2",
            "1.0.0-beta.11",
            "1.0.0-rc.1",
            "1.0.0",
            "1.0.1",
            "1.1.0",
            "2.0.0",
        ];
        for pair in ordered.windows(2) {
            let (a, b) = (
                parse_strict(pair[0]).unwrap(),
                parse_strict(pair[1]).unwrap(),
            );
            assert_eq!(compare(&a, &b), Ordering::Less, "{} < {}", pair[0], pair[1]);
            assert_eq!(compare(&b, &a), Ordering::Greater);
        }
        let a = parse_strict("1.0.0+a").unwrap();
        let b = parse_strict("1.0.0+b").unwrap();
        assert_eq!(compare(&a, &b), Ordering::Equal);
    }
}

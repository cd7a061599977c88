//! Problems found while loading or validating a catalog. Each names where it was found (file,
//! line, package, channel, bundle) and which `opm validate` rule it breaks
//! (docs/catalog.md §7: L = load, C = conversion, M = model; B = bundle directory, §8).

use std::fmt;
use std::path::PathBuf;

/// Where a problem is.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Location {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub package: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bundle: Option<String>,
}

impl Location {
    pub fn file(file: impl Into<String>, line: Option<u32>) -> Location {
        Location {
            file: Some(file.into()),
            line,
            ..Location::default()
        }
    }

    pub fn from_origin(origin: &super::model::Origin) -> Location {
        Location {
            file: origin.file.as_deref().map(str::to_string),
            line: origin.line,
            ..Location::default()
        }
    }

    pub fn package(mut self, package: impl Into<String>) -> Location {
        self.package = Some(package.into());
        self
    }

    pub fn channel(mut self, channel: impl Into<String>) -> Location {
        self.channel = Some(channel.into());
        self
    }

    pub fn bundle(mut self, bundle: impl Into<String>) -> Location {
        self.bundle = Some(bundle.into());
        self
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(file) = &self.file {
            f.write_str(file)?;
            if let Some(line) = self.line {
                write!(f, ":{line}")?;
            }
            f.write_str(": ")?;
        }
        let mut parts = Vec::new();
        if let Some(p) = &self.package {
            parts.push(format!("package {p:?}"));
        }
        if let Some(c) = &self.channel {
            parts.push(format!("channel {c:?}"));
        }
        if let Some(b) = &self.bundle {
            parts.push(format!("bundle {b:?}"));
        }
        if !parts.is_empty() {
            write!(f, "{}: ", parts.join(", "))?;
        }
        Ok(())
    }
}

/// The `opm validate` rule a problem breaks (numbering of docs/catalog.md §7), or `B*` for
/// registry+v1 bundle directories (§8).
#[rustfmt::skip]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum Rule {
    L1, L2, L3, L4, L5, L6,
    C1, C2, C3, C4, C5, C6, C7, C8, C9, C10, C11, C12, C13, C14, C15, C16, C18, C19, C20,
    C21, C22, C23, C24, C25, C26,
    M1, M2, M3, M4, M5, M6, M8, M9, M10, M11, M12, M13,
    /// registry+v1 bundle directory could not be read or rendered.
    B1,
    /// Warning: a channel entry's `skipRange` does not parse. opm v1.50.0 accepts it and OLM
    /// ignores it silently (docs/resolution.md §2); opm v1.69.0+ rejects it.
    W1,
}

impl Rule {
    /// Warnings do not make a catalog invalid.
    pub fn is_warning(self) -> bool {
        matches!(self, Rule::W1)
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// One thing wrong with a catalog.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize)]
#[error("{location}{message}")]
pub struct Problem {
    pub rule: Rule,
    #[serde(flatten)]
    pub location: Location,
    pub message: String,
}

impl Problem {
    pub fn new(rule: Rule, location: Location, message: impl Into<String>) -> Problem {
        Problem {
            rule,
            location,
            message: message.into(),
        }
    }
}

/// Why a catalog could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: not a directory", .0.display())]
    NotADirectory(PathBuf),
    #[error("{}: {source}", path.display())]
    Walk {
        path: PathBuf,
        source: ignore::Error,
    },
    #[error("catalog has {} problem(s):\n{}", .0.len(), .0.iter().map(|p| format!("  {p}")).collect::<Vec<_>>().join("\n"))]
    Invalid(Vec<Problem>),
}

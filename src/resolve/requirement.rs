//! What a bundle needs from others (docs/resolution.md §6): `olm.gvk.required`,
//! `olm.package.required`, `olm.label.required` and `olm.constraint`, parsed strictly and
//! matched against a candidate's properties.
//!
//! A requirement that does not parse is an error naming the bundle and the property; it fails
//! only the Subscriptions whose candidates carry it.

use std::fmt;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::catalog::model::Property;
use crate::catalog::properties::{
    BUNDLE_OBJECT, CONSTRAINT, CSV_METADATA, GVK, GVK_REQUIRED, GvkValue, LABEL, LABEL_REQUIRED,
    PACKAGE, PACKAGE_REQUIRED,
};
use crate::catalog::semver_range::{RangeError, Version, VersionRange, parse_strict};

use super::cel_rule::{CelError, CelRule};

/// OLM refuses `olm.constraint` values larger than this (bytes).
pub const MAX_CONSTRAINT_BYTES: usize = 131_072;

/// One dependency of a bundle.
#[derive(Debug, Clone)]
pub struct Requirement {
    pub predicate: Predicate,
    /// `failureMessage` of an `olm.constraint`.
    pub failure_message: Option<String>,
}

/// What a candidate must be to satisfy a requirement.
#[derive(Debug, Clone)]
pub enum Predicate {
    Gvk(GvkValue),
    Package { name: String, range: VersionRange },
    Label(String),
    Cel(Arc<CelRule>),
    All(Vec<Predicate>),
    Any(Vec<Predicate>),
    Not(Vec<Predicate>),
}

/// A requirement that cannot be read: the bundle, the property and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bundle {bundle}: property {type_} (#{index}) cannot be used: {reason}")]
pub struct RequirementError {
    pub bundle: String,
    pub index: usize,
    pub type_: String,
    #[source]
    pub reason: ValueError,
}

/// Why the value of a requirement property cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    /// Not JSON; the parser's words (its error is neither `Clone` nor comparable).
    #[error("{message}")]
    Json { message: String },
    #[error("the value is {bytes} bytes, more than the {MAX_CONSTRAINT_BYTES} allowed")]
    TooLarge { bytes: usize },
    #[error("expected a JSON object, found {found}")]
    NotAnObject { found: String },
    #[error("json: unknown field {field:?}")]
    UnknownField { field: String },
    #[error("{field} must be a string, found {found}")]
    NotAString { field: String, found: String },
    #[error("an API needs at least a kind and a version")]
    IncompleteApi,
    #[error("packageName is empty")]
    NoPackageName,
    /// Boxed: the range error is most of the size of every `ValueError`.
    #[error("versionRange {text:?} of package {package} does not parse: {source}")]
    VersionRange {
        text: String,
        package: String,
        #[source]
        source: Box<RangeError>,
    },
    /// The `olm.constraint` value itself is not an object of known fields.
    #[error("parse olm.constraint: {0}")]
    Constraint(Box<ValueError>),
    #[error("constraint is empty")]
    EmptyConstraint,
    #[error("constraint has {} where exactly one is allowed", .given.join(" and "))]
    ManyConstraints { given: Vec<String> },
    #[error("{compound}: constraints must be a non-empty list")]
    EmptyCompound { compound: String },
    #[error(transparent)]
    Cel(#[from] CelError),
}

/// A candidate as a predicate sees it.
#[derive(Debug, Clone, Copy)]
pub struct CandidateView<'a> {
    /// The package the catalog files the bundle under (the `olm.package` property wins).
    pub package: &'a str,
    /// The entry's version (tolerant), used when `olm.package` has none that parses strictly.
    pub version: Option<&'a Version>,
    pub properties: &'a [Property],
}

/// Every requirement of a bundle, in property order.
pub fn requirements(
    bundle: &str,
    properties: &[Property],
) -> Result<Vec<Requirement>, RequirementError> {
    let mut out = Vec::new();
    for (index, p) in properties.iter().enumerate() {
        let error = |reason: ValueError| RequirementError {
            bundle: bundle.to_owned(),
            index,
            type_: p.type_.clone(),
            reason,
        };
        let value = || -> Result<Value, RequirementError> {
            serde_json::from_str(p.json().get()).map_err(|e| {
                error(ValueError::Json {
                    message: e.to_string(),
                })
            })
        };
        let predicate = match p.type_.as_str() {
            GVK_REQUIRED => Predicate::Gvk(gvk(&value()?).map_err(error)?),
            PACKAGE_REQUIRED => package(&value()?).map_err(error)?,
            LABEL_REQUIRED => Predicate::Label(
                object(&value()?, &["label"])
                    .and_then(|o| string(&o, "label"))
                    .map_err(error)?,
            ),
            CONSTRAINT => {
                let raw = p.json();
                if raw.get().len() > MAX_CONSTRAINT_BYTES {
                    return Err(error(ValueError::TooLarge {
                        bytes: raw.get().len(),
                    }));
                }
                let (predicate, failure_message) = constraint(&value()?).map_err(error)?;
                out.push(Requirement {
                    predicate,
                    failure_message,
                });
                continue;
            }
            _ => continue,
        };
        out.push(Requirement {
            predicate,
            failure_message: None,
        });
    }
    Ok(out)
}

fn object(value: &Value, known: &[&str]) -> Result<Map<String, Value>, ValueError> {
    let Value::Object(map) = value else {
        return Err(ValueError::NotAnObject {
            found: value.to_string(),
        });
    };
    if let Some(key) = map.keys().find(|k| !known.contains(&k.as_str())) {
        return Err(ValueError::UnknownField { field: key.clone() });
    }
    Ok(map.clone())
}

fn string(map: &Map<String, Value>, key: &str) -> Result<String, ValueError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(ValueError::NotAString {
            field: key.to_owned(),
            found: other.to_string(),
        }),
    }
}

fn gvk(value: &Value) -> Result<GvkValue, ValueError> {
    let map = object(value, &["group", "version", "kind"])?;
    let g = GvkValue {
        group: string(&map, "group")?,
        kind: string(&map, "kind")?,
        version: string(&map, "version")?,
    };
    if g.kind.is_empty() || g.version.is_empty() {
        return Err(ValueError::IncompleteApi);
    }
    Ok(g)
}

fn package(value: &Value) -> Result<Predicate, ValueError> {
    let map = object(value, &["packageName", "versionRange"])?;
    let name = string(&map, "packageName")?;
    if name.is_empty() {
        return Err(ValueError::NoPackageName);
    }
    let text = string(&map, "versionRange")?;
    let range = VersionRange::parse(&text).map_err(|source| ValueError::VersionRange {
        text: text.clone(),
        package: name.clone(),
        source: Box::new(source),
    })?;
    Ok(Predicate::Package { name, range })
}

/// An `olm.constraint` value (or one nested in all/any/not): the predicate and its message.
fn constraint(value: &Value) -> Result<(Predicate, Option<String>), ValueError> {
    const KEYS: [&str; 7] = [
        "failureMessage",
        "gvk",
        "package",
        "cel",
        "all",
        "any",
        "not",
    ];
    let map = object(value, &KEYS).map_err(|e| ValueError::Constraint(Box::new(e)))?;
    let message = Some(string(&map, "failureMessage")?).filter(|m| !m.is_empty());
    let given: Vec<&str> = KEYS[1..]
        .iter()
        .copied()
        .filter(|k| map.get(*k).is_some_and(|v| !v.is_null()))
        .collect();
    let key = match given.as_slice() {
        [] => return Err(ValueError::EmptyConstraint),
        [one] => *one,
        many => {
            return Err(ValueError::ManyConstraints {
                given: many.iter().map(|k| (*k).to_owned()).collect(),
            });
        }
    };
    let inner = &map[key];
    let predicate = match key {
        "gvk" => Predicate::Gvk(gvk(inner)?),
        "package" => package(inner)?,
        "cel" => {
            let rule = object(inner, &["rule"]).and_then(|o| string(&o, "rule"))?;
            Predicate::Cel(Arc::new(CelRule::compile(&rule)?))
        }
        compound => {
            let map = object(inner, &["constraints"])?;
            let list = match map.get("constraints") {
                Some(Value::Array(list)) if !list.is_empty() => list,
                _ => {
                    return Err(ValueError::EmptyCompound {
                        compound: compound.to_owned(),
                    });
                }
            };
            let nested = list
                .iter()
                .map(|c| constraint(c).map(|(p, _)| p))
                .collect::<Result<Vec<_>, _>>()?;
            match compound {
                "all" => Predicate::All(nested),
                "any" => Predicate::Any(nested),
                _ => Predicate::Not(nested),
            }
        }
    };
    Ok((predicate, message))
}

impl Predicate {
    /// Whether `candidate` satisfies the predicate. A CEL rule that fails at run time does not
    /// match (docs/resolution.md §6).
    pub fn matches(&self, candidate: &CandidateView<'_>) -> bool {
        match self {
            Predicate::Gvk(wanted) => candidate
                .properties
                .iter()
                .filter(|p| p.type_ == GVK)
                .any(|p| property_gvk(p).as_ref() == Some(wanted)),
            Predicate::Package { name, range } => {
                let own = package_of(candidate);
                if own.0 != name.as_str() {
                    return false;
                }
                own.1
                    .as_ref()
                    .or(candidate.version)
                    .is_some_and(|v| range.contains(v))
            }
            Predicate::Label(label) => candidate.properties.iter().any(|p| {
                p.type_ == LABEL
                    && serde_json::from_str::<Value>(p.json().get())
                        .ok()
                        .and_then(|v| v.get("label").and_then(Value::as_str).map(str::to_owned))
                        .as_deref()
                        == Some(label.as_str())
            }),
            Predicate::Cel(rule) => rule.evaluate(visible_properties(candidate.properties)),
            Predicate::All(list) => list.iter().all(|p| p.matches(candidate)),
            Predicate::Any(list) => list.iter().any(|p| p.matches(candidate)),
            Predicate::Not(list) => !list.iter().any(|p| p.matches(candidate)),
        }
    }

    /// The API this predicate asks for, when it is a plain GVK requirement.
    pub fn gvk(&self) -> Option<&GvkValue> {
        match self {
            Predicate::Gvk(g) => Some(g),
            _ => None,
        }
    }
}

/// `(package, strict version)` of a candidate from its `olm.package` property.
fn package_of<'a>(candidate: &CandidateView<'a>) -> (&'a str, Option<Version>) {
    for p in candidate.properties.iter().filter(|p| p.type_ == PACKAGE) {
        if let Ok(v) = serde_json::from_str::<Value>(p.json().get())
            && let Some(name) = v.get("packageName").and_then(Value::as_str)
            && name == candidate.package
        {
            let version = v
                .get("version")
                .and_then(Value::as_str)
                .and_then(|s| parse_strict(s).ok());
            return (candidate.package, version);
        }
    }
    (candidate.package, None)
}

fn property_gvk(p: &Property) -> Option<GvkValue> {
    let v: Value = serde_json::from_str(p.json().get()).ok()?;
    let s = |k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    Some(GvkValue {
        group: s("group"),
        kind: s("kind"),
        version: s("version"),
    })
}

/// The properties a CEL rule sees: `{type, value}` for all but the bundle's manifests and CSV
/// metadata, which the registry does not serve as properties either.
fn visible_properties(properties: &[Property]) -> Value {
    Value::Array(
        properties
            .iter()
            .filter(|p| p.type_ != BUNDLE_OBJECT && p.type_ != CSV_METADATA)
            .map(|p| {
                let value = serde_json::from_str(p.json().get()).unwrap_or(Value::Null);
                serde_json::json!({"type": p.type_, "value": value})
            })
            .collect(),
    )
}

/// OLM's predicate text (docs/resolution.md §6), used in `bundle <B> requires an operator <text>`.
impl fmt::Display for Predicate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let join = |list: &[Predicate], sep: &str| {
            list.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(sep)
        };
        match self {
            Predicate::Gvk(g) => write!(
                f,
                "providing an API with group: {}, version: {}, kind: {}",
                g.group, g.version, g.kind
            ),
            Predicate::Package { name, range } => write!(
                f,
                "with package: {name} and with version in range: {}",
                range.as_str()
            ),
            Predicate::Label(l) => write!(f, "with label: {l}"),
            Predicate::Cel(rule) => write!(f, "with constraint: {:?}", rule.source()),
            Predicate::All(list) => f.write_str(&join(list, " and ")),
            Predicate::Any(list) => f.write_str(&join(list, " or ")),
            Predicate::Not(list) => write!(f, "not {}", join(list, " and not ")),
        }
    }
}

impl Requirement {
    /// OLM's text for the requirement, with the `failureMessage` where one is given.
    pub fn olm_text(&self) -> String {
        match (&self.predicate, &self.failure_message) {
            (Predicate::Cel(rule), Some(m)) => {
                format!("with constraint: {:?} and message: {m:?}", rule.source())
            }
            (p, _) => p.to_string(),
        }
    }

    /// The requirement in plain words: "an operator providing RabbitmqCluster
    /// (rabbitmq.com/v1beta1)", "package cert-manager in range >=1.12.2", …
    pub fn plain(&self) -> String {
        let words = plain(&self.predicate);
        match &self.failure_message {
            Some(m) => format!("{words} ({m})"),
            None => words,
        }
    }
}

fn plain(p: &Predicate) -> String {
    let join = |list: &[Predicate], sep: &str| list.iter().map(plain).collect::<Vec<_>>().join(sep);
    match p {
        Predicate::Gvk(g) => format!(
            "an operator providing {} ({}/{})",
            g.kind, g.group, g.version
        ),
        Predicate::Package { name, range } => {
            format!("package {name} at a version in {}", range.as_str())
        }
        Predicate::Label(l) => format!("an operator labelled {l}"),
        Predicate::Cel(rule) => format!("an operator matching the CEL rule {:?}", rule.source()),
        Predicate::All(list) => format!("an operator that is all of: {}", join(list, "; ")),
        Predicate::Any(list) => format!("an operator that is any of: {}", join(list, "; ")),
        Predicate::Not(list) => format!("an operator that is none of: {}", join(list, "; ")),
    }
}

#[cfg(test)]
#[path = "requirement_tests.rs"]
mod tests;

//! Bundle properties: the well-known types and their value shapes (docs/catalog.md §6.3).
//! Values stay raw JSON in the model; these functions read them on demand.

use std::borrow::Cow;

use serde::Serialize;
use serde_json::value::RawValue;

use super::csv_metadata;
use super::go_json::{self, Fields, UnmarshalError};
use super::model::Property;

pub const PACKAGE: &str = "olm.package";
pub const GVK: &str = "olm.gvk";
pub const PACKAGE_REQUIRED: &str = "olm.package.required";
pub const GVK_REQUIRED: &str = "olm.gvk.required";
pub const BUNDLE_OBJECT: &str = "olm.bundle.object";
pub const CSV_METADATA: &str = "olm.csv.metadata";
pub const CONSTRAINT: &str = "olm.constraint";
pub const MAX_OPENSHIFT_VERSION: &str = "olm.maxOpenShiftVersion";
pub const LABEL: &str = "olm.label";
pub const LABEL_REQUIRED: &str = "olm.label.required";
pub const DEPRECATED: &str = "olm.deprecated";
pub const CHANNEL: &str = "olm.channel";

/// `olm.package` value. Key order is opm's (`packageName`, `version`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PackageValue {
    #[serde(rename = "packageName")]
    pub package_name: String,
    pub version: String,
}

/// `olm.gvk` / `olm.gvk.required` value. Key order is opm's (`group`, `kind`, `version`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct GvkValue {
    pub group: String,
    pub kind: String,
    pub version: String,
}

/// `olm.package.required` value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PackageRequiredValue {
    #[serde(rename = "packageName")]
    pub package_name: String,
    #[serde(rename = "versionRange")]
    pub version_range: String,
}

/// A property read according to its type. Types with large or open-ended values
/// (`olm.csv.metadata`, `olm.constraint`, unknown ones) are handed back raw.
#[derive(Debug, Clone)]
pub enum TypedProperty<'a> {
    Package(PackageValue),
    Gvk(GvkValue),
    PackageRequired(PackageRequiredValue),
    GvkRequired(GvkValue),
    /// Borrowed, or unpacked when the property is packed (`Property::packed`).
    CsvMetadata(Cow<'a, RawValue>),
    Constraint(&'a RawValue),
    /// `"<major>.<minor>"`, with surrounding quotes tolerated as the value may be a JSON
    /// string holding a quoted string (docs/catalog.md §6.3).
    MaxOpenShiftVersion(String),
    Label(String),
    LabelRequired(String),
    Deprecated,
    Channel {
        channel_name: String,
        priority: i64,
    },
    Other(&'a RawValue),
}

impl PartialEq for TypedProperty<'_> {
    fn eq(&self, other: &Self) -> bool {
        use TypedProperty as T;
        match (self, other) {
            (T::Package(a), T::Package(b)) => a == b,
            (T::Gvk(a), T::Gvk(b)) | (T::GvkRequired(a), T::GvkRequired(b)) => a == b,
            (T::PackageRequired(a), T::PackageRequired(b)) => a == b,
            (T::CsvMetadata(a), T::CsvMetadata(b)) => a.get() == b.get(),
            (T::Constraint(a), T::Constraint(b)) | (T::Other(a), T::Other(b)) => a.get() == b.get(),
            (T::MaxOpenShiftVersion(a), T::MaxOpenShiftVersion(b))
            | (T::Label(a), T::Label(b))
            | (T::LabelRequired(a), T::LabelRequired(b)) => a == b,
            (T::Deprecated, T::Deprecated) => true,
            (
                T::Channel {
                    channel_name: a,
                    priority: p,
                },
                T::Channel {
                    channel_name: b,
                    priority: q,
                },
            ) => a == b && p == q,
            _ => false,
        }
    }
}

/// Why a property value does not have the shape its type demands (opm's C11).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("parse property[{index}] of type {type_:?}: {source}")]
pub struct PropertyError {
    pub index: usize,
    pub type_: String,
    pub source: UnmarshalError,
}

fn fields<'a>(
    raw: &'a RawValue,
    go_type: &'static str,
) -> Result<Option<Fields<'a>>, UnmarshalError> {
    Fields::of(raw, go_type)
}

fn gvk(
    raw: &RawValue,
    owner: &'static str,
    go_type: &'static str,
) -> Result<GvkValue, UnmarshalError> {
    let Some(f) = fields(raw, go_type)? else {
        return Ok(GvkValue {
            group: String::new(),
            kind: String::new(),
            version: String::new(),
        });
    };
    Ok(GvkValue {
        group: f.string("group", owner)?.unwrap_or_default(),
        kind: f.string("kind", owner)?.unwrap_or_default(),
        version: f.string("version", owner)?.unwrap_or_default(),
    })
}

fn label(raw: &RawValue) -> Result<String, UnmarshalError> {
    match fields(raw, "property.Label")? {
        Some(f) => Ok(f.string("label", "Label")?.unwrap_or_default()),
        None => Ok(String::new()),
    }
}

impl Property {
    /// Reads the value according to the property type.
    pub fn typed(&self) -> Result<TypedProperty<'_>, UnmarshalError> {
        let raw = &*self.value;
        Ok(match self.type_.as_str() {
            PACKAGE => {
                let f = fields(raw, "property.Package")?;
                let get = |name| match &f {
                    Some(f) => f.string(name, "Package").map(Option::unwrap_or_default),
                    None => Ok(String::new()),
                };
                TypedProperty::Package(PackageValue {
                    package_name: get("packageName")?,
                    version: get("version")?,
                })
            }
            PACKAGE_REQUIRED => {
                let f = fields(raw, "property.PackageRequired")?;
                let get = |name| match &f {
                    Some(f) => f
                        .string(name, "PackageRequired")
                        .map(Option::unwrap_or_default),
                    None => Ok(String::new()),
                };
                TypedProperty::PackageRequired(PackageRequiredValue {
                    package_name: get("packageName")?,
                    version_range: get("versionRange")?,
                })
            }
            GVK => TypedProperty::Gvk(gvk(raw, "GVK", "property.GVK")?),
            GVK_REQUIRED => {
                TypedProperty::GvkRequired(gvk(raw, "GVKRequired", "property.GVKRequired")?)
            }
            CSV_METADATA => {
                // The loader checks these values while it has them at hand (fbc::blob).
                if !self.is_checked() {
                    csv_metadata::check(raw)?;
                }
                TypedProperty::CsvMetadata(self.json())
            }
            CONSTRAINT => TypedProperty::Constraint(raw),
            MAX_OPENSHIFT_VERSION => {
                let text = if go_json::kind(raw) == "string" {
                    serde_json::from_str::<String>(raw.get())
                        .map_err(|e| UnmarshalError::Syntax(e.to_string()))?
                } else {
                    raw.get().to_string()
                };
                TypedProperty::MaxOpenShiftVersion(text.trim_matches('"').to_string())
            }
            LABEL => TypedProperty::Label(label(raw)?),
            LABEL_REQUIRED => TypedProperty::LabelRequired(label(raw)?),
            DEPRECATED => TypedProperty::Deprecated,
            CHANNEL => {
                let f = fields(raw, "property.Channel")?;
                let mut channel_name = String::new();
                let mut priority = 0;
                if let Some(f) = f {
                    channel_name = f.string("channelName", "Channel")?.unwrap_or_default();
                    if let Some(p) = f.get("priority") {
                        priority = serde_json::from_str::<i64>(p.get()).map_err(|_| {
                            UnmarshalError::Field {
                                kind: go_json::kind(p),
                                field: "Channel.priority".to_string(),
                                go_type: "int",
                            }
                        })?;
                    }
                }
                TypedProperty::Channel {
                    channel_name,
                    priority,
                }
            }
            _ => TypedProperty::Other(raw),
        })
    }
}

/// Checks the value of every property as opm's conversion does (docs/catalog.md §7 C11).
/// `olm.bundle.object` values are checked where they are decoded (`fbc::blob`).
pub fn check_properties(properties: &[Property]) -> Result<(), PropertyError> {
    for (index, p) in properties.iter().enumerate() {
        // Checked at load (a packed value would otherwise be unpacked just to be checked).
        if p.is_checked() {
            continue;
        }
        p.typed().map_err(|source| PropertyError {
            index,
            type_: p.type_.clone(),
            source,
        })?;
    }
    Ok(())
}

/// Every value of the given well-known type that parses; callers that need errors use `typed`.
pub fn packages(properties: &[Property]) -> impl Iterator<Item = PackageValue> + '_ {
    properties
        .iter()
        .filter(|p| p.type_ == PACKAGE)
        .filter_map(|p| match p.typed() {
            Ok(TypedProperty::Package(v)) => Some(v),
            _ => None,
        })
}

pub fn provided_gvks(properties: &[Property]) -> impl Iterator<Item = GvkValue> + '_ {
    properties
        .iter()
        .filter(|p| p.type_ == GVK)
        .filter_map(|p| match p.typed() {
            Ok(TypedProperty::Gvk(v)) => Some(v),
            _ => None,
        })
}

pub fn required_gvks(properties: &[Property]) -> impl Iterator<Item = GvkValue> + '_ {
    properties
        .iter()
        .filter(|p| p.type_ == GVK_REQUIRED)
        .filter_map(|p| match p.typed() {
            Ok(TypedProperty::GvkRequired(v)) => Some(v),
            _ => None,
        })
}

pub fn required_packages(
    properties: &[Property],
) -> impl Iterator<Item = PackageRequiredValue> + '_ {
    properties
        .iter()
        .filter(|p| p.type_ == PACKAGE_REQUIRED)
        .filter_map(|p| match p.typed() {
            Ok(TypedProperty::PackageRequired(v)) => Some(v),
            _ => None,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prop(t: &str, v: &str) -> Property {
        Property::new(t, serde_json::from_str(v).unwrap())
    }

    #[test]
    fn reads_well_known_values() {
        assert_eq!(
            prop(PACKAGE, r#"{"packageName":"etcd","version":"0.9.4"}"#)
                .typed()
                .unwrap(),
            TypedProperty::Package(PackageValue {
                package_name: "etcd".into(),
                version: "0.9.4".into()
            })
        );
        assert_eq!(
            prop(GVK, r#"{"group":"g","kind":"K","version":"v1"}"#)
                .typed()
                .unwrap(),
            TypedProperty::Gvk(GvkValue {
                group: "g".into(),
                kind: "K".into(),
                version: "v1".into()
            })
        );
        assert_eq!(
            prop(MAX_OPENSHIFT_VERSION, r#""\"4.8\"""#).typed().unwrap(),
            TypedProperty::MaxOpenShiftVersion("4.8".into())
        );
        assert_eq!(
            prop(MAX_OPENSHIFT_VERSION, "4.9").typed().unwrap(),
            TypedProperty::MaxOpenShiftVersion("4.9".into())
        );
        assert!(matches!(
            prop("vendor.io/x", "null").typed().unwrap(),
            TypedProperty::Other(_)
        ));
    }

    #[test]
    fn rejects_wrong_shapes_like_opm() {
        let err = check_properties(&[
            prop(GVK, r#"{"group":"g","kind":"K","version":"v1"}"#),
            prop(PACKAGE, r#"{"packageName":5}"#),
        ])
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "parse property[1] of type \"olm.package\": json: cannot unmarshal number into Go struct field Package.packageName of type string"
        );
        assert!(
            prop(CHANNEL, r#"{"channelName":"a","priority":"high"}"#)
                .typed()
                .is_err()
        );
        assert!(prop(CSV_METADATA, r#"{"keywords":"a"}"#).typed().is_err());
        assert!(
            prop(CSV_METADATA, r#"{"annotations":{"a":1}}"#)
                .typed()
                .is_err()
        );
    }
}
